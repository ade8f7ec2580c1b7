"""Paged snapshots: ``snapshot(limit=, available_offset=, holders_offset=,
waiters_offset=)`` and the lease records' ``acquired_at``.

A page of each list (a pool's available ids, the live leases soonest expiry
first, the waiters in serving order) starts at that list's own offset; the
``*_count`` fields always count everything. Pages concatenated must give the
whole list, and a page must cost one Redis command whatever the primitive's size.

Every test that can runs against a real redis-server and again against the real
local 3-master Redis Cluster (the ``client`` fixture is parametrized).
"""

from __future__ import annotations

import itertools
import math
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, given, settings

from django_redis_pool import Lease, Lock, ResourcePool, Semaphore
from django_redis_pool.primitives.leased.primitive import LeasedPrimitive, Snapshot
from tests.support.primitive_helpers import (
    expire_now,
    own_lease,
    pool_of,
    queue_dead_waiter,
    redis_time,
    slot_lease,
)
from tests.support.waiting import wait_for

LISTS = ("available", "holders", "waiters")
OFFSET_ARG = {
    "available": "available_offset",
    "holders": "holders_offset",
    "waiters": "waiters_offset",
}
#: What a snapshot script may run inside Redis: reads only.
READ_COMMANDS = {"time", "get", "zcard", "zcount", "zrange", "zrangebyscore", "hmget"}
_names = itertools.count()


# ----------------------------------------------------------------------- helpers


def lease_key(lease: Lease) -> tuple[Any, ...]:
    return (lease.resource, lease.holder, lease.fence, lease.expires_at, lease.acquired_at)


def lists_of(snap: Snapshot) -> dict[str, list[Any]]:
    return {
        "available": list(snap.available),
        "holders": [lease_key(lease) for lease in snap.leases],
        "waiters": list(snap.waiters),
    }


def counts_of(snap: Snapshot) -> tuple[Any, ...]:
    """Everything but the clock and the lists."""
    return (
        snap.kind,
        snap.name,
        snap.size,
        snap.free,
        snap.available_count,
        snap.held_count,
        snap.waiting_count,
        snap.expired_count,
    )


def paged(primitive: LeasedPrimitive, limit: int) -> tuple[dict[str, list[Any]], set[Any]]:
    """Walk every list page by page, each list at its own offset (so the offsets
    differ as soon as the lists' lengths do). Returns the concatenated pages and
    the set of counts the pages reported."""
    got: dict[str, list[Any]] = {name: [] for name in LISTS}
    offsets = dict.fromkeys(LISTS, 0)
    counts = set()
    pages = None
    while pages is None or pages > 0:
        snap = primitive.snapshot(limit=limit, **{OFFSET_ARG[n]: offsets[n] for n in LISTS})
        counts.add(counts_of(snap))
        if pages is None:
            longest = max(snap.available_count, snap.held_count, snap.waiting_count)
            pages = longest // limit + 1
        pages -= 1
        more = False
        for name, items in lists_of(snap).items():
            assert len(items) <= limit, f"{name}: a page longer than the limit"
            got[name] += items
            offsets[name] += len(items)
            more = more or len(items) == limit
        if not more:
            return got, counts
    raise AssertionError(f"more pages of {limit} than the counts allow: {got}")


def assert_pages_match(primitive: LeasedPrimitive, full: Snapshot) -> None:
    """Every page (each limit, each offset, the lists walked together or apart)
    is the matching slice of ``full``, and reports ``full``'s counts."""
    whole = lists_of(full)
    longest = max(len(items) for items in whole.values())
    for limit in range(1, longest + 2):
        got, counts = paged(primitive, limit)
        assert got == whole, f"pages of {limit}"
        assert counts == {counts_of(full)}, f"pages of {limit}"
    for limit in range(longest + 2):
        for offset in range(longest + 3):
            snap = primitive.snapshot(limit=limit, **{OFFSET_ARG[name]: offset for name in LISTS})
            assert counts_of(snap) == counts_of(full), (limit, offset)
            for name, items in lists_of(snap).items():
                assert items == whole[name][offset : offset + limit], (name, limit, offset)


def full_snapshot(primitive: LeasedPrimitive) -> Snapshot:
    full = primitive.snapshot()
    for same in (primitive.snapshot(limit=None), primitive.snapshot(limit=2**52)):
        assert lists_of(same) == lists_of(full)
        assert counts_of(same) == counts_of(full)
    return full


