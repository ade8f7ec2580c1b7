"""A release that Redis does not answer in time goes on in the background.

``CLIENT PAUSE ms WRITE`` (Redis >= 6.2) makes the harness's real Redis hold
every script, releases included, while it still answers reads such as
``CLIENT UNPAUSE``: a release sent then cannot finish within its deadline
(``DEADLINE_SLACK`` of waiting). The caller must be back by then, and the
release must go on, with the same request id, until Redis answers it (the
resource is free again at once, not when its lease ends: the leases here last
120 s) or the lease has ended. Each test pauses Redis for far longer than it
needs and ends the pause itself (``CLIENT UNPAUSE``), so no bound depends on
how long the machine takes.
"""

from __future__ import annotations

import asyncio
import multiprocessing
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from asgiref.sync import sync_to_async
from django.http import HttpRequest, HttpResponse
from django.test import AsyncClient, Client
from django.urls import path

from django_redis_pool import BackendUnavailable, Lock, ResourcePool, get_pool
from django_redis_pool.decorators import with_resource
from django_redis_pool.primitives import pending_releases
from django_redis_pool.primitives.clients.connections import DeadlineConnection
from django_redis_pool.primitives.clients.deadlines import DEADLINE_SLACK
from django_redis_pool.primitives.clients.stopwatch import Stopwatch
from django_redis_pool.primitives.leased import releases
from tests.support.primitive_helpers import own_lease
from tests.support.waiting import STALL, await_for, floor_of, wait_for

pytestmark = pytest.mark.urls(__name__)

#: How long the leases here last: a release lost to the pause would free its
#: resource only then, long after every wait of these tests.
LEASE = 120
#: How long a test pauses Redis's writes, in ms, unless it ends the pause first.
PAUSE_MS = 60_000
#: How long a test waits for a release to finish once Redis is back.
BACK = 30.0

#: The client the views pause Redis's writes through (set by the fixture).
PAUSER: list[redis.Redis] = []


def pause_writes() -> None:
    PAUSER[0].client_pause(PAUSE_MS, all=False)  # CLIENT PAUSE ms WRITE


@with_resource("printers")
def served(request: HttpRequest) -> HttpResponse:
    return HttpResponse("served")


@with_resource("printers")
def pausing(request: HttpRequest) -> HttpResponse:
    pause_writes()  # right before the response: its release is the next write
    return HttpResponse("served")


@with_resource("printers")
async def aserved(request: HttpRequest) -> HttpResponse:
    return HttpResponse("served")


@with_resource("printers")
async def apausing(request: HttpRequest) -> HttpResponse:
    await sync_to_async(pause_writes)()
    return HttpResponse("served")


urlpatterns = [
    path("served/", served),
    path("pausing/", pausing),
    path("aserved/", aserved),
    path("apausing/", apausing),
]


@pytest.fixture
def paused_redis(redis_client: redis.Redis) -> Iterator[redis.Redis]:
    """The harness's client, through which a test pauses Redis's writes; the
    pause is ended, and every late release finished, by the end of the test
    (and those of earlier tests before it starts: the tests count them)."""
    wait_for(lambda: pending_releases() == 0, 60, "the late releases of earlier tests to end")
    PAUSER[:] = [redis_client]
    yield redis_client
    redis_client.client_unpause()
    wait_for(lambda: pending_releases() == 0, BACK, "the late releases to end")


@pytest.fixture
def printers(settings: Any, redis_url: str, paused_redis: redis.Redis) -> ResourcePool:
    """The configured pool ``printers``, its one resource ``p1`` free."""
    settings.DJANGO_REDIS_POOL = {
        "CONNECTION": {"URL": redis_url},
        "POOLS": {"printers": {"RESOURCES": ["p1"], "LEASE_TIMEOUT": LEASE}},
    }
    pool = get_pool("printers")
    pool.associate("p1")
    return pool


def deadline_client(url: str) -> redis.Redis:
    """A client of the plain API whose connections keep deadlines."""
    return redis.Redis.from_url(url, connection_class=DeadlineConnection)


# -- through a view ------------------------------------------------------------------


