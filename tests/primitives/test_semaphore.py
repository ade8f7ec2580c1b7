"""Semaphore behaviour, one sentence of API.md at a time, plus processes and crashes.

Every behavioural test runs against a real redis-server and again against the
real local 3-master Redis Cluster (the ``client`` fixture is parametrized).
"""

from __future__ import annotations

import itertools
import json
import math
import multiprocessing
import os
import random
import re
import signal
import socket
import threading
import time

import hypothesis.strategies as st
import pytest
import redis
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test
from redis.backoff import NoBackoff
from redis.retry import Retry

from django_redis_pool import (
    BackendUnavailable,
    Lease,
    NotConfigured,
    NotOwned,
    PoolError,
    ResourceUnavailable,
    Semaphore,
)
from tests.support.client_specs import client_from, spec_of
from tests.support.primitive_helpers import (
    LONG_CHUNK,
    assert_constructor_does_no_io,
    expire_now,
    ops,
    slot_lease,
)
from tests.support.waiting import wait_blocked, wait_for

mp = multiprocessing.get_context("fork")


#: Every test here runs on the blocking API and on the asyncio twins.
pytestmark = pytest.mark.usefixtures("api")


def _redis_time(client) -> float:
    sec, usec = client.time()
    return sec + usec / 1e6


def _identities(sem: Semaphore) -> set[str]:
    return {lease.resource for lease in sem.holders()}


def _lease_of(sem: Semaphore, identity: str) -> Lease:
    return {lease.resource: lease for lease in sem.holders()}[identity]


def _in_thread(fn, *args, **kwargs):
    """Run ``fn`` in a thread; returns (thread, results) where results gets
    (return value, monotonic time of return) or the exception raised."""
    results: list = []

    def target():
        try:
            results.append((fn(*args, **kwargs), time.monotonic()))
        except BaseException as exc:  # surfaced by the test
            results.append((exc, time.monotonic()))

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread, results


# -- the seed session and configuration ---------------------------------------------------


def test_seed_002_session(client):
    sem = Semaphore(client, "seed")
    sem.set_max_size(3)
    assert sem.acquire("peter") is True
    assert sem.acquire("jack") is True
    assert sem.acquire("tom") is True
    assert sem.acquire("mary") is False
    assert sem.release("jack") is True
    assert sem.get_current_size() == 2
    assert sem.get_max_size() == 3


def test_unconfigured_semaphore_has_max_zero_and_acquire_raises_not_configured(client):
    sem = Semaphore(client, "unset")
    assert sem.get_max_size() == 0
    assert sem.get_current_size() == 0
    with pytest.raises(NotConfigured) as info:
        sem.acquire("peter")
    assert isinstance(info.value, TypeError)
    with pytest.raises(NotConfigured):
        sem.acquire("peter", timeout=5)  # raises at once, never queues
    with pytest.raises(NotConfigured), sem.hold("peter", timeout=5):
        pass
    assert sem.waiting_count() == 0 and sem.holders() == []
    sem.set_max_size(0)  # a stored size of 0 is configured: nothing is ever granted
    assert sem.get_max_size() == 0
    assert sem.acquire("peter") is False


def test_errors_are_importable_and_derive_from_the_builtin_ones():
    for error in (ResourceUnavailable, NotOwned, NotConfigured, BackendUnavailable):
        assert issubclass(error, PoolError)
    assert issubclass(ResourceUnavailable, TimeoutError)
    assert issubclass(NotConfigured, TypeError)
    assert issubclass(BackendUnavailable, ConnectionError)


def test_ensure_max_size_stores_only_when_none_is_stored(client):
    sem = Semaphore(client, "ensure")
    assert sem.ensure_max_size(2) is True
    assert sem.get_max_size() == 2
    assert sem.ensure_max_size(5) is False
    assert sem.get_max_size() == 2
    sem.set_max_size(4)
    assert sem.ensure_max_size(1) is False
    assert sem.get_max_size() == 4
    other = Semaphore(client, "ensure-zero")
    assert other.ensure_max_size(0) is True
    assert other.ensure_max_size(3) is False, "0 is a stored size too"
    assert other.get_max_size() == 0


