"""The asyncio twins of the primitives, beyond the behaviour tests (which run
on both paths, see ``tests/support/async_bridge.py``): one fair queue for blocking and
async callers, cancellation at any await point, renewal on the loop, and the
per-loop asyncio clients. Against the harness's real Redis."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import sys
import threading
import time
from typing import Any

import pytest
import redis
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from django_redis_pool import Lease, Lock, ResourcePool, Semaphore
from django_redis_pool.primitives.clients.async_clients import (
    aclose_async_clients,
    async_client_for,
)
from django_redis_pool.primitives.clients.stopwatch import Stopwatch
from tests.support.primitive_helpers import aslot_lease, ops, slot_lease
from tests.support.waiting import await_for, wait_for


def _leftovers(primitive: Any) -> dict[str, Any]:
    """What a primitive holds in Redis besides its members: holds, waiters, wake lists."""
    snapshot = primitive.snapshot()
    wakes = primitive.client.keys(f"{ops(primitive).wake_prefix}*")
    return {"held": snapshot.held_count, "waiting": snapshot.waiting_count, "wakes": wakes}


def test_sync_and_async_waiters_are_served_in_one_priority_then_arrival_order(redis_client):
    pool = ResourcePool(redis_client, "mixed", resources=["r"], lease_timeout=30)
    held = pool.acquire(timeout=0)
    assert held is not None
    arrivals = [("sync-a", 0), ("async-b", 0), ("sync-c", 5), ("async-d", 5), ("async-e", 0)]
    served: list[str] = []
    lock = threading.Lock()

    def take(lease: Lease | None, who: str) -> None:
        assert lease is not None, who
        with lock:
            served.append(who)
        lease.release()  # hands over to the next in line

    async def async_waiter(who: str, priority: int) -> None:
        lease = await pool.aacquire(timeout=20, holder=who, priority=priority)
        take(lease, who)  # (a blocking release: the order is what is tested)

    threads = []
    for who, priority in arrivals:
        if who.startswith("sync"):
            thread = threading.Thread(
                target=lambda w=who, p=priority: take(
                    pool.acquire(timeout=20, holder=w, priority=p), w
                )
            )
            thread.start()
        else:
            thread = threading.Thread(target=asyncio.run, args=(async_waiter(who, priority),))
            thread.start()
        threads.append(thread)
        wait_for(lambda w=who: _queued(pool, w), what=f"{who} to queue")
    assert [w.holder for w in pool.waiters()] == [
        "sync-c",
        "async-d",
        "sync-a",
        "async-b",
        "async-e",
    ]
    held.release()
    for thread in threads:
        thread.join(30)
    assert served == ["sync-c", "async-d", "sync-a", "async-b", "async-e"]
    assert _leftovers(pool) == {"held": 0, "waiting": 0, "wakes": []}


def _queued(primitive: Any, holder: str) -> bool:
    return any(w.holder == holder for w in primitive.waiters())


# -- cancellation at every await point ---------------------------------------------

#: The commands the lease engine awaits (every one is sent by the client's
#: ``execute_command``, which the engine calls itself for its scripts).
AWAITED = ("FCALL", "EVALSHA", "SCRIPT LOAD", "FUNCTION LOAD", "BLPOP")


class CancelAt:
    """Instruments the asyncio twin of a client (its real methods still run):
    the ``at``-th awaited call cancels the calling task ``when``: "before" it is
    sent, "after" its reply came back (the reply is then lost to the caller, as
    when a cancellation races a grant), or "swallowed": after its reply, inside
    the call, which then returns the reply anyway (as Python 3.11's
    ``asyncio.wait_for`` in redis-py does when the cancellation races the send);
    ``release_at`` releases the holder's lease just before that call, so a
    grant races the waiter."""

    def __init__(self, at: int, when: str, release_at: int, holder: Lease) -> None:
        self.at, self.when, self.release_at, self.holder = at, when, release_at, holder
        self.calls = 0
        self.cancelled = False

    def install(self, twin: Any, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(twin, "execute_command", self._wrapped(twin.execute_command))

    def _wrapped(self, method: Any) -> Any:
        async def call(*args: Any, **kwargs: Any) -> Any:
            name = str(args[0]).upper() if args else ""
            if name not in AWAITED:
                return await method(*args, **kwargs)
            self.calls += 1
            # (released before the first blocking read at the latest: no wait lasts)
            if self.calls == self.release_at or (name == "BLPOP" and not self.holder.lost):
                await asyncio.to_thread(self.holder.release)
            if self.calls == self.at and self.when == "before":
                await self._cancel()
            reply = await method(*args, **kwargs)
            if self.calls == self.at and self.when == "after":
                await self._cancel()
            if self.calls == self.at and self.when == "swallowed":
                with contextlib.suppress(asyncio.CancelledError):
                    await self._cancel()
            return reply

        return call

    async def _cancel(self) -> None:
        task = asyncio.current_task()
        assert task is not None
        self.cancelled = True
        task.cancel()
        await asyncio.sleep(0)  # delivered here, at this await point


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    kind=st.sampled_from(["pool", "lock", "semaphore"]),
    at=st.integers(1, 8),
    when=st.sampled_from(["before", "after", "swallowed"]),
    release_at=st.integers(1, 8),
)
def test_a_cancellation_at_any_await_point_leaves_nothing_behind(
    redis_client, monkeypatch, kind, at, when, release_at
):
    redis_client.flushdb()
    if kind == "pool":
        primitive: Any = ResourcePool(redis_client, "c", resources=["r"], lease_timeout=30)
        holder = primitive.acquire(timeout=0)
        acquire = primitive.aacquire
    elif kind == "lock":
        primitive = Lock(redis_client, "c", lease_timeout=30)
        assert primitive.acquire(blocking=False, holder="first")
        holder = primitive.lease_of("first")
        acquire = functools.partial(primitive.aacquire, holder="second")
    else:
        primitive = Semaphore(redis_client, "c", lease_timeout=30, default_max_size=1)
        holder = slot_lease(primitive, "first")
        acquire = functools.partial(aslot_lease, primitive, "second")
    assert holder is not None
    cancel = CancelAt(at, when, release_at, holder)

    async def scenario(patch: pytest.MonkeyPatch) -> Any:
        cancel.install(async_client_for(redis_client), patch)
        task = asyncio.ensure_future(acquire(timeout=5))
        try:
            return await task
        except asyncio.CancelledError:
            return "cancelled"

    with monkeypatch.context() as patch:
        outcome = asyncio.run(scenario(patch))
    event(f"{outcome if isinstance(outcome, str) else type(outcome).__name__} of {cancel.calls}")
    assert cancel.calls > 0, "the engine's awaited commands were seen"
    if outcome == "cancelled":
        assert cancel.cancelled
    if cancel.cancelled and when == "swallowed" and sys.version_info >= (3, 11):
        assert outcome == "cancelled", "a cancellation swallowed by a call is still seen"
    elif isinstance(outcome, Lease):
        assert outcome.release()
    elif outcome is True:  # the lock's
        primitive.release(holder="second")
    if not holder.lost:
        holder.release()
    assert _leftovers(primitive) == {"held": 0, "waiting": 0, "wakes": []}


# -- holding on the loop --------------------------------------------------------------


def test_an_async_lease_renews_itself_as_a_task_and_awaits_a_coroutine_on_lost(redis_client):
    # (renewed every 1 s, a 1.5 s lease has 0.5 s of margin, which a busy
    # machine's stalls do not reach; a 0.3 s one had 0.1 s)
    pool = ResourcePool(redis_client, "renewed", resources=["r"], lease_timeout=1.5)
    threads_before = threading.active_count()
    lost: list[Lease] = []

    async def on_lost(lease: Lease) -> None:
        await asyncio.sleep(0)
        lost.append(lease)

    async def scenario() -> None:
        async with pool.ahold(timeout=1, auto_renew=True) as lease:
            await asyncio.sleep(3.2)  # two lease durations: renewed by a task of this loop
            assert not lease.lost and pool.is_occupied("r")
            # (<=: a thread of an earlier test may have ended meanwhile)
            assert threading.active_count() <= threads_before, "no renewal thread"
        assert pool.is_available("r")
        lease = await pool.aacquire(timeout=1)
        assert lease is not None
        lease.start_auto_renew(on_lost=on_lost)
        assert pool.force_release("r")
        await await_for(lambda: lease.lost and lost, what="its next renewal to find it gone")
        assert lost == [lease]

    asyncio.run(scenario())


def test_async_context_managers_release_on_error(redis_client):
    pool = ResourcePool(redis_client, "cm", resources=["r"], lease_timeout=30)
    semaphore = Semaphore(redis_client, "cm", default_max_size=1)
    lock = Lock(redis_client, "cm", timeout=1)

    async def scenario() -> None:
        for manager in (pool.ahold(timeout=1), semaphore.ahold(timeout=1), lock):
            with pytest.raises(KeyError):
                async with manager:
                    raise KeyError("boom")
        async with lock:
            assert lock.owned() and lock.fence is not None
            assert await asyncio.to_thread(lock.owned) is False, "held by this task, not a thread"
        assert not lock.locked()

    asyncio.run(scenario())
    assert pool.is_available("r") and semaphore.get_current_size() == 0


def test_a_lock_default_holder_is_one_per_task(redis_client):
    lock = Lock(redis_client, "tasks", lease_timeout=30)
    order: list[str] = []

    async def worker(name: str) -> None:
        async with lock:
            order.append(f"{name} in")
            await asyncio.sleep(0.05)
            order.append(f"{name} out")

    async def scenario() -> None:
        await asyncio.gather(worker("a"), worker("b"))

    asyncio.run(scenario())
    assert order in (["a in", "a out", "b in", "b out"], ["b in", "b out", "a in", "a out"])


# -- the asyncio clients ----------------------------------------------------------------


def _clients(redis_client: redis.Redis, name: str) -> int:
    """The connections named ``name`` (the test's own client and its twins:
    those of earlier tests, such as an idle renewal thread, come and go)."""
    return sum(client.get("name") == name for client in redis_client.client_list())


def test_twins_are_one_per_loop_and_closed_when_their_loop_shuts_down(redis_client, redis_url):
    blocking = redis.Redis.from_url(
        redis_url.rsplit("/", 1)[0] + "/3", socket_timeout=7, client_name="twins"
    )
    pool = ResourcePool(blocking, "twins", resources=["r"], lease_timeout=30)
    before = _clients(redis_client, "twins")
    twins: list[Any] = []

    async def scenario() -> None:
        twin = async_client_for(blocking)
        assert async_client_for(blocking) is twin, "one per loop"
        kwargs = twin.connection_pool.connection_kwargs
        assert (kwargs["db"], kwargs["socket_timeout"]) == (3, 7)
        twins.append(twin)
        leases = await asyncio.gather(*(pool.aacquire(timeout=1) for _ in range(3)))
        assert sum(lease is not None for lease in leases) == 1
        for lease in leases:
            if lease is not None:
                await lease.arelease()
        assert _clients(redis_client, "twins") > before

    asyncio.run(scenario())
    asyncio.run(scenario())
    assert twins[0] is not twins[1], "a new loop, a new twin"
    wait_for(
        lambda: _clients(redis_client, "twins") == before, what="the twins' connections to close"
    )
    assert pool.is_available("r")


def test_aclose_async_clients_closes_this_loops_twins_now(redis_client, redis_url):
    blocking = redis.Redis.from_url(redis_url, client_name="aclose")
    before = _clients(redis_client, "aclose")

    async def scenario() -> None:
        await async_client_for(blocking).ping()
        assert _clients(redis_client, "aclose") == before + 1
        await aclose_async_clients()
        # (closed here at once; the server drops the connection when it reads the close)
        await asyncio.to_thread(
            wait_for, lambda: _clients(redis_client, "aclose") == before, 10, "the twin to close"
        )
        await async_client_for(blocking).ping()  # a new one on demand

    asyncio.run(scenario())


def test_a_primitive_on_an_asyncio_client_refuses_blocking_calls(redis_url):
    import redis.asyncio

    async def scenario() -> None:
        pool = ResourcePool(redis.asyncio.Redis.from_url(redis_url), "native", lease_timeout=30)
        assert await pool.aacquire(timeout=0) is None
        with pytest.raises(TypeError, match=r"redis\.asyncio client"):
            pool.acquire(timeout=0)
        await pool.client.aclose()

    asyncio.run(scenario())


def test_an_async_wait_holds_no_thread_and_times_out_on_time(redis_client):
    # (held with no expiry: on a busy machine the waits may last longer than a
    # fixed lease would, and the held resource must not be handed to a waiter)
    pool = ResourcePool(redis_client, "waits", resources=["r"], lease_timeout=None)
    held = pool.acquire(timeout=0)
    before = threading.active_count()

    async def timed(timeout: float) -> tuple[Any, float, float]:
        """The acquire's result, its wall time and the part of it that the
        loop's thread waited (not running other waiters, nor waiting for a CPU)."""
        watch = Stopwatch()
        return await pool.aacquire(timeout=timeout), watch.elapsed(), watch.waited()

    async def watch() -> list[Any]:
        # The floor: 200 refused tries at once, which also opens the connections the
        # waiters reuse. The waits last several floors, so that all 200 are queued
        # before the first one times out, however busy the machine is.
        started = time.monotonic()
        assert await asyncio.gather(*(timed(0) for _ in range(200)))
        floor = time.monotonic() - started
        timeout = max(1.0, 10 * floor)
        waiting = asyncio.gather(*(timed(timeout) for _ in range(200)))
        await asyncio.to_thread(
            wait_for, lambda: pool.waiting_count() == 200, timeout, "200 waiters"
        )
        assert threading.active_count() <= before + 1  # (+ the to_thread worker)
        results = await waiting
        # Never refused before its timeout (the queue drops a waiter at its deadline
        # on the Redis clock), and it waits no longer than its timeout (the
        # caller's deadline counts the time it waited, so on a busy machine the
        # time the loop spent running the other waiters comes on top)
        assert timeout * 0.9 <= min(elapsed for _, elapsed, _ in results)
        assert max(waited for _, _, waited in results) <= timeout + max(1.0, 5 * floor)
        return [lease for lease, _, _ in results]

    assert asyncio.run(watch()) == [None] * 200
    assert held is not None and held.release()
    assert _leftovers(pool) == {"held": 0, "waiting": 0, "wakes": []}
