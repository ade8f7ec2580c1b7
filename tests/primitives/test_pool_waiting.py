"""Blocking acquires: fair order across processes, push wake-up, races, crashes.

Runs against a real redis-server and the real 3-master Redis Cluster.
"""

from __future__ import annotations

import multiprocessing
import os
import random
import signal
import threading
import time
import uuid

from django_redis_pool import ResourcePool
from django_redis_pool.primitives.wire.channel import Channel
from django_redis_pool.primitives.wire.scripts import _constants
from tests.support.client_specs import client_from, spec_of
from tests.support.primitive_helpers import (
    LONG_CHUNK,
    LONG_READ_TIMEOUT,
    ops,
    pool_of,
    queue_dead_waiter,
    redis_time,
)
from tests.support.waiting import wait_blocked, wait_for

mp = multiprocessing.get_context("fork")


def _served_in_order(spec, label, priority, log_key):
    client = client_from(spec)
    pool = ResourcePool(client, "fair")
    lease = pool.acquire(timeout=30, holder=label, priority=priority)
    client.rpush(log_key, label)
    time.sleep(0.02)
    lease.release()


def test_waiters_are_served_by_priority_then_arrival_across_processes(client):
    pool = ResourcePool(client, "fair")
    pool.associate("only")
    held = pool.acquire()
    log_key = "{pool:fair}:log"
    arrivals = [("A", 0), ("B", 5), ("C", 0), ("D", 5), ("E", 10), ("F", -1), ("G", 10)]
    procs = []
    for n, (label, priority) in enumerate(arrivals, start=1):
        proc = mp.Process(target=_served_in_order, args=(spec_of(client), label, priority, log_key))
        proc.start()
        procs.append(proc)
        wait_for(lambda n=n: pool.waiting_count() == n, what=f"{label} to queue")
    assert [w.holder for w in pool.waiters()] == ["E", "G", "B", "D", "A", "C", "F"]
    held.release()
    for proc in procs:
        proc.join(30)
        assert proc.exitcode == 0
    served = [x.decode() for x in client.lrange(log_key, 0, -1)]
    assert served == ["E", "G", "B", "D", "A", "C", "F"]
    assert pool.available() == ["only"] and pool.waiting_count() == 0


def _block_then_report(spec, ready_key, report_key):
    client = client_from(spec, socket_timeout=LONG_READ_TIMEOUT)  # (the parent's reads)
    pool = ResourcePool(client, "wake")
    client.rpush(ready_key, "1")
    lease = pool.acquire(timeout=30)
    client.rpush(report_key, repr(time.time()))
    lease.release()


def test_blocked_waiter_in_another_process_is_woken_by_a_push_not_its_chunk(long_client):
    client = long_client  # reads of LONG_CHUNK, the forked child's too
    pool = ResourcePool(client, "wake")
    pool.associate("r")
    chunk = ops(pool).chunk()  # the child's too (same settings): its blocking read
    assert chunk == LONG_CHUNK
    latencies = []
    for i in range(5):
        held = pool.acquire()
        ready, report = f"{{pool:wake}}:ready{i}", f"{{pool:wake}}:report{i}"
        proc = mp.Process(target=_block_then_report, args=(spec_of(client), ready, report))
        proc.start()
        client.blpop([ready], timeout=10)
        wait_for(lambda: pool.waiting_count() == 1, what="the child to block")
        wait_blocked(client)  # inside its blocking read: no poll could explain a fast wake
        released_at = time.time()
        held.release()
        _, woke_at = client.blpop([report], timeout=10)
        latencies.append(float(woke_at) - released_at)
        proc.join(10)
        assert proc.exitcode == 0
    # woken by the release's push, not by the end of its blocking read (a chunk off)
    assert max(latencies) < chunk / 2, latencies


