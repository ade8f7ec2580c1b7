"""Lock behaviour, one sentence of API.md at a time.

Every behavioural test runs against a real redis-server and again against the
real local 3-master Redis Cluster (the ``client`` fixture is parametrized).
"""

from __future__ import annotations

import gc
import itertools
import logging
import multiprocessing
import os
import re
import signal
import socket
import threading
import time

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from django_redis_pool import (
    BackendUnavailable,
    Lease,
    Lock,
    NotOwned,
    PoolError,
    ResourceUnavailable,
)
from django_redis_pool.primitives import pending_releases
from django_redis_pool.primitives.leased import lock as lock_module
from django_redis_pool.testing import EmbeddedRedis
from tests.support.client_specs import client_from, spec_of
from tests.support.primitive_helpers import (
    LONG_CHUNK,
    LONG_READ_TIMEOUT,
    assert_constructor_does_no_io,
    expire,
    ops,
    own_lease,
    redis_time,
)
from tests.support.waiting import STALL, floor_of, wait_blocked, wait_for

mp = multiprocessing.get_context("fork")


#: Every test here runs on the blocking API and on the asyncio twins.
pytestmark = pytest.mark.usefixtures("api")


def _in_thread(fn):
    """Run ``fn`` in a new thread; return its result (or re-raise its error)."""
    out: dict = {}

    def run():
        try:
            out["value"] = fn()
        except BaseException as exc:  # surfaced in the caller
            out["error"] = exc

    t = threading.Thread(target=run)
    t.start()
    t.join(30)
    assert not t.is_alive(), "thread did not finish"
    if "error" in out:
        raise out["error"]
    return out["value"]


def _join_ok(proc, timeout=30):
    proc.join(timeout)
    if proc.is_alive():
        proc.kill()
        proc.join(5)
    assert proc.exitcode == 0, f"child exited with {proc.exitcode}"


# -- acquire / release / inspection -----------------------------------------------


def test_acquire_release_and_inspection_follow_the_hold(client):
    lock = Lock(client, "basic")
    assert lock.fence is None
    assert (lock.locked(), lock.owned(), lock.holder(), lock.holders()) == (False, False, None, [])

    before = time.time()
    assert lock.acquire() is True
    assert lock.locked() is True and lock.owned() is True
    assert isinstance(lock.fence, int)
    holder = lock.holder()
    assert isinstance(holder, str) and holder
    [lease] = lock.holders()
    assert isinstance(lease, Lease)
    assert (lease.holder, lease.fence, lease.lease_timeout) == (holder, lock.fence, 30)
    assert before + 29 < lease.expires_at < time.time() + 31  # Redis clock, same machine
    first = lock.fence

    assert lock.release() is None
    assert (lock.locked(), lock.owned(), lock.holder(), lock.holders()) == (False, False, None, [])
    assert lock.fence == first, "fence stays the latest acquisition's"

    assert lock.acquire(blocking=False) is True
    assert lock.fence > first
    lock.release()


def test_explicit_holder_in_constructor_names_the_holder(client):
    lock = Lock(client, "named", holder="worker-7")
    assert lock.acquire() is True
    assert lock.holder() == "worker-7"
    assert lock.owned() and lock.owned(holder="worker-7")
    assert not lock.owned(holder="someone-else")
    lock.release()
    assert lock.holder() is None


def test_release_when_not_held_raises_not_owned(client):
    lock = Lock(client, "never")
    with pytest.raises(NotOwned):
        lock.release()
    assert lock.acquire() is True
    lock.release()
    with pytest.raises(NotOwned):
        lock.release()


def test_blocking_false_tries_once(client):
    lock = Lock(client, "once")
    other = Lock(client, "once")
    assert other.acquire(blocking=False) is True
    floor = floor_of(lambda: lock.acquire(timeout=0))  # refused at once
    started = time.monotonic()
    assert lock.acquire(blocking=False) is False
    assert time.monotonic() - started < 10 * floor + STALL, "it did not wait"
    assert lock.waiting_count() == 0 and lock.waiters() == []
    other.release()
    assert lock.acquire(blocking=False) is True
    lock.release()


