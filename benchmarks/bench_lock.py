"""Lock throughput and hand-off latency, next to redis-py's and python-redis-lock's.

In the same run, side by side:

* floor      - uncontended: two trivial EVALSHA round trips (``return 1``) per
               cycle; hand-off: a bare RPUSH in one process waking a BLPOP in
               another (the least any two-call lock / any push wake-up can cost);
* ours       - ``django_redis_pool.Lock(client, name, lease_timeout=30)``;
* redis-py   - ``client.lock(name, timeout=30, sleep=S)`` (``redis.lock.Lock``),
               with its default polling ``sleep=0.1`` and with ``sleep=0.001``;
* redis_lock - python-redis-lock, ``redis_lock.Lock(client, name, expire=30)``.

1. Uncontended: one client, one thread, loopback; ``acquire()`` + ``release()``
   in a loop, ``--cycles`` per round, ``--rounds`` rounds interleaved case by
   case; the median round is reported, with the server time per cycle from
   ``INFO commandstats``. (redis-py's ``sleep`` plays no part here, so it is
   measured once.)
2. Hand-off: two forked processes, each with its own client, play ping-pong:
   in turn one holds the lock and the other blocks in ``acquire()``. The
   waiter tells the holder it is about to acquire; the holder makes sure it is
   really blocked (ours: ``waiting_count() == 1``; then, for ours,
   python-redis-lock and the floor: ``CLIENT LIST`` shows the waiter's
   connection blocked in BLPOP), then releases either at once or after holding
   the lock ``--hold`` seconds more, while the waiter sits idle (a wake-up from
   idle costs more: the waiter's CPU may have gone to sleep). redis-py's waiter
   polls and never blocks, so it is only measured held: ``--hold`` plus a random
   fraction of its ``sleep``, so that the release lands at a random point of its
   polling cycle. Latency is from just before the holder's ``release()`` to
   just after the waiter's ``acquire()`` returns, both on
   ``time.monotonic_ns()`` (CLOCK_MONOTONIC, system-wide on Linux). Hand-offs
   are split over the same ``--rounds``, each round a fresh pair of processes
   per case; the first ``--warmup`` of each pair are dropped.

    .venv/bin/python benchmarks/bench_lock.py [--cycles 2000] [--rounds 5]
        [--handoffs 200] [--slow-handoffs 30] [--hold 0.02]

Uses ``REDIS_URL`` if set (it is flushed!), else starts an embedded redis-server.
"""

from __future__ import annotations

import argparse
import math
import multiprocessing
import os
import queue
import random
import statistics
import time
import traceback
from collections.abc import Callable
from importlib.metadata import version
from typing import Any

import redis
import redis_lock
from benchmark_redis import benchmark_redis

from django_redis_pool import Lock

LEASE = 30  # seconds: every lock's expiry; never reached here
CHECK_LIMIT = 10.0  # seconds: give up if a waiter never shows up as blocked


# -- the implementations --------------------------------------------------------


class ListBaton:
    """Hand-off floor: the "lock" is a token in a list; acquire = BLPOP, release
    = RPUSH. Nothing else happens: no ownership, no expiry, no queue."""

    def __init__(self, client: redis.Redis, name: str) -> None:
        self.client, self.key = client, f"baton:{name}"

    def acquire(self) -> bool:
        return self.client.blpop([self.key], timeout=0) is not None

    def release(self) -> None:
        self.client.rpush(self.key, 1)


#: case -> (label, polling sleep of redis-py or None)
CASES: dict[str, tuple[str, float | None]] = {
    "floor": ("floor: RPUSH wakes BLPOP", None),
    "ours": ("ours: django_redis_pool.Lock", None),
    "redis-py-0.1": ("redis-py Lock, sleep=0.1 (default)", 0.1),
    "redis-py-0.001": ("redis-py Lock, sleep=0.001", 0.001),
    "redis_lock": ("python-redis-lock", None),
}


def make_lock(case: str, client: redis.Redis, name: str) -> Any:
    """A lock object of ``case`` with ``acquire()`` (blocking, no timeout) and ``release()``."""
    if case == "floor":
        return ListBaton(client, name)
    if case == "ours":
        return Lock(client, name, lease_timeout=LEASE)
    if case.startswith("redis-py"):
        return client.lock(name, timeout=LEASE, sleep=CASES[case][1])
    if case == "redis_lock":
        return redis_lock.Lock(client, name, expire=LEASE)
    raise ValueError(case)


# -- 1. uncontended throughput --------------------------------------------------


def measure(client: redis.Redis, cycles: int, cycle: Callable[[], None]) -> tuple[float, float]:
    """(cycles per second, server microseconds per cycle, over every command sent)."""
    client.config_resetstat()
    started = time.perf_counter()
    for _ in range(cycles):
        cycle()
    elapsed = time.perf_counter() - started
    stats = client.info("commandstats")
    for own in ("cmdstat_config", "cmdstat_info"):
        stats.pop(own, None)
    return cycles / elapsed, sum(v["usec"] for v in stats.values()) / cycles