def expiry_order(snap: Snapshot) -> list[float]:
    return [math.inf if lease.expires_at is None else lease.expires_at for lease in snap.leases]


def commands_run(client: Any, fn: Callable[[], Any]) -> tuple[Any, dict[str, int]]:
    """``fn()`` and the calls of each command Redis ran meanwhile (INFO
    commandstats; commands run by a script are counted too; the INFO call
    that takes the first reading is left out)."""
    before = client.info("commandstats")
    result = fn()
    after = client.info("commandstats")
    delta: dict[str, int] = {}
    for key, stats in after.items():
        calls = stats["calls"] - before.get(key, {}).get("calls", 0)
        if calls:
            delta[key.removeprefix("cmdstat_")] = calls
    delta["info"] -= 1
    if not delta["info"]:
        del delta["info"]
    return result, delta


# ------------------------------------------------------------------------- pools


def test_pool_pages_concatenate_to_the_whole_across_the_available_set_and_expired_leases(
    client: Any,
) -> None:
    pool = pool_of(client, "pages", *(f"r{i}" for i in range(8)))
    timeouts = [30, 30, 40, 20, None, 25]
    leases = [pool.acquire(holder=f"h{i}", lease_timeout=t) for i, t in enumerate(timeouts)]
    assert [lease.resource for lease in leases if lease] == [f"r{i}" for i in range(6)]
    r0, r1, r2 = leases[:3]
    assert r0 is not None and r1 is not None and r2 is not None
    expire_now(r0, r1)  # expired, not reclaimed: available after the available set
    assert r2.release()  # back into the available set, after r6 and r7

    full = full_snapshot(pool)
    assert full.available == ["r6", "r7", "r2", "r0", "r1"]
    assert [key[0] for key in lists_of(full)["holders"]] == ["r3", "r5", "r4"], "soonest first"
    assert full.waiters == []
    assert (full.available_count, full.held_count, full.expired_count) == (5, 3, 2)
    assert (full.size, full.free, full.waiting_count) == (8, 5, 0)
    assert_pages_match(pool, full)

    # the straddling page, spelled out: the end of the set, then the expired leases
    page = pool.snapshot(limit=3, available_offset=1)
    assert page.available == ["r7", "r2", "r0"]
    page = pool.snapshot(limit=2, available_offset=3, holders_offset=2)
    assert page.available == ["r0", "r1"]
    assert [lease.resource for lease in page.leases] == ["r4"]

    # the available list is the order a fifo pool hands the resources out in
    handed = [pool.acquire(holder="next") for _ in range(5)]
    assert [lease.resource for lease in handed if lease] == full.available


def test_pool_pages_of_expired_leases_and_waiters_when_nothing_is_in_the_available_set(
    client: Any,
) -> None:
    pool = pool_of(client, "pagesq", "a", "b", "c", "d")
    leases = [pool.acquire(holder=f"h{i}", lease_timeout=30 - i) for i in range(4)]
    assert all(leases)
    for holder, priority in (("w1", 0), ("w2", 5), ("w3", 0), ("w4", -3), ("w5", 5)):
        queue_dead_waiter(pool, holder, priority)
    expire_now(leases[2])  # c expires first, then a; the waiters stay queued
    expire_now(leases[0])  # type: ignore[arg-type]

    full = full_snapshot(pool)
    assert full.available == ["c", "a"], "expired leases, soonest expiry first"
    assert [key[0] for key in lists_of(full)["holders"]] == ["d", "b"]
    assert [w.holder for w in full.waiters] == ["w2", "w5", "w1", "w3", "w4"]
    assert (full.available_count, full.held_count, full.expired_count) == (2, 2, 2)
    assert (full.size, full.free, full.waiting_count) == (4, 2, 5)
    assert_pages_match(pool, full)


# ------------------------------------------------------------ semaphores, locks


@pytest.mark.parametrize("order", ["fifo", "lifo"])
def test_available_pages_list_resources_in_the_order_they_are_handed_out(
    client: Any, order: str
) -> None:
    pool = pool_of(client, f"order{order}", "a", "b", "c", "d", order=order)
    listed = [
        *pool.snapshot(limit=2).available,
        *pool.snapshot(limit=2, available_offset=2).available,
    ]
    handed = [lease.resource for lease in (pool.acquire(holder="h") for _ in range(4)) if lease]
    assert listed == handed