def test_a_request_is_not_held_by_a_release_redis_answers_late_and_its_hold_ends(
    printers, paused_redis, caplog
):
    client = Client()
    floor = floor_of(lambda: client.get("/served/"))  # (the same request, Redis answering)
    watch = Stopwatch()
    with caplog.at_level("INFO", logger="django_redis_pool"):
        response = client.get("/pausing/")
        waited = watch.waited()
        assert response.status_code == 200
        assert waited < DEADLINE_SLACK + 10 * floor + STALL, "held past its release's deadline"
        assert pending_releases() == 1, "the release goes on (Redis still paused)"
        assert "'p1' of pool 'printers'" in caplog.text
        assert "goes on in the background" in caplog.text
        paused_redis.client_unpause()
        wait_for(lambda: printers.available_count() == 1, BACK, "p1 to be free again")
        wait_for(lambda: pending_releases() == 0, BACK, "the late release to end")
    assert "ended after" in caplog.text and "attempts: done" in caplog.text
    assert printers.occupied_count() == 0


def test_an_async_request_is_not_held_by_a_release_redis_answers_late_and_its_hold_ends(
    printers, paused_redis, caplog
):
    async def scenario() -> None:
        client = AsyncClient()
        watch = Stopwatch()
        await client.get("/aserved/")  # (the same request, Redis answering)
        floor = watch.waited()
        watch = Stopwatch()
        response = await client.get("/apausing/")
        waited = watch.waited()
        assert response.status_code == 200
        assert waited < DEADLINE_SLACK + 10 * floor + STALL, "held past its release's deadline"
        assert pending_releases() == 1, "the release goes on (Redis still paused)"

    with caplog.at_level("INFO", logger="django_redis_pool"):
        asyncio.run(scenario())
        paused_redis.client_unpause()
        wait_for(lambda: printers.available_count() == 1, BACK, "p1 to be free again")
        wait_for(lambda: pending_releases() == 0, BACK, "the late release to end")
    assert "goes on in the background" in caplog.text and "attempts: done" in caplog.text


# -- through the plain API -----------------------------------------------------------


def test_a_pools_lease_released_late_returns_in_time_and_frees_its_resource(
    redis_url, paused_redis
):
    pool = ResourcePool(deadline_client(redis_url), "late", resources=["r"], lease_timeout=LEASE)
    floor = floor_of(lambda: pool.release(pool.acquire()))  # (Redis answering)
    with pool.hold(timeout=0) as lease:
        paused_redis.client_pause(PAUSE_MS, all=False)
        watch = Stopwatch()
    assert watch.waited() < DEADLINE_SLACK + 10 * floor + STALL, "held past the deadline"
    assert lease.released and not lease.lost, "let go of, not lost"
    assert not lease.renew() and lease.release() is False, "a second release does nothing"
    assert pending_releases() == 1
    paused_redis.client_unpause()
    wait_for(lambda: pool.available_count() == 1, BACK, "r to be free again")
    wait_for(lambda: pending_releases() == 0, BACK, "the late release to end")


def test_a_lock_released_late_returns_in_time_and_is_free_again(redis_url, paused_redis):
    lock = Lock(deadline_client(redis_url), "late-lock", lease_timeout=LEASE)

    def take_and_release() -> None:
        with lock:
            pass

    floor = floor_of(take_and_release)
    with lock:
        paused_redis.client_pause(PAUSE_MS, all=False)
        watch = Stopwatch()
    assert watch.waited() < DEADLINE_SLACK + 10 * floor + STALL, "held past the deadline"
    assert own_lease(lock) is None, "this object let go of it"
    paused_redis.client_unpause()
    wait_for(lambda: not lock.locked(), BACK, "the lock to be free again")
    wait_for(lambda: pending_releases() == 0, BACK, "the late release to end")


def test_an_asyncio_clients_late_release_goes_on_on_its_loop(redis_url, paused_redis):
    """A pool built on a redis.asyncio client has no blocking client: its late
    release goes on as a task of the loop."""

    async def scenario() -> None:
        aclient = redis.asyncio.Redis.from_url(redis_url)
        pool = ResourcePool(aclient, "alate", resources=["r"], lease_timeout=LEASE)
        warm = await pool.aacquire(timeout=0)  # (the pool filled, the scripts loaded)
        assert warm is not None
        watch = Stopwatch()
        assert await warm.arelease()
        floor = watch.waited()
        lease = await pool.aacquire(timeout=0)
        assert lease is not None
        await aclient.client_pause(PAUSE_MS, all=False)
        watch = Stopwatch()
        assert await lease.arelease() is True
        assert watch.waited() < DEADLINE_SLACK + 10 * floor + STALL, "held past the deadline"
        assert pending_releases() == 1
        await aclient.client_unpause()
        await await_for(lambda: pending_releases() == 0, BACK, "the late release to end")
        assert await pool.aacquire(timeout=0) is not None, "r is free again"
        await aclient.aclose()

    asyncio.run(scenario())