# -- acquiring, refreshing, releasing --------------------------------------------------


def test_same_identity_is_refreshed_without_a_second_slot(client):
    sem = Semaphore(client, "refresh", lease_timeout=10)
    sem.set_max_size(2)
    assert sem.acquire("peter") is True
    first = _lease_of(sem, "peter")
    time.sleep(0.05)  # (the Redis clock moves on: the refresh's expiry is later)
    assert sem.acquire("peter") is True
    assert sem.get_current_size() == 1
    second = _lease_of(sem, "peter")
    assert second.expires_at > first.expires_at
    assert second.fence == first.fence
    # A longer lease on the refresh moves the expiry to 30 s from then (Redis clock).
    before = _redis_time(client)
    assert sem.acquire("peter", lease_timeout=30) is True
    after = _redis_time(client)
    assert before + 30 - 0.001 <= _lease_of(sem, "peter").expires_at <= after + 30 + 0.001
    # Refreshing works even when the semaphore is full.
    assert sem.acquire("jack") is True
    assert sem.acquire("mary") is False
    assert sem.acquire("peter") is True
    assert sem.acquire("peter", timeout=5) is True, "a blocking refresh does not wait"
    assert sem.get_current_size() == 2
    assert _identities(sem) == {"peter", "jack"}
    assert _lease_of(sem, "peter").fence == first.fence


def test_release_of_an_identity_holding_nothing_is_false(client):
    sem = Semaphore(client, "rel")
    sem.set_max_size(2)
    assert sem.release("nobody") is False
    assert sem.acquire("peter") is True
    assert sem.release("peter") is True
    assert sem.release("peter") is False
    assert sem.get_current_size() == 0


def test_holders_lists_the_identities_holding_a_slot(client):
    sem = Semaphore(client, "holders", lease_timeout=30)
    sem.set_max_size(3)
    assert sem.holders() == []
    for identity in ("peter", "jack", "tom"):
        assert sem.acquire(identity) is True
    leases = sem.holders()
    assert all(isinstance(lease, Lease) for lease in leases)
    assert sorted(lease.resource for lease in leases) == ["jack", "peter", "tom"]
    assert all(lease.holder == lease.resource for lease in leases)
    assert sem.is_holding("jack") and not sem.is_holding("mary")
    sem.release("jack")
    assert _identities(sem) == {"peter", "tom"}
    assert not sem.is_holding("jack")


def test_timeout_zero_tries_once_and_a_blocking_acquire_is_woken_by_release(long_client):
    # Long blocking reads: only the release's push wakes the waiter before the
    # end of its chunk.
    client = long_client
    sem = Semaphore(client, "block")
    chunk = ops(sem).chunk()
    assert chunk == LONG_CHUNK
    sem.set_max_size(1)
    assert sem.acquire("holder") is True
    assert sem.acquire("waiter") is False
    assert sem.acquire("waiter", timeout=0) is False
    assert sem.waiting_count() == 0 and sem.waiters() == []
    thread, results = _in_thread(sem.acquire, "waiter", timeout=2 * chunk)
    wait_for(lambda: sem.waiting_count() == 1, what="the waiter to queue")
    assert [w.holder for w in sem.waiters()] == ["waiter"]
    wait_blocked(client)  # inside its blocking read: only a push can wake it early
    released_at = time.monotonic()
    assert sem.release("holder") is True
    thread.join(chunk)
    assert [r for r, _ in results] == [True]
    assert results[0][1] - released_at < chunk / 2, "woken by the release, not by a chunk"
    assert _identities(sem) == {"waiter"}
    assert _lease_of(sem, "waiter").expires_at is None, "the hand-off was confirmed"
    assert sem.waiting_count() == 0