def test_semaphore_pages_concatenate_to_the_whole(client: Any) -> None:
    semaphore = Semaphore(client, "pagesem")
    semaphore.set_max_size(5)
    timeouts = {"a": 30, "b": 20, "c": None, "d": 25, "e": 30}
    leases = {i: slot_lease(semaphore, i, lease_timeout=t) for i, t in timeouts.items()}
    for holder, priority in (("w1", 0), ("w2", 3), ("w3", 0), ("w4", -1)):
        queue_dead_waiter(semaphore, holder, priority)
    lease_a = leases["a"]
    assert lease_a is not None
    expire_now(lease_a)

    full = full_snapshot(semaphore)
    assert full.available == []
    assert [key[0] for key in lists_of(full)["holders"]] == ["b", "d", "e", "c"]
    assert [w.holder for w in full.waiters] == ["w2", "w1", "w3", "w4"]
    assert (full.size, full.free, full.available_count) == (5, 1, 0)
    assert (full.held_count, full.waiting_count, full.expired_count) == (4, 4, 1)
    assert_pages_match(semaphore, full)


def test_lock_pages_concatenate_to_the_whole(client: Any) -> None:
    lock = Lock(client, "pagelock", lease_timeout=30, holder="owner")
    assert lock.acquire()
    for i in range(3):
        queue_dead_waiter(lock, f"w{i}", priority=i % 2)
    full = full_snapshot(lock)
    assert [key[:3] for key in lists_of(full)["holders"]] == [("owner", "owner", lock.fence)]
    assert [w.holder for w in full.waiters] == ["w1", "w0", "w2"]
    assert (full.size, full.free, full.held_count, full.waiting_count) == (1, 0, 1, 3)
    assert_pages_match(lock, full)

    expire_now(own_lease(lock))  # type: ignore[arg-type]
    expired = full_snapshot(lock)
    assert expired.leases == []
    assert (expired.free, expired.held_count, expired.expired_count) == (1, 0, 1)
    assert_pages_match(lock, expired)


# ------------------------------------------------------- past the end, limit=0


def _busy_primitives(client: Any) -> list[LeasedPrimitive]:
    pool = pool_of(client, "ends", "a", "b", "c", "d")
    assert pool.acquire(holder="h1", lease_timeout=30)
    expiring = pool.acquire(holder="h2", lease_timeout=30)
    assert expiring is not None and pool.acquire(holder="h3", lease_timeout=30)
    semaphore = Semaphore(client, "endsem", default_max_size=2)
    assert semaphore.acquire("x") and semaphore.acquire("y")
    queue_dead_waiter(semaphore, "w")
    lock = Lock(client, "endlock", holder="owner")
    assert lock.acquire()
    queue_dead_waiter(lock, "w")
    expire_now(expiring)
    return [pool, semaphore, lock]


@pytest.mark.parametrize("limit", [None, 1, 3, 2**52])
def test_offsets_past_the_end_give_empty_lists_and_the_full_counts(client: Any, limit: Any) -> None:
    for primitive in _busy_primitives(client):
        full = full_snapshot(primitive)
        whole = lists_of(full)
        ends = [{name: len(items) for name, items in whole.items()}]
        ends += [dict.fromkeys(LISTS, n) for n in (10, 10**6, 2**52)]
        for offsets in ends:
            snap = primitive.snapshot(limit=limit, **{OFFSET_ARG[n]: offsets[n] for n in LISTS})
            assert lists_of(snap) == {name: [] for name in LISTS}, (primitive, offsets)
            assert counts_of(snap) == counts_of(full), (primitive, offsets)


def test_limit_none_with_an_offset_gives_the_rest_of_each_list(client: Any) -> None:
    for primitive in _busy_primitives(client):
        full = full_snapshot(primitive)
        whole = lists_of(full)
        snap = primitive.snapshot(**{OFFSET_ARG[name]: 1 for name in LISTS})
        assert lists_of(snap) == {name: items[1:] for name, items in whole.items()}


