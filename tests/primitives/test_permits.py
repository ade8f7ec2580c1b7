"""Weighted permits: ``Semaphore.acquire(identity, permits=k)``.

Every behavioural test runs against a real redis-server and again against the
real local 3-master Redis Cluster (the ``client`` fixture), on the blocking API
and on the asyncio twins (the ``api`` fixture); the model test and the hammer
check what Redis itself holds against the max size.
"""

from __future__ import annotations

import itertools
import json
import multiprocessing
import os
import random
import signal
import threading
import time
import uuid
from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis.stateful import (
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from django_redis_pool import NotConfigured, ResourceUnavailable, Semaphore
from django_redis_pool.primitives.leased.primitive import lease_as_dict
from django_redis_pool.primitives.wire.protocol import Reply
from tests.support.client_specs import client_from, spec_of
from tests.support.primitive_helpers import LONG_CHUNK, expire_now, ops, redis_time, slot_lease
from tests.support.waiter_model import FATES, INF, SLOT_STEPS, WaiterModel
from tests.support.waiting import wait_blocked, wait_for

mp = multiprocessing.get_context("fork")

#: Every behaviour test here runs on the blocking API and on the asyncio twins.
pytestmark = pytest.mark.usefixtures("api")

#: The field of a semaphore's ``:info`` hash holding the permits taken beyond one
#: per holder (``engine.lua``).
EXTRA = b"\x01extra"


def held(sem: Semaphore) -> dict[str, int]:
    """identity -> permits of every live hold."""
    return {lease.resource: lease.permits for lease in sem.holders()}


def extra_in_redis(sem: Semaphore) -> int | None:
    raw = sem.client.hget(f"{ops(sem).base}:info", EXTRA)
    return None if raw is None else int(raw)


def in_thread(fn: Any, *args: Any, **kwargs: Any) -> tuple[threading.Thread, list[Any]]:
    """Run ``fn`` in a thread; its result (or exception) lands in the list."""
    results: list[Any] = []

    def target() -> None:
        try:
            results.append(fn(*args, **kwargs))
        except BaseException as exc:  # surfaced by the test
            results.append(exc)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread, results


# -- taking and giving back ---------------------------------------------------------------


def test_an_acquire_takes_its_permits_at_once_and_a_release_gives_them_all_back(client):
    sem = Semaphore(client, "take")
    sem.set_max_size(5)
    assert sem.acquire("big", permits=3) is True
    assert held(sem) == {"big": 3}
    assert (sem.get_current_size(), sem.get_held_permits()) == (1, 3)
    assert sem.acquire("other", permits=3) is False, "only 2 are free"
    assert sem.acquire("other", permits=2) is True
    assert sem.get_held_permits() == 5 and sem.snapshot().free == 0
    assert sem.acquire("one") is False
    assert sem.release("big") is True
    assert (sem.get_current_size(), sem.get_held_permits()) == (1, 2)
    assert sem.acquire("one") is True and sem.acquire("two", permits=2) is True
    for identity in ("other", "one", "two"):
        assert sem.release(identity) is True
    assert sem.get_held_permits() == 0
    assert extra_in_redis(sem) is None, "an idle semaphore keeps no count of extra permits"


def test_the_lease_holders_and_snapshot_show_each_holds_permits(client):
    sem = Semaphore(client, "show")
    sem.set_max_size(4)
    lease = slot_lease(sem, "a", permits=3, lease_timeout=30)
    assert lease is not None and lease.permits == 3
    assert "permits=3" in repr(lease)
    one = slot_lease(sem, "b")
    assert one is not None and one.permits == 1
    assert sem.lease_of("a").permits == 3
    snap = sem.snapshot()
    assert (snap.held_count, snap.held_permits, snap.size, snap.free) == (2, 4, 4, 0)
    data = snap.as_dict()
    assert (data["held"], data["holds"], data["free"], data["size"]) == (4, 2, 0, 4)
    assert {h["holder"]: h["permits"] for h in data["holders"]} == {"a": 3, "b": 1}
    assert lease_as_dict(lease)["permits"] == 3
    counts_only = sem.snapshot(limit=0)
    assert (counts_only.held_permits, counts_only.free) == (4, 0)


def test_hold_takes_its_permits_for_the_block(client):
    sem = Semaphore(client, "hold")
    sem.set_max_size(3)
    with sem.hold("block", permits=3, timeout=0) as lease:
        assert lease.permits == 3 and sem.get_held_permits() == 3
        with pytest.raises(ResourceUnavailable), sem.hold(timeout=0):
            pass
    assert sem.get_held_permits() == 0


def test_an_identity_asking_again_keeps_the_permits_it_took(client):
    sem = Semaphore(client, "again")
    sem.set_max_size(4)
    assert sem.acquire("a", permits=2, lease_timeout=10) is True
    # more, fewer or the same: True, its lease refreshed, its permits unchanged
    for permits in (4, 1, 2):
        assert sem.acquire("a", permits=permits, lease_timeout=20) is True
        assert held(sem) == {"a": 2}
    lease = sem.lease_of("a")
    assert lease is not None and lease.lease_timeout == 20
    assert sem.get_held_permits() == 2
    assert sem.release("a") is True and sem.get_held_permits() == 0


def test_a_newcomer_whose_own_waiter_is_served_first_shares_that_hold_and_loses_no_permit(
    client,
):
    # b waits for 2 permits; the expiry of a's hold, reclaimed by b's own next
    # acquire, serves that waiter first: the newcomer shares its hold (2
    # permits), and no second grant over it leaves a permit counted forever.
    sem = Semaphore(client, "served-first")
    sem.set_max_size(3)
    first = slot_lease(sem, "a", permits=3, lease_timeout=30)
    assert first is not None
    waiter, got = in_thread(sem.acquire, "b", permits=2, timeout=30)
    wait_for(lambda: [w.holder for w in sem.waiters()] == ["b"], what="b to queue")
    expire_now(first)
    assert sem.acquire("b", permits=1, timeout=0) is True
    waiter.join(30)
    assert got == [True]
    assert held(sem) == {"b": 2} and sem.get_held_permits() == 2
    assert sem.release("b") is True
    assert sem.get_held_permits() == 0 and extra_in_redis(sem) is None
    assert sem.acquire("c", permits=3, timeout=0) is True, "every permit came back"


@pytest.mark.parametrize("bad", [0, -1, 1.0, 2.5, "2", True, None, 2**53])
def test_bad_permits_raise_value_error_naming_them(client, bad):
    sem = Semaphore(client, "bad")
    sem.set_max_size(3)
    with pytest.raises(ValueError, match="permits"):
        sem.acquire("a", permits=bad)
    with pytest.raises(ValueError, match="permits"), sem.hold("a", permits=bad):
        pass
    assert sem.get_current_size() == 0


def test_an_unconfigured_semaphore_raises_whatever_permits_are_asked(client):
    sem = Semaphore(client, "unset")
    with pytest.raises(NotConfigured):
        sem.acquire("a", permits=2)
    assert Semaphore(client, "unset2", default_max_size=3).acquire("a", permits=3) is True


# -- fairness -----------------------------------------------------------------------------


def test_a_newcomer_takes_no_permits_ahead_of_a_queued_waiter_even_if_they_are_free(
    long_client,
):
    client = long_client
    sem = Semaphore(client, "ahead")
    sem.set_max_size(4)
    assert sem.acquire("x", permits=2) is True
    thread, results = in_thread(sem.acquire, "big", permits=4, timeout=60)
    wait_for(lambda: sem.waiting_count() == 1, what="the large waiter to queue")
    assert sem.snapshot().free == 2, "two permits are free"
    assert sem.acquire("small", timeout=0) is False, "but the large waiter goes first"
    assert sem.acquire("small", permits=2, timeout=0) is False
    assert sem.acquire("small", timeout=0, priority=-1) is False
    assert held(sem) == {"x": 2}
    # a newcomer of a higher priority would be ahead of it in the queue: it goes
    assert sem.acquire("urgent", timeout=0, priority=1) is True
    assert sem.release("urgent") is True
    wait_blocked(client)
    assert sem.release("x") is True
    thread.join(30)
    assert results == [True], "served by the release's push"
    assert held(sem) == {"big": 4}
    assert sem.acquire("small", timeout=0) is False
    assert sem.release("big") is True
    assert sem.acquire("small", timeout=0) is True


def test_the_head_waiter_holds_up_smaller_ones_behind_it_until_its_permits_are_free(
    long_client,
):
    client = long_client
    sem = Semaphore(client, "line")
    sem.set_max_size(3)
    assert sem.acquire("x", permits=2) is True and sem.acquire("y") is True
    order: list[str] = []

    def waiter(identity: str, permits: int) -> None:
        assert sem.acquire(identity, permits=permits, timeout=60) is True
        order.append(identity)

    big, _ = in_thread(waiter, "big", 3)
    wait_for(lambda: sem.waiting_count() == 1, what="big to queue")
    small, _ = in_thread(waiter, "small", 1)
    wait_for(lambda: sem.waiting_count() == 2, what="small to queue")
    assert [(w.holder, w.permits) for w in sem.waiters()] == [("big", 3), ("small", 1)]
    assert sem.snapshot().as_dict()["waiters"][0]["permits"] == 3
    assert sem.release("y") is True  # one free: small fits, but big is first
    time.sleep(0.3)
    assert order == [] and sem.waiting_count() == 2, "small waits behind big"
    assert sem.release("x") is True  # three free: big, then nothing for small
    wait_for(lambda: order == ["big"], what="big to be served")
    assert sem.waiting_count() == 1
    assert sem.release("big") is True
    small.join(30)
    big.join(30)
    assert order == ["big", "small"]
    assert sem.release("small") is True


def test_a_waiter_giving_up_lets_the_waiters_behind_it_be_served_at_once(long_client):
    client = long_client
    sem = Semaphore(client, "give-up")
    sem.set_max_size(3)
    assert sem.acquire("x", permits=2) is True
    # (big waits long enough to be seen queued, and small behind it, on a busy machine)
    big, big_result = in_thread(sem.acquire, "big", permits=3, timeout=5)
    wait_for(lambda: sem.waiting_count() == 1, what="big to queue")
    small, small_result = in_thread(slot_lease, sem, "small", timeout=60)
    wait_for(lambda: sem.waiting_count() == 2, what="small to queue")
    big.join(30)
    gave_up = time.monotonic()
    assert big_result == [False]
    small.join(LONG_CHUNK)
    assert time.monotonic() - gave_up < LONG_CHUNK / 2, "served by the withdrawal, not a chunk"
    [lease] = small_result
    assert lease.permits == 1 and held(sem) == {"x": 2, "small": 1}


def test_a_large_waiter_is_not_starved_by_a_stream_of_small_ones(client):
    sem = Semaphore(client, "stream", lease_timeout=10)
    sem.set_max_size(4)
    stop = threading.Event()
    granted_at: list[float] = []  # when each small hold began, on the Redis clock

    def small(n: int) -> None:
        rng = random.Random(n)
        while not stop.is_set():
            lease = slot_lease(sem, f"small-{n}", timeout=5)
            if lease is not None:
                granted_at.append(lease.acquired_at)
                time.sleep(rng.uniform(0.005, 0.03))
                lease.release()

    workers = [threading.Thread(target=small, args=(n,), daemon=True) for n in range(5)]
    try:
        for worker in workers:
            worker.start()
        wait_for(lambda: len(granted_at) >= 20, 30, "the small ones to run")
        big, result = in_thread(slot_lease, sem, "big", permits=4, timeout=20)
        wait_for(
            lambda: any(w.holder == "big" for w in sem.waiters()) or result,
            what="the large one to queue",
        )
        queued_at = next((w.since for w in sem.waiters() if w.holder == "big"), None)
        big.join(30)
        [lease] = result
        assert lease is not None, "the large one was starved"
        assert lease.permits == 4
        lease.release()
    finally:
        stop.set()
        for worker in workers:
            worker.join(30)
    if queued_at is not None:
        # Once it was queued, only the small ones queued before it (at most one
        # per worker) were served ahead of it.
        ahead = [at for at in granted_at if queued_at < at < lease.acquired_at]
        assert len(ahead) <= len(workers), f"{len(ahead)} small grants went ahead of it"
    assert sem.get_held_permits() == 0


def test_waiting_count_counts_callers_whatever_permits_they_ask(long_client):
    sem = Semaphore(long_client, "count")
    sem.set_max_size(4)
    assert sem.acquire("x", permits=4) is True
    threads = []
    for n, permits in enumerate((1, 3, 4, 9), 1):
        threads.append(in_thread(sem.acquire, f"w{permits}", permits=permits, timeout=60))
        wait_for(lambda n=n: sem.waiting_count() == n, what=f"caller {n} to queue")
    assert [(w.holder, w.permits) for w in sem.waiters()] == [
        ("w1", 1),
        ("w3", 3),
        ("w4", 4),
        ("w9", 9),
    ]
    assert sem.snapshot().waiting_count == 4
    sem.set_max_size(21)  # 17 free: each served in turn
    assert sem.release("x") is True
    for thread, _ in threads:
        thread.join(30)
    assert [results for _, results in threads] == [[True]] * 4
    assert sem.waiting_count() == 0 and sem.get_held_permits() == 17


# -- more permits than the max ------------------------------------------------------------


def test_asking_more_permits_than_the_max_size(long_client):
    client = long_client
    sem = Semaphore(client, "oversized")
    sem.set_max_size(2)
    # not waiting: refused at once
    assert sem.acquire("huge", permits=3, timeout=0) is False
    assert sem.acquire("huge", permits=3) is False
    # waiting: it waits for the max to grow, holding up nobody meanwhile
    thread, results = in_thread(sem.acquire, "huge", permits=3, timeout=60)
    wait_for(lambda: sem.waiting_count() == 1, what="the oversized caller to queue")
    assert sem.acquire("small", timeout=0) is True, "the oversized waiter holds up nobody"
    assert sem.acquire("pair", permits=2, timeout=0) is False, "one is free"
    assert sem.acquire("one", timeout=0) is True
    assert sem.release("small") and sem.release("one")
    assert results == [] and sem.waiting_count() == 1, "still waiting for a larger max"
    wait_blocked(client)
    sem.set_max_size(3)  # served in turn once the max grows
    thread.join(30)
    assert results == [True] and held(sem) == {"huge": 3}
    sem.set_max_size(1)  # lowering it evicts nobody
    assert held(sem) == {"huge": 3}
    assert sem.acquire("one", timeout=0) is False
    assert sem.release("huge") is True
    assert sem.acquire("one", timeout=0) is True


def test_lowering_the_max_keeps_weighted_holds_and_new_acquires_wait_below_it(client):
    sem = Semaphore(client, "lower")
    sem.set_max_size(5)
    assert sem.acquire("a", permits=3) and sem.acquire("b", permits=2)
    sem.set_max_size(3)
    assert held(sem) == {"a": 3, "b": 2}
    snap = sem.snapshot()
    assert (snap.size, snap.held_permits, snap.free) == (3, 5, 0)
    assert sem.acquire("c", timeout=0) is False
    assert sem.release("a") is True  # 2 held of 3
    assert sem.acquire("c", permits=2, timeout=0) is False
    assert sem.acquire("c", timeout=0) is True


# -- crash safety: expiry, gc, force-release ------------------------------------------------


def test_an_expired_weighted_hold_gives_its_permits_back(client):
    sem = Semaphore(client, "expiry")
    sem.set_max_size(4)
    lease = slot_lease(sem, "gone", permits=3, lease_timeout=30)
    assert lease is not None and sem.acquire("stays") is True
    expire_now(lease)
    snap = sem.snapshot()
    assert (snap.held_count, snap.held_permits, snap.free, snap.expired_count) == (1, 1, 3, 1)
    assert sem.get_held_permits() == 1, "an expired hold's permits are not counted"
    assert sem.acquire("next", permits=3, timeout=0) is True, "reclaimed by the acquire"
    assert held(sem) == {"stays": 1, "next": 3}
    assert lease.renew() is False


def test_gc_and_force_release_give_a_weighted_holds_permits_back(client):
    sem = Semaphore(client, "collect")
    sem.set_max_size(6)
    expiring = slot_lease(sem, "expiring", permits=3, lease_timeout=30)
    assert expiring is not None and sem.acquire("forced", permits=2) is True
    assert extra_in_redis(sem) == 3
    expire_now(expiring)
    [reclaimed] = sem.collect().reclaimed
    assert (reclaimed.resource, reclaimed.permits) == ("expiring", 3)
    assert extra_in_redis(sem) == 1 and sem.get_held_permits() == 2
    fence = sem.lease_of("forced").fence
    assert sem.force_release("forced", fence=fence) is True
    assert sem.get_held_permits() == 0 and extra_in_redis(sem) is None
    assert sem.acquire("all", permits=6, timeout=0) is True


def _hold_three_and_hang(spec: Any, ready: Any) -> None:
    client = client_from(spec)
    sem = Semaphore(client, "crash")
    assert sem.acquire("crasher", permits=3, lease_timeout=1.5) is True
    ready.set()
    time.sleep(60)


def test_a_killed_holders_permits_come_back_when_its_lease_expires(client):
    sem = Semaphore(client, "crash")
    sem.set_max_size(4)
    ready = mp.Event()
    proc = mp.Process(target=_hold_three_and_hang, args=(spec_of(client), ready))
    proc.start()
    try:
        assert ready.wait(10), "the child never acquired"
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.join(5)
    crashed = sem.lease_of("crasher")
    assert crashed is not None and crashed.permits == 3
    assert sem.acquire("survivor", permits=2, timeout=0) is False, "its permits are held"
    assert sem.acquire("survivor", permits=4, timeout=10) is True
    assert redis_time(client) >= crashed.expires_at, "granted only once its lease ended"
    assert held(sem) == {"survivor": 4}


# -- many processes -----------------------------------------------------------------------

HAMMER_PROCS, HAMMER_CYCLES, HAMMER_MAX = 6, 60, 5
INSIDE_KEY = "{semaphore:weighted}:inside"
REPORT_KEY = "{semaphore:weighted}:report"


def _hammer(spec: Any, n: int) -> None:
    client = client_from(spec)
    sem = Semaphore(client, "weighted", lease_timeout=10)
    rng = random.Random(n)
    identity = f"worker-{n}"
    done, peak, error = 0, 0, ""
    try:
        for _ in range(HAMMER_CYCLES):
            permits = rng.choice((1, 1, 2, 3, HAMMER_MAX))
            if not sem.acquire(identity, permits=permits, timeout=60):
                raise AssertionError(f"{identity} got no {permits} permits within 60 s")
            inside = client.incrby(INSIDE_KEY, permits)
            peak = max(peak, inside)
            time.sleep(rng.uniform(0, 0.003))
            client.decrby(INSIDE_KEY, permits)
            if not sem.release(identity):
                raise AssertionError(f"{identity} lost its permits")
            done += 1
    except BaseException as exc:
        error = repr(exc)
    client.rpush(REPORT_KEY, json.dumps([n, done, peak, error]))
    os._exit(1 if error else 0)


def test_processes_taking_mixed_permits_never_hold_more_than_the_max(client):
    sem = Semaphore(client, "weighted", lease_timeout=10)
    sem.set_max_size(HAMMER_MAX)
    procs = [mp.Process(target=_hammer, args=(spec_of(client), n)) for n in range(HAMMER_PROCS)]
    seen: list[tuple[int, int]] = []  # (permits of the live holds, holds), read from Redis
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            leases = sem.holders()  # one script: one instant
            seen.append((sum(lease.permits for lease in leases), len(leases)))

    watcher = threading.Thread(target=watch, daemon=True)
    try:
        for proc in procs:
            proc.start()
        watcher.start()
        for proc in procs:
            proc.join(120)
    finally:
        stop.set()
        watcher.join(30)
        for proc in procs:
            if proc.is_alive():
                proc.kill()
    reports = sorted(json.loads(raw) for raw in client.lrange(REPORT_KEY, 0, -1))
    assert [error for *_, error in reports if error] == []
    assert [proc.exitcode for proc in procs] == [0] * HAMMER_PROCS
    assert [(n, done) for n, done, _, _ in reports] == [
        (n, HAMMER_CYCLES) for n in range(HAMMER_PROCS)
    ]
    peak = max(p for _, _, p, _ in reports)
    assert peak <= HAMMER_MAX, f"{peak} permits were used at once"
    assert peak >= 3, "the workers never overlapped: the test proves nothing"
    assert seen and max(permits for permits, _ in seen) <= HAMMER_MAX
    assert any(holds >= 2 for _, holds in seen), "the watcher never saw two holds"
    assert int(client.get(INSIDE_KEY)) == 0
    assert sem.get_held_permits() == 0 and sem.waiting_count() == 0
    assert extra_in_redis(sem) is None


# -- the model --------------------------------------------------------------------------

IDENTITIES = st.sampled_from(["a", "b", "c", "d", "e"])
PERMITS = st.integers(min_value=1, max_value=4)
PRIORITIES = st.integers(min_value=0, max_value=1)
_names = itertools.count()


class PermitsModel(WaiterModel):
    """A semaphore of weighted permits against a Python model of it: grants at
    once (``timeout=0``), callers queued in Redis as a blocking acquire queues
    them (served by the releases, expiries, gc and larger maxes that follow,
    each grant confirmed as the waiter's own would be), releases, expiries,
    changes of the max and callers dying (see WaiterModel). After every step:
    the holds, their permits, the queue, its dead callers, the count of extra
    permits in Redis, and the max never exceeded."""

    client: Any = None  # set by the test
    FIELDS = ("identity", "permits", "max_waiting")

    def __init__(self) -> None:
        super().__init__()
        self.sem = Semaphore(self.client, f"permits-model{next(_names)}")
        self.engine = ops(self.sem)
        self.max: int | None = None
        self.holders: dict[str, int] = {}  # identity -> permits (expired ones included)
        self.expired: set[str] = set()
        self.cap = 0  # the most permits that may be held (above max only after a lowering)
        self.holds = itertools.count(1)
        self.hold: dict[str, int] = {}  # identity -> which hold it is

    # -- the model's engine

    def free(self) -> int:
        return max(0, (self.max or 0) - sum(self.holders.values()))

    def grant(self, identity: str, permits: int) -> None:
        self.holders[identity] = permits
        self.hold[identity] = next(self.holds)
        # its queued callers share its hold (the dead ones are dropped)
        for w in [w for w in self.ordered() if w["identity"] == identity]:
            if w["dead"]:
                self.drop(w)
            else:
                self.queue.remove(w)
                self.handed_to(w, share=True)

    def handed_to(self, w: dict[str, Any], *, share: bool) -> None:
        self.hand(w["identity"], w, hold=self.hold[w["identity"]], share=share)

    def holds_still(self, w: dict[str, Any]) -> bool:
        """Whether the hold handed (or shared) to ``w`` lasts."""
        identity = w["identity"]
        return identity in self.holders and self.hold[identity] == w["hold"]

    def serve(self) -> float | None:
        """The queue served as serve_slots does (the dead met dropped, at most
        SLOT_STEPS steps); the priority of the waiter that holds it up (INF:
        no permit free, or the step limit), or None."""
        if not self.queue:
            return None
        size, free, rank = self.max or 0, self.free(), 0
        for _ in range(SLOT_STEPS):
            if free == 0:
                return INF
            ordered = self.ordered()
            if rank >= len(ordered):
                return None
            w = ordered[rank]
            if w["dead"]:
                self.drop(w)
            elif w["permits"] > size:
                rank += 1
            elif w["permits"] > free:
                return float(w["priority"])
            else:
                self.queue.remove(w)
                self.grant(w["identity"], w["permits"])
                self.handed_to(w, share=False)
                free -= w["permits"]
                rank = 0
        return INF

    def end(self, identity: str) -> None:
        del self.holders[identity]
        self.expired.discard(identity)
        self.serve()

    def reclaim(self) -> None:
        for identity in sorted(self.expired):
            self.end(identity)

    def acquire(self, identity: str, permits: int, priority: int) -> bool:
        """A newcomer: granted (True) or not, as acquire.lua decides."""
        if identity in self.holders and identity not in self.expired:
            return True  # refreshed, keeping its permits
        if identity in self.holders:
            self.end(identity)  # its own expired hold first
        self.reclaim()
        queued = bool(self.queue)
        ahead = self.serve() if queued else None
        if identity in self.holders:
            return True  # its own queued caller was served just now: that one hold, refreshed
        if (ahead is None or priority > ahead) and permits <= self.free():
            self.grant(identity, permits)
            return True
        return False

    def caller(self, data: st.DataObject) -> dict[str, Any]:
        return {"identity": data.draw(IDENTITIES), "permits": data.draw(PERMITS)}

    def ask(
        self,
        token: str,
        priority: int,
        fate: str,
        identity: str = "a",
        permits: int = 1,
        max_waiting: int = -1,
    ) -> None:
        reply = self.request(token, priority, fate, max_waiting, permits, identity)
        if self.max is None:
            assert reply == "unconfigured"
            return
        if self.acquire(identity, permits, priority):
            assert isinstance(reply, str) and reply.startswith(f"{identity}\n"), reply
            self.confirm_reply(reply)
            return
        if not self.room_to_wait(max_waiting):
            assert reply == Reply.FULL, reply
            return
        assert isinstance(reply, int), reply
        self.queued(
            token, priority, fate, identity=identity, permits=permits, max_waiting=max_waiting
        )

    def quiet(self) -> bool:
        return self.free() == 0 and not self.expired

    def hold_of(self, resource: str) -> Any:
        live = resource in self.holders and resource not in self.expired
        return self.hold[resource] if live else None

    def expire_hold(self, resource: str) -> None:
        self.expire_in_redis(resource)
        self.expired.add(resource)

    # -- rules

    @rule(identity=IDENTITIES, permits=PERMITS, priority=PRIORITIES)
    def acquire_now(self, identity: str, permits: int, priority: int) -> None:
        if self.max is None:
            with pytest.raises(NotConfigured):
                self.sem.acquire(identity, permits=permits, timeout=0)
            return
        expected = self.acquire(identity, permits, priority)
        got = self.sem.acquire(identity, permits=permits, priority=priority, timeout=0)
        assert got is expected, (identity, permits, priority)
        if got:
            self.confirmed(identity)  # (by the acquire, if it was not)

    @rule(
        identity=IDENTITIES,
        permits=st.integers(min_value=1, max_value=6),
        priority=PRIORITIES,
        fate=FATES,
        max_waiting=st.sampled_from([-1, -1, 0, 1, 2]),
    )
    def queue_caller(
        self, identity: str, permits: int, priority: int, fate: str, max_waiting: int
    ) -> None:
        """A caller that waits (``max_waiting``: -1 none): queued in Redis by
        the acquire operation itself, as ``acquire(timeout=60)`` queues it (its
        wake list is not read here)."""
        self.ask(uuid.uuid4().hex, priority, fate, identity, permits, max_waiting)

    def withdrawn(self) -> None:
        self.serve()

    def check_in_serves(self) -> None:
        self.reclaim()
        self.serve()

    def lasting(self, w: dict[str, Any]) -> str | None:
        return w["identity"] if self.holds_still(w) else None

    @precondition(lambda self: self.handed)
    @rule(data=st.data())
    def give_up_handed(self, data: st.DataObject) -> None:
        """A caller handed a hold gives up before reading it: the hold ends
        (its identity's, whoever shares it); a share given up changes nothing."""
        w = data.draw(st.sampled_from(self.handed))
        self.handed.remove(w)
        mine = not w["share"] and self.holds_still(w)
        assert self.engine.run("withdraw", w["token"]) == int(mine)
        if mine:
            self.end(w["identity"])

    @rule(identity=IDENTITIES)
    def release(self, identity: str) -> None:
        expected = identity in self.holders and identity not in self.expired
        assert self.sem.release(identity) is expected
        if identity in self.holders:
            self.end(identity)

    @precondition(lambda self: set(self.holders) - self.expired)
    @rule(data=st.data())
    def expire(self, data: st.DataObject) -> None:
        self.expire_hold(data.draw(st.sampled_from(sorted(set(self.holders) - self.expired))))

    @rule()
    def gc(self) -> None:
        _, dropped = self.engine.gc()
        assert [w.holder for w in dropped] == [w["identity"] for w in self.drop_dead()]
        self.reclaim()
        self.serve()

    @rule(n=st.integers(min_value=0, max_value=6))
    def set_max_size(self, n: int) -> None:
        self.sem.set_max_size(n)
        self.max = n
        self.cap = max(n, sum(self.holders.values()))
        self.reclaim()
        self.serve()

    # -- after every step

    @invariant()
    def agrees_with_model(self) -> None:
        self.pass_deaths()
        self.confirm_served()
        live = {i: k for i, k in self.holders.items() if i not in self.expired}
        assert held(self.sem) == live
        assert [(w.holder, w.permits, w.priority) for w in self.sem.waiters()] == [
            (w["identity"], w["permits"], w["priority"]) for w in self.ordered()
        ]
        extra = sum(k - 1 for k in self.holders.values())
        assert extra_in_redis(self.sem) == (extra or None)
        assert self.sem.get_held_permits() == sum(live.values())
        if self.max is not None:
            used = sum(self.holders.values())
            self.cap = max(self.max, min(self.cap, used))
            assert used <= self.cap, f"{used} permits held, max {self.max}"
        self.agrees_on_dead()


def test_weighted_permits_match_the_model(redis_client):
    PermitsModel.client = redis_client
    run_state_machine_as_test(
        PermitsModel,
        settings=WaiterModel.SETTINGS,
    )