def test_blocking_false_with_a_timeout_raises_value_error(client):
    lock = Lock(client, "bad-combo")
    for timeout in (1, 0, 0.5):
        with pytest.raises(ValueError, match="timeout"):
            lock.acquire(blocking=False, timeout=timeout)
    assert not lock.locked()


def test_timeout_expiring_returns_false_and_leaves_no_queue_entry(client):
    other = Lock(client, "tmo")
    assert other.acquire()
    lock = Lock(client, "tmo")
    floor = floor_of(lambda: lock.acquire(timeout=0))  # refused at once
    started = time.monotonic()
    assert lock.acquire(timeout=0.2) is False
    waited = time.monotonic() - started
    assert 0.19 <= waited < 0.2 + 10 * floor + STALL
    assert lock.waiting_count() == 0 and lock.waiters() == []
    assert [k for k in client.scan_iter() if b":wake:" in k] == []
    assert other.owned() and not lock.owned()
    other.release()


def test_blocked_waiters_are_served_in_arrival_order(client):
    lock = Lock(client, "fifo")
    assert lock.acquire(holder="first")
    served: list[str] = []
    errors: list[BaseException] = []

    def wait(label: str) -> None:
        try:
            assert lock.acquire(timeout=20, holder=label)
            served.append(label)
            time.sleep(0.01)
            lock.release()  # this thread acts as ``label`` until it releases
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    labels = ["w0", "w1", "w2", "w3"]
    threads = []
    for n, label in enumerate(labels, start=1):
        t = threading.Thread(target=wait, args=(label,))
        t.start()
        threads.append(t)
        wait_for(lambda n=n: lock.waiting_count() == n, what=f"{label} to queue")
    waiters = lock.waiters()
    assert [w.holder for w in waiters] == labels
    assert all(w.deadline is not None for w in waiters)
    lock.release()
    for t in threads:
        t.join(20)
    assert not errors, errors
    assert served == labels
    assert not lock.locked() and lock.waiting_count() == 0


def test_fence_is_per_thread_latest_acquisition_through_this_object(client):
    lock = Lock(client, "per-thread")
    assert lock.acquire()
    main_fence = lock.fence
    lock.release()

    def other_thread():
        before = lock.fence
        assert lock.acquire()
        mine = lock.fence
        lock.release()
        return before, mine

    before, theirs = _in_thread(other_thread)
    assert before is None, "another thread's fence is not this thread's"
    assert theirs > main_fence
    assert lock.fence == main_fence


# -- holders ------------------------------------------------------------------------


def test_two_lock_objects_for_the_same_name_are_two_holders(client):
    a = Lock(client, "two")
    b = Lock(client, "two")
    assert a.acquire() is True
    assert b.acquire(blocking=False) is False
    assert b.acquire(timeout=0.1) is False, "b waits for a, it is not a's holder"
    assert b.owned() is False and a.owned() is True
    with pytest.raises(NotOwned):
        b.release()
    with pytest.raises(NotOwned):
        b.extend()
    assert a.owned() is True and b.holder() == a.holder()
    a.release()
    assert b.acquire(blocking=False) is True
    assert a.owned() is False
    b.release()


def test_two_threads_using_one_lock_object_are_two_holders(client):
    lock = Lock(client, "threads")
    assert lock.acquire() is True
    main_holder = lock.holder()

    def other_thread():
        result = {
            "try": lock.acquire(blocking=False),
            "wait": lock.acquire(timeout=0.1),
            "owned": lock.owned(),
        }
        try:
            lock.release()
        except NotOwned:
            result["release"] = "NotOwned"
        return result

    assert _in_thread(other_thread) == {
        "try": False,
        "wait": False,
        "owned": False,
        "release": "NotOwned",
    }
    assert lock.owned() and lock.holder() == main_holder
    lock.release()
    took, their_holder = _in_thread(lambda: (lock.acquire(blocking=False), lock.holder()))
    assert took is True and their_holder not in (None, main_holder)
    assert lock.locked() and not lock.owned()