def test_limit_zero_reads_only_the_counts(client: Any) -> None:
    pool, semaphore, lock = _busy_primitives(client)
    expected = {
        pool: ("pool", "ends", 4, 2, 2, 2, 0, 1),
        semaphore: ("semaphore", "endsem", 2, 0, 0, 2, 1, 0),
        lock: ("lock", "endlock", 1, 0, 0, 1, 1, 0),
    }
    for primitive, counts in expected.items():
        for offset in (0, 1, 2**52):
            snap = primitive.snapshot(limit=0, **{OFFSET_ARG[n]: offset for n in LISTS})
            assert (snap.available, snap.leases, snap.waiters) == ([], [], []), primitive
            assert counts_of(snap) == counts, primitive
            assert counts_of(snap) == counts_of(primitive.snapshot()), primitive


def test_limit_zero_of_an_unset_semaphore_reports_its_default_size(client: Any) -> None:
    snap = Semaphore(client, "endunset", default_max_size=7).snapshot(limit=0)
    assert (snap.size, snap.free, snap.held_count) == (7, 7, 0)
    snap = Semaphore(client, "endunset2").snapshot(limit=0)
    assert (snap.size, snap.free) == (None, 0)


# ----------------------------------------------------------------- bad arguments


BAD_COUNTS = [-1, True, False, 1.5, 2.0, "3", b"3", 2**52 + 1, math.inf, math.nan]


@pytest.mark.parametrize("bad", BAD_COUNTS, ids=repr)
@pytest.mark.parametrize("what", ["limit", *OFFSET_ARG.values()])
def test_a_bad_limit_or_offset_raises_value_error_naming_it(what: str, bad: Any) -> None:
    # validation happens before any I/O: no Redis behind this client
    pool = ResourcePool(_NoRedis(), "bad")
    with pytest.raises(ValueError, match=rf"^{what} must be an int"):
        pool.snapshot(**{what: bad})


@pytest.mark.parametrize("what", OFFSET_ARG.values())
def test_an_offset_of_none_is_a_bad_offset(what: str) -> None:
    with pytest.raises(ValueError, match=what):
        ResourcePool(_NoRedis(), "bad").snapshot(**{what: None})


def test_bad_arguments_are_rejected_on_every_kind(client: Any) -> None:
    for primitive in (
        ResourcePool(client, "badp"),
        Semaphore(client, "bads"),
        Lock(client, "badl"),
    ):
        with pytest.raises(ValueError, match="limit"):
            primitive.snapshot(limit=-5)
        with pytest.raises(ValueError, match="waiters_offset"):
            primitive.snapshot(limit=2, waiters_offset=-1)
    assert client.keys("*") == [], "nothing written"


class _NoRedis:
    """Passes the client check; fails the test if it is ever used."""

    def register_script(self, *args: Any) -> None:
        raise AssertionError("no I/O expected")

    def blpop(self, *args: Any) -> None:
        raise AssertionError("no I/O expected")

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"no I/O expected, got {name}")


# -------------------------------------------------------------- a page's cost


def _big_pool(client: Any, name: str, n: int) -> tuple[ResourcePool, list[str]]:
    """A pool of ``n`` resources (added 1,000 a step), the first five leased
    and the first two of those expired. Returns the pool and its whole
    available list."""
    ids = [f"r{i:05d}" for i in range(n)]
    pool = pool_of(client, name, ids[0])
    assert pool.associate_many(ids[1:]) == n - 1
    leases = [pool.acquire(holder=f"h{i}", lease_timeout=30 + i) for i in range(5)]
    assert [lease.resource for lease in leases if lease] == ids[:5]
    expire_now(leases[0], leases[1])  # type: ignore[arg-type]
    return pool, ids[5:] + ids[:2]


