"""What happens when Redis is slow: a caller never holds past its wait.

``CLIENT PAUSE`` makes the harness's real Redis answer late, as a stalled or
overloaded server would.
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from typing import Any

import pytest
import redis
from django.test import RequestFactory
from redis.retry import Retry

from django_redis_pool import BackendUnavailable, Lock, ResourcePool
from django_redis_pool.guard import Guard, Refusal
from django_redis_pool.kinds import Held
from django_redis_pool.primitives import lease as lease_module
from django_redis_pool.primitives.deadlines import DeadlineBackoff, DeadlineConnection
from django_redis_pool.primitives.engine import DEADLINE_SLACK, LATE_GRANT
from tests.waiting import wait_for


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
    _use_hung_server(settings, hung_server, request, form)
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


@pytest.mark.parametrize("form", ["url", "sentinel"])
def test_a_hung_redis_fails_an_async_request_within_its_timeout_plus_the_slack(
    settings, hung_server, request, form
):
    """The same, on the event loop: every asyncio call keeps the deadline."""
    _use_hung_server(settings, hung_server, request, form)
    guard, first = Guard("printers", timeout=1), RequestFactory().get("/")

    async def scenario() -> None:
        held = await guard.aenter(first)  # connected, and the pool filled
        assert isinstance(held, Held)
        os.kill(hung_server.pid, signal.SIGSTOP)
        started = time.monotonic()
        refused = await guard.aenter(RequestFactory().get("/"))
        assert time.monotonic() - started < 1 + DEADLINE_SLACK + 1.0
        assert isinstance(refused, Refusal) and isinstance(refused.error, BackendUnavailable)
        started = time.monotonic()
        await guard.aexit(first, held)  # logged, never raised
        assert time.monotonic() - started < DEADLINE_SLACK + 1.0
        os.kill(hung_server.pid, signal.SIGCONT)  # (so that the twins close at the loop's end)

    asyncio.run(scenario())


def _use_hung_server(settings: Any, hung_server: Any, request: Any, form: str) -> None:
    """Configure the pool ``printers`` on ``hung_server``: by its URL, or as
    the master a real Sentinel names."""
    if form == "url":
        connection: dict[str, Any] = {"URL": hung_server.url}
    else:
        port = request.getfixturevalue("sentinel")
        connection = {"SENTINELS": [["127.0.0.1", port]], "SERVICE_NAME": "mymaster"}
    settings.DJANGO_REDIS_POOL = {
        "CONNECTION": connection,
        "POOLS": {"printers": {"RESOURCES": ["p1"], "LEASE_TIMEOUT": 30}},
    }


def test_a_renewal_stuck_on_a_hung_redis_delays_no_renewal_on_another(hung_server, redis_url):
    """Each client's leases are renewed by a thread of their own: a renewal that
    waits on a Redis that stopped answering (here for up to 10 s) must not let a
    short lease on a healthy Redis expire meanwhile."""
    hung = hung_server.client(socket_timeout=10)
    stuck = Lock(hung, "stuck", lease_timeout=0.6, auto_renew=True)
    assert stuck.acquire(blocking=False)
    os.kill(hung_server.pid, signal.SIGSTOP)  # its renewal, 0.4 s from now, hangs
    healthy = Lock(redis.Redis.from_url(redis_url), "healthy", lease_timeout=0.6, auto_renew=True)
    assert healthy.acquire(blocking=False)
    try:
        for _ in range(10):  # 2 s: over three lease durations
            time.sleep(0.2)
            assert healthy.owned(), "the healthy Redis's lease expired: its renewal was held up"
        assert healthy.lease is not None and not healthy.lease.lost
    finally:
        healthy.release()


def test_a_client_s_renewal_thread_ends_when_idle_and_comes_back_when_needed(
    redis_client, monkeypatch
):
    """One renewal thread per client, so they must not pile up: one with
    nothing to renew ends after RENEWER_IDLE, and the next renewal starts one."""
    monkeypatch.setattr(lease_module, "RENEWER_IDLE", 0.3)
    name = f"drp-renewer-{id(redis_client):x}"

    def renewers() -> list[threading.Thread]:
        return [thread for thread in threading.enumerate() if thread.name == name]

    for round in range(2):
        lock = Lock(redis_client, f"idle-{round}", lease_timeout=0.5, auto_renew=True)
        assert lock.acquire(blocking=False)
        assert len(renewers()) == 1
        time.sleep(1.0)  # two lease durations: renewed all along
        assert lock.owned()
        lock.release()
        wait_for(lambda: not renewers(), timeout=5, what="the idle renewal thread to end")