def test_waiter_that_times_out_returns_false_and_leaves_no_queue_entry(client):
    sem = Semaphore(client, "late")
    sem.set_max_size(1)
    assert sem.acquire("holder") is True
    started = time.monotonic()
    assert sem.acquire("waiter", timeout=0.2, priority=3) is False
    assert time.monotonic() - started >= 0.19
    assert sem.waiting_count() == 0 and sem.waiters() == []
    assert [k for k in client.scan_iter() if b":wake:" in k] == []
    assert _identities(sem) == {"holder"}
    assert sem.release("holder") is True
    assert sem.get_current_size() == 0, "the freed slot went to nobody"
    assert sem.acquire("waiter") is True


def _wait_and_log(spec, identity, priority, log_key):
    client = client_from(spec)
    sem = Semaphore(client, "fair")
    assert sem.acquire(identity, timeout=30, priority=priority) is True
    client.rpush(log_key, identity)
    time.sleep(0.02)
    assert sem.release(identity) is True


def test_waiters_are_served_by_priority_then_arrival_across_processes(client):
    sem = Semaphore(client, "fair")
    sem.set_max_size(1)
    assert sem.acquire("owner") is True
    log_key = "{semaphore:fair}:log"
    arrivals = [("A", 0), ("B", 5), ("C", 0), ("D", 5), ("E", 10), ("F", -1), ("G", 10)]
    procs = []
    try:
        for n, (identity, priority) in enumerate(arrivals, start=1):
            proc = mp.Process(
                target=_wait_and_log, args=(spec_of(client), identity, priority, log_key)
            )
            proc.start()
            procs.append(proc)
            wait_for(lambda n=n: sem.waiting_count() == n, what=f"{identity} to queue")
        expected = ["E", "G", "B", "D", "A", "C", "F"]
        waiters = sem.waiters()
        assert [w.holder for w in waiters] == expected
        assert [w.priority for w in waiters] == [10, 10, 5, 5, 0, 0, -1]
        assert sem.release("owner") is True
        for proc in procs:
            proc.join(30)
            assert proc.exitcode == 0
    finally:
        for proc in procs:
            if proc.is_alive():
                proc.kill()
    assert [x.decode() for x in client.lrange(log_key, 0, -1)] == expected
    assert sem.get_current_size() == 0 and sem.waiting_count() == 0


def test_waiters_sharing_an_identity_share_its_slot_when_it_is_granted(client):
    # Two callers block with the same identity; the release grants the slot to the
    # first, after which that identity holds a slot, so the second must get True
    # too (sharing the hold) instead of waiting for another slot to free up.
    sem = Semaphore(client, "shared-identity")
    sem.set_max_size(1)
    assert sem.acquire("owner") is True
    first = _in_thread(sem.acquire, "tenant", timeout=3)
    wait_for(lambda: sem.waiting_count() == 1, what="the first waiter to queue")
    second = _in_thread(sem.acquire, "tenant", timeout=3)
    wait_for(lambda: sem.waiting_count() == 2, what="the second waiter to queue")
    assert sem.release("owner") is True
    for thread, _ in (first, second):
        thread.join(10)
    assert [r for r, _ in first[1]] == [True]
    assert [r for r, _ in second[1]] == [True], "the identity already held a slot"
    assert sem.get_current_size() == 1 and _identities(sem) == {"tenant"}
    assert sem.waiting_count() == 0


# -- changing the max size ------------------------------------------------------------


def test_lowering_the_max_size_never_evicts_and_new_acquires_wait_until_below_it(client):
    sem = Semaphore(client, "lower")
    sem.set_max_size(3)
    for identity in ("a", "b", "c"):
        assert sem.acquire(identity) is True
    sem.set_max_size(1)
    assert sem.get_max_size() == 1
    assert sem.get_current_size() == 3
    assert _identities(sem) == {"a", "b", "c"}
    assert sem.acquire("a") is True, "a holder keeps its slot and may refresh it"
    assert sem.acquire("d") is False
    thread, results = _in_thread(sem.acquire, "d", timeout=10)
    wait_for(lambda: sem.waiting_count() == 1, what="d to queue")
    for identity, left in (("a", 2), ("b", 1)):
        assert sem.release(identity) is True
        time.sleep(0.2)  # a hand-off is immediate: give a wrong one time to happen
        assert sem.get_current_size() == left
        assert not sem.is_holding("d") and results == [], f"{left} holders >= max 1"
        assert sem.waiting_count() == 1
    assert sem.release("c") is True
    thread.join(10)
    assert [r for r, _ in results] == [True]
    assert _identities(sem) == {"d"} and sem.waiting_count() == 0


