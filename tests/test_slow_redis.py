"""What happens when Redis is slow: a caller never holds past its wait.

``CLIENT PAUSE`` makes the harness's real Redis answer late, as a stalled or
overloaded server would.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from django.test import RequestFactory
from redis.backoff import NoBackoff
from redis.retry import Retry

from django_redis_pool import BackendUnavailable, Lock, ResourcePool
from django_redis_pool.embedded import EmbeddedRedis, find_redis_binary
from django_redis_pool.guard import Guard, Refusal
from django_redis_pool.kinds import Held
from django_redis_pool.primitives.deadlines import DeadlineBackoff, DeadlineConnection
from django_redis_pool.primitives.engine import DEADLINE_SLACK, LATE_GRANT

from .waiting import wait_for


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


# -- a Redis that stops answering ---------------------------------------------------


@pytest.fixture
def hung_server() -> Iterator[EmbeddedRedis]:
    """A redis-server of its own, stopped (SIGSTOP) by the test when it wants."""
    server = EmbeddedRedis().start()
    try:
        yield server
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(server.pid, signal.SIGCONT)
        server.stop()


def test_a_hung_redis_fails_an_acquire_within_its_timeout_plus_the_slack(hung_server):
    client = redis.Redis.from_url(
        hung_server.url,
        connection_class=DeadlineConnection,
        socket_timeout=5,
        retry=Retry(DeadlineBackoff(cap=0.5, base=0.05), 3),
    )
    pool = ResourcePool(client, "hung", resources=["r"], lease_timeout=30)
    pool.collect()
    held = pool.acquire(timeout=0)
    assert held is not None
    os.kill(hung_server.pid, signal.SIGSTOP)
    started = time.monotonic()
    with pytest.raises(BackendUnavailable):
        pool.acquire(timeout=0.5)  # 4 attempts x 5 s = 20 s without the deadline
    assert time.monotonic() - started < 0.5 + DEADLINE_SLACK + 1.0


@pytest.mark.parametrize("form", ["url", "sentinel"])
def test_a_hung_redis_fails_a_request_within_its_timeout_plus_the_slack(
    settings, hung_server, request, form
):
    """Directly, or the master a real Sentinel names."""
    if form == "url":
        connection: dict[str, Any] = {"URL": hung_server.url}
    else:
        port = request.getfixturevalue("sentinel")
        connection = {"SENTINELS": [["127.0.0.1", port]], "SERVICE_NAME": "mymaster"}
    settings.DJANGO_REDIS_POOL = {
        "CONNECTION": connection,
        "POOLS": {"printers": {"RESOURCES": ["p1"], "LEASE_TIMEOUT": 30}},
    }
    guard, first = Guard("printers", timeout=1), RequestFactory().get("/")
    held = guard.enter(first)  # connected, and the pool filled
    assert isinstance(held, Held)
    os.kill(hung_server.pid, signal.SIGSTOP)
    started = time.monotonic()
    refused = guard.enter(RequestFactory().get("/"))
    assert time.monotonic() - started < 1 + DEADLINE_SLACK + 1.0
    assert isinstance(refused, Refusal) and isinstance(refused.error, BackendUnavailable)
    started = time.monotonic()
    guard.exit(first, held)  # logged, never raised: the hold ends with its lease
    assert time.monotonic() - started < DEADLINE_SLACK + 1.0


@pytest.fixture
def sentinel(hung_server: EmbeddedRedis, tmp_path: Any) -> Iterator[int]:
    """A real Redis Sentinel (the same redis-server binary, ``--sentinel``)
    watching ``hung_server`` as "mymaster"; yields its port."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    config = tmp_path / "sentinel.conf"
    config.write_text(
        f"port {port}\nbind 127.0.0.1\ndir {tmp_path}\n"
        f"sentinel monitor mymaster 127.0.0.1 {hung_server.port} 1\n"
        "sentinel down-after-milliseconds mymaster 60000\n"
    )
    process = subprocess.Popen(
        [find_redis_binary("redis-server"), str(config), "--sentinel"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        probe = redis.Redis(port=port, socket_timeout=1, retry=Retry(NoBackoff(), 0))
        wait_for(
            lambda: _answers(probe, "SENTINEL", "get-master-addr-by-name", "mymaster"),
            what="the sentinel",
        )
        yield port
    finally:
        process.kill()
        process.wait()


def _answers(client: Any, *command: str) -> bool:
    try:
        return bool(client.execute_command(*command))
    except redis.exceptions.RedisError:
        return False