def uncontended_cycle(case: str, client: redis.Redis) -> Callable[[], None]:
    if case == "floor":
        script = client.register_script("return 1")
        return lambda: (script(), script())
    lock = make_lock(case, client, f"uncontended:{case}")

    def cycle() -> None:
        if not lock.acquire():
            raise RuntimeError(f"{case}: an uncontended acquire failed")
        lock.release()

    return cycle


# -- 2. hand-off latency --------------------------------------------------------


def wait_until(what: str, check: Callable[[], bool]) -> None:
    limit = time.monotonic() + CHECK_LIMIT
    while not check():
        if time.monotonic() > limit:
            raise RuntimeError(f"gave up after {CHECK_LIMIT} s waiting for: {what}")


def blocked_in_blpop(client: redis.Redis, peer: str) -> bool:
    """True if a connection named ``peer`` is blocked in BLPOP on the server."""
    return any(
        c.get("name") == peer and c.get("cmd") == "blpop" and "b" in c.get("flags", "")
        for c in client.client_list()
    )


def settle(case: str, lock: Any, client: redis.Redis, peer: str, hold: float) -> None:
    """Return once the peer, which said it is about to acquire, is blocked in it,
    and has been for ``hold`` seconds."""
    sleep = CASES[case][1]
    if sleep is not None:
        # A polling waiter never blocks on the server: let it poll for ``hold``,
        # and release at a random point of its sleep so that no phase is favoured.
        time.sleep(hold + random.uniform(0, sleep))
        return
    if case == "ours":
        wait_until("waiting_count() == 1", lambda: lock.waiting_count() == 1)
    # ours, python-redis-lock and the floor block in BLPOP: that is checked exactly
    wait_until(f"{peer} blocked in BLPOP", lambda: blocked_in_blpop(client, peer))
    if hold:
        time.sleep(hold)


def expect(peer: Any, message: Any) -> None:
    got = peer.recv()
    if got != message:
        raise RuntimeError(f"ping-pong out of step: expected {message!r}, got {got!r}")


def player(
    case: str, url: str, name: str, hold: float, role: int, n: int, peer: Any, results: Any
) -> None:
    """One side of the ping-pong. Hand-off ``i`` goes from role ``i % 2`` to the
    other. Sends ``(role, {i: release ns}, {i: acquired ns})`` to ``results``.

    The waiter says ("wait", i) before it acquires and ("got", i) after. The
    releaser does not try to take the lock back before "got": redis-py's and
    python-redis-lock's locks are not fair, so a releaser that asks again at once
    usually wins against a waiter that still has to notice the release."""
    try:
        random.seed(os.getpid())
        me, other = f"bench-lock-{role}", f"bench-lock-{1 - role}"
        client = redis.Redis.from_url(url, client_name=me)
        lock = make_lock(case, client, name)
        released: dict[int, int] = {}
        acquired: dict[int, int] = {}
        if role == 0:  # holds it first; the peer starts only once it does
            if not lock.acquire():
                raise RuntimeError("the first acquire failed")
            peer.send("held")
        else:
            expect(peer, "held")
        for i in range(n):
            if i % 2 == role:  # we hold it: wait for the peer to block, then release
                expect(peer, ("wait", i))
                settle(case, lock, client, other, hold)
                released[i] = time.monotonic_ns()
                lock.release()
                expect(peer, ("got", i))
            else:  # we wait for it
                peer.send(("wait", i))
                if not lock.acquire():
                    raise RuntimeError("a blocking acquire returned False")
                acquired[i] = time.monotonic_ns()
                peer.send(("got", i))
        if n % 2 == role:  # the last waiter holds it now
            lock.release()
        results.put((role, released, acquired))
    except BaseException:
        results.put((role, "error", traceback.format_exc()))
        raise


def handoffs(case: str, url: str, name: str, n: int, warmup: int, hold: float) -> list[float]:
    """Latencies in ms of ``n`` hand-offs between two fresh processes, each
    released ``hold`` seconds after the waiter was seen blocked."""
    ctx = multiprocessing.get_context("fork")
    results = ctx.Queue()
    a, b = ctx.Pipe()
    total = n + warmup
    players = [
        ctx.Process(target=player, args=(case, url, name, hold, role, total, end, results))
        for role, end in ((0, a), (1, b))
    ]
    for p in players:
        p.start()
    released: dict[int, int] = {}
    acquired: dict[int, int] = {}
    errors: list[str] = []
    try:
        for _ in players:
            try:
                _role, rel, acq = results.get(timeout=60 + total * 0.5)
            except queue.Empty:
                errors.append("no result from a player")
                break
            if rel == "error":
                errors.append(acq)
                continue
            released.update(rel)
            acquired.update(acq)
    finally:
        for p in players:
            p.join(timeout=5)
            if p.is_alive():
                p.terminate()
    if errors:
        raise RuntimeError(f"{case}: hand-offs failed:\n" + "\n".join(errors))
    return [(acquired[i] - released[i]) / 1e6 for i in range(warmup, total)]


