"""``LeasedPrimitive.force_release(resource, *, fence=None)``: an operator ends
the live hold on ``resource`` (a pool's resource id, a semaphore identity, a
lock's holder) whoever holds it.

With ``fence`` only a hold with that fence is ended; a reentrant lock's whole
hold ends; the resource goes to the head waiter (else becomes available); the
holder's Lease then finds itself lost; False when there is no such live hold.

Every test runs against a real redis-server and again against the real local
3-master Redis Cluster (the ``client`` fixture is parametrized).
"""

from __future__ import annotations

import bisect
import itertools
import random
import threading
import time
from typing import Any

import pytest

from django_redis_pool import Lease, Lock, NotOwned, ResourcePool, Semaphore
from django_redis_pool.primitives.leased.primitive import LeasedPrimitive
from tests.support.primitive_helpers import (
    expire_now,
    finish,
    in_thread,
    ops,
    own_lease,
    pool_of,
    slot_lease,
)
from tests.support.waiting import wait_for

# ----------------------------------------------------------------------- helpers


def holders(primitive: LeasedPrimitive) -> list[tuple[str, str, int]]:
    return [(lease.resource, lease.holder, lease.fence) for lease in primitive.snapshot().leases]


def assert_lost(lease: Lease) -> None:
    """The holder's lease finds itself lost, on renew and on release."""
    assert lease.renew() is False
    assert lease.lost is True
    assert lease.release() is False
    assert lease.renew(10) is False


# ------------------------------------------------------------------------- pools


def test_pool_force_release_ends_whoever_holds_it_and_the_resource_is_available(
    client: Any,
) -> None:
    pool = pool_of(client, "fr", "a", "b")
    lease = pool.acquire(holder="worker", lease_timeout=30)
    assert lease is not None and lease.resource == "a"
    assert pool.force_release("a") is True
    snap = pool.snapshot()
    assert snap.leases == []
    assert snap.available == ["b", "a"], "back in the available set, at its end"
    assert (snap.held_count, snap.available_count, snap.size) == (0, 2, 2)
    assert not pool.is_occupied("a")
    assert_lost(lease)
    assert pool.force_release("a") is False, "no live hold any more"


def test_pool_force_release_of_a_no_expiry_lease(client: Any) -> None:
    pool = pool_of(client, "frforever", "a")
    lease = pool.acquire(holder="forever")
    assert lease is not None and lease.expires_at is None
    assert pool.force_release("a") is True
    assert_lost(lease)
    assert pool.available() == ["a"]


def test_pool_force_release_with_the_holds_fence(client: Any) -> None:
    pool = pool_of(client, "frfence", "a")
    lease = pool.acquire(holder="worker", lease_timeout=30)
    assert lease is not None
    for wrong in (0, lease.fence - 1, lease.fence + 1, 2**52):
        assert pool.force_release("a", fence=wrong) is False, wrong
    assert holders(pool) == [("a", "worker", lease.fence)], "a wrong fence ends nothing"
    assert lease.renew() is True
    assert pool.force_release("a", fence=lease.fence) is True
    assert holders(pool) == []
    assert_lost(lease)


def test_pool_force_release_with_a_stale_fence_spares_the_next_holder(client: Any) -> None:
    pool = pool_of(client, "frstale", "a")
    first = pool.acquire(holder="first", lease_timeout=30)
    assert first is not None
    seen = pool.snapshot().leases[0]  # what the operator looked at
    assert pool.force_release("a", fence=seen.fence) is True
    second = pool.acquire(holder="second", lease_timeout=30)
    assert second is not None and second.resource == "a"
    assert second.fence > first.fence
    assert pool.force_release("a", fence=seen.fence) is False, "granted since the operator looked"
    assert first.release() is False, "the old holder's lease does not end the new one"
    assert holders(pool) == [("a", "second", second.fence)]
    assert second.renew() is True
    assert second.release() is True


def test_pool_force_release_is_false_without_a_live_hold(client: Any) -> None:
    pool = pool_of(client, "frnone", "a", "b")
    assert pool.force_release("a") is False, "available, never leased"
    assert pool.force_release("nope") is False, "not in the pool"
    assert pool.force_release("a", fence=1) is False
    released = pool.acquire(holder="done")
    assert released is not None and released.release()
    assert pool.force_release(released.resource) is False, "released already"
    assert pool.available_count() == 2


