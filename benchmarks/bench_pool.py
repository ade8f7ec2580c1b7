"""ResourcePool acquire+release throughput next to the round-trip floor.

One client, one thread, loopback. In the same run, interleaved round by round:

* floor   - two trivial EVALSHA round trips (``return 1``) per cycle: the least
            any two-call acquire+release can cost;
* pool    - ``acquire(timeout=0)`` + ``lease.release()`` on a pool of 100 and of
            100,000 resources;
* seed000 - the WATCH/MULTI pool of seed 000 (SRANDMEMBER + SMOVE), the
            hand-written baseline.

Server time per call comes from ``INFO commandstats`` (reset before each
measurement), so it shows whether a call's cost grows with the pool's size.

    .venv/bin/python benchmarks/bench_pool.py [--cycles 5000] [--rounds 5]

Uses ``REDIS_URL`` if set (it is flushed!), else starts an embedded redis-server.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import redis
from benchmark_redis import benchmark_redis

from django_redis_pool import ResourcePool


def measure(client: redis.Redis, cycles: int, cycle: Callable[[], None]) -> tuple[float, float]:
    """(cycles per second, server microseconds per call).

    A "call" is what the client sends: one EVALSHA for a script, whose time
    includes the commands it runs inside; for plain commands, each command.
    """
    client.config_resetstat()
    started = time.perf_counter()
    for _ in range(cycles):
        cycle()
    elapsed = time.perf_counter() - started
    stats = client.info("commandstats")
    stats.pop("cmdstat_config", None)
    if "cmdstat_evalsha" in stats:
        stats = {"cmdstat_evalsha": stats["cmdstat_evalsha"]}
    calls = sum(v["calls"] for v in stats.values())
    usec = sum(v["usec"] for v in stats.values())
    return cycles / elapsed, usec / max(calls, 1)


def seed000_cycle(client: redis.Redis) -> Callable[[], None]:
    """Seed 000's acquire (WATCH, SRANDMEMBER, MULTI/SMOVE) and release (SMOVE)."""
    available, occupied = "seed000:available", "seed000:occupied"

    def cycle() -> None:
        with client.pipeline() as tx:
            tx.watch(available, occupied)
            resource = tx.srandmember(available)
            tx.multi()
            tx.smove(available, occupied, resource)
            tx.execute()
        client.smove(occupied, available, resource)

    return cycle


def fill(pool: ResourcePool, n: int) -> None:
    for i in range(n):
        pool.associate(f"r{i}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cycles", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--large", type=int, default=100_000)
    args = parser.parse_args()

    with benchmark_redis() as (_url, client):
        info = client.info("server")

        floor_script = client.register_script("return 1")
        small = ResourcePool(client, "small")
        large = ResourcePool(client, "large")
        fill(small, 100)
        fill(large, args.large)
        client.sadd("seed000:available", *[f"r{i}" for i in range(100)])

        def pool_cycle(pool: ResourcePool) -> Callable[[], None]:
            def cycle() -> None:
                pool.acquire().release()

            return cycle

        cases = {
            "floor: 2 x EVALSHA `return 1`": lambda: (floor_script(), floor_script()),
            "ResourcePool, 100 resources": pool_cycle(small),
            f"ResourcePool, {args.large:,} resources": pool_cycle(large),
            "seed 000 WATCH/MULTI pool, 100 resources": seed000_cycle(client),
        }
        results: dict[str, list[tuple[float, float]]] = {name: [] for name in cases}
        for cycle in cases.values():  # warm up: scripts loaded, connections open
            measure(client, 200, cycle)
        for _ in range(args.rounds):
            for name, cycle in cases.items():
                results[name].append(measure(client, args.cycles, cycle))

        floor = statistics.median(r[0] for r in results[next(iter(cases))])
        print(
            f"redis {info['redis_version']}, redis-py {redis.__version__}, "
            f"{args.rounds} rounds x {args.cycles} cycles, one client on loopback\n"
        )
        print("| case | cycles/s (median) | vs floor | server us per call |")
        print("|---|---:|---:|---:|")
        for name, rows in results.items():
            rate = statistics.median(r[0] for r in rows)
            usec = statistics.median(r[1] for r in rows)
            print(f"| {name} | {rate:,.0f} | {rate / floor:.2f}x | {usec:.2f} |")


if __name__ == "__main__":
    main()
