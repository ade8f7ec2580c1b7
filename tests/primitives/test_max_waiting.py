"""``max_waiting``: bounded waiting on ResourcePool, Semaphore and Lock (API.md,
"Overload").

At most ``max_waiting`` callers wait at once, counted by Redis across every
process and host in the step that would queue one; one more is refused at
once, as a timeout refuses it. Every test runs against a real redis-server
and the real local 3-master Redis Cluster (the ``client`` fixture is
parametrized); the behaviour tests also run on the asyncio twins (``api``).
Durations are bounded by floors (:func:`tests.support.waiting.floor_of`): a refusal
"at once" takes about as long as a refused ``timeout=0`` acquire, never its
timeout.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from django_redis_pool import Lock, ObjectPool, ResourcePool, ResourceUnavailable, Semaphore
from django_redis_pool.primitives.wire.protocol import Reply
from tests.support.client_specs import client_from, spec_of
from tests.support.primitive_helpers import ops, redis_time
from tests.support.waiting import STALL, floor_of, wait_blocked, wait_for

mp = multiprocessing.get_context("fork")

KINDS = ["pool", "semaphore", "lock"]

#: How long a caller that is meant to wait waits: far beyond any bound here.
LONG = 60.0


class Busy:
    """A pool, semaphore or lock named ``name`` (``max_waiting`` as given),
    held by "holder" with no expiry, and what a caller does with it."""

    def __init__(self, client: Any, kind: str, name: str, max_waiting: int | None) -> None:
        self.client, self.kind, self.name, self.max_waiting = client, kind, name, max_waiting
        self.primitive: Any
        if kind == "pool":
            self.primitive = ResourcePool(client, name, max_waiting=max_waiting)
            assert self.primitive.associate("r1")
            self._held: Any = self.primitive.acquire(holder="holder")
            assert self._held is not None
        elif kind == "semaphore":
            self.primitive = Semaphore(client, name, max_waiting=max_waiting)
            self.primitive.set_max_size(1)
            assert self.primitive.acquire("holder")
        else:
            self.primitive = self.lock()
            self._held = Lock(client, name, lease_timeout=None, holder="holder")
            assert self._held.acquire(timeout=0)

    def lock(self, timeout: float | None = None) -> Lock:
        return Lock(
            self.client,
            self.name,
            lease_timeout=None,
            timeout=timeout,
            max_waiting=self.max_waiting,
        )

    def release_holder(self) -> None:
        if self.kind == "semaphore":
            assert self.primitive.release("holder")
        else:
            self._held.release()

    def acquire(self, timeout: float, priority: int = 0) -> bool:
        """One caller's ``acquire``: whether it was granted (and then given back)."""
        if self.kind == "pool":
            lease = self.primitive.acquire(timeout=timeout, priority=priority)
            if lease is None:
                return False
            assert lease.release()
        elif self.kind == "semaphore":
            identity = f"caller-{uuid.uuid4().hex[:8]}"
            if not self.primitive.acquire(identity, timeout=timeout, priority=priority):
                return False
            assert self.primitive.release(identity)
        else:
            lock = self.lock()
            if not lock.acquire(timeout=timeout):
                return False
            lock.release()
        return True

    @contextlib.contextmanager
    def hold(self, timeout: float) -> Iterator[None]:
        """One caller's context manager: ``lease()``, ``hold()``, ``with lock:``."""
        if self.kind == "pool" or self.kind == "semaphore":
            with self.primitive.hold(timeout=timeout):
                yield
        else:
            with self.lock(timeout):
                yield

    def refusal(self, timeout: float) -> ResourceUnavailable:
        """The error of a caller of :meth:`hold` that is refused."""
        with pytest.raises(ResourceUnavailable) as info, self.hold(timeout):
            raise AssertionError("granted")
        return info.value


def in_threads(count: int, fn: Callable[[], Any]) -> tuple[list[threading.Thread], list[Any]]:
    """Start ``fn`` in ``count`` daemon threads; their results (or errors) land in the list."""
    results: list[Any] = []

    def target() -> None:
        try:
            results.append(fn())
        except BaseException as exc:  # surfaced by the test
            results.append(exc)

    threads = [threading.Thread(target=target, daemon=True) for _ in range(count)]
    for thread in threads:
        thread.start()
    return threads, results