def test_pool_force_release_of_an_expired_lease_is_false(client: Any) -> None:
    pool = pool_of(client, "frexp", "a", "b")
    lease = pool.acquire(holder="late", lease_timeout=30)
    assert lease is not None
    expire_now(lease)
    assert pool.snapshot().expired_count == 1
    assert pool.force_release("a") is False
    assert pool.force_release("a", fence=lease.fence) is False
    snap = pool.snapshot()
    assert (snap.held_count, snap.available_count, snap.expired_count) == (0, 2, 0)
    assert sorted(snap.available) == ["a", "b"]
    assert_lost(lease)


def test_pool_force_release_hands_the_resource_to_the_head_waiter(client: Any) -> None:
    pool = pool_of(client, "frhand", "only")
    owner = pool.acquire(holder="owner", lease_timeout=30)
    assert owner is not None
    started = []
    for queued, (holder, priority) in enumerate((("low", 0), ("high", 5), ("low-2", 0)), 1):
        started.append(
            in_thread(
                lambda h=holder, p=priority: pool.acquire(
                    timeout=15, holder=h, priority=p, lease_timeout=30
                )
            )
        )
        wait_for(lambda n=queued: pool.waiting_count() == n, what=f"{holder} to queue")
    assert pool.force_release("only", fence=owner.fence) is True
    # the fair hand-off: straight to the head waiter, never through the available set
    wait_for(lambda: len(pool.snapshot().leases) == 1, what="the hand-off")
    snap = pool.snapshot()
    assert [lease.holder for lease in snap.leases] == ["high"]
    assert snap.available == []
    assert [w.holder for w in snap.waiters] == ["low", "low-2"]
    assert snap.leases[0].fence > owner.fence
    assert_lost(owner)
    served = []
    for thread, out in (started[1], started[0], started[2]):
        lease = finish(thread, out)
        served.append(lease.holder)
        assert pool.force_release("only") is True
        assert_lost(lease)
    assert served == ["high", "low", "low-2"]
    assert pool.available() == ["only"]


# -------------------------------------------------------------------- semaphores


def test_semaphore_force_release_ends_an_identitys_hold(client: Any) -> None:
    semaphore = Semaphore(client, "frsem", default_max_size=2)
    alice = slot_lease(semaphore, "alice", lease_timeout=30)
    bob = slot_lease(semaphore, "bob", lease_timeout=30)
    assert alice is not None and bob is not None
    assert semaphore.snapshot().free == 0
    assert semaphore.force_release("alice") is True
    assert not semaphore.is_holding("alice") and semaphore.is_holding("bob")
    snap = semaphore.snapshot()
    assert (snap.held_count, snap.free) == (1, 1)
    assert_lost(alice)
    assert semaphore.release("alice") is False
    assert semaphore.force_release("alice") is False
    assert bob.renew() is True


def test_semaphore_force_release_ends_a_shared_hold_entirely(client: Any) -> None:
    semaphore = Semaphore(client, "frsemshare", default_max_size=1)
    first = slot_lease(semaphore, "alice", lease_timeout=30)
    again = slot_lease(semaphore, "alice", lease_timeout=30)  # the same hold
    assert first is not None and again is not None and first.fence == again.fence
    assert semaphore.force_release("alice", fence=first.fence) is True
    assert not semaphore.is_holding("alice")
    assert_lost(first)
    assert_lost(again)
    assert semaphore.acquire("carol")


def test_semaphore_force_release_with_fence_and_without_a_live_hold(client: Any) -> None:
    semaphore = Semaphore(client, "frsemfence", default_max_size=2)
    assert semaphore.force_release("nobody") is False
    lease = slot_lease(semaphore, "alice", lease_timeout=30)
    late = slot_lease(semaphore, "late", lease_timeout=30)
    assert lease is not None and late is not None
    assert semaphore.force_release("alice", fence=lease.fence + 1) is False
    assert semaphore.is_holding("alice")
    assert semaphore.force_release("alice", fence=lease.fence) is True
    expire_now(late)
    assert semaphore.force_release("late") is False, "expired"
    assert semaphore.snapshot().held_count == 0


