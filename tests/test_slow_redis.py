"""What happens when Redis is slow: a caller never holds past its wait.

``CLIENT PAUSE`` makes the harness's real Redis answer late, as a stalled or
overloaded server would.
"""

from __future__ import annotations

import time

import pytest

from django_redis_pool import Lock, ResourcePool
from django_redis_pool.primitives.engine import LATE_GRANT


@pytest.mark.parametrize("timeout", [0, 0.2])
def test_a_grant_that_arrives_after_the_wait_is_given_back(redis_client, caplog, timeout):
    pool = ResourcePool(redis_client, "slow", resources=["r"], lease_timeout=30)
    pool.collect()  # the resource is there
    pause = timeout + 4 * LATE_GRANT + 0.5
    redis_client.client_pause(int(pause * 1000))
    started = time.monotonic()
    with caplog.at_level("WARNING", logger="django_redis_pool"):
        lease = pool.acquire(timeout=timeout)
    assert time.monotonic() - started >= pause * 0.9, "Redis answered late, as asked"
    assert lease is None, "a grant past the wait is not handed to the caller"
    assert "given back" in caplog.text
    assert pool.available() == ["r"], "and it is free again"


def test_a_grant_within_the_wait_is_kept(redis_client):
    lock = Lock(redis_client, "slow-lock", lease_timeout=30)
    redis_client.client_pause(100)
    assert lock.acquire(timeout=5), "late for Redis, but well within the wait"
    lock.release()