def test_raising_the_max_size_serves_queued_waiters_at_once(long_client):
    # Long blocking reads: only set_max_size's pushes wake the waiters before
    # the end of their chunk.
    client = long_client
    sem = Semaphore(client, "raise")
    chunk = ops(sem).chunk()
    assert chunk == LONG_CHUNK
    sem.set_max_size(1)
    assert sem.acquire("a") is True
    forever = _in_thread(sem.acquire, "b", timeout=None)
    wait_for(lambda: sem.waiting_count() == 1, what="b to queue")
    bounded = _in_thread(sem.acquire, "c", timeout=2 * chunk, lease_timeout=30)
    wait_for(lambda: sem.waiting_count() == 2, what="c to queue")
    wait_blocked(client, 2)  # inside their blocking reads: only a push can wake them early
    raised_at, before = time.monotonic(), _redis_time(client)
    sem.set_max_size(3)
    for thread, _ in (forever, bounded):
        thread.join(chunk)
    for _, results in (forever, bounded):
        assert [r for r, _ in results] == [True]
        assert results[0][1] - raised_at < chunk / 2, "served by set_max_size, not by a chunk"
    assert _identities(sem) == {"a", "b", "c"}
    assert sem.get_current_size() == 3 and sem.waiting_count() == 0
    after = _redis_time(client)  # c's 30 s run from its grant, confirmed in between
    assert before + 30 - 0.001 <= _lease_of(sem, "c").expires_at <= after + 30 + 0.001
    assert _lease_of(sem, "b").expires_at is None


# -- hold() --------------------------------------------------------------------------


def test_hold_defaults_to_a_unique_identity_and_releases_on_exit(client):
    sem = Semaphore(client, "hold-default")
    sem.set_max_size(3)
    with sem.hold() as first, sem.hold() as second:
        assert isinstance(first, Lease) and isinstance(second, Lease)
        assert first.resource != second.resource
        assert _identities(sem) == {first.resource, second.resource}
        assert sem.get_current_size() == 2
    assert sem.get_current_size() == 0 and sem.holders() == []


def test_hold_with_an_explicit_identity(client):
    sem = Semaphore(client, "hold-explicit", lease_timeout=30)
    sem.set_max_size(1)
    with sem.hold("alice", timeout=1) as lease:
        assert lease.resource == "alice" and lease.holder == "alice"
        assert sem.is_holding("alice")
        assert _lease_of(sem, "alice").fence == lease.fence
        assert sem.acquire("bob") is False
    assert not sem.is_holding("alice")
    assert sem.acquire("bob") is True


def test_hold_raises_resource_unavailable_when_nothing_is_granted_in_time(client):
    sem = Semaphore(client, "hold-timeout")
    sem.set_max_size(1)
    assert sem.acquire("holder") is True
    with pytest.raises(ResourceUnavailable) as info, sem.hold("other", timeout=0.1):
        raise AssertionError("the body must not run")
    assert isinstance(info.value, TimeoutError)
    with pytest.raises(ResourceUnavailable), sem.hold(timeout=0):
        raise AssertionError("the body must not run")
    assert sem.waiting_count() == 0
    assert _identities(sem) == {"holder"}


def test_hold_releases_when_the_body_raises(client):
    sem = Semaphore(client, "hold-error")
    sem.set_max_size(1)
    with pytest.raises(RuntimeError), sem.hold("alice") as lease:
        assert sem.is_holding("alice")
        raise RuntimeError("boom")
    assert lease.resource == "alice"
    assert not sem.is_holding("alice") and sem.get_current_size() == 0
    assert sem.acquire("bob") is True