# -- report ---------------------------------------------------------------------


def pct(values: list[float], q: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cycles", type=int, default=2000, help="uncontended cycles per round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--handoffs", type=int, default=200, help="hand-offs per case and hold (split over rounds)"
    )
    parser.add_argument(
        "--slow-handoffs", type=int, default=30, help="hand-offs for redis-py with sleep=0.1"
    )
    parser.add_argument(
        "--hold", type=float, default=0.02, help="seconds the lock is held after the waiter blocks"
    )
    parser.add_argument("--warmup", type=int, default=2, help="hand-offs dropped per process pair")
    args = parser.parse_args()
    if args.hold <= 0:
        parser.error("--hold must be > 0 (a polling waiter needs time to start polling)")

    with benchmark_redis() as (url, client):
        info = client.info("server")
        hz = client.config_get("hz").get("hz", "?")

        # 1. uncontended, interleaved round by round
        uncontended = [case for case in CASES if case != "redis-py-0.001"]
        cycles = {case: uncontended_cycle(case, client) for case in uncontended}
        for cycle in cycles.values():  # warm up: scripts loaded, connection open
            measure(client, 200, cycle)
        rates: dict[str, list[tuple[float, float]]] = {case: [] for case in uncontended}
        for _ in range(args.rounds):
            for case, cycle in cycles.items():
                rates[case].append(measure(client, args.cycles, cycle))

        # 2. hand-offs, interleaved round by round, a fresh pair of processes each;
        # redis-py only held: its waiter polls, it is never seen blocked to release at once
        holds = {case: [args.hold] if CASES[case][1] else [0.0, args.hold] for case in CASES}
        latencies: dict[tuple[str, float], list[float]] = {
            (case, hold): [] for case in CASES for hold in holds[case]
        }
        for r in range(args.rounds):
            for case, hold in latencies:
                n = args.slow_handoffs if case == "redis-py-0.1" else args.handoffs
                per_round = n // args.rounds + (1 if r < n % args.rounds else 0)
                if per_round:
                    name = f"handoff:{case}:{hold}:{r}"
                    if case == "floor":
                        client.rpush(f"baton:{name}", 1)  # the token the first holder takes
                    latencies[case, hold] += handoffs(case, url, name, per_round, args.warmup, hold)
        client.flushall()

        print(
            f"redis {info['redis_version']} (hz {hz}), redis-py {redis.__version__}, "
            f"python-redis-lock {version('python-redis-lock')}, {os.cpu_count()} CPUs, loopback\n"
        )
        print(f"Uncontended acquire + release, one client: {args.rounds} x {args.cycles} cycles\n")
        print("| case | cycles/s (median) | rounds min-max | vs floor | server µs per cycle |")
        print("|---|---:|---:|---:|---:|")
        floor = statistics.median(rate for rate, _ in rates["floor"])
        for case, rows in rates.items():
            rate = statistics.median(v for v, _ in rows)
            usec = statistics.median(u for _, u in rows)
            label = {"floor": "floor: 2 x EVALSHA `return 1`", "redis-py-0.1": "redis-py Lock"}.get(
                case, CASES[case][0]
            )
            low, high = min(v for v, _ in rows), max(v for v, _ in rows)
            spread = f"{low:,.0f}-{high:,.0f}"
            print(f"| {label} | {rate:,.0f} | {spread} | {rate / floor:.2f}x | {usec:.1f} |")

        ms = f"{args.hold * 1000:g} ms"
        print(
            "\nHand-off latency, ms, release() called -> waiter's acquire() returned; "
            "ping-pong between 2 processes\n"
        )
        print(
            f"| case | hand-offs (each) | released at once: p50 | p99 | max "
            f"| held {ms} more: p50 | p99 | max |"
        )
        print("|---|---:|---:|---:|---:|---:|---:|---:|")
        for case, (label, _) in CASES.items():
            cells = []
            for hold in (0.0, args.hold):
                lat = latencies.get((case, hold))
                if lat is None:
                    cells.append("n/a (polls) | |")
                else:
                    cells.append(f"{pct(lat, 50):.2f} | {pct(lat, 99):.2f} | {max(lat):.2f}")
            n = len(latencies[case, args.hold])
            print(f"| {label} | {n} | {cells[0]} | {cells[1]} |")

        print("\nTarget for ours: hand-off p50 <= 1 ms and p99 <= 5 ms:")
        for hold in holds["ours"]:
            lat = latencies["ours", hold]
            p50, p99 = pct(lat, 50), pct(lat, 99)
            verdict = "met" if p50 <= 1 and p99 <= 5 else "NOT met"
            when = "released at once" if hold == 0 else f"held {ms} more"
            print(f"  {when}: p50 {p50:.2f} ms, p99 {p99:.2f} ms: {verdict}")


if __name__ == "__main__":
    main()