def assert_refused_at_once(subject: Busy) -> None:
    """A caller that would wait ``LONG`` is refused as fast as a refused
    ``timeout=0`` acquire (the floor), by ``acquire`` and by the context manager,
    and is not queued."""
    queued = subject.primitive.waiting_count()
    floor = floor_of(lambda: subject.acquire(0))
    started = time.monotonic()
    assert subject.acquire(LONG) is False
    assert time.monotonic() - started < 10 * floor + STALL, "refused at once, not after waiting"
    started = time.monotonic()
    error = subject.refusal(LONG)
    assert time.monotonic() - started < 10 * floor + STALL
    assert error.reason == ResourceUnavailable.FULL == "full"
    assert "max_waiting" in str(error) and repr(subject.name) in str(error)
    assert subject.primitive.waiting_count() == queued, "the refused caller was not queued"


# -- validation ----------------------------------------------------------------------


@pytest.mark.parametrize("bad", [-1, 1.5, "3", True, 2**53])
@pytest.mark.parametrize("cls", [ResourcePool, Semaphore, Lock])
def test_a_bad_max_waiting_raises_value_error_naming_it_and_the_fix(
    redis_client: Any, cls: type, bad: Any
) -> None:
    with pytest.raises(ValueError, match=r"max_waiting must be an int >= 0") as info:
        cls(redis_client, "bad", max_waiting=bad)
    assert repr(bad) in str(info.value)
    assert "None (no limit)" in str(info.value)


def test_the_object_pool_checks_max_waiting_alike() -> None:
    with pytest.raises(ValueError, match=r"max_waiting must be an int >= 0.*got -1"):
        ObjectPool(object, max_waiting=-1)


@pytest.mark.parametrize("cls", [ResourcePool, Semaphore, Lock])
def test_max_waiting_defaults_to_no_limit_and_is_kept(redis_client: Any, cls: type) -> None:
    assert cls(redis_client, "x").max_waiting is None
    assert cls(redis_client, "x", max_waiting=0).max_waiting == 0
    assert cls(redis_client, "x", max_waiting=7).max_waiting == 7


def test_a_locks_for_holder_keeps_its_max_waiting(redis_client: Any) -> None:
    assert Lock(redis_client, "x", max_waiting=3).for_holder("h").max_waiting == 3


# -- refusals --------------------------------------------------------------------------


@pytest.mark.usefixtures("api")
@pytest.mark.parametrize("kind", KINDS)
def test_max_waiting_zero_never_waits_and_queues_nobody(client: Any, kind: str) -> None:
    subject = Busy(client, kind, "zero", max_waiting=0)
    assert_refused_at_once(subject)
    assert subject.primitive.waiting_count() == 0
    assert [k for k in client.scan_iter() if b":wake:" in k] == []
    subject.release_holder()
    assert subject.acquire(LONG) is True, "a free one is granted: only waiting is refused"
    with subject.hold(LONG):
        pass


@pytest.mark.usefixtures("api")
@pytest.mark.parametrize("kind", KINDS)
def test_max_waiting_n_lets_n_callers_wait_and_refuses_the_next_at_once(
    client: Any, kind: str
) -> None:
    subject = Busy(client, kind, "two", max_waiting=2)
    threads, results = in_threads(2, lambda: subject.acquire(LONG))
    try:
        wait_for(lambda: subject.primitive.waiting_count() == 2, what="two callers to queue")
        wait_blocked(client, 2, "both waiters to block")  # waiting, not sleeping or retrying
        assert_refused_at_once(subject)
        floor = floor_of(lambda: subject.acquire(0))
        started = time.monotonic()
        assert subject.acquire(LONG, priority=100) is False, "whatever its priority"
        assert time.monotonic() - started < 10 * floor + STALL
        assert subject.primitive.waiting_count() == 2
    finally:
        subject.release_holder()
        for thread in threads:
            thread.join(LONG)
    assert results == [True, True], "the two waiters were served in turn"
    assert subject.primitive.waiting_count() == 0
    assert subject.acquire(LONG) is True