def test_timeouts_racing_releases_lose_nothing(client):
    pool = ResourcePool(client, "race", lease_timeout=30)
    pool.associate("r")
    rng = random.Random(7)
    outcomes = {"granted": 0, "timed_out": 0}
    for _ in range(200):
        held = pool.acquire()
        assert held is not None
        result: list = []
        waiter = threading.Thread(target=lambda out=result: out.append(pool.acquire(timeout=0.01)))
        waiter.start()
        time.sleep(rng.uniform(0.005, 0.015))
        assert held.release() is True
        waiter.join(5)
        got = result[0]
        if got is not None:
            outcomes["granted"] += 1
            assert got.release() is True
        else:
            outcomes["timed_out"] += 1
        assert (pool.available_count(), pool.occupied_count(), pool.waiting_count()) == (1, 0, 0)
    assert pool.available() == ["r"]
    assert outcomes["granted"] and outcomes["timed_out"], outcomes


def _past_its_deadline(pool: ResourcePool, waiter: threading.Thread) -> bool:
    """Whether the waiter is queued past its deadline on the Redis clock, or
    has given up (not before it has queued: a release then would serve it)."""
    queued = pool.waiters()
    if queued:
        deadline = queued[0].deadline
        assert deadline is not None
        return redis_time(pool.client) > deadline
    return not waiter.is_alive()


def test_waiter_past_its_deadline_never_takes_a_late_release(client):
    # Redis checks blocking timeouts once per server tick (100 ms at hz 10), so
    # the waiter's read returns late; a release landing after its deadline but
    # before that tick must not end up leased to it.
    pool = ResourcePool(client, "late", lease_timeout=30)
    pool.associate("r")
    for _ in range(5):
        held = pool.acquire()
        result: list = []
        waiter = threading.Thread(target=lambda out=result: out.append(pool.acquire(timeout=0.02)))
        started = time.monotonic()
        waiter.start()
        wait_for(lambda w=waiter: _past_its_deadline(pool, w), what="the waiter's deadline to pass")
        assert held.release() is True
        waiter.join(5)
        assert result == [None], (
            f"granted {time.monotonic() - started:.3f} s after a 0.02 s timeout"
        )
        assert pool.available() == ["r"] and pool.waiting_count() == 0


def test_many_threads_never_share_a_resource(client):
    pool = ResourcePool(client, "hammer", lease_timeout=30)
    for r in ("r1", "r2", "r3"):
        pool.associate(r)
    holders: dict[str, int | None] = {"r1": None, "r2": None, "r3": None}
    guard = threading.Lock()
    violations: list[str] = []
    fences: dict[str, list[int]] = {"r1": [], "r2": [], "r3": []}
    cycles = [0] * 16
    errors: list[BaseException] = []

    def worker(n: int) -> None:
        try:
            for _ in range(500):
                lease = pool.acquire(timeout=60)
                with guard:
                    if holders[lease.resource] is not None:
                        violations.append(f"{lease.resource} held by {holders[lease.resource]}")
                    holders[lease.resource] = n
                    fences[lease.resource].append(lease.fence)
                with guard:
                    holders[lease.resource] = None
                assert lease.release() is True
                cycles[n] += 1
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(240)
    assert not errors, errors[:3]
    assert violations == []
    assert sum(cycles) == 16 * 500
    for seq in fences.values():
        assert seq == sorted(set(seq)), "fences strictly increase per resource"
    assert sorted(pool.available()) == ["r1", "r2", "r3"]
    assert pool.occupied_count() == 0 and pool.waiting_count() == 0


def test_release_by_another_process_hands_to_the_waiting_thread(client):
    pool = ResourcePool(client, "handoff")
    pool.associate("r")
    lease = pool.acquire(holder="parent")
    got = []
    t = threading.Thread(target=lambda: got.append(pool.acquire(timeout=10, holder="thread")))
    t.start()
    wait_for(lambda: pool.waiting_count() == 1)
    proc = mp.Process(target=_force_release, args=(spec_of(client), "handoff", "r"))
    proc.start()
    proc.join(10)
    t.join(10)
    assert got[0].holder == "thread" and got[0].fence > lease.fence


def _force_release(spec, name, resource):
    assert ResourcePool(client_from(spec), name).release(resource)


def _wait_forever(spec, name):
    Channel.wait_chunk = 0.2
    ResourcePool(client_from(spec), name).acquire(timeout=None, holder="doomed")


def _held_with_a_dead_waiter(client, name, **options):
    """A pool of one resource, held, and a waiter process SIGKILLed while queued."""
    pool = ResourcePool(client, name, **options)
    pool.associate("r")
    held = pool.acquire()
    proc = mp.Process(target=_wait_forever, args=(spec_of(client), name))
    proc.start()
    wait_for(lambda: pool.waiting_count() == 1)
    os.kill(proc.pid, signal.SIGKILL)
    proc.join(5)
    return pool, held


