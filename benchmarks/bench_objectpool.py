"""ObjectPool's local acquire + release next to a queue.LifoQueue pool, from 1 and 8 threads.

    .venv/bin/python benchmarks/bench_objectpool.py [--seconds 1] [--rounds 5]

No Redis: both pools hold 8 ready objects (no global limit), and every thread
borrows and returns one in a loop for ``--seconds``. The baseline is the
smallest correct pool: ``LifoQueue.get()`` / ``put()``. Cases alternate round
by round; medians with the min-max. A third case measures ours with
``global_limit`` against the embedded Redis: borrowing an idle object makes no
Redis call, so it runs at the local rate; its Redis commands per object
created are reported instead.
"""

from __future__ import annotations

import argparse
import queue
import statistics
import threading
import time
from collections.abc import Callable
from typing import Any

from django_redis_pool import Semaphore
from django_redis_pool.primitives.object_pool import ObjectPool
from django_redis_pool.testing import EmbeddedRedis

OBJECTS = 8


class LifoPool:
    """The baseline: a LifoQueue of ready objects."""

    def __init__(self) -> None:
        self.queue: queue.LifoQueue[object] = queue.LifoQueue()
        for _ in range(OBJECTS):
            self.queue.put(object())

    def acquire(self) -> object:
        return self.queue.get()

    def release(self, obj: object) -> None:
        self.queue.put(obj)


def ours() -> ObjectPool[object]:
    pool: ObjectPool[object] = ObjectPool(object, min=OBJECTS, max=OBJECTS)
    while pool.available < OBJECTS:
        time.sleep(0.01)
    return pool


def rate(pool: Any, threads: int, seconds: float) -> float:
    """acquire + release cycles per second, all threads together."""
    counts = [0] * threads
    stop = threading.Event()
    acquire: Callable[[], Any] = pool.acquire
    release: Callable[[Any], None] = pool.release

    def loop(i: int) -> None:
        n = 0
        while not stop.is_set():
            for _ in range(100):
                release(acquire())
            n += 100
        counts[i] = n

    workers = [threading.Thread(target=loop, args=(i,)) for i in range(threads)]
    started = time.perf_counter()
    for worker in workers:
        worker.start()
    time.sleep(seconds)
    stop.set()
    for worker in workers:
        worker.join()
    return sum(counts) / (time.perf_counter() - started)


def redis_cost_per_object(n: int = 200) -> dict[str, float]:
    """Redis commands (and µs of server time) per object created and destroyed
    with a global limit."""
    with EmbeddedRedis() as srv:
        client = srv.client()
        semaphore = Semaphore(client, "bench", lease_timeout=30)
        semaphore.set_max_size(n)
        pool: ObjectPool[object] = ObjectPool(object, max=n, global_limit=semaphore)
        client.config_resetstat()
        objs = [pool.acquire(timeout=10) for _ in range(n)]
        for obj in objs:
            pool.destroy(obj)
        stats = client.info("commandstats")
        calls = sum(v["calls"] for k, v in stats.items() if k != "cmdstat_info")
        usec = sum(v["usec"] for k, v in stats.items() if k != "cmdstat_info")
        return {"commands": calls / n, "usec": usec / n}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    results: dict[tuple[str, int], list[float]] = {}
    for _ in range(args.rounds):
        for threads in (1, 8):
            for label, make in (("LifoQueue pool", LifoPool), ("ObjectPool", ours)):
                results.setdefault((label, threads), []).append(rate(make(), threads, args.seconds))
    print(f"\n{args.rounds} rounds of {args.seconds:g} s, {OBJECTS} objects\n")
    print("| threads | case | ops/s (min-max) | vs LifoQueue |")
    print("|---:|---|---:|---:|")
    for threads in (1, 8):
        base = statistics.median(results[("LifoQueue pool", threads)])
        for label in ("LifoQueue pool", "ObjectPool"):
            runs = results[(label, threads)]
            median = statistics.median(runs)
            print(
                f"| {threads} | {label} | {median:,.0f} ({min(runs):,.0f}-{max(runs):,.0f}) "
                f"| {median / base:.2f}x |"
            )
    cost = redis_cost_per_object()
    print(
        f"\nWith global_limit: {cost['commands']:.1f} Redis commands and "
        f"{cost['usec']:.1f} µs of Redis time per object created and destroyed "
        "(borrowing an idle object: none)."
    )


if __name__ == "__main__":
    main()
