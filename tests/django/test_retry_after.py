"""A refusal's ``Retry-After`` (a request's) and ``retry_after`` (``holding()``'s)
estimate when a turn is likely (issue 49): from the primitive's recent hold
times and the queue ahead, not from the wait the caller was refused after.
Against the harness's real Redis; views are decorated here and called with
``RequestFactory`` requests."""

from __future__ import annotations

import asyncio
import math
import threading
import time
from typing import Any

import pytest
from django.http import HttpResponse
from django.test import RequestFactory

from django_redis_pool import (
    ResourceUnavailable,
    get_allocator,
    get_lock,
    get_pool,
    get_semaphore,
    holding,
)
from django_redis_pool.decorators import with_resource
from django_redis_pool.primitives import counts
from django_redis_pool.primitives.leased import turns
from tests.support.primitive_helpers import ops
from tests.support.waiting import wait_for

#: How long each hold of the issue's test lasts, in seconds.
HOLD = 10.0


@pytest.fixture
def configured(settings: Any, redis_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    settings.DJANGO_REDIS_POOL = {
        "CONNECTION": {"URL": redis_url},
        "POOLS": {
            "plotters": {"RESOURCES": ["a", "b"], "LEASE_TIMEOUT": 60},
            "printers": {"RESOURCES": ["p1"], "LEASE_TIMEOUT": 60},
        },
        "SEMAPHORES": {"reports": {"MAX_SIZE": 3, "LEASE_TIMEOUT": 60, "PERMITS": 2}},
        "LOCKS": {"imports": {"LEASE_TIMEOUT": 60}},
        "ALLOCATORS": {"proxies": {"KEYS": ["k1"], "LEASE_TIMEOUT": 60}},
    }
    # every estimate reads Redis afresh (a test's refusals come less than a second apart)
    monkeypatch.setattr(turns, "FRESH_FOR", -1.0)
    monkeypatch.setattr(turns, "MEAN_FRESH_FOR", -1.0)


def timed(primitive: Any, *holds: float) -> None:
    """Count holds of ``holds`` seconds for ``primitive``, as its releases
    record them, and add them into Redis."""
    for held in holds:
        ops(primitive).counts.released(held)
    assert counts.flush() == 0


def refused(name: str, **options: Any) -> HttpResponse:
    """A request refused ``name`` (the view never runs)."""

    @with_resource(name, **options)
    def view(request: Any) -> HttpResponse:
        raise AssertionError("refused: the view does not run")

    response = view(RequestFactory().get("/"))
    assert response.status_code == 503
    return response


def test_a_refused_request_is_told_to_come_back_when_a_resource_frees(configured: None) -> None:
    """The issue's case: holds last about 10 s, a request waits 2 s and is
    refused; its Retry-After is within a factor of 2 of the time until a
    resource actually frees (not the 2 s it waited)."""
    pool = get_pool("plotters")
    pool.collect()
    first = [pool.acquire(), pool.acquire()]
    threading.Event().wait(HOLD)  # (a first round of holds of HOLD seconds)
    assert all(lease is not None and lease.release() for lease in first)
    assert counts.flush() == 0
    second = [pool.acquire(), pool.acquire()]
    assert all(lease is not None for lease in second)
    started = time.monotonic()

    def release_after_hold() -> None:
        threading.Event().wait(max(0.0, started + HOLD - time.monotonic()))
        for lease in second:
            lease.release()  # type: ignore[union-attr]

    releaser = threading.Thread(target=release_after_hold, daemon=True)
    releaser.start()
    response = refused("plotters", timeout=2)
    told_at = time.monotonic()
    with pytest.raises(ResourceUnavailable) as task_refused, holding("plotters", timeout=0):
        pass
    task_told_at = time.monotonic()
    wait_for(lambda: pool.available_count() > 0, 2 * HOLD, "a plotter to free")
    freed_at = time.monotonic()
    releaser.join(5)
    retry_after = int(response["Retry-After"])
    actual = freed_at - told_at
    assert actual / 2 <= retry_after <= actual * 2, (retry_after, actual)
    estimate = task_refused.value.retry_after
    actual = freed_at - task_told_at
    assert estimate is not None and actual / 2 <= estimate <= actual * 2, (estimate, actual)


def test_a_request_is_told_whole_seconds_and_holding_the_seconds_themselves(
    configured: None,
) -> None:
    pool = get_pool("printers")
    timed(pool, 10.0)
    assert pool.acquire() is not None
    response = refused("printers", timeout=0)
    with pytest.raises(ResourceUnavailable) as task_refused, holding("printers", timeout=0):
        pass
    assert 5 < int(response["Retry-After"]) <= 10
    estimate = task_refused.value.retry_after
    assert estimate is not None and 5.0 < estimate <= 10.0
    assert not math.isclose(estimate, math.ceil(estimate)), "not rounded"


def test_an_async_view_is_told_the_estimate(configured: None) -> None:
    pool = get_pool("printers")
    timed(pool, 10.0)
    assert pool.acquire() is not None

    @with_resource("printers", timeout=0)
    async def view(request: Any) -> HttpResponse:
        raise AssertionError("refused: the view does not run")

    response = asyncio.run(view(RequestFactory().get("/")))
    assert response.status_code == 503 and 5 < int(response["Retry-After"]) <= 10


def test_the_callers_waiting_ahead_push_the_retry_after_back(configured: None) -> None:
    pool = get_pool("printers")
    timed(pool, 10.0)
    assert pool.acquire() is not None
    between = time.monotonic()
    alone = int(refused("printers", timeout=0)["Retry-After"])
    waiting = [
        threading.Thread(target=pool.acquire, kwargs={"timeout": 30}, daemon=True) for _ in range(2)
    ]
    for thread in waiting:
        thread.start()
    wait_for(lambda: pool.waiting_count() == 2, what="two callers to wait")
    behind = int(refused("printers", timeout=0)["Retry-After"])
    between = time.monotonic() - between
    # two more mean holds of 10 s, from a hold older by the time in between
    # (each header rounded up: 1 s either way)
    assert 20 - between - 1 <= behind - alone <= 21
    for left in (1, 0):  # (the waiters take it in turn, and go)
        pool.force_release("p1")
        wait_for(
            lambda left=left: sum(t.is_alive() for t in waiting) == left,  # type: ignore[misc]
            what="a waiter served",
        )


def test_the_views_own_retry_after_wins_over_the_estimate(configured: None) -> None:
    pool = get_pool("printers")
    timed(pool, 10.0)
    assert pool.acquire() is not None
    assert refused("printers", timeout=0, retry_after=7)["Retry-After"] == "7"


def test_a_refused_request_estimates_its_turn_once_and_not_when_the_view_tells_it(
    configured: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from django_redis_pool.primitives.leased.primitive import LeasedPrimitive

    estimates: list[str] = []
    estimate = LeasedPrimitive.turn_estimate

    def counted(self: Any, permits: int = 1) -> float | None:
        estimates.append(self.name)
        return estimate(self, permits)

    monkeypatch.setattr(LeasedPrimitive, "turn_estimate", counted)
    pool = get_pool("printers")
    timed(pool, 10.0)
    assert pool.acquire() is not None
    assert 5 < int(refused("printers", timeout=0)["Retry-After"]) <= 10
    assert estimates == ["printers"], "one estimate (one snapshot read) per refusal"
    assert refused("printers", timeout=0, retry_after=7)["Retry-After"] == "7"
    assert estimates == ["printers"], "no estimate read where the view tells the turn"


def test_a_semaphore_lock_and_allocator_refusal_tell_the_estimate(configured: None) -> None:
    semaphore, lock, allocator = (
        get_semaphore("reports"),
        get_lock("imports"),
        get_allocator("proxies"),
    )
    for primitive in (semaphore, lock, allocator):
        timed(primitive, 10.0)
    assert semaphore.acquire("someone", permits=2)  # a request takes PERMITS: 2
    assert lock.for_holder("someone").acquire()
    allocator.extend(["k1"])
    assert allocator.malloc_key() is not None
    for name in ("reports", "imports", "proxies"):
        assert 5 < int(refused(name, timeout=0)["Retry-After"]) <= 10, name


def test_without_timed_holds_a_request_is_told_the_wait_it_was_refused_after(
    configured: None,
) -> None:
    assert get_pool("printers").acquire() is not None
    assert refused("printers", timeout=0.2)["Retry-After"] == "1"
    with pytest.raises(ResourceUnavailable) as task_refused, holding("printers", timeout=0.2):
        pass
    assert task_refused.value.retry_after == pytest.approx(0.2)