def test_hold_waits_forever_by_default_until_a_release(client):
    sem = Semaphore(client, "hold-wait")
    sem.set_max_size(1)
    assert sem.acquire("holder") is True
    got: list = []

    def body():
        with sem.hold("waiter") as lease:
            got.append((lease.resource, sem.is_holding("waiter")))

    thread = threading.Thread(target=body, daemon=True)
    thread.start()
    wait_for(lambda: sem.waiting_count() == 1, what="hold() to queue")
    assert sem.release("holder") is True
    thread.join(10)
    assert got == [("waiter", True)]
    assert sem.get_current_size() == 0


def test_hold_auto_renew_keeps_a_short_lease_alive(client):
    sem = Semaphore(client, "hold-renew")
    sem.set_max_size(1)
    # (renewed every 1 s, a 1.5 s lease has 0.5 s of margin, which a busy
    # machine's stalls do not reach)
    with sem.hold("alice", lease_timeout=1.5, auto_renew=True) as lease:
        for _ in range(13):  # ~3.2 s: two lease durations
            time.sleep(0.25)
            assert sem.is_holding("alice")
            assert sem.acquire("bob") is False
        assert not lease.lost
    assert not sem.is_holding("alice")
    assert sem.acquire("bob") is True


# -- leases on the Redis clock --------------------------------------------------------


def test_an_expired_lease_gives_its_slot_back(client):
    sem = Semaphore(client, "expiry", lease_timeout=30)  # (ended on purpose below)
    sem.set_max_size(1)
    crashed = slot_lease(sem, "crashed")
    assert crashed is not None
    assert sem.acquire("other") is False
    expire_now(crashed)
    assert sem.get_current_size() == 0
    assert sem.holders() == [] and not sem.is_holding("crashed")
    assert sem.acquire("other", lease_timeout=30) is True
    assert sem.release("crashed") is False, "its lease was reclaimed"
    assert _identities(sem) == {"other"}


def test_gc_reclaims_expired_holders(client):
    sem = Semaphore(client, "gc")
    sem.set_max_size(3)
    # (a and b outlast the acquires, however busy the machine is: the next
    # acquire would reclaim an expired one; then they are ended together)
    leases = [slot_lease(sem, identity, lease_timeout=30) for identity in "ab"]
    assert all(leases)
    assert sem.acquire("c") is True
    expire_now(*leases)
    assert sem.gc() == 2
    assert sem.gc() == 0
    assert _identities(sem) == {"c"}
    assert sem.get_current_size() == 1


def test_fences_strictly_increase(client):
    sem = Semaphore(client, "fence")
    sem.set_max_size(2)
    fences = []
    for i in range(12):
        identity = f"id{i % 3}"
        if i % 2:
            with sem.hold(identity, timeout=1) as lease:
                fences.append(lease.fence)
        else:
            assert sem.acquire(identity) is True
            fences.append(_lease_of(sem, identity).fence)
            assert sem.release(identity) is True
    assert fences == sorted(set(fences))
    assert sem.acquire("x") is True and sem.acquire("y") is True
    x, y = _lease_of(sem, "x").fence, _lease_of(sem, "y").fence
    assert fences[-1] < x < y


# -- bad input and no I/O -------------------------------------------------------------


def _raises_naming(fn, value):
    with pytest.raises(ValueError, match=re.escape(repr(value))):
        fn()


