"""``holding()``: the request hold of ``@with_resource`` for code that is not a
view (tasks, commands, scripts): a context manager, an async one and a
decorator; refusals raised with ``retry_after``; released on every exit; a
never-expiring hold renewed on ``REQUEST_LEASE`` and ended by a killed
process's death; logged, counted and signalled as a request's hold."""

from __future__ import annotations

import asyncio
import logging
import math
import multiprocessing
import os
import signal
import time
from collections.abc import Iterator
from typing import Any

import pytest

from django_redis_pool import (
    BackendUnavailable,
    Decision,
    Lease,
    ResourceUnavailable,
    get_lock,
    get_pool,
    get_ratelimit,
    holding,
    signals,
)
from django_redis_pool.holder_names import request_of
from django_redis_pool.primitives import counts
from tests.support.primitive_helpers import redis_time
from tests.support.stoppable_servers import closed_port
from tests.support.waiting import wait_for


@pytest.fixture
def configured(settings: Any, redis_url: str) -> None:
    settings.DJANGO_REDIS_POOL = {
        "CONNECTION": {"URL": redis_url},
        "REQUEST_LEASE": 1,
        "POOLS": {"printers": {"RESOURCES": ["p1"], "LEASE_TIMEOUT": 30}},
        "SEMAPHORES": {"reports": {"MAX_SIZE": 2}},
        # its leases never expire: holding() holds it on REQUEST_LEASE, renewed
        "LOCKS": {"imports": {"LEASE_TIMEOUT": None}},
        "RATE_LIMITS": {"api": {"RATE": "2/m", "BURST": 2}},
    }
    get_pool("printers").collect()  # (its resource is associated on first use anyway)


def is_taken(name: str) -> bool:
    """Whether another caller is refused ``name`` now."""
    if name == "printers":
        lease = get_pool(name).acquire(timeout=0)
        if lease is None:
            return True
        lease.release()
        return False
    lock = get_lock(name).for_holder("someone-else")
    if not lock.acquire(blocking=False):
        return True
    lock.release()
    return False


@pytest.fixture
def sent() -> Iterator[list[tuple[str, dict[str, Any]]]]:
    """The signals sent during the test, by name."""
    got: list[tuple[str, dict[str, Any]]] = []
    receivers = []
    for name in ("resource_acquired", "resource_released", "resource_unavailable"):

        def receiver(sender: Any, _name: str = name, **kwargs: Any) -> None:
            got.append((_name, kwargs))

        getattr(signals, name).connect(receiver, weak=False)
        receivers.append((name, receiver))
    yield got
    for name, receiver in receivers:
        getattr(signals, name).disconnect(receiver)


def test_a_with_block_holds_what_a_request_would_and_releases_it(
    configured: None, sent: list[tuple[str, dict[str, Any]]]
) -> None:
    with holding("printers", timeout=0) as held:
        assert isinstance(held, Lease) and held.resource == "p1"
        assert is_taken("printers")
        assert "task tests.django.test_holding." in held.holder
        assert request_of(held.holder) is None, "not a request's holder name"
    assert not is_taken("printers"), "released at the end of the block"
    assert [name for name, _ in sent] == ["resource_acquired", "resource_released"]
    assert all(kwargs["request"] is None and kwargs["name"] == "printers" for _, kwargs in sent)
    counts.flush()
    totals = get_pool("printers").activity().totals
    assert totals.get("acquired") == 2, "counted: the block's hold and is_taken's after it"
    assert totals.get("refused_timeout") == 1, "is_taken's, inside the block"


def test_a_second_holder_is_refused_with_retry_after(
    configured: None, sent: list[tuple[str, dict[str, Any]]]
) -> None:
    with holding("printers", timeout=0):
        with pytest.raises(ResourceUnavailable) as refused, holding("printers", timeout=0):
            pytest.fail("not granted twice")
        assert refused.value.reason == "timeout"
        assert refused.value.retry_after == 1.0, "did not wait: a turn is expected in 1 s"
        with pytest.raises(ResourceUnavailable) as waited, holding("printers", timeout=0.2):
            pytest.fail("not granted twice")
        assert waited.value.retry_after == pytest.approx(0.2), "the wait it was refused after"
    assert [name for name, _ in sent].count("resource_unavailable") == 2


