"""Primitive-level operator APIs: ``snapshot()``, ``collect()`` / ``gc()``,
``Semaphore(default_max_size=)`` and its holds' leases, ``Lock.for_holder`` and
the lease-lost listeners.

Every test that can runs against a real redis-server and again against the real
local 3-master Redis Cluster (the ``client`` fixture is parametrized).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
from collections.abc import Iterator
from typing import Any

import pytest

from django_redis_pool import Lease, Lock, NotOwned, ResourcePool, Semaphore
from django_redis_pool.primitives.leased import lease as lease_module
from django_redis_pool.primitives.leased.primitive import Collected, LeasedPrimitive, Snapshot
from django_redis_pool.primitives.leased.records import Waiter
from django_redis_pool.primitives.wire.channel import Channel
from tests.support.client_specs import client_from, spec_of
from tests.support.primitive_helpers import (
    expire,
    expire_now,
    finish,
    in_thread,
    ops,
    own_lease,
    pool_of,
    queue_dead_waiter,
    redis_time,
    slot_lease,
)
from tests.support.waiting import wait_for

mp = multiprocessing.get_context("fork")

SNAPSHOT_KEYS = {
    "kind",
    "name",
    "time",
    "size",
    "free",
    "held",
    "holds",
    "waiting",
    "expired",
    "oldest_since",
    "available",
    "holders",
    "waiters",
}
HOLDER_KEYS = {
    "resource",
    "holder",
    "fence",
    "permits",
    "acquired_at",
    "expires_at",
    "seconds_left",
}
WAITER_KEYS = {"holder", "priority", "permits", "since", "deadline", "waited"}


# ----------------------------------------------------------------------- helpers


def contents_of(client: Any, keys: Any) -> dict[bytes, Any]:
    """Each of ``keys`` with its full contents (TTLs left out)."""
    state: dict[bytes, Any] = {}
    for key in sorted(set(keys)):
        kind = client.type(key)
        kind = kind.decode() if isinstance(kind, bytes) else kind
        if kind == "zset":
            state[key] = client.zrange(key, 0, -1, withscores=True)
        elif kind == "hash":
            state[key] = client.hgetall(key)
        elif kind == "list":
            state[key] = client.lrange(key, 0, -1)
        else:
            state[key] = client.get(key)
    return state


def raw_state(client: Any, primitive: LeasedPrimitive) -> dict[bytes, Any]:
    """Every Redis key of ``primitive`` with its full contents (TTLs left out)."""
    return contents_of(client, client.scan_iter(match=f"{ops(primitive).base}*"))


@pytest.fixture
def lost() -> Iterator[list[Lease]]:
    """The leases passed to ``lost_listeners`` during the test."""
    calls: list[Lease] = []
    listener = calls.append
    lease_module.lost_listeners.append(listener)
    try:
        yield calls
    finally:
        lease_module.lost_listeners.remove(listener)


# ---------------------------------------------------------------------- snapshot


def test_pool_snapshot_reports_clock_size_available_ids_and_leases(client: Any) -> None:
    pool = pool_of(client, "snap", "a", "b", "c", lease_timeout=30)
    lease = pool.acquire(holder="worker-1")
    assert lease is not None and lease.resource == "a"
    before = redis_time(client)
    snap = pool.snapshot()
    after = redis_time(client)
    assert isinstance(snap, Snapshot)
    assert (snap.kind, snap.name) == ("pool", "snap")
    assert before - 0.01 <= snap.now <= after + 0.01, "now is the Redis clock"
    assert snap.size == 3, "available + held"
    assert snap.available == ["b", "c"]
    assert snap.free == 2
    assert snap.waiters == []
    [held] = snap.leases
    assert (held.resource, held.holder, held.fence) == ("a", "worker-1", lease.fence)
    assert held.expires_at == pytest.approx(lease.expires_at)
    left = snap.seconds_left(held)
    assert left is not None and 29 <= left <= 30


def test_semaphore_snapshot_size_is_the_max_size_or_none_while_unset(client: Any) -> None:
    semaphore = Semaphore(client, "snapsem", lease_timeout=30)
    unset = semaphore.snapshot()
    assert (unset.kind, unset.name, unset.size, unset.free) == ("semaphore", "snapsem", None, 0)
    assert unset.leases == [] and unset.available == []
    semaphore.set_max_size(3)
    assert semaphore.acquire("alice")
    snap = semaphore.snapshot()
    assert snap.size == 3
    assert snap.free == 2
    assert snap.available == [], "slots have no ids"
    [held] = snap.leases
    assert (held.resource, held.holder) == ("alice", "alice")
    assert held.fence > 0


def test_lock_snapshot_has_size_one_and_its_holder(client: Any) -> None:
    lock = Lock(client, "snaplock", lease_timeout=None, holder="job-7")
    free = lock.snapshot()
    assert (free.kind, free.size, free.free, free.leases) == ("lock", 1, 1, [])
    assert lock.acquire()
    snap = lock.snapshot()
    assert (snap.size, snap.free) == (1, 0)
    [held] = snap.leases
    assert (held.resource, held.holder, held.fence) == ("job-7", "job-7", lock.fence)
    assert held.expires_at is None
    assert snap.seconds_left(held) is None, "no expiry"


def test_snapshot_lists_waiters_in_serving_order(client: Any) -> None:
    pool = pool_of(client, "snapwait", "only")
    held = pool.acquire(holder="owner")
    assert held is not None
    started = []

    def take_and_give_back(holder: str, priority: int) -> str | None:
        lease = pool.acquire(timeout=15, holder=holder, priority=priority)
        return None if lease is None else lease.holder if lease.release() else "lost"

    try:
        for queued, (holder, priority) in enumerate((("low", 0), ("high", 5), ("low-2", 0)), 1):
            started.append(in_thread(lambda h=holder, p=priority: take_and_give_back(h, p)))
            wait_for(lambda n=queued: pool.waiting_count() == n, what=f"{holder} to queue")
        snap = pool.snapshot()
        assert [w.holder for w in snap.waiters] == ["high", "low", "low-2"]
        assert [w.priority for w in snap.waiters] == [5, 0, 0]
        for waiter in snap.waiters:
            assert isinstance(waiter, Waiter)
            assert snap.now - 15 <= waiter.since <= snap.now
            assert waiter.deadline is not None and waiter.deadline > snap.now
        assert snap.free == 0
        assert snap.leases[0].holder == "owner"
    finally:
        held.release()
        served = [finish(thread, out) for thread, out in started]
    assert served == ["low", "high", "low-2"], "each was served"


def test_snapshot_as_dict_is_json_with_the_documented_keys(client: Any) -> None:
    pool = pool_of(client, "snapjson", "a", "b")  # no expiry by default
    pool.acquire(holder="h1", lease_timeout=20)
    pool.acquire(holder="h2")
    queue_dead_waiter(pool, "queued")  # a queued record, listed until collected
    snap = pool.snapshot()
    data = json.loads(json.dumps(snap.as_dict()))
    assert set(data) == SNAPSHOT_KEYS
    assert data["kind"] == "pool" and data["name"] == "snapjson"
    assert data["time"] == snap.now
    assert (data["size"], data["free"], data["held"], data["waiting"]) == (2, 0, 2, 1)
    assert data["available"] == []
    holders = {h["holder"]: h for h in data["holders"]}
    assert set(holders) == {"h1", "h2"}
    for holder in holders.values():
        assert set(holder) == HOLDER_KEYS
    assert holders["h1"]["resource"] == "a"
    assert 19 <= holders["h1"]["seconds_left"] <= 20
    assert holders["h2"]["expires_at"] is None and holders["h2"]["seconds_left"] is None
    [waiter] = data["waiters"]
    assert set(waiter) == WAITER_KEYS
    assert waiter["holder"] == "queued" and waiter["priority"] == 0
    assert waiter["waited"] >= 0


def test_expired_unreclaimed_pool_lease_is_not_held_and_its_resource_is_available(
    client: Any,
) -> None:
    pool = pool_of(client, "snapexp", "a", "b")
    short = pool.acquire(holder="gone", lease_timeout=30)
    keep = pool.acquire(holder="stays", lease_timeout=30)
    assert short is not None and keep is not None
    expire_now(short)
    snap = pool.snapshot()
    assert [lease.holder for lease in snap.leases] == ["stays"]
    assert snap.available == ["a"]
    assert (snap.size, snap.free) == (2, 1)
    assert snap.expired_count == 1, "not reclaimed yet"


def test_expired_lock_and_semaphore_holds_are_not_listed_as_held(client: Any) -> None:
    lock = Lock(client, "snapexplock", lease_timeout=0.05, holder="gone")
    semaphore = Semaphore(client, "snapexpsem", lease_timeout=0.05, default_max_size=2)
    assert lock.acquire()
    lease = slot_lease(semaphore, "gone")
    assert lease is not None
    expire(lease)
    wait_for(lambda: not lock.owned(), what="the lock's lease to expire")
    lock_snap, sem_snap = lock.snapshot(), semaphore.snapshot()
    assert (lock_snap.leases, lock_snap.free) == ([], 1)
    assert (sem_snap.leases, sem_snap.free, sem_snap.size) == ([], 2, 2)


# ---------------------------------------------------------------------- collect


def test_collect_returns_the_reclaimed_leases(client: Any) -> None:
    pool = pool_of(client, "coll", "a", "b", "c")
    first = pool.acquire(holder="h1", lease_timeout=30)
    second = pool.acquire(holder="h2", lease_timeout=30)
    live = pool.acquire(holder="h3", lease_timeout=30)
    assert first is not None and second is not None and live is not None
    expire_now(first, second)
    collected = pool.collect()
    assert isinstance(collected, Collected)
    got = sorted((lease.resource, lease.holder, lease.fence) for lease in collected.reclaimed)
    assert got == [("a", "h1", first.fence), ("b", "h2", second.fence)]
    assert collected.dropped == []
    assert sorted(pool.available()) == ["a", "b"]
    snap = pool.snapshot(limit=0)
    assert (snap.held_count, snap.expired_count) == (1, 0), "only the live lease is left"
    assert first.release() is False, "its holder learns it is gone"
    assert pool.collect() == Collected(reclaimed=[], dropped=[])


def test_collect_drops_dead_waiters_and_keeps_live_ones(client: Any) -> None:
    pool = pool_of(client, "colldead", "only")
    held = pool.acquire(holder="owner")
    assert held is not None
    queue_dead_waiter(pool, "ghost", priority=3)
    thread, out = in_thread(lambda: pool.acquire(timeout=15, holder="alive"))
    try:
        wait_for(lambda: pool.waiting_count() == 2, what="the live waiter to queue")
        collected = pool.collect()
        assert collected.reclaimed == []
        assert [(w.holder, w.priority) for w in collected.dropped] == [("ghost", 3)]
        assert [w.holder for w in pool.waiters()] == ["alive"]
    finally:
        held.release()
        got = finish(thread, out)
    assert got is not None and got.holder == "alive"
    got.release()


def _wait_forever(spec: tuple[str, str, int], name: str) -> None:
    Channel.wait_chunk = 0.05  # checks in often, so is presumed dead soon after death
    ResourcePool(client_from(spec), name).acquire(timeout=None, holder="doomed")


def test_collect_drops_the_waiter_of_a_killed_process(client: Any) -> None:
    pool = pool_of(client, "collkill", "only")
    assert pool.acquire(holder="owner") is not None
    proc = mp.Process(target=_wait_forever, args=(spec_of(client), "collkill"))
    proc.start()
    try:
        wait_for(lambda: pool.waiting_count() == 1, what="the child to queue")
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.join(10)
    wait_for(lambda: pool.collect(dry_run=True).dropped, what="the waiter to be presumed dead")
    collected = pool.collect()
    assert [w.holder for w in collected.dropped] == ["doomed"]
    assert pool.waiting_count() == 0


def test_collect_dry_run_changes_nothing_then_a_real_collect_reclaims(client: Any) -> None:
    pool = pool_of(client, "colldry", "a", "b", "c")
    expiring = pool.acquire(holder="h1", lease_timeout=30)
    assert expiring is not None
    assert pool.acquire(holder="h2", lease_timeout=30) is not None
    assert pool.acquire(holder="h3", lease_timeout=30) is not None
    queue_dead_waiter(pool, "ghost")
    expire_now(expiring)
    before = raw_state(client, pool)
    dry = pool.collect(dry_run=True)
    assert raw_state(client, pool) == before, "a dry run writes nothing"
    assert [(x.resource, x.holder, x.fence) for x in dry.reclaimed] == [("a", "h1", expiring.fence)]
    assert [w.holder for w in dry.dropped] == ["ghost"]
    assert pool.collect(dry_run=True) == dry, "and can be repeated"
    real = pool.collect()
    assert [(x.resource, x.holder, x.fence) for x in real.reclaimed] == [
        ("a", "h1", expiring.fence)
    ]
    assert raw_state(client, pool) != before
    assert pool.available() == ["a"]
    assert pool.waiting_count() == 0
    assert pool.collect(dry_run=True) == Collected(reclaimed=[], dropped=[])


def test_collect_reports_a_dead_waiter_dropped_while_handing_off_a_reclaimed_lease(
    client: Any,
) -> None:
    # BUG: engine.lua's reclaim() -> end_lease() -> put_back() -> hand_to_waiter()
    # -> next_waiter() drops dead waiters it meets (drop_waiter) without reporting
    # them, so gc.lua's waiter loop never sees them: collect() returns dropped=[]
    # while collect(dry_run=True) (read.lua 'expired') listed the same waiter.
    pool = pool_of(client, "collhand", "only")
    expiring = pool.acquire(holder="h1", lease_timeout=30)
    assert expiring is not None
    queue_dead_waiter(pool, "ghost")
    expire_now(expiring)
    dry = pool.collect(dry_run=True)
    assert [w.holder for w in dry.dropped] == ["ghost"]
    real = pool.collect()
    assert [lease.holder for lease in real.reclaimed] == ["h1"]
    assert pool.waiting_count() == 0, "the waiter is gone"
    assert [w.holder for w in real.dropped] == ["ghost"], "and is reported as dropped"


def test_collect_works_for_locks_and_semaphores(client: Any) -> None:
    lock = Lock(client, "colllock", lease_timeout=0.05, holder="crashed")
    semaphore = Semaphore(client, "collsem", lease_timeout=0.05, default_max_size=1)
    assert lock.acquire()
    lease = slot_lease(semaphore, "crashed-too")
    assert lease is not None
    expire(lease)
    wait_for(lambda: not lock.owned(), what="the lock's lease to expire")
    [lock_lease] = lock.collect().reclaimed
    assert (lock_lease.resource, lock_lease.holder, lock_lease.fence) == (
        "crashed",
        "crashed",
        lock.fence,
    )
    [sem_lease] = semaphore.collect().reclaimed
    assert (sem_lease.resource, sem_lease.holder, sem_lease.fence) == (
        "crashed-too",
        "crashed-too",
        lease.fence,
    )
    for primitive in (lock, semaphore):
        snap = primitive.snapshot(limit=0)
        assert (snap.held_count, snap.expired_count) == (0, 0)


def test_gc_still_returns_the_number_reclaimed(client: Any) -> None:
    pool = pool_of(client, "gccount", "a", "b", "c")
    first = pool.acquire(holder="h1", lease_timeout=30)
    second = pool.acquire(holder="h2", lease_timeout=30)
    assert first is not None and second is not None
    expire_now(first, second)
    assert pool.gc() == 2
    assert pool.gc() == 0
    assert sorted(pool.available()) == ["a", "b", "c"]


# -------------------------------------------------- Semaphore(default_max_size=)


def test_default_max_size_is_not_stored_by_construction(client: Any) -> None:
    semaphore = Semaphore(client, "defsize", default_max_size=3)
    assert semaphore.default_max_size == 3
    assert client.exists(f"{ops(semaphore).base}:max") == 0, "building does no I/O"
    assert semaphore.get_max_size() == 0
    assert semaphore.snapshot().size == 3, "a snapshot shows the size the first acquire stores"
    assert client.exists(f"{ops(semaphore).base}:max") == 0, "reads do not store it"


def test_first_acquire_stores_the_default_max_size(client: Any) -> None:
    semaphore = Semaphore(client, "defsize1", default_max_size=3)
    assert semaphore.acquire("a")
    assert semaphore.get_max_size() == 3
    assert client.get(f"{ops(semaphore).base}:max") == b"3"
    assert semaphore.acquire("b") and semaphore.acquire("c")
    assert not semaphore.acquire("d"), "three slots"


@pytest.mark.parametrize("stored", [0, 1, 5])
def test_default_max_size_never_overwrites_a_stored_size(client: Any, stored: int) -> None:
    Semaphore(client, "defsize2").set_max_size(stored)
    semaphore = Semaphore(client, "defsize2", default_max_size=3)
    granted = [semaphore.acquire(identity) for identity in "abcdef"]
    assert semaphore.get_max_size() == stored
    assert granted.count(True) == stored


def test_set_max_size_overrides_the_default(client: Any) -> None:
    semaphore = Semaphore(client, "defsize3", default_max_size=3)
    assert semaphore.acquire("a")
    semaphore.set_max_size(1)
    assert semaphore.get_max_size() == 1
    assert not semaphore.acquire("b")
    semaphore.set_max_size(4)
    assert semaphore.acquire("b")
    assert semaphore.get_max_size() == 4


@pytest.mark.parametrize("bad", [-1, 1.5, True, "3"])
def test_default_max_size_must_be_an_int_at_least_0(client: Any, bad: Any) -> None:
    with pytest.raises(ValueError, match="max size"):
        Semaphore(client, "defsize4", default_max_size=bad)


def test_a_slots_hold_yields_its_lease_and_is_refused_when_full(client: Any) -> None:
    semaphore = Semaphore(client, "semlease", lease_timeout=30, default_max_size=1)
    lease = slot_lease(semaphore, "alice")
    assert isinstance(lease, Lease)
    assert (lease.resource, lease.holder) == ("alice", "alice")
    assert lease.fence > 0 and lease.expires_at is not None and lease.lease_timeout == 30
    assert lease.primitive_kind == "semaphore" and lease.primitive_name == "semlease"
    assert slot_lease(semaphore, "bob", timeout=0) is None, "full"
    assert lease.renew(60)
    assert lease.lease_timeout == 60
    assert lease.release() is True
    assert not semaphore.is_holding("alice")
    assert slot_lease(semaphore, "bob") is not None


# ------------------------------------------------------------ Lock.for_holder


def test_for_holder_lock_is_usable_from_another_thread(client: Any) -> None:
    lock = Lock(client, "perreq", lease_timeout=30)
    request_lock = lock.for_holder("req-1")
    thread, out = in_thread(lambda: (request_lock.acquire(timeout=5), request_lock.fence))
    acquired, fence_in_thread = finish(thread, out)
    assert acquired is True
    assert request_lock.owned(), "any thread acts as req-1"
    assert request_lock.fence == fence_in_thread, "the fence falls back to req-1's lease"
    lease = own_lease(request_lock)
    assert isinstance(lease, Lease)
    assert (lease.holder, lease.fence) == ("req-1", fence_in_thread)
    assert request_lock.extend(60) is True
    assert lease.lease_timeout == 60
    assert lease.expires_at == pytest.approx(lock.snapshot().leases[0].expires_at)
    assert lock.holder() == "req-1"
    request_lock.release()
    assert not lock.locked()
    assert own_lease(request_lock) is None and request_lock.fence is None
    with pytest.raises(NotOwned):
        request_lock.release()


def test_for_holder_leaves_the_original_lock_alone(client: Any) -> None:
    lock = Lock(client, "perreq2", lease_timeout=30)
    request_lock = lock.for_holder("req-2", lease_timeout=5)
    assert (request_lock.lease_timeout, lock.lease_timeout) == (5, 30)
    assert request_lock.name == lock.name and request_lock is not lock
    assert request_lock.acquire(blocking=False)
    assert own_lease(request_lock) is not None and own_lease(request_lock).lease_timeout == 5
    assert lock.locked()
    assert not lock.owned() and own_lease(lock) is None and lock.fence is None
    assert not lock.acquire(blocking=False), "the same lock, held by req-2"
    request_lock.release()
    assert lock.acquire(blocking=False)
    assert lock.fence is not None and lock.fence > (request_lock.fence or 0)
    lock.release()


# --------------------------------------------------------- lease lost listeners


def test_lost_listener_is_called_once_when_a_force_released_lease_is_released(
    client: Any, lost: list[Lease]
) -> None:
    pool = pool_of(client, "lostpool", "r")
    lease = pool.acquire(holder="h")
    assert lease is not None
    assert pool.release("r") is True  # an operator's force-release
    assert lost == []
    assert lease.release() is False
    assert lost == [lease]
    assert lease.lost
    assert lease.release() is False
    assert lost == [lease], "once"


def test_lost_listener_is_called_once_when_renew_finds_the_lease_gone(
    client: Any, lost: list[Lease]
) -> None:
    pool = pool_of(client, "lostrenew", "r")
    lease = pool.acquire(holder="h", lease_timeout=30)
    assert lease is not None
    assert pool.release("r") is True
    assert lease.renew() is False
    assert lost == [lease]
    assert lease.renew() is False
    assert lease.release() is False
    assert lost == [lease], "once"


def test_lost_listener_is_not_called_on_a_normal_double_release(
    client: Any, lost: list[Lease]
) -> None:
    pool = pool_of(client, "lostdouble", "r")
    lease = pool.acquire(holder="h")
    assert lease is not None
    assert lease.release() is True
    assert lease.release() is False
    assert lost == []