def test_bad_input_raises_value_error_naming_the_value(client):
    sem = Semaphore(client, "bad")
    for n in (-1, 2.5, True, False, "3", None):
        _raises_naming(lambda n=n: sem.set_max_size(n), n)
        _raises_naming(lambda n=n: sem.ensure_max_size(n), n)
    for identity in ("", None, 5, "x" * 201, "a\nb", "nul\x00", "tab\there"):
        shown = identity if not isinstance(identity, str) or len(identity) < 40 else None
        for call in (sem.acquire, sem.release, sem.is_holding):
            with pytest.raises(ValueError, match="identity") as info:
                call(identity)
            if shown is not None:
                assert repr(shown) in str(info.value)
    for timeout in (-1, -0.5, "1", True, math.nan):
        _raises_naming(lambda t=timeout: sem.acquire("a", timeout=t), timeout)
        with pytest.raises(ValueError, match="timeout"), sem.hold("a", timeout=timeout):
            pass
    for lease_timeout in (0, -1, math.inf, "5", True):
        lt = lease_timeout
        _raises_naming(lambda lt=lt: sem.acquire("a", lease_timeout=lt), lt)
        _raises_naming(lambda lt=lt: Semaphore(client, "x", lease_timeout=lt), lt)
    for priority in (1.5, "1", True, None, 2**60):
        _raises_naming(lambda p=priority: sem.acquire("a", timeout=1, priority=p), priority)
    for name in ("", "a b", "{x}", 7):
        _raises_naming(lambda name=name: Semaphore(client, name), name)
    # Nothing reached Redis: still unconfigured, no holders, no waiters.
    assert sem.get_max_size() == 0
    assert sem.holders() == [] and sem.waiting_count() == 0


def test_constructor_does_no_io():
    assert_constructor_does_no_io(
        lambda client: Semaphore(client, "x", lease_timeout=3, key_prefix="p")
    )


def test_unreachable_redis_raises_backend_unavailable_only_when_used():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    conn = redis.Redis(host="127.0.0.1", port=port, retry=Retry(NoBackoff(), 0))
    sem = Semaphore(conn, "offline", lease_timeout=3)  # no error: nothing is sent yet
    calls = [
        sem.get_max_size,
        lambda: sem.set_max_size(2),
        lambda: sem.acquire("a"),
        lambda: sem.acquire("a", timeout=1),
        lambda: sem.release("a"),
        sem.holders,
    ]
    for call in calls:
        with pytest.raises(BackendUnavailable) as info:
            call()
        assert isinstance(info.value, ConnectionError)
        assert isinstance(info.value.__cause__, redis.exceptions.ConnectionError)


# -- many processes, crashes ----------------------------------------------------------

HAMMER_PROCS, HAMMER_CYCLES, HAMMER_SLOTS = 8, 150, 3
INSIDE_KEY = "{semaphore:hammer}:inside"
REPORT_KEY = "{semaphore:hammer}:report"


def _hammer(spec, n):
    client = client_from(spec)
    sem = Semaphore(client, "hammer", lease_timeout=5)
    rng = random.Random(n)
    identity = f"worker-{n}"
    done, peak, error = 0, 0, ""
    try:
        for _ in range(HAMMER_CYCLES):
            if not sem.acquire(identity, timeout=30):
                raise AssertionError(f"{identity} got no slot within 30 s")
            inside = client.incr(INSIDE_KEY)
            peak = max(peak, inside)
            time.sleep(rng.uniform(0, 0.002))
            client.decr(INSIDE_KEY)
            if not sem.release(identity):
                raise AssertionError(f"{identity} lost its slot")
            done += 1
    except BaseException as exc:
        error = repr(exc)
    client.rpush(REPORT_KEY, json.dumps([n, done, peak, error]))
    os._exit(1 if error else 0)


def test_processes_hammering_a_semaphore_never_exceed_its_max_size(client):
    sem = Semaphore(client, "hammer", lease_timeout=5)
    sem.set_max_size(HAMMER_SLOTS)
    procs = [mp.Process(target=_hammer, args=(spec_of(client), n)) for n in range(HAMMER_PROCS)]
    try:
        for proc in procs:
            proc.start()
        for proc in procs:
            proc.join(90)
    finally:
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
    assert peak <= HAMMER_SLOTS, f"{peak} processes were inside at once"
    assert peak >= 2, "the processes never overlapped: the test proves nothing"
    assert int(client.get(INSIDE_KEY)) == 0
    assert sem.get_current_size() == 0
    assert sem.waiting_count() == 0
    assert sem.holders() == []


def _hold_and_hang(spec, ready):
    client = client_from(spec)
    sem = Semaphore(client, "crash")
    assert sem.acquire("crasher", lease_timeout=1.5) is True
    ready.set()
    time.sleep(60)


