"""Our Allocator next to redis-allocator 0.7.0, with 1,000 and 100,000 keys, on Redis 6.2 and 7.

    .venv/bin/python benchmarks/bench_allocator.py [--quick] [--servers 6.2,7]

One client, malloc_key + free_keys cycles (ours: an exclusive allocator with
leases of 30 s; redis-allocator: ``malloc_key(timeout=30)``), and the floor
(two EVALSHA of ``return 1``). The four cases are interleaved round by round
on one embedded server, each round on a freshly filled allocator; the table
gives the median cycles/s with the min-max over rounds, the median Lua µs per
cycle (``INFO commandstats``) and the ratios. The 4- and 8-process aggregate
of both allocators (1,000 keys) is in ``bench_engine.py``'s section 2.

Needs the ``bench`` extra (redis-allocator 0.7.0).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import engine_cases as cases
from bench_engine import binary_version, server_binary

from django_redis_pool.testing import EmbeddedRedis

SIZES = (1_000, 100_000)
CASES = {"floor": "floor", "our-allocator": "ours: Allocator", "allocator": "redis-allocator"}


def bench(binary: str, rounds: int, cycles: int) -> dict[tuple[str, int], list[dict[str, float]]]:
    runs: dict[tuple[str, int], list[dict[str, float]]] = {}
    with EmbeddedRedis(executable=binary) as srv:
        client, dclient = srv.client(), srv.client(decode_responses=True)
        for _ in range(rounds):
            for size in SIZES:
                for case in CASES:
                    client.flushall()
                    cases.setup(case, client, dclient, "alloc", size)
                    cycle = cases.cycle(case, client, dclient, "alloc", "main")
                    for _ in range(cases.WARMUP):
                        cycle()
                    row, _ = cases.measure(case, client, cycle, cycles)
                    runs.setdefault((case, size), []).append(row)
        client.flushall()
    return runs


def table(runs: dict[tuple[str, int], list[dict[str, float]]]) -> str:
    lines = [
        "| keys | case | cycles/s (min-max) | vs floor | vs redis-allocator | Lua µs/cycle |",
        "|---:|---|---:|---:|---:|---:|",
    ]
    for size in SIZES:
        floor = statistics.median(r["rate"] for r in runs[("floor", size)])
        peer = statistics.median(r["rate"] for r in runs[("allocator", size)])
        for case, label in CASES.items():
            rates = [r["rate"] for r in runs[(case, size)]]
            rate = statistics.median(rates)
            lua = statistics.median(r["lua"] for r in runs[(case, size)])
            lines.append(
                f"| {size:,} | {label} | {rate:,.0f} ({min(rates):,.0f}-{max(rates):,.0f}) "
                f"| {rate / floor:.2f}x | {rate / peer:.2f}x | {lua:.1f} |"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a small run (a smoke test)")
    parser.add_argument("--servers", default="6.2,7", help="6.2, 7 or a redis-server path")
    args = parser.parse_args()
    rounds, cycles = (2, 200) if args.quick else (5, 2000)
    for label in args.servers.split(","):
        binary = server_binary(label)
        if binary is None:
            print(f"\n(Redis {label}: no binary here, skipped)")
            continue
        print(f"\n### Redis {binary_version(binary)}: {rounds} rounds of {cycles} cycles\n")
        print(table(bench(binary, rounds, cycles)), flush=True)


if __name__ == "__main__":
    main()