def test_a_waiter_that_died_is_skipped(client):
    pool, held = _held_with_a_dead_waiter(client, "dead")
    got = []
    t = threading.Thread(target=lambda: got.append(pool.acquire(timeout=10, holder="alive")))
    t.start()
    wait_for(lambda: pool.waiting_count() == 2)
    # past the dead waiter's liveness window (0.2 s + 1 s grace)
    wait_for(lambda: pool.collect(dry_run=True).dropped, what="the waiter to be presumed dead")
    held.release()
    t.join(5)
    assert got and got[0] is not None and got[0].holder == "alive"
    assert pool.waiting_count() == 0


def test_gc_drops_dead_waiters(client):
    pool = ResourcePool(client, "deadgc")
    pool.associate("r")
    pool.acquire()
    proc = mp.Process(target=_wait_forever, args=(spec_of(client), "deadgc"))
    proc.start()
    wait_for(lambda: pool.waiting_count() == 1)
    os.kill(proc.pid, signal.SIGKILL)
    proc.join(5)
    wait_for(lambda: pool.collect(dry_run=True).dropped, what="the waiter to be presumed dead")
    pool.gc()
    assert pool.waiting_count() == 0


def _live_behind_dead_waiters(client, name, dead):
    """A pool of one resource whose holder released it with ``dead`` dead
    waiters queued, then a live one (its token returned): the release's
    hand-off dropped SKIP_LIMIT of them at most."""
    pool = pool_of(client, name, "r")
    engine = ops(pool)
    held = pool.acquire(holder="first")
    for _ in range(dead):
        queue_dead_waiter(pool, "ghost")
    live = uuid.uuid4().hex
    reply = engine.run("acquire", live, 60000, 0, 60000, -1, 60000, engine.restore, 1, "live")
    assert isinstance(reply, int), reply
    assert held.release()
    return pool, live


def test_no_newcomer_passes_a_live_waiter_behind_more_dead_ones_than_a_hand_off_skips(client):
    # 2 * SKIP_LIMIT + 1 dead waiters, then a live one, queue for the one
    # resource. Its release's hand-off drops SKIP_LIMIT of them and gives up
    # (bounded work): the resource is available while the live waiter waits.
    # A newcomer's acquire serves the queue first, and its hand-off gives up
    # too: the newcomer must not take the resource ahead of the live waiter
    # (one not even waiting did). The live waiter's own check-in gets it.
    skip = int(_constants()["SKIP_LIMIT"])
    pool, live = _live_behind_dead_waiters(client, "crowded", 2 * skip + 1)
    engine = ops(pool)
    assert pool.available() == ["r"] and pool.waiting_count() == skip + 2
    assert pool.acquire(holder="newcomer") is None
    assert pool.available() == ["r"] and pool.waiting_count() == 2
    assert engine.run("wait", live, 60000).startswith("r\n"), "the live waiter's check-in"
    assert [lease.holder for lease in pool.leases()] == ["live"]
    assert pool.waiting_count() == 0


def test_a_live_waiter_behind_a_crowd_of_dead_ones_checks_in_again_at_once_while_a_resource_is_free(
    client,
):
    # Each check-in drops SKIP_LIMIT dead waiters: while the one free resource
    # has not reached the live waiter, its check-in says "again now" (0 ms),
    # not "wait a chunk", until it is served.
    skip = int(_constants()["SKIP_LIMIT"])
    pool, live = _live_behind_dead_waiters(client, "crowd-check-in", 3 * skip + 1)
    engine = ops(pool)
    replies = [engine.run("wait", live, 60000)]
    while replies[-1] == 0:
        replies.append(engine.run("wait", live, 60000))
    assert replies[:-1] == [0, 0] and replies[-1].startswith("r\n"), replies


def _hold_and_hang(spec, name, ready_key):
    client = client_from(spec)
    ResourcePool(client, name, lease_timeout=0.5).acquire(holder="crasher")
    client.rpush(ready_key, "1")
    time.sleep(60)


