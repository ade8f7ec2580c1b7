"""ObjectPool's local acquire + release next to a queue.LifoQueue pool, from 1 and 8 threads.

    python -m benchmarks objectpool [--quick] [--seconds 1] [--rounds 5] [--server 6.2|7|PATH]

No Redis: both pools hold 8 ready objects (no global limit), and every thread
borrows and returns one in a loop for ``--seconds``. The baseline is the
smallest correct pool: ``LifoQueue.get()`` / ``put()``. Cases alternate round
by round; medians with the min-max. A third case measures ours with
``global_limit`` against Redis (``--server``): borrowing an idle object makes no
Redis call, so it runs at the local rate; its Redis commands per object
created are reported instead.
"""

from __future__ import annotations

import argparse
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

from benchmarks import servers
from benchmarks.results import choose, heading, median, plural, say
from django_redis_pool import Semaphore
from django_redis_pool.primitives.object_pool.pool import ObjectPool

NAME = "objectpool"
HELP = "ObjectPool vs a LifoQueue pool; Redis commands per object"

OBJECTS = 8
THREADS = (1, 8)
CASES = ("LifoQueue pool", "ObjectPool")


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


def redis_cost_per_object(label: str, n: int = 200) -> dict[str, float]:
    """Redis commands (and µs of server time) per object created and destroyed
    with a global limit."""
    with servers.redis_server(label) as srv:
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


def add_arguments(parser: argparse.ArgumentParser) -> None:
    servers.add_option(parser, multiple=False)
    parser.add_argument("--seconds", type=float, help="per round (default 1; --quick: 0.2)")
    parser.add_argument("--rounds", type=int, help="default 5 (--quick: 1)")


def run(args: argparse.Namespace) -> dict[str, Any] | None:
    s = choose(args, {"seconds": 1.0, "rounds": 5}, {"seconds": 0.2, "rounds": 1})
    results: dict[str, dict[str, list[float]]] = {}
    for round_ in range(s["rounds"]):
        say(f"round {round_ + 1} of {s['rounds']}")
        for threads in THREADS:
            for label, make in zip(CASES, (LifoPool, ours), strict=True):
                by_threads = results.setdefault(label, {})
                by_threads.setdefault(str(threads), []).append(rate(make(), threads, s["seconds"]))
    cost = redis_cost_per_object(args.server)
    return {
        "settings": {**s, "server": args.server, "objects": OBJECTS, "threads": list(THREADS)},
        # case -> {threads: [ops/s per round]}; per object created and destroyed with a
        # global limit: Redis commands and µs of Redis time
        "results": {"rates": results, "global_limit": cost},
    }


def render(doc: dict[str, Any]) -> str:
    s = doc["settings"]
    head = f"{s['rounds']} rounds of {s['seconds']:g} s, {s['objects']} objects"
    return "\n".join([heading(doc), "", head, "", pools_table(doc)])


def pools_table(doc: dict[str, Any]) -> str:
    s, res = doc["settings"], doc["results"]
    lines = [
        "| threads | case | ops/s (min-max) | vs LifoQueue |",
        "|---:|---|---:|---:|",
    ]
    for threads in map(str, s["threads"]):
        base = median(res["rates"]["LifoQueue pool"][threads])
        for label in CASES:
            runs = res["rates"][label][threads]
            mid = median(runs)
            lines.append(
                f"| {threads} | {label} | {mid:,.0f} ({min(runs):,.0f}-{max(runs):,.0f}) "
                f"| {mid / base:.2f}x |"
            )
    cost = res["global_limit"]
    lines += [
        "",
        f"With global_limit: {cost['commands']:.1f} Redis commands and "
        f"{cost['usec']:.1f} µs of Redis time per object created and destroyed "
        "(borrowing an idle object: none).",
    ]
    return "\n".join(lines)


# -- docs/performance.md ------------------------------------------------------------------

DOCS_PARTS = ("",)


def docs(found: list[dict[str, Any]], part: str) -> str:
    """docs/performance.md's table: the render's, with the run's settings in a sentence."""
    doc = found[0]
    s = doc["settings"]
    return (
        f"{s['objects']} ready objects in each pool, {plural(s['rounds'])} of {s['seconds']:g} s "
        "per case and thread count; the median round, with the slowest and fastest.\n\n"
        + pools_table(doc)
    )