def test_a_new_thread_is_a_new_holder_even_when_its_thread_id_is_recycled(client):
    # A thread took the lock and ended without releasing it (its lease is still
    # live). Threads started later are other threads: none may be taken for that
    # holder, even when CPython/glibc hands one the same thread id (it usually
    # does once the first thread has fully exited).
    lock = Lock(client, "recycled", lease_timeout=30)
    took, first_ident = _in_thread(lambda: (lock.acquire(blocking=False), threading.get_ident()))
    assert took is True

    def later_thread():
        result = {"recycled_id": threading.get_ident() == first_ident, "owned": lock.owned()}
        try:
            result["wait"] = lock.acquire(timeout=0.1)
        except PoolError as exc:
            result["wait"] = f"PoolError: {exc}"
        return result

    results = []
    for _ in range(10):
        time.sleep(0.02)  # let the previous thread exit fully (its id becomes reusable)
        results.append(_in_thread(later_thread))
        if results[-1]["recycled_id"]:
            break
    for result in results:
        assert (result["owned"], result["wait"]) == (False, False), result
    assert lock.locked()


def test_acquire_with_holder_makes_the_thread_act_as_it_until_release(client):
    lock = Lock(client, "acts-as")

    def worker():
        assert lock.acquire(holder="job")
        seen = {"holder": lock.holder(), "owned": lock.owned(), "extend": lock.extend()}
        lock.release()  # releases "job"
        assert lock.acquire(blocking=False)  # back to this thread's default holder
        seen["after"] = lock.holder()
        lock.release()
        return seen

    seen = _in_thread(worker)
    assert seen["holder"] == "job" and seen["owned"] is True and seen["extend"] is True
    assert seen["after"] not in (None, "job")
    assert not lock.locked()


def test_explicit_holder_hands_the_lock_from_one_thread_to_another(client):
    lock = Lock(client, "handoff")
    fence = _in_thread(lambda: (lock.acquire(holder="job"), lock.fence)[1])
    assert lock.holder() == "job"
    assert lock.owned() is False, "the main thread is not 'job' unless it says so"
    assert lock.owned(holder="job") is True

    assert _in_thread(lambda: lock.extend(holder="job")) is True
    _in_thread(lambda: lock.release(holder="job"))
    assert not lock.locked()

    # The same through another Lock object naming the holder in its constructor.
    assert _in_thread(lambda: lock.acquire(holder="job"))
    other = Lock(client, "handoff", holder="job")

    def finish():
        assert other.owned() and other.extend()
        other.release()

    _in_thread(finish)
    assert not lock.locked()
    assert lock.acquire(blocking=False) and lock.fence > fence
    lock.release()


def _release_as(spec, name, holder):
    lock = Lock(client_from(spec), name, holder=holder)
    assert lock.owned()
    assert lock.extend(5)
    lock.release()
    assert not lock.locked()


@pytest.mark.parametrize("api", ["sync"], indirect=True)  # (the interleaving is forced by hand)
def test_a_release_leaves_alone_the_hold_its_holder_took_again_meanwhile(client, monkeypatch):
    """One holder shared by two threads: between a release's reply and its
    bookkeeping, the other thread takes the lock again as that holder. The new
    hold stays known to the lock, and renewed."""
    lock = Lock(client, "taken-again", lease_timeout=2, auto_renew=True)
    assert lock.acquire(holder="job")
    release = lock_module.release_lease_steps

    def release_then_taken_again(*args, **kwargs):
        result = yield from release(*args, **kwargs)
        assert _in_thread(lambda: lock.acquire(holder="job", blocking=False))
        return result

    monkeypatch.setattr(lock_module, "release_lease_steps", release_then_taken_again)
    lock.release(holder="job")
    monkeypatch.undo()
    [lease] = lock.holders()
    wait_for(lambda: redis_time(client) > lease.expires_at + 0.5, what="its first term to pass")
    assert lock.owned(holder="job"), "the new hold was not renewed"
    lock.release(holder="job")
    assert not lock.locked()


def test_explicit_holder_lets_another_process_release_the_lock(client):
    lock = Lock(client, "xproc")
    assert _in_thread(lambda: lock.acquire(holder="job"))
    proc = mp.Process(target=_release_as, args=(spec_of(client), "xproc", "job"))
    proc.start()
    _join_ok(proc)
    assert not lock.locked() and lock.holder() is None


# -- non-reentrant and reentrant ----------------------------------------------------