@pytest.mark.usefixtures("api")
def test_each_caller_applies_its_own_max_waiting(client: Any) -> None:
    subject = Busy(client, "pool", "own", max_waiting=1)
    unbounded = ResourcePool(client, "own")  # the same pool, no limit

    def wait_and_release() -> bool:
        lease = unbounded.acquire(timeout=LONG)
        return lease is not None and lease.release()

    threads, results = in_threads(1, wait_and_release)
    try:
        wait_for(lambda: unbounded.waiting_count() == 1, what="the first caller to queue")
        assert_refused_at_once(subject)
        more, more_results = in_threads(1, wait_and_release)
        threads += more
        wait_for(lambda: unbounded.waiting_count() == 2, what="a caller with no limit to queue")
    finally:
        subject.release_holder()
        for thread in threads:
            thread.join(LONG)
    assert results == [True] and more_results == [True]


def test_a_retried_acquire_refused_as_full_changes_nothing(client: Any) -> None:
    """The acquire operation itself: REPLY_FULL, with nothing queued or granted."""
    pool = Busy(client, "pool", "raw", max_waiting=0).primitive
    engine = ops(pool)
    for _ in range(2):  # (redis-py may run it twice)
        reply = engine.run("acquire", "tok-full", -1, 0, 60000, 0, 2000, "", 1, "w")
        assert reply == Reply.FULL
    assert pool.waiting_count() == 0
    assert engine.run("withdraw", "tok-full") == 0, "the token holds nothing"


# -- across processes ----------------------------------------------------------------------


def _wait_in_child(spec: tuple[str, str, int], name: str) -> None:
    pool = ResourcePool(client_from(spec), name, max_waiting=2)
    lease = pool.acquire(timeout=LONG)
    os._exit(0 if lease is not None and lease.release() else 1)


def test_waiters_of_two_processes_count_against_one_max_waiting(client: Any) -> None:
    subject = Busy(client, "pool", "procs", max_waiting=2)
    procs = [mp.Process(target=_wait_in_child, args=(spec_of(client), "procs")) for _ in "ab"]
    try:
        for n, proc in enumerate(procs, start=1):
            proc.start()
            wait_for(lambda n=n: subject.primitive.waiting_count() == n, 30, f"child {n} to queue")
        assert_refused_at_once(subject)
    finally:
        subject.release_holder()
        for proc in procs:
            proc.join(LONG)
            if proc.is_alive():
                proc.kill()
    assert [proc.exitcode for proc in procs] == [0, 0], "both children were served"
    assert subject.primitive.waiting_count() == 0


def _queue_and_hang(spec: tuple[str, str, int], name: str) -> None:
    ResourcePool(client_from(spec), name).acquire(timeout=LONG)
    os._exit(1)  # (never reached: killed while it waits)


def test_a_killed_waiter_stops_counting_once_its_liveness_window_ends(client: Any) -> None:
    """The dead waiter is dropped by the acquire that finds the queue full (by
    its liveness window, as a hand-off drops dead waiters): no gc, no hand-off
    (the pool stays held) is needed."""
    subject = Busy(client, "pool", "dead", max_waiting=1)
    pool = subject.primitive
    proc = mp.Process(target=_queue_and_hang, args=(spec_of(client), "dead"))
    proc.start()
    try:
        wait_for(lambda: pool.waiting_count() == 1, 30, "the child to queue")
        wait_blocked(client, 1, "the child to block")
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.join(10)
    (alive_until,) = [
        s for _, s in client.zrange(f"{ops(pool).base}:walive", 0, -1, withscores=True)
    ]
    before = redis_time(client) * 1000

    def reason() -> str:
        return subject.refusal(0.05).reason

    if before <= alive_until:  # (a machine stalled past the window already skips this)
        assert reason() == ResourceUnavailable.FULL, "a waiter in its window counts"
    wait_for(lambda: reason() == ResourceUnavailable.TIMEOUT, 30, "the dead waiter to be dropped")
    assert redis_time(client) * 1000 > alive_until, "dropped only after its window"
    assert pool.waiting_count() == 0
    assert client.zcard(f"{ops(pool).base}:walive") == 0
    subject.release_holder()
