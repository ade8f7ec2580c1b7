"""Async views and middleware on the asyncio path: every connection form of
the setting, and a thousand requests waiting in one process without a thread
each. Against real Redis servers (and a real Sentinel and Cluster)."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest
from django.test import AsyncClient

from django_redis_pool import get_pool, registry
from django_redis_pool.primitives.clients.async_clients import async_client_for
from tests.support.waiting import wait_for
from tests.urlconfs import decorated_views as views

pytestmark = pytest.mark.urls("tests.urlconfs.decorated_views")

POOLS = {"printers": {"RESOURCES": ["p1"], "LEASE_TIMEOUT": 30}}


def _connection(form: str, request: pytest.FixtureRequest, settings: Any) -> dict[str, Any]:
    if form == "cluster":
        return {"URL": request.getfixturevalue("redis_cluster").url, "CLUSTER": True}
    if form == "sentinel":
        port = request.getfixturevalue("sentinel")
        return {"SENTINELS": [["127.0.0.1", port]], "SERVICE_NAME": "mymaster"}
    url = request.getfixturevalue("redis_url")
    if form == "url":
        return {"URL": url, "OPTIONS": {"socket_timeout": 4}}
    if form == "bounded":
        return {"URL": url, "MAX_CONNECTIONS": 2, "POOL_TIMEOUT": 1}
    backend = {
        "django_redis": "django_redis.cache.RedisCache",
        "builtin_cache": "django.core.cache.backends.redis.RedisCache",
    }[form]
    settings.CACHES = {
        "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
        "redis": {"BACKEND": backend, "LOCATION": url},
    }
    return {"CACHE": "redis"}


@pytest.mark.parametrize(
    "form",
    [
        "url",
        "bounded",
        "django_redis",
        "builtin_cache",
        "sentinel",
        pytest.param("cluster", marks=pytest.mark.cluster),
    ],
)
def test_every_connection_form_serves_async_views_on_its_asyncio_twin(
    settings: Any, request: pytest.FixtureRequest, form: str
) -> None:
    settings.DJANGO_REDIS_POOL = {
        "CONNECTION": _connection(form, request, settings),
        "POOLS": POOLS,
    }
    pool = get_pool("printers")

    async def scenario() -> None:
        twin = async_client_for(registry.get_connection())
        assert type(twin).__module__.startswith("redis.asyncio")
        response = await AsyncClient().get("/async/")
        assert response.status_code == 200
        lease = await pool.aacquire(timeout=1)
        assert lease is not None and lease.resource == "p1"
        assert (await AsyncClient().get("/async/")).status_code == 503, "held: refused"
        assert await lease.arelease()

    asyncio.run(scenario())
    assert pool.is_available("p1") and pool.waiting_count() == 0


# About 12 s of CPU on an idle 2-core machine (2,050 requests through Django's
# whole stack), so several times as long when the CPUs are busy: its own bounds
# are scaled from the floor of its first 50 requests, pytest-timeout's 120 s is not.
@pytest.mark.timeout(600)
def test_a_thousand_async_requests_wait_in_one_process_with_no_thread_more(
    settings: Any, redis_url: str
) -> None:
    # (1,000 connects and reads at once from one event loop: on a busy machine,
    # the loop runs each one's continuation seconds after Redis answered, and
    # redis-py's own timers (wall-clock, 5 s by default) then refused requests
    # with "Timeout connecting to server" or "Timeout reading" although Redis
    # answered)
    options = {"socket_connect_timeout": 120, "socket_timeout": 120}
    connection = {"URL": redis_url, "OPTIONS": options}
    settings.DJANGO_REDIS_POOL = {"CONNECTION": connection, "POOLS": POOLS}
    views.RECORD.reset()
    pool = get_pool("printers")
    # (held as long as the requests may wait: a 30 s hold that expired while they
    # queued on a busy machine was handed down their queue before it was full)
    held = pool.acquire(timeout=0, lease_timeout=600)
    assert held is not None
    count = 1000

    async def scenario() -> list[int]:
        # Django's own executors (signals, sync middleware) reach their size first;
        # and the floor: 50 requests, refused (the 1,000 below wait up to 600 s)
        started = time.monotonic()
        refused = await asyncio.gather(*(AsyncClient().get("/async/") for _ in range(50)))
        floor = time.monotonic() - started
        assert {r.status_code for r in refused} == {503}
        threads = threading.active_count()
        waiting = [asyncio.ensure_future(AsyncClient().get("/async-queue/")) for _ in range(count)]
        await asyncio.to_thread(
            wait_for,
            lambda: pool.waiting_count() == count,
            max(60, 2 * floor * count / 50),
            f"{count} requests to wait",
        )
        assert threading.active_count() <= threads, "no thread per waiting request"
        # Then they are served, the held resource and 99 more handed down the queue
        # (each request hands its resource to the next): one chain of 1,000
        # hand-offs, each waiting for a loop that also checks every other waiter
        # in every 2 s, took minutes on a busy machine.
        await asyncio.to_thread(held.release)
        await asyncio.to_thread(pool.associate_many, [f"p{i}" for i in range(2, 101)])
        return [r.status_code for r in await asyncio.gather(*waiting)]

    assert asyncio.run(scenario()) == [200] * count
    assert len(views.RECORD.seen) == count
    assert pool.available_count() == 100 and pool.waiting_count() == 0