def test_non_reentrant_lock_refuses_the_same_holder_again(client):
    lock = Lock(client, "nonre")
    assert lock.acquire() is True
    fence = lock.fence
    started = time.monotonic()
    assert lock.acquire(blocking=False) is False
    floor = time.monotonic() - started  # a try that does not wait
    started = time.monotonic()
    with pytest.raises(PoolError):
        lock.acquire()
    with pytest.raises(PoolError):
        lock.acquire(timeout=5)
    with pytest.raises(PoolError), lock:
        pass
    took = time.monotonic() - started  # three tries
    assert took < 3 * 10 * floor + STALL, "it raised at once instead of waiting for itself"
    assert lock.owned() and lock.fence == fence and lock.waiting_count() == 0
    lock.release()
    assert not lock.locked()
    with pytest.raises(NotOwned):
        lock.release()


def test_reentrant_lock_counts_acquisitions_with_one_fence(client):
    lock = Lock(client, "re", reentrant=True, lease_timeout=10)
    other = Lock(client, "re", reentrant=True, holder="other")
    assert lock.acquire() is True
    fence = lock.fence
    expiries = [lock.holders()[0].expires_at]
    for _ in range(2):
        time.sleep(0.05)  # (the Redis clock moves on: each refresh's expiry is later)
        assert lock.acquire(blocking=False) is True
        assert lock.fence == fence
        expiries.append(lock.holders()[0].expires_at)
    assert expiries[0] < expiries[1] < expiries[2], "each acquisition refreshes the lease"
    assert other.acquire(blocking=False) is False

    got: list = []
    t = threading.Thread(target=lambda: got.append((other.acquire(timeout=20), other.fence)))
    t.start()
    wait_for(lambda: lock.waiting_count() == 1, what="other to queue")
    lock.release()
    lock.release()
    time.sleep(0.1)  # a hand-off is immediate: give a wrong one time to happen
    assert lock.locked() and lock.owned() and lock.holder() == lock.holders()[0].holder
    assert got == [] and lock.waiting_count() == 1
    lock.release()
    t.join(10)
    assert got and got[0][0] is True
    assert got[0][1] > fence, "the next holder's fence is larger"
    assert other.owned()
    with pytest.raises(NotOwned):
        lock.release()
    assert other.owned()
    other.release()
    assert not lock.locked()


def test_reentrant_lock_is_free_after_as_many_releases(client):
    lock = Lock(client, "re-free", reentrant=True)
    for _ in range(3):
        assert lock.acquire()
    lock.release()
    lock.release()
    assert lock.locked()
    lock.release()
    assert not lock.locked()
    with pytest.raises(NotOwned):
        lock.release()
    with lock:
        with lock:
            assert lock.owned()
        assert lock.owned()
    assert not lock.locked()


def test_reentrant_waiters_sharing_a_holder_are_all_served_when_it_gets_the_lock(client):
    # Two threads acting as the same holder "h" queue for a reentrant lock held
    # by someone else. Once "h" holds it, the second one is "the same holder
    # acquiring again": it must be granted too (as a fresh acquire by "h" is),
    # not left waiting for "h" to release.
    lock = Lock(client, "re-shared", reentrant=True, holder="h")
    other = Lock(client, "re-shared", holder="other")
    assert other.acquire()
    got: list = []
    threads = [
        threading.Thread(target=lambda: got.append((lock.acquire(timeout=1.5), lock.fence)))
        for _ in range(2)
    ]
    for n, t in enumerate(threads, start=1):
        t.start()
        wait_for(lambda n=n: lock.waiting_count() == n, what="the waiters to queue")
    assert lock.acquire(blocking=False) is False, "'h' does not hold it yet"
    other.release()
    for t in threads:
        t.join(10)
    assert [ok for ok, _ in got] == [True, True], got
    assert got[0][1] == got[1][1], "one hold, one fence"
    assert lock.waiting_count() == 0
    lock.release()
    assert lock.locked(), "held until as many releases as acquisitions"
    lock.release()
    assert not lock.locked()


# -- extend -------------------------------------------------------------------------


