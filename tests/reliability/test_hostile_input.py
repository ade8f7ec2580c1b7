"""Values Redis cannot count are refused before anything is written.

Every duration the library sends to Redis has one upper bound
(``validators.MAX_SECONDS``); a larger, NaN or infinite one (where "forever"
is not meant) raises ``ValueError`` naming it, and a task's params or result
over the payload limit, or nested too deep, are refused before the task is
stored.
"""

from __future__ import annotations

import math
import time

import pytest

from django_redis_pool import (
    Allocator,
    Lock,
    RateLimiter,
    ResourcePool,
    Semaphore,
    TaskQueue,
)
from django_redis_pool.primitives.queue.task import MAX_PAYLOAD
from django_redis_pool.primitives.validators import MAX_SECONDS
from tests.support.primitive_helpers import own_lease

TOO_LONG = (1e20, MAX_SECONDS * 2, math.nan)


@pytest.mark.parametrize("seconds", TOO_LONG)
def test_a_lease_redis_cannot_count_never_gives_two_holders(client, seconds):
    with pytest.raises(ValueError, match="lease_timeout"):
        Lock(client, "huge", lease_timeout=seconds)
    lock = Lock(client, "huge", lease_timeout=30)
    with pytest.raises(ValueError, match="lease_timeout"):
        lock.extend(seconds)
    pool = ResourcePool(client, "huge")
    pool.associate("r")
    with pytest.raises(ValueError, match="lease_timeout"):
        pool.acquire(lease_timeout=seconds)
    assert pool.available_count() == 1, "nothing was written"
    sem = Semaphore(client, "huge", default_max_size=1)
    with pytest.raises(ValueError, match="lease_timeout"):
        sem.acquire("a", lease_timeout=seconds)
    assert sem.get_current_size() == 0
    assert Lock(client, "huge", lease_timeout=30).acquire(blocking=False, holder="w2")


def test_the_longest_lease_allowed_still_counts_right(client):
    lock = Lock(client, "longest", lease_timeout=MAX_SECONDS)
    assert lock.acquire(blocking=False, holder="w1")
    assert not Lock(client, "longest", lease_timeout=30).acquire(blocking=False, holder="w2")
    expires = own_lease(lock).expires_at
    assert expires is not None and MAX_SECONDS - 60 < expires - time.time() <= MAX_SECONDS + 60


@pytest.mark.parametrize("seconds", [1e20, math.nan, -1])
def test_a_wait_redis_cannot_count_is_refused_naming_it(client, seconds):
    pool = ResourcePool(client, "waits", resources=["r"])
    with pytest.raises(ValueError, match="timeout"):
        pool.acquire(timeout=seconds)
    assert pool.acquire(timeout=math.inf) is not None, "infinity still means for ever"


def test_other_durations_have_the_same_bound(client):
    too_long = MAX_SECONDS * 2
    with pytest.raises(ValueError, match="result_ttl"):
        TaskQueue(client, "q", result_ttl=too_long)
    with pytest.raises(ValueError, match="visibility_timeout"):
        TaskQueue(client, "q", visibility_timeout=too_long)
    with pytest.raises(ValueError, match="per"):
        RateLimiter(client, "r", rate=1, per=too_long)
    with pytest.raises(ValueError, match="soft_bind_timeout"):
        Allocator(client, "a", soft_bind_timeout=too_long)
    with pytest.raises(ValueError, match="lease_timeout"):
        Allocator(client, "a", lease_timeout=too_long)


@pytest.mark.parametrize("run_at", [1e20, math.inf, -math.inf, math.nan, "soon", True])
def test_a_run_at_redis_cannot_count_stores_nothing(client, run_at):
    queue = TaskQueue(client, "runat")
    with pytest.raises(ValueError, match="run_at"):
        queue.enqueue("job", {}, id="t1", run_at=run_at)
    assert queue.get_task("t1") is None, "nothing stored"


def test_params_nested_too_deep_are_a_type_error_and_store_nothing(client):
    queue = TaskQueue(client, "deep")
    params: list = []
    for _ in range(100_000):
        params = [params]
    with pytest.raises(TypeError, match="params"):
        queue.enqueue("job", params, id="t1")
    assert queue.get_task("t1") is None


def test_params_over_the_payload_limit_are_refused_and_store_nothing(client):
    queue = TaskQueue(client, "big")
    with pytest.raises(ValueError, match="payload limit"):
        queue.enqueue("job", "x" * (MAX_PAYLOAD + 1), id="t1")
    assert queue.get_task("t1") is None
    small = TaskQueue(client, "small", max_payload=1000)
    with pytest.raises(ValueError, match="1000"):
        small.enqueue("job", "x" * 1000, id="t2")
    assert small.enqueue("job", "x" * 900, id="t3") == "t3"


def test_a_result_over_the_payload_limit_fails_its_task(client):
    queue = TaskQueue(client, "bigresult", max_payload=1000, task_fn=lambda task: "y" * 2000)
    queue.enqueue("job", {}, id="t1")
    assert queue.listen(["job"], burst=True) == 1
    task = queue.get_task("t1")
    assert task is not None and task.status == "failed"
    assert "payload limit" in (task.error or "")