# -- a late release ends nothing else ------------------------------------------------


def test_a_late_release_that_finds_its_lease_taken_ends_nothing(
    redis_url, paused_redis, monkeypatch, caplog
):
    """The lease expired and another holder took the resource before the
    release reached Redis: the release (its token is not the new lease's) ends
    nothing. (Attempts go on past the lease's end here, so that one reaches Redis.)"""
    monkeypatch.setattr(releases, "CLOCK_MARGIN", 60.0)
    pool = ResourcePool(deadline_client(redis_url), "taken", resources=["r"])
    first = pool.acquire(timeout=0, lease_timeout=0.3)
    assert first is not None
    second = pool.acquire(timeout=10, lease_timeout=LEASE)  # once the first expired
    assert second is not None and second.fence > first.fence
    paused_redis.client_pause(PAUSE_MS, all=False)
    with caplog.at_level("INFO", logger="django_redis_pool"):
        assert first.release() is True  # (not known yet: it goes on)
        assert pending_releases() == 1
        paused_redis.client_unpause()
        wait_for(lambda: pending_releases() == 0, BACK, "the late release to end")
    assert "the lease had ended already" in caplog.text
    assert pool.is_occupied("r") and second.renew(), "the second holder still holds it"
    assert [lease.fence for lease in pool.leases()] == [second.fence]
    assert second.release()


def test_a_late_release_stops_once_its_lease_has_ended(redis_url, paused_redis, caplog):
    """Redis does not answer until the lease has ended: the release stops
    trying (there is nothing left to release) while Redis is still paused."""
    pool = ResourcePool(deadline_client(redis_url), "ended", resources=["r"])
    lease = pool.acquire(timeout=0, lease_timeout=0.5)
    assert lease is not None
    paused_redis.client_pause(PAUSE_MS, all=False)
    with caplog.at_level("INFO", logger="django_redis_pool"):
        assert lease.release() is True
        wait_for(lambda: pending_releases() == 0, BACK, "the late release to give up")
    assert "given up: its lease has ended" in caplog.text
    paused_redis.client_unpause()
    assert pool.available_count() == 1, "the resource is free (its lease ended)"


# -- a forked child -------------------------------------------------------------------


def _report_pending(result: Any) -> None:
    result.put(pending_releases())


def test_a_forked_child_has_none_of_its_parents_late_releases(redis_url, paused_redis):
    pool = ResourcePool(deadline_client(redis_url), "forked", resources=["r"], lease_timeout=LEASE)
    lease = pool.acquire(timeout=0)
    assert lease is not None
    paused_redis.client_pause(PAUSE_MS, all=False)
    lease.release()
    assert pending_releases() == 1
    context = multiprocessing.get_context("fork")
    result = context.Queue()
    child = context.Process(target=_report_pending, args=(result,))
    child.start()
    assert result.get(timeout=30) == 0, "the child would release its parent's lease again"
    child.join(30)
    assert pending_releases() == 1, "the parent's goes on"
    paused_redis.client_unpause()
    wait_for(lambda: pool.available_count() == 1, BACK, "r to be free again")


def test_a_holder_whose_release_goes_on_in_the_background_is_told_so_when_it_asks_again(
    redis_url, paused_redis
):
    """Its next acquire finds the lock still held by itself: not a holder's
    mistake ("not reentrant"), but its own release still in flight."""

    async def release_late() -> None:
        aclient = redis.asyncio.Redis.from_url(redis_url)
        lock = Lock(aclient, "inflight", lease_timeout=LEASE)
        assert await lock.aacquire(holder="h")
        await aclient.client_pause(PAUSE_MS, all=False)
        await lock.arelease(holder="h")  # back in time; goes on on the loop
        assert pending_releases() == 1
        # (the attempt Redis holds dies with its connection, not run at the unpause)
        paused_redis.client_kill_filter(_type="normal", skipme=True)
        paused_redis.client_unpause()
        # (blocking, on this thread: the loop's retry cannot run meanwhile)
        same = Lock(redis.Redis.from_url(redis_url), "inflight", lease_timeout=LEASE)
        with pytest.raises(BackendUnavailable, match="its own release of it"):
            same.acquire(timeout=0.01, holder="h")
        await await_for(lambda: pending_releases() == 0, BACK, "the late release to end")
        assert same.acquire(timeout=0, holder="h")
        same.release(holder="h")
        await aclient.aclose()

    asyncio.run(release_late())