def test_extend_restarts_the_lease(client):
    lock = Lock(client, "ext", lease_timeout=0.5)
    assert lock.acquire()
    before = time.time()
    assert lock.extend(5) is True
    [lease] = lock.holders()
    assert before + 4.5 < lease.expires_at < time.time() + 5.5
    assert lease.lease_timeout == 5
    time.sleep(0.7)
    assert lock.owned(), "extended past the original 0.5 s lease"
    before = time.time()
    assert lock.extend() is True  # DEFAULT: the lock's own lease_timeout
    [lease] = lock.holders()
    assert before < lease.expires_at < time.time() + 0.6
    assert lease.lease_timeout == 0.5
    lock.release()
    with pytest.raises(NotOwned):
        lock.extend()


# -- expiry -------------------------------------------------------------------------


def test_extend_without_a_timeout_uses_the_locks_own_even_after_a_timed_extend(client):
    """With lease_timeout=None the lock's own lease never expires: extend()
    goes back to that after extend(2), instead of keeping 2 s."""
    lock = Lock(client, "forever", lease_timeout=None)
    assert lock.acquire()
    assert lock.extend(2)
    assert own_lease(lock).expires_at is not None
    assert lock.extend()
    assert own_lease(lock).expires_at is None and own_lease(lock).lease_timeout is None
    stored = lock.lease_of(lock.holder())
    assert stored is not None and stored.expires_at is None, "stored without an expiry"
    lock.release()


def test_expired_lease_cannot_be_released_or_extended_by_the_old_holder(client):
    lock = Lock(client, "exp", lease_timeout=0.2)
    assert lock.acquire()
    expire(own_lease(lock))
    assert not lock.owned() and not lock.locked()
    with pytest.raises(NotOwned):
        lock.release()

    assert lock.acquire()
    expire(own_lease(lock))
    with pytest.raises(NotOwned):
        lock.extend()
    with pytest.raises(NotOwned):
        lock.release()
    assert not lock.locked()


def test_expired_lease_is_reclaimed_by_the_next_holder_and_the_old_one_is_fenced_off(client):
    old = Lock(client, "exp2", lease_timeout=0.2)
    assert old.acquire()
    old_fence, old_holder = old.fence, old.holder()
    expire(own_lease(old))
    # Not reclaimed yet (lazily, by the next acquire) but no longer counted.
    snap = old.snapshot(limit=0)
    assert (snap.held_count, snap.expired_count) == (0, 1)
    assert not old.locked()
    new = Lock(client, "exp2", lease_timeout=10)
    assert new.acquire(blocking=False) is True
    assert old.owned() is False and new.owned() is True
    assert new.fence > old_fence
    with pytest.raises(NotOwned):
        old.extend()
    with pytest.raises(NotOwned):
        old.release()
    assert new.owned() and new.holder() not in (None, old_holder)
    new.release()


def test_gc_reclaims_expired_leases(client):
    lock = Lock(client, "gc", lease_timeout=0.1)
    assert lock.gc() == 0
    assert lock.acquire()
    expire(own_lease(lock))
    assert lock.gc() == 1
    snap = lock.snapshot(limit=0)
    assert (snap.held_count, snap.expired_count) == (0, 0)
    assert lock.gc() == 0


# -- context manager ----------------------------------------------------------------


def test_context_manager_acquires_returns_the_lock_and_releases(client):
    lock = Lock(client, "cm")
    with lock as entered:
        assert entered is lock
        assert lock.owned()
    assert not lock.locked()


def test_context_manager_raises_resource_unavailable_after_its_timeout(client):
    lock = Lock(client, "cm-busy", timeout=0.2)
    other = Lock(client, "cm-busy")
    assert other.acquire()
    floor = floor_of(lambda: lock.acquire(timeout=0))  # refused at once
    started = time.monotonic()
    with pytest.raises(ResourceUnavailable), lock:
        pytest.fail("entered a lock held by another holder")
    assert 0.19 <= time.monotonic() - started < 0.2 + 10 * floor + STALL
    assert other.owned() and lock.waiting_count() == 0
    other.release()


def test_context_manager_releases_when_the_body_raises(client):
    lock = Lock(client, "cm-raise")
    with pytest.raises(RuntimeError, match="boom"), lock:
        assert lock.owned()
        raise RuntimeError("boom")
    assert not lock.locked()
    assert lock.acquire(blocking=False)
    lock.release()


# -- bad inputs and no I/O ----------------------------------------------------------