def test_semaphore_force_release_hands_the_slot_to_the_head_waiter(client: Any) -> None:
    semaphore = Semaphore(client, "frsemwait", default_max_size=1)
    alice = slot_lease(semaphore, "alice", lease_timeout=30)
    assert alice is not None
    thread, out = in_thread(lambda: slot_lease(semaphore, "bob", timeout=15, lease_timeout=30))
    wait_for(lambda: semaphore.waiting_count() == 1, what="bob to queue")
    assert semaphore.force_release("alice") is True
    bob = finish(thread, out)
    assert bob is not None and bob.fence > alice.fence
    assert holders(semaphore) == [("bob", "bob", bob.fence)]
    assert_lost(alice)
    assert bob.release() is True


# ------------------------------------------------------------------------- locks


def test_lock_force_release_ends_the_holders_lock(client: Any) -> None:
    lock = Lock(client, "frlock", lease_timeout=30, holder="job")
    assert lock.acquire()
    lease = own_lease(lock)
    assert lease is not None
    assert lock.force_release("other") is False, "not the holder"
    assert lock.force_release("job") is True
    assert not lock.locked() and not lock.owned()
    with pytest.raises(NotOwned):
        lock.extend()
    assert lease.renew() is False and lease.lost
    with pytest.raises(NotOwned):
        lock.release()
    assert lock.force_release("job") is False


def test_lock_force_release_with_fence(client: Any) -> None:
    lock = Lock(client, "frlockfence", lease_timeout=None, holder="job")
    assert lock.acquire()
    fence = lock.fence
    assert fence is not None
    assert lock.force_release("job", fence=fence + 1) is False
    assert lock.owned()
    assert lock.force_release("job", fence=fence) is True
    assert not lock.locked()


def test_lock_force_release_of_an_expired_hold_is_false(client: Any) -> None:
    lock = Lock(client, "frlockexp", lease_timeout=30, holder="job")
    assert lock.acquire()
    assert own_lease(lock) is not None
    expire_now(own_lease(lock))
    assert lock.force_release("job") is False
    assert lock.force_release("job", fence=lock.fence) is False
    assert not lock.locked()


def test_lock_force_release_hands_the_lock_to_the_waiter(client: Any) -> None:
    lock = Lock(client, "frlockwait", lease_timeout=None, holder="first")
    assert lock.acquire()
    other = lock.for_holder("second")
    thread, out = in_thread(lambda: other.acquire(timeout=15))
    wait_for(lambda: lock.waiting_count() == 1, what="the second holder to queue")
    assert lock.force_release("first", fence=lock.fence) is True
    assert finish(thread, out) is True
    assert lock.holder() == "second"
    assert other.fence is not None and lock.fence is not None and other.fence > lock.fence
    with pytest.raises(NotOwned):
        lock.release()
    other.release()
    assert not lock.locked()


def test_auto_renewing_holder_is_told_it_lost_the_lock(client: Any) -> None:
    lost: list[Lease] = []
    lock = Lock(
        client, "frlockauto", lease_timeout=1.5, auto_renew=True, holder="job", on_lost=lost.append
    )  # (long enough that a busy machine does not let it expire before the force-release)
    assert lock.acquire()
    assert lock.force_release("job", fence=lock.fence) is True
    wait_for(lambda: lost, what="on_lost")
    assert [(lease.holder, lease.fence) for lease in lost] == [("job", lock.fence)]


def test_reentrant_lock_force_release_ends_the_whole_hold(client: Any) -> None:
    lock = Lock(client, "frrlock", lease_timeout=30, holder="job", reentrant=True)
    for _ in range(3):
        assert lock.acquire()
    assert lock.force_release("job") is True
    assert not lock.locked(), "the whole hold ends, not one count"
    assert lock.force_release("job") is False
    with pytest.raises(NotOwned):
        lock.release()


def test_reentrant_lock_force_release_with_fence_ends_the_whole_hold(client: Any) -> None:
    lock = Lock(client, "frrlockfence", lease_timeout=30, holder="job", reentrant=True)
    for _ in range(3):
        assert lock.acquire()
    lease = own_lease(lock)
    assert lease is not None
    assert lock.force_release("job", fence=lock.fence) is True
    assert not lock.locked()
    assert lease.renew() is False and lease.lost
    with pytest.raises(NotOwned):
        lock.release()
    thief = lock.for_holder("next")
    assert thief.acquire(blocking=False), "free at once"
    assert thief.fence is not None and lock.fence is not None and thief.fence > lock.fence
    thief.release()