def test_a_full_queue_of_waiters_is_refused_at_once(settings: Any, redis_url: str) -> None:
    settings.DJANGO_REDIS_POOL = {
        "CONNECTION": {"URL": redis_url},
        "SEMAPHORES": {"reports": {"MAX_SIZE": 1, "MAX_WAITING": 0}},
    }
    with holding("reports", timeout=0):
        started = time.monotonic()  # the floor: a refusal that does not wait
        with pytest.raises(ResourceUnavailable), holding("reports", timeout=0):
            pytest.fail("not granted twice")
        floor = time.monotonic() - started
        started = time.monotonic()
        with pytest.raises(ResourceUnavailable) as refused, holding("reports", timeout=5):
            pytest.fail("not granted twice")
        assert time.monotonic() - started < floor + 2.5, "refused at once, not after 5 s"
        assert refused.value.reason == "full"
        assert refused.value.retry_after == 5.0


def test_async_with_waits_on_the_event_loop(configured: None) -> None:
    async def main() -> None:
        async with holding("printers", timeout=0) as held:
            assert isinstance(held, Lease)
            with pytest.raises(ResourceUnavailable):
                async with holding("printers", timeout=0):
                    pytest.fail("not granted twice")
            # another task waits for it on the loop, and gets it once released
            waiter = asyncio.ensure_future(hold_briefly())
            await asyncio.sleep(0.05)
            assert not waiter.done()
        assert await waiter == "p1"

    async def hold_briefly() -> str:
        async with holding("printers", timeout=5) as held:
            return str(held.resource)

    asyncio.run(main())
    assert not is_taken("printers")


def test_decorated_functions_hold_on_each_call(configured: None) -> None:
    @holding("printers", timeout=0)
    def print_it(document: str, *, copies: int = 1) -> str:
        assert is_taken("printers")
        return f"{document} x{copies}"

    @holding("printers", timeout=0)
    async def aprint_it(document: str) -> str:
        assert await asyncio.to_thread(is_taken, "printers")
        return document

    assert print_it("report", copies=2) == "report x2", "the arguments are untouched"
    assert print_it.__name__ == "print_it"
    assert not is_taken("printers")
    assert asyncio.run(aprint_it("memo")) == "memo"
    assert not is_taken("printers")
    with holding("printers", timeout=0), pytest.raises(ResourceUnavailable):
        print_it("refused")


@pytest.mark.parametrize("error", [ValueError("boom"), SystemExit(3), KeyboardInterrupt()])
def test_any_exception_releases(configured: None, error: BaseException) -> None:
    with pytest.raises(type(error)), holding("printers", timeout=0):
        raise error
    assert not is_taken("printers")

    @holding("imports", timeout=0)
    def task() -> None:
        raise error

    with pytest.raises(type(error)):
        task()
    assert not is_taken("imports")


def test_cancellation_releases(configured: None) -> None:
    async def main() -> None:
        entered = asyncio.Event()

        async def body() -> None:
            async with holding("imports", timeout=0):
                entered.set()
                await asyncio.Event().wait()  # until cancelled

        running = asyncio.ensure_future(body())
        await entered.wait()
        assert await asyncio.to_thread(is_taken, "imports")
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running

    asyncio.run(main())
    assert not is_taken("imports")


def test_a_long_body_keeps_its_never_expiring_hold_renewed(configured: None) -> None:
    with holding("imports", timeout=0) as lock:
        ((left,),) = [(lease.expires_at,) for lease in get_lock("imports").holders()]
        assert left is not None, "a lease of REQUEST_LEASE, not a hold for ever"
        client = get_lock("imports").client
        wait_for(lambda: redis_time(client) > left + 2, what="three REQUEST_LEASEs (Redis clock)")
        assert is_taken("imports"), "still held: renewed while the body runs"
        assert lock.owned()
    assert not is_taken("imports")