@pytest.mark.parametrize(
    ("make", "value"),
    [
        (lambda c: Lock(c, "a b"), "a b"),
        (lambda c: Lock(c, "{x}"), "{x}"),
        (lambda c: Lock(c, ""), ""),
        (lambda c: Lock(c, "ok", holder=""), ""),
        (lambda c: Lock(c, "ok", holder=5), 5),
        (lambda c: Lock(c, "ok", lease_timeout=0), 0),
        (lambda c: Lock(c, "ok", lease_timeout=-1), -1),
        (lambda c: Lock(c, "ok", timeout=-1), -1),
        (lambda c: Lock(c, "ok").acquire(holder=""), ""),
        (lambda c: Lock(c, "ok").acquire(holder=5), 5),
        (lambda c: Lock(c, "ok").acquire(timeout=-1), -1),
        (lambda c: Lock(c, "ok").release(holder=""), ""),
        (lambda c: Lock(c, "ok").owned(holder=""), ""),
        (lambda c: Lock(c, "ok").extend(holder=3.5), 3.5),
        (lambda c: Lock(c, "ok").extend(0), 0),
        (lambda c: Lock(c, "ok").extend(-2), -2),
    ],
    ids=[
        "name-space",
        "name-braces",
        "name-empty",
        "holder-empty",
        "holder-int",
        "lease-zero",
        "lease-negative",
        "timeout-negative",
        "acquire-holder-empty",
        "acquire-holder-int",
        "acquire-timeout-negative",
        "release-holder-empty",
        "owned-holder-empty",
        "extend-holder-float",
        "extend-zero",
        "extend-negative",
    ],
)
def test_bad_inputs_raise_value_error_naming_the_value(client, make, value):
    with pytest.raises(ValueError, match=re.escape(repr(value))):
        make(client)
    assert Lock(client, "ok").locked() is False


def test_constructor_does_no_io():
    assert_constructor_does_no_io(
        lambda client: Lock(
            client,
            "x",
            lease_timeout=3,
            reentrant=True,
            auto_renew=True,
            timeout=1,
            holder="h",
            on_lost=print,
        )
    )


def test_lock_on_an_unreachable_redis_builds_but_raises_backend_unavailable_when_used():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dead = redis.Redis(
        host="127.0.0.1", port=port, retry=Retry(NoBackoff(), 0), socket_connect_timeout=1
    )
    lock = Lock(dead, "nowhere", auto_renew=True, timeout=0.2)
    with pytest.raises(BackendUnavailable) as info:
        lock.acquire(blocking=False)
    assert isinstance(info.value.__cause__, redis.exceptions.ConnectionError)
    with pytest.raises(BackendUnavailable):
        lock.acquire(timeout=0.2)
    with pytest.raises(BackendUnavailable):
        lock.locked()
    with pytest.raises(BackendUnavailable), lock:
        pass


# -- hand-off across processes ------------------------------------------------------


def _block_then_report(spec, report_key):
    client = client_from(spec, socket_timeout=LONG_READ_TIMEOUT)  # (the parent's reads)
    lock = Lock(client, "wake")
    assert lock.acquire(timeout=60)  # (longer than half its chunk: see below)
    woke_at = time.time()
    client.rpush(report_key, repr(woke_at))
    lock.release()


def test_lock_is_handed_to_a_waiter_in_another_process_by_a_push_not_its_chunk(long_client):
    client = long_client  # reads of LONG_CHUNK, the forked child's too
    lock = Lock(client, "wake")
    chunk = ops(lock).chunk()  # the child's too (same settings): its blocking read
    assert chunk == LONG_CHUNK
    latencies = []
    for i in range(5):
        assert lock.acquire(timeout=10)
        report = f"{{lock:wake}}:report{i}"
        proc = mp.Process(target=_block_then_report, args=(spec_of(client), report))
        proc.start()
        wait_for(lambda: lock.waiting_count() == 1, what="the child to block")
        wait_blocked(client)  # inside its blocking read: no poll can explain a fast wake
        released_at = time.time()
        lock.release()
        popped = client.blpop([report], timeout=10)
        assert popped, "the child never got the lock"
        latencies.append(float(popped[1]) - released_at)
        _join_ok(proc)
    # woken by the release's push, not by the end of its blocking read (a chunk off)
    assert max(latencies) < chunk / 2, latencies