def test_reentrant_lock_force_release_hands_the_whole_lock_to_the_waiter(client: Any) -> None:
    lock = Lock(client, "frrlockwait", lease_timeout=30, holder="job", reentrant=True)
    assert lock.acquire() and lock.acquire()
    other = lock.for_holder("next")
    thread, out = in_thread(lambda: other.acquire(timeout=15))
    wait_for(lambda: lock.waiting_count() == 1, what="the waiter to queue")
    assert lock.force_release("job", fence=lock.fence) is True
    assert finish(thread, out) is True
    assert lock.holder() == "next"
    other.release()
    assert not lock.locked(), "one release frees the waiter's single acquisition"


# ----------------------------------------------------------------- bad arguments


@pytest.mark.parametrize("bad", [-1, True, False, 1.5, "3", b"3", 2**52 + 1], ids=repr)
def test_a_bad_fence_raises_value_error(client: Any, bad: Any) -> None:
    pool = pool_of(client, "frbad", "a")
    lease = pool.acquire()
    assert lease is not None
    with pytest.raises(ValueError, match="fence"):
        pool.force_release("a", fence=bad)
    with pytest.raises(ValueError, match="fence"):
        Lock(client, "frbadlock").force_release("h", fence=bad)
    assert pool.is_occupied("a"), "nothing was released"


@pytest.mark.parametrize("bad", ["", None, 5, "x" * 201], ids=repr)
def test_a_bad_resource_raises_value_error(client: Any, bad: Any) -> None:
    for primitive in (ResourcePool(client, "frbadr"), Semaphore(client, "frbads")):
        with pytest.raises(ValueError, match="resource"):
            primitive.force_release(bad)


# ------------------------------------------------------------------- concurrency