def _hold_then_wait(ready: Any) -> None:  # (the child of the test below)
    with holding("imports", timeout=5):
        ready.set()
        while True:
            time.sleep(1)


def test_a_killed_process_hold_ends_within_request_lease(configured: None) -> None:
    context = multiprocessing.get_context("fork")
    ready = context.Event()
    child = context.Process(target=_hold_then_wait, args=(ready,))
    child.start()
    try:
        assert ready.wait(30), "the child took the hold"
        assert is_taken("imports")
        os.kill(child.pid, signal.SIGKILL)  # type: ignore[arg-type]
        child.join(10)
        assert child.exitcode == -signal.SIGKILL
        lock = get_lock("imports")
        dead = redis_time(lock.client)  # (the Redis clock, which ends the hold)
        [lease] = lock.holders()
        # its last renewal came before the kill: the lease ends REQUEST_LEASE
        # (1 s) after it at the latest (stored to the ms)
        assert lease.expires_at is not None
        assert lease.expires_at <= dead + 1 + 0.001, "within REQUEST_LEASE of the kill"
        wait_for(lambda: not is_taken("imports"), timeout=10, what="the dead hold to end")
    finally:
        if child.is_alive():
            child.kill()


def test_a_rate_limit_refusal_tells_the_limiters_own_retry_after(configured: None) -> None:
    for _ in range(2):
        with holding("api", identity="job:42") as decision:
            assert isinstance(decision, Decision) and decision.allowed
    with pytest.raises(ResourceUnavailable) as refused, holding("api", identity="job:42"):
        pytest.fail("limited")
    error = refused.value
    assert error.reason == "limited"
    _, retry_after = get_ratelimit("api").status("job:42")
    assert error.decision.retry_after == error.retry_after  # type: ignore[attr-defined]
    assert 0 < retry_after <= error.retry_after <= retry_after + 1
    assert not math.isclose(error.retry_after, math.ceil(error.retry_after)), "not rounded"
    with holding("api") as decision:  # the key "" by default: a budget of its own
        assert decision.allowed


def test_redis_unreachable_raises_or_runs_without_a_hold_with_fail_open(
    settings: Any, caplog: pytest.LogCaptureFixture
) -> None:
    url = f"redis://127.0.0.1:{closed_port()}/0"
    settings.DJANGO_REDIS_POOL = {"CONNECTION": {"URL": url}, "LOCKS": {"imports": {}}}
    with pytest.raises(BackendUnavailable), holding("imports", timeout=0):
        pytest.fail("no hold without Redis")
    settings.DJANGO_REDIS_POOL = {
        "CONNECTION": {"URL": url},
        "FAIL_OPEN": True,
        "LOCKS": {"imports": {}},
    }
    ran = []
    with caplog.at_level(logging.WARNING, "django_redis_pool"), holding("imports") as held:
        ran.append(held)
    assert ran == [None]
    assert any(
        "runs without holding 'imports'" in record.getMessage()
        and "test_holding" in record.getMessage()
        for record in caplog.records
    )


@pytest.mark.parametrize("timeout", [0, 1.5])
def test_a_hold_checks_its_wait_once_and_arms_one_deadline(
    configured: None, monkeypatch: Any, timeout: float
) -> None:
    """One wait from the guard to the wire: the guard starts it and arms its
    deadline; the primitive takes it as it is (no second check, no second
    deadline)."""
    from django_redis_pool.primitives.clients import deadlines, waits

    armed: list[float | None] = []  # (the deadlines of a wait; a release's has none)
    checked: list[object] = []
    enter, check = deadlines.deadline.__enter__, waits.check_timeout

    def arm(self: Any) -> None:
        if isinstance(self.watch, waits.Wait):
            armed.append(self.seconds)
        enter(self)

    monkeypatch.setattr(deadlines.deadline, "__enter__", arm)
    monkeypatch.setattr(waits, "check_timeout", lambda *a: (checked.append(a[0]), check(*a))[1])
    with holding("printers", timeout=timeout) as lease:
        assert lease is not None
    assert armed == [timeout + deadlines.DEADLINE_SLACK], "one deadline for the wait"
    assert checked == [], "the wait handed down is not checked again"