def _fence_cycles(spec, log_key, cycles):
    client = client_from(spec)
    lock = Lock(client, "fences")
    for _ in range(cycles):
        assert lock.acquire(timeout=60)
        client.rpush(log_key, lock.fence)  # while holding: the list is in holding order
        lock.release()


def test_fences_strictly_increase_across_processes(client):
    lock = Lock(client, "fences")
    log_key = "{lock:fences}:log"
    assert lock.acquire()
    start_fence = lock.fence
    procs = [
        mp.Process(target=_fence_cycles, args=(spec_of(client), log_key, 25)) for _ in range(4)
    ]
    for proc in procs:
        proc.start()
    wait_for(lambda: lock.waiting_count() == 4, what="all four processes to queue")
    lock.release()
    for proc in procs:
        _join_ok(proc, timeout=60)
    fences = [int(f) for f in client.lrange(log_key, 0, -1)]
    assert len(fences) == 100
    assert len(set(fences)) == 100
    assert all(a < b for a, b in itertools.pairwise(fences)), fences
    assert fences[0] > start_fence
    assert lock.acquire(blocking=False) and lock.fence > fences[-1]
    lock.release()


# -- auto-renew and loss ------------------------------------------------------------


def test_auto_renew_holds_a_short_lease_for_much_longer(client):
    # (renewed every 1 s, a 1.5 s lease has 0.5 s of margin, which a busy
    # machine's stalls do not reach)
    lock = Lock(client, "renew", lease_timeout=1.5, auto_renew=True)
    assert lock.acquire()
    lease = own_lease(lock)
    time.sleep(3.2)  # two lease durations
    assert lock.owned()
    assert Lock(client, "renew").acquire(blocking=False) is False
    lock.release()
    assert not lock.locked()
    assert lease is not None and not lease._renewing, "release stops the background renewal"


def test_a_dropped_auto_renewing_lock_is_renewed_no_more(client):
    """The renewal thread holds only a weak reference: a Lock dropped while
    held stops being renewed, and its lease simply expires."""

    def work() -> None:
        assert Lock(client, "dropped", lease_timeout=0.5, auto_renew=True).acquire(blocking=False)

    work()
    gc.collect()
    wait_for(
        lambda: Lock(client, "dropped").acquire(blocking=False),
        timeout=10,
        what="the dropped lock's lease to expire",
    )


def test_on_lost_fires_when_the_keys_are_deleted_behind_the_holder(client, caplog):
    caplog.set_level(logging.WARNING, logger="django_redis_pool")
    lost: list[Lease] = []
    lock = Lock(client, "lost", lease_timeout=0.5, auto_renew=True, on_lost=lost.append)
    assert lock.acquire()
    holder, fence = lock.holder(), lock.fence
    base = ops(lock).base
    client.delete(base + ":leases")
    client.delete(base + ":info")
    wait_for(lambda: lost, what="on_lost to be called")
    time.sleep(0.4)  # at least one more renewal period: it is reported once
    assert len(lost) == 1
    assert isinstance(lost[0], Lease)
    assert (lost[0].holder, lost[0].fence, lost[0].lost) == (holder, fence, True)
    assert "was lost" in caplog.text
    warnings = [r for r in caplog.records if r.name == "django_redis_pool"]
    assert any("was lost" in r.getMessage() for r in warnings)
    with pytest.raises(NotOwned):
        lock.release()


def test_on_lost_fires_when_another_lock_object_force_releases_the_hold(client, caplog):
    caplog.set_level(logging.WARNING, logger="django_redis_pool")
    lost: list[Lease] = []
    lock = Lock(
        client, "forced", lease_timeout=0.5, auto_renew=True, holder="job", on_lost=lost.append
    )
    assert lock.acquire()
    Lock(client, "forced", holder="job").release()
    wait_for(lambda: lost, what="on_lost to be called")
    assert [lease.holder for lease in lost] == ["job"]
    assert "was lost" in caplog.text
    assert not lock.owned()
    with pytest.raises(NotOwned):
        lock.release()


# -- crashed holder -----------------------------------------------------------------