def test_a_killed_holders_slot_returns_when_its_lease_expires(client):
    sem = Semaphore(client, "crash")
    sem.set_max_size(1)
    ready = mp.Event()
    proc = mp.Process(target=_hold_and_hang, args=(spec_of(client), ready))
    proc.start()
    try:
        assert ready.wait(10), "the child never acquired"
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.join(5)
    killed_at = time.monotonic()
    killed_server = _redis_time(client)
    crashed = _lease_of(sem, "crasher")
    assert sem.acquire("survivor", timeout=0) is False, "the dead holder's lease is live"
    assert sem.get_current_size() == 1
    assert sem.acquire("survivor", timeout=5) is True
    waited = time.monotonic() - killed_at
    granted_server = _redis_time(client)
    assert granted_server >= crashed.expires_at, "granted before the lease expired"
    assert waited >= min(0.5, crashed.expires_at - killed_server - 0.05)
    assert _identities(sem) == {"survivor"}
    assert sem.release("crasher") is False


# -- model-based ----------------------------------------------------------------------

IDENTITIES = st.sampled_from(["a", "b", "c", "d"])
SIZES = st.integers(min_value=0, max_value=4)
_names = itertools.count()


class SemaphoreModel(RuleBasedStateMachine):
    client = None  # set by the test

    def __init__(self) -> None:
        super().__init__()
        self.sem = Semaphore(self.client, f"model{next(_names)}")
        self.max: int | None = None  # None: never set
        self.holders: set[str] = set()
        self.grandfathered = 0  # holders kept when the max was lowered below them
        self.last_fence = 0

    @rule(identity=IDENTITIES)
    def acquire(self, identity):
        if self.max is None:
            with pytest.raises(NotConfigured):
                self.sem.acquire(identity)
            return
        expected = identity in self.holders or len(self.holders) < self.max
        assert self.sem.acquire(identity) is expected
        if expected and identity not in self.holders:
            self.holders.add(identity)
            fence = _lease_of(self.sem, identity).fence
            assert fence > self.last_fence
            self.last_fence = fence

    @rule(identity=IDENTITIES)
    def release(self, identity):
        assert self.sem.release(identity) is (identity in self.holders)
        self.holders.discard(identity)
        self.grandfathered = min(self.grandfathered, len(self.holders))

    @rule(n=SIZES)
    def set_max_size(self, n):
        self.sem.set_max_size(n)
        self.max = n
        self.grandfathered = len(self.holders)

    @rule(n=SIZES)
    def ensure_max_size(self, n):
        assert self.sem.ensure_max_size(n) is (self.max is None)
        if self.max is None:
            self.max = n

    @invariant()
    def agrees_with_model(self):
        assert self.sem.get_max_size() == (self.max or 0)
        current = self.sem.get_current_size()
        assert current == len(self.holders)
        assert _identities(self.sem) == self.holders
        if self.max is not None:
            assert current <= max(self.max, self.grandfathered)
        assert self.sem.waiting_count() == 0


def test_semaphore_matches_model(redis_client):
    SemaphoreModel.client = redis_client
    run_state_machine_as_test(
        SemaphoreModel,
        settings=settings(
            max_examples=40,
            stateful_step_count=25,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )


def test_a_shared_identitys_other_releases_are_not_losses(redis_client):
    """Requests sharing one identity share its hold: the first release ends
    it, the others find it gone, which is no loss (not counted, no warning);
    a hold whose lease ran out still is."""
    from django_redis_pool.primitives import counts

    sem = Semaphore(redis_client, "shared-id", default_max_size=1)
    shares = [slot_lease(sem, "job", timeout=0) for _ in range(3)]
    assert all(shares)
    assert [share.release() for share in shares] == [True, False, False]
    assert not any(share.lost for share in shares) and all(share.released for share in shares)
    assert ops(sem).counts.take()[0][counts.LOST] == 0
    short = slot_lease(sem, "job", timeout=0, lease_timeout=0.05)
    assert short is not None
    expire_now(short)
    wait_for(lambda: not short.unexpired(), what="its lease to have run out here too")
    assert short.release() is False and short.lost
    assert ops(sem).counts.take()[0][counts.LOST] == 1