def test_crashed_holder_resource_reaches_a_blocked_waiter_at_lease_expiry(long_client):
    # Long blocking reads: only a read timed to the lease's expiry wakes the
    # waiter before the end of its chunk.
    client = long_client
    pool = ResourcePool(client, "crash", lease_timeout=0.5)
    pool.associate("r")
    chunk = ops(pool).chunk()
    assert chunk == LONG_CHUNK
    ready = "{pool:crash}:ready"
    proc = mp.Process(target=_hold_and_hang, args=(spec_of(client), "crash", ready))
    proc.start()
    client.blpop([ready], timeout=10)
    os.kill(proc.pid, signal.SIGKILL)
    proc.join(5)
    started = time.monotonic()
    lease = pool.acquire(timeout=2 * chunk, holder="survivor")
    waited = time.monotonic() - started
    assert lease is not None and lease.holder == "survivor"
    assert waited < chunk / 2, "woken at the expiry, not by the end of its blocking read"


def test_timed_out_waiter_leaves_no_trace(client):
    pool = ResourcePool(client, "trace")
    pool.associate("r")
    pool.acquire()
    assert pool.acquire(timeout=0.05) is None
    assert pool.waiting_count() == 0
    leftovers = [k for k in client.scan_iter() if b":wake:" in k]
    assert leftovers == []


def test_waiter_granted_a_no_expiry_lease_confirms_it(client):
    pool = ResourcePool(client, "confirm")
    pool.associate("r")
    held = pool.acquire()
    got = []
    t = threading.Thread(target=lambda: got.append(pool.acquire(timeout=10)))
    t.start()
    wait_for(lambda: pool.waiting_count() == 1)
    held.release()
    t.join(10)
    assert got[0].expires_at is None
    assert pool.leases()[0].expires_at is None


def test_associate_wakes_a_blocked_waiter(client):
    pool = ResourcePool(client, "assoc")
    got = []
    t = threading.Thread(target=lambda: got.append(pool.acquire(timeout=10)))
    t.start()
    wait_for(lambda: pool.waiting_count() == 1)
    pool.associate("new")
    t.join(5)
    assert got[0].resource == "new"


def _wait_until_interrupted(spec, name, report_key):
    # Ctrl-C's usual handler, whatever the parent's disposition (a suite run as a
    # background job inherits an ignored SIGINT).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    client = client_from(spec)
    try:
        ResourcePool(client, name).acquire(timeout=30)
    except KeyboardInterrupt:
        client.rpush(report_key, "interrupted")


def test_interrupted_waiter_withdraws_at_once(client):
    pool = ResourcePool(client, "intr")
    pool.associate("r")
    pool.acquire()
    report = "{pool:intr}:report"
    proc = mp.Process(target=_wait_until_interrupted, args=(spec_of(client), "intr", report))
    proc.start()
    try:
        wait_for(lambda: pool.waiting_count() == 1)
        os.kill(proc.pid, signal.SIGINT)
        assert client.blpop([report], timeout=10)
        proc.join(5)
        assert pool.waiting_count() == 0
    finally:
        if proc.is_alive():
            proc.kill()
            proc.join(5)


def test_a_grant_handed_to_a_waiter_that_died_lapses_after_the_confirmation_window(client):
    """A release within a dead waiter's liveness window hands the resource to
    it; unconfirmed, that grant lasts PROVISIONAL (5 s), not the 30 s lease."""
    lease_timeout = 120  # the lease the queue must not wait for, far longer than the window
    pool, held = _held_with_a_dead_waiter(client, "stall", lease_timeout=lease_timeout)
    held.release()  # at once: the dead waiter still counts as alive
    handed = pool.lease_of("r")
    assert handed is not None and handed.holder == "doomed"
    assert handed.expires_at is not None
    assert handed.expires_at - redis_time(client) <= 5.0, "a confirmation window, not the lease"
    started, before = time.monotonic(), redis_time(client)
    lease = pool.acquire(timeout=lease_timeout / 2, holder="alive")
    assert lease is not None and lease.holder == "alive"
    waited = time.monotonic() - started
    assert waited < lease_timeout / 2, "the dead waiter stalled the queue for its lease"
    assert lease.expires_at is not None and lease.expires_at >= before + lease_timeout - 0.001