def _hold_and_hang(spec, ready_key):
    client = client_from(spec)
    assert Lock(client, "crash", lease_timeout=1.0, holder="crasher").acquire(blocking=False)
    client.rpush(ready_key, "1")
    time.sleep(60)


def test_a_sigkilled_holders_lock_goes_to_a_blocked_waiter_at_lease_expiry(long_client):
    client = long_client  # reads of LONG_CHUNK: only a read timed to the expiry ends early
    ready = "{lock:crash}:ready"
    proc = mp.Process(target=_hold_and_hang, args=(spec_of(client), ready))
    proc.start()
    assert client.blpop([ready], timeout=10), "the child never took the lock"
    os.kill(proc.pid, signal.SIGKILL)
    killed_at = time.time()
    proc.join(5)
    waiter = Lock(client, "crash", lease_timeout=10)
    chunk = ops(waiter).chunk()  # a wake at the end of a blocking read, not then
    assert chunk == LONG_CHUNK
    [lease] = waiter.holders()
    assert lease.holder == "crasher"
    expires_at = lease.expires_at  # Redis clock; the server runs on this machine

    runs: list[str] = []  # the operations its wait made besides its acquire
    make_op = ops(waiter).channel.op

    def counting_op(op, *args):
        runs.append(op)
        return make_op(op, *args)

    ops(waiter).channel.op = counting_op
    assert waiter.acquire(timeout=2 * chunk) is True
    got_at = time.time()
    assert waiter.owned() and waiter.holder() != "crasher"
    assert got_at - killed_at >= 0.5, "granted before the crashed holder's lease expired"
    assert got_at >= expires_at - 0.02, (got_at, expires_at)
    assert got_at - expires_at < chunk / 2, f"woken {got_at - expires_at:.3f} s after the expiry"
    assert len(runs) <= 5, f"the waiter polled: {runs}"
    waiter.release()


def test_a_retried_release_of_a_reentrant_lock_counts_down_once(client):
    # redis-py re-sends a command after a connection error, so a release script
    # may run twice for one call: the second run must answer like the first.
    lock = Lock(client, "re-retry", reentrant=True, holder="h")
    assert lock.acquire() and lock.acquire()
    engine = ops(lock)
    assert engine.release("h", "", "req-1") == 2
    assert engine.release("h", "", "req-1") == 2, "a retry agrees and does not count down"
    assert lock.owned()
    assert engine.release("h", "", "req-2") == 1
    assert engine.release("h", "", "req-2") == 1, "a retry of the final release agrees"
    assert not lock.locked()


def test_a_release_that_cannot_reach_redis_stops_auto_renewal() -> None:
    # Otherwise the renewer would keep a lock it was asked to give up alive for
    # ever; stopped, the lease expires once Redis is back. The release itself
    # goes on in the background until the lease has ended.
    server = EmbeddedRedis().start()
    try:
        lock = Lock(server.client(), "renewed", lease_timeout=2, auto_renew=True)
        assert lock.acquire(blocking=False)
        lease = own_lease(lock)
        assert lease is not None and lease._renewing
        before = pending_releases()
        server.stop()
        lock.release()  # (refused: it goes on in the background)
        assert not lease._renewing, "no longer renewed"
        assert own_lease(lock) is None
        assert pending_releases() >= before + 1
        wait_for(lambda: pending_releases() <= before, what="the late release to give up")
    finally:
        server.stop()


def test_a_holder_held_elsewhere_is_refused_at_once_and_told_why(client):
    """A waiting acquire finds its holder's name holding the lock, but not
    through this Lock object (another object or process of the same holder
    name, or a release lost in a failover): refused at once, not a mistake."""
    first = Lock(client, "elsewhere", lease_timeout=30)
    assert first.acquire(holder="job")
    second = Lock(client, "elsewhere", lease_timeout=30)
    watch = time.monotonic()
    assert second.acquire(timeout=5, holder="job") is False
    assert time.monotonic() - watch < 4, "at once, not after its timeout"
    with (
        pytest.raises(ResourceUnavailable, match="not through this Lock object"),
        second.for_holder("job"),
    ):
        pass
    with pytest.raises(PoolError, match="not reentrant"):
        first.acquire(timeout=5, holder="job")  # (it holds it: the caller's mistake)
    first.release(holder="job")