def test_a_page_of_a_huge_pool_is_one_command_and_costs_what_it_costs_on_a_small_one(
    redis_client: Any,
) -> None:
    big, big_ids = _big_pool(redis_client, "huge", 20_000)
    small, small_ids = _big_pool(redis_client, "small", 200)
    for pool in (big, small):
        pool.snapshot(limit=0)  # the read script is loaded

    def places(n: int) -> list[int]:
        in_set = n - 5
        # start, middle of the set, straddling set/expired, inside the expired part, past the end
        return [0, in_set // 2, in_set - 25, in_set + 1, n + 10]

    for big_offset, small_offset in zip(places(20_000), places(200), strict=True):
        costs = []
        for pool, ids, offset in ((big, big_ids, big_offset), (small, small_ids, small_offset)):
            snap, delta = commands_run(
                redis_client,
                lambda p=pool, o=offset: p.snapshot(
                    limit=50, available_offset=o, holders_offset=1, waiters_offset=o
                ),
            )
            assert snap.available == ids[offset : offset + 50]
            assert [lease.resource for lease in snap.leases] == ["r00003", "r00004"]
            counts = (snap.available_count, snap.held_count, snap.expired_count)
            assert counts == (len(ids), 3, 2)
            assert snap.size == len(ids) + 3
            assert delta.pop("evalsha", 0) + delta.pop("fcall", 0) == 1, "one round trip"
            assert set(delta) <= READ_COMMANDS, delta
            costs.append(delta)
        assert costs[0] == costs[1], f"the same work at offset {big_offset} of 20,000 as of 200"
        assert sum(costs[0].values()) <= 12, costs[0]
    page = big.snapshot(limit=50, available_offset=10_000)
    assert len(page.available) == 50


def script_reads(client: Any, fn: Callable[[], Any]) -> tuple[Any, list[list[str]]]:
    """``fn()`` and the commands scripts ran in Redis meanwhile (seen by MONITOR)."""
    marker = f"end-{uuid.uuid4().hex}"
    with client.monitor() as monitor:
        result = fn()
        client.echo(marker)
        ran = []
        while (seen := monitor.next_command())["command"] != f"ECHO {marker}":
            if seen["client_type"] == "lua":
                ran.append(seen["command"].split(" "))
    return result, ran


def unbounded(ran: list[list[str]], limit: int) -> list[list[str]]:
    """The reads among ``ran`` that may touch more than ``limit`` members."""
    out = []
    for command in ran:
        name = command[0].upper()
        if name == "ZRANGE":
            start, stop = int(command[2]), int(command[3])
            too_many = stop < 0 or stop - start + 1 > limit
        elif name == "ZRANGEBYSCORE":
            count = int(command[command.index("LIMIT") + 2]) if "LIMIT" in command else -1
            too_many = not 0 <= count <= limit
        elif name == "HMGET":
            too_many = len(command) - 2 > limit
        else:
            too_many = name not in {"TIME", "GET", "ZCARD", "ZCOUNT"}  # O(1) or O(log n)
        if too_many:
            out.append(command)
    return out


def test_a_page_reads_only_as_many_members_as_the_page_holds(redis_client: Any) -> None:
    pool, ids = _big_pool(redis_client, "hugemon", 20_000)
    in_set = 20_000 - 5
    for offset in (0, 10_000, in_set - 25, in_set + 1):
        snap, ran = script_reads(
            redis_client,
            lambda o=offset: pool.snapshot(limit=50, available_offset=o, holders_offset=1),
        )
        assert snap.available == ids[offset : offset + 50]
        assert ran, "MONITOR shows the script's commands"
        assert unbounded(ran, 50) == [], offset
    whole, ran = script_reads(redis_client, pool.snapshot)
    assert len(whole.available) == len(ids)
    assert unbounded(ran, 50), "the check sees a whole read"


# ------------------------------------------------------------------ acquired_at


def _granted_between(client: Any, grant: Callable[[], Lease | None]) -> Lease:
    before = redis_time(client)
    lease = grant()
    after = redis_time(client)
    assert lease is not None
    assert lease.acquired_at is not None
    assert before - 0.01 <= lease.acquired_at <= after + 0.01, "Redis time of the grant"
    return lease


def test_acquired_at_is_the_redis_time_of_the_grant_and_is_in_the_snapshot(client: Any) -> None:
    pool = pool_of(client, "acq", "a", "b")
    semaphore = Semaphore(client, "acqsem", default_max_size=2)
    lock = Lock(client, "acqlock", lease_timeout=30, holder="job")
    leases = [
        (pool, _granted_between(client, lambda: pool.acquire(lease_timeout=30))),
        (pool, _granted_between(client, lambda: pool.acquire())),
        (
            semaphore,
            _granted_between(client, lambda: slot_lease(semaphore, "x", lease_timeout=30)),
        ),
        (lock, _granted_between(client, lambda: own_lease(lock) if lock.acquire() else None)),
    ]
    for primitive, lease in leases:
        [listed] = [
            listed for listed in primitive.snapshot().leases if listed.resource == lease.resource
        ]
        assert listed.acquired_at == lease.acquired_at
        assert listed.fence == lease.fence
        if lease.expires_at is not None:
            assert lease.acquired_at is not None
            assert lease.expires_at - lease.acquired_at == pytest.approx(30, abs=0.002)
        assert primitive.snapshot().as_dict()["holders"][0]["acquired_at"] is not None


def test_acquired_at_is_when_the_hold_began_not_its_latest_renewal_or_reacquire(
    client: Any,
) -> None:
    pool = pool_of(client, "acqkeep", "a")
    semaphore = Semaphore(client, "acqkeepsem", default_max_size=1)
    lock = Lock(client, "acqkeeplock", lease_timeout=30, holder="job", reentrant=True)
    lease = pool.acquire(lease_timeout=30)
    slot = slot_lease(semaphore, "x", lease_timeout=30)
    assert lease is not None and slot is not None and lock.acquire()
    held = own_lease(lock)
    assert held is not None
    began = {"pool": lease.acquired_at, "semaphore": slot.acquired_at, "lock": held.acquired_at}
    time.sleep(0.05)
    assert lease.renew(40)
    assert lease.acquired_at == began["pool"]
    again = slot_lease(semaphore, "x", lease_timeout=40)  # the same identity: the same hold
    assert again is not None and again.acquired_at == began["semaphore"]
    assert lock.acquire()  # reentrant: the same hold
    for primitive in (pool, semaphore, lock):
        [listed] = primitive.snapshot().leases
        assert listed.acquired_at == began[primitive.kind]
        assert listed.expires_at is not None and listed.acquired_at is not None
        # renewed 50 ms later (the lock: re-acquired, for its own 30 s)
        assert listed.expires_at - listed.acquired_at >= 30.04


def test_acquired_at_of_a_lease_handed_to_a_waiter_is_the_hand_off(client: Any) -> None:
    pool = pool_of(client, "acqwait", "only")
    owner = pool.acquire(holder="owner", lease_timeout=30)
    assert owner is not None
    out: list[Any] = []
    waiter = threading.Thread(
        target=lambda: out.append(pool.acquire(timeout=10, holder="w", lease_timeout=30)),
        daemon=True,
    )
    waiter.start()
    wait_for(lambda: pool.waiting_count() == 1, what="the waiter to queue")
    [queued] = pool.snapshot().waiters
    time.sleep(0.1)
    released_after = redis_time(client)
    assert owner.release()
    waiter.join(10)
    [lease] = out
    assert lease is not None and lease.acquired_at is not None
    assert lease.acquired_at >= released_after - 0.01
    assert lease.acquired_at >= queued.since + 0.09, "not when it queued"
    [listed] = pool.snapshot().leases
    assert listed.acquired_at == lease.acquired_at
    assert lease.release()


# -------------------------------------------------------- property: any history

OPS = st.one_of(
    st.tuples(st.just("acquire"), st.sampled_from([None, 20, 30]), st.integers(0, 4)),
    st.tuples(st.just("release"), st.integers(0, 9)),
    st.tuples(st.just("expire"), st.integers(0, 9)),
    st.tuples(st.just("force_release"), st.integers(0, 9)),
    st.tuples(st.just("wait"), st.integers(-2, 2)),
    st.tuples(st.just("associate")),
    st.tuples(st.just("collect")),
)


class _Model:
    """What a pool or semaphore should hold after a sequence of operations."""

    def __init__(self, client: Any, kind: str) -> None:
        name = f"prop{next(_names)}"
        self.kind = kind
        self.resources = {"r0", "r1", "r2"}
        self.primitive: LeasedPrimitive
        if kind == "pool":
            self.primitive = pool_of(client, name, *sorted(self.resources))
        else:
            self.primitive = Semaphore(client, name)
            self.primitive.set_max_size(3)
        self.live: dict[str, Lease] = {}
        self.expired: list[str] = []  # expired, not reclaimed, soonest first
        self.queued = 0

    def pick(self, names: Any, i: int) -> str | None:
        names = sorted(names)
        return names[i % len(names)] if names else None

    def apply(self, op: tuple[Any, ...]) -> None:
        primitive, what = self.primitive, op[0]
        if what == "acquire":
            # An acquire reclaims expired leases first, except a semaphore
            # identity's asking again while it holds (its hold is refreshed).
            if not (self.kind == "semaphore" and f"i{op[2]}" in self.live):
                self.expired.clear()
            if isinstance(primitive, ResourcePool):
                lease = primitive.acquire(lease_timeout=op[1])
                assert (lease is not None) is (len(self.live) < len(self.resources))
            else:
                assert isinstance(primitive, Semaphore)
                identity = f"i{op[2]}"
                lease = slot_lease(primitive, identity, lease_timeout=op[1])
                granted = identity in self.live or len(self.live) < 3
                assert (lease is not None) is granted
            if lease is not None:
                assert lease.acquired_at is not None
                self.live[lease.resource] = lease
        elif what == "release":
            resource = self.pick(self.live, op[1])
            if resource is not None:
                assert self.live.pop(resource).release() is True
        elif what == "expire":
            if not self.live:
                self.apply(("acquire", 30, op[1]))  # something to expire
            resource = self.pick(self.live, op[1])
            if resource is not None:
                lease = self.live.pop(resource)
                assert lease.renew(0.001)
                wait_for(
                    lambda: self.primitive.lease_of(resource) is None,
                    what=f"{resource} to expire",
                )
                self.expired.append(resource)
        elif what == "force_release":
            resource = self.pick([*self.live, *self.expired, "r0"], op[1])
            assert resource is not None
            assert primitive.force_release(resource) is (resource in self.live)
            if resource in self.live:
                lease = self.live.pop(resource)
                assert lease.renew() is False and lease.lost
            if resource in self.expired:
                self.expired.remove(resource)  # reclaimed on the way
        elif what == "wait":
            # a waiter queues only when nothing is free: take what is left first
            size = len(self.resources) if self.kind == "pool" else 3
            identities = (i for i in itertools.count() if f"i{i}" not in self.live)
            while len(self.live) < size:
                self.apply(("acquire", 30, next(identities)))
            queue_dead_waiter(primitive, f"w{self.queued}", op[1])  # reclaims first
            self.queued += 1
            self.expired.clear()
        elif what == "associate":
            if isinstance(primitive, ResourcePool):
                resource = f"r{len(self.resources)}"
                assert primitive.associate(resource)
                self.resources.add(resource)
        elif what == "collect":
            primitive.collect()
            self.expired.clear()

    def check(self, limits: list[int]) -> None:
        full = full_snapshot(self.primitive)
        assert {lease.resource: lease.fence for lease in full.leases} == {
            r: lease.fence for r, lease in self.live.items()
        }
        assert full.held_count == len(self.live)
        assert full.expired_count == len(self.expired)
        assert full.waiting_count == len(full.waiters)
        priorities = [waiter.priority for waiter in full.waiters]
        assert priorities == sorted(priorities, reverse=True), "serving order"
        assert expiry_order(full) == sorted(expiry_order(full)), "soonest expiry first"
        if self.kind == "pool":
            free = self.resources - set(self.live)
            assert sorted(full.available) == sorted(free), "no duplicates, none missing"
            assert full.available_count == len(free)
            if self.expired:
                assert full.available[-len(self.expired) :] == self.expired
            assert (full.size, full.free) == (len(self.resources), len(free))
        else:
            assert (full.available, full.available_count) == ([], 0)
            assert (full.size, full.free) == (3, 3 - len(self.live))
        for limit in limits:
            got, counts = paged(self.primitive, limit)
            assert got == lists_of(full), f"pages of {limit}"
            assert counts == {counts_of(full)}, f"pages of {limit}"


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    kind=st.sampled_from(["pool", "semaphore"]),
    ops=st.lists(OPS, max_size=14),
    limits=st.lists(st.integers(1, 5), min_size=1, max_size=3),
    offset=st.integers(0, 8),
)
def test_pages_always_concatenate_to_the_whole(
    redis_client: Any, kind: str, ops: list[tuple[Any, ...]], limits: list[int], offset: int
) -> None:
    model = _Model(redis_client, kind)
    for op in ops:
        model.apply(op)
        model.check(limits[:1])
    model.check(limits)
    full = lists_of(model.primitive.snapshot())
    for limit in limits:
        snap = model.primitive.snapshot(limit=limit, **{OFFSET_ARG[n]: offset for n in LISTS})
        assert lists_of(snap) == {n: items[offset : offset + limit] for n, items in full.items()}