def test_holders_renewing_while_an_operator_force_releases(client: Any) -> None:
    """Workers acquire (blocking), renew and release pool resources while an
    operator force-releases what a snapshot shows, fenced or not. Every event is
    logged with a global sequence number taken before and after its call, so a
    call that ended before another began is known to have run first in Redis."""
    resources = ["r0", "r1", "r2"]
    pool = pool_of(client, "frconc", *resources, lease_timeout=10)
    seq = itertools.count()
    mutex = threading.Lock()
    grants: list[tuple[int, int, str, int]] = []  # (start, end, resource, fence)
    renews: list[tuple[int, int, str, int, bool]] = []  # (start, end, resource, fence, ok)
    releases: dict[int, bool] = {}  # fence -> did the holder's own release succeed
    forced: list[tuple[int, int, str, int | None, bool]] = []  # (start, end, r, fence, ok)
    snapshots: list[Any] = []
    errors: list[BaseException] = []
    stop = threading.Event()

    def tick() -> int:
        with mutex:
            return next(seq)

    def worker(n: int) -> None:
        rng = random.Random(n)
        last_fence = 0
        try:
            while not stop.is_set():
                start = tick()
                lease = pool.acquire(timeout=0.5, holder=f"w{n}")
                if lease is None:
                    continue
                grants.append((start, tick(), lease.resource, lease.fence))
                assert lease.fence > last_fence, "fences increase"
                last_fence = lease.fence
                for _ in range(rng.randint(1, 4)):
                    time.sleep(rng.uniform(0, 0.004))
                    start = tick()
                    ok = lease.renew()
                    renews.append((start, tick(), lease.resource, lease.fence, ok))
                    if not ok:
                        assert lease.lost, "a failed renewal marks the lease lost"
                        break
                releases[lease.fence] = lease.release()
        except BaseException as exc:
            errors.append(exc)

    def operator() -> None:
        rng = random.Random(99)
        try:
            while not stop.is_set():
                snap = pool.snapshot()
                snapshots.append(snap)
                if snap.leases:
                    target = rng.choice(snap.leases)
                    fence = target.fence if rng.random() < 0.7 else None
                    start = tick()
                    ok = pool.force_release(target.resource, fence=fence)
                    forced.append((start, tick(), target.resource, fence, ok))
                time.sleep(rng.uniform(0, 0.006))
        except BaseException as exc:
            errors.append(exc)

    def exercised() -> bool:
        """Whether the run exercised what the last checks below ask of it (read
        while it runs: copies of the lists, each taken at once)."""
        granted = {fence for *_, fence in list(grants)}
        done = list(forced)
        ended = [fence for *_, fence, ok in done if ok and fence is not None and fence in granted]
        return (
            len(ended) >= 5
            and any(fence is None and ok for *_, fence, ok in done)
            and any(not ok for *_, ok in list(renews))
            and sum(dict(releases).values()) >= 5
        )

    threads = [threading.Thread(target=worker, args=(n,), daemon=True) for n in range(6)]
    threads.append(threading.Thread(target=operator, daemon=True))
    started = time.monotonic()
    for thread in threads:
        thread.start()
    # 3 s of it at least, and on a busy machine until it has done enough
    wait_for(
        lambda: errors or (time.monotonic() - started >= 3 and exercised()),
        timeout=60,
        what="the run to exercise what is checked",
    )
    stop.set()
    for thread in threads:
        thread.join(10)
        assert not thread.is_alive()
    if errors:
        raise errors[0]

    fences = [fence for *_, fence in grants]
    assert len(set(fences)) == len(fences), "a fence is never granted twice"
    by_end = sorted(grants, key=lambda g: g[1])
    ends = [end for _start, end, *_ in by_end]
    highest = list(itertools.accumulate((fence for *_, fence in by_end), max))
    for start, _end, resource, fence in grants:
        before = bisect.bisect_left(ends, start)  # grants that returned before this began
        if before:
            assert highest[before - 1] < fence, f"fence {fence} of {resource} not the highest"

    # never two live holders of one resource: a renewal that began after a newer
    # lease on the same resource was granted must have failed
    granted_by_resource: dict[str, list[tuple[int, int]]] = {r: [] for r in resources}
    for _start, end, resource, fence in grants:
        granted_by_resource[resource].append((end, fence))
    for start, _end, resource, fence, ok in renews:
        if ok:
            newer = [g for g in granted_by_resource[resource] if g[0] < start and g[1] > fence]
            assert not newer, f"{resource} fence {fence} renewed while {newer} held it"

    # a force-released holder's renewal fails, and so does its release
    # (a grant force-released before its waiter confirmed it never reached a worker)
    granted = {fence for *_, fence in grants}
    ended = [
        (end, fence)
        for _start, end, _r, fence, ok in forced
        if ok and fence is not None and fence in granted
    ]
    for end, fence in ended:
        assert releases.get(fence) is False, f"fence {fence} was force-released"
        late = [r for r in renews if r[3] == fence and r[0] > end]
        assert all(not r[4] for r in late), f"fence {fence} renewed after its force-release"
    # every lease ended once: by its own release, or else by a force-release (a
    # force-release may also have ended a grant that never reached a worker)
    assert len(releases) == len(grants)
    own = sum(releases.values())
    assert len(grants) - own <= sum(1 for *_, ok in forced if ok)

    for snap in snapshots:
        assert snap.size == 3 and snap.available_count + snap.held_count == 3
        assert len({lease.resource for lease in snap.leases}) == len(snap.leases)
    final = pool.snapshot()
    assert (final.held_count, final.available_count, final.waiting_count) == (0, 3, 0)

    # the run exercised what it checks
    assert len(ended) >= 5, forced
    assert any(fence is None and ok for *_, fence, ok in forced)
    assert any(not ok for *_, ok in renews), "some holder found itself force-released"
    assert own >= 5


def test_a_retried_release_never_ends_the_hold_granted_since(client: Any) -> None:
    # redis-py re-sends a command whose reply was lost; the same request id must
    # answer as the first run did, not end whoever holds the resource now.
    pool = pool_of(client, "frretry", "r1")
    first = pool.acquire(holder="A", lease_timeout=30)
    assert first is not None
    thread, out = in_thread(lambda: pool.acquire(holder="B", timeout=10, lease_timeout=30))
    wait_for(lambda: pool.waiting_count() == 1, what="B to queue")
    assert ops(pool).release("r1", request="req-1") == 1
    second = finish(thread, out)
    assert second is not None and second.holder == "B"

    assert ops(pool).release("r1", request="req-1") == 1  # the retry: same answer
    assert second.renew() is True, "B's hold survives the retried release"
