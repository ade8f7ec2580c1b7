"""The asyncio path's own cost per call: ours next to a bare ``redis.asyncio`` floor.

    .venv/bin/python benchmarks/bench_async.py [--rounds 9] [--cycles 1000]
        [--server 6.2|7|PATH] [--before REF]

One event loop, one client: the floor is two ``redis.asyncio`` EVALSHA of
``return 1`` per cycle (what an acquire + release costs Redis at the least);
ours is ``aacquire`` + ``arelease`` of a ResourcePool, a Semaphore and a Lock
(``async with lock``). Each round of each case runs in a fresh worker
process (so that ``--before REF``, our package from another git revision, runs
in the same rounds, interleaved with today's); the report is the median µs
per cycle, and ours minus the floor: what our asyncio path adds per cycle
(two awaited calls). Starts its own embedded redis-server.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CASES = ["floor", "pool", "semaphore", "lock"]
ROOT = Path(__file__).resolve().parent.parent


async def _measure(url: str, case: str, cycles: int) -> float:
    """µs per cycle of ``case`` (run in a worker process)."""
    import redis
    import redis.asyncio as aredis

    from django_redis_pool import Lock, ResourcePool, Semaphore

    # (ours on a blocking client, as Django builds them: its asyncio twin runs the awaits)
    client = redis.Redis.from_url(url)
    client.flushall()
    floor_client = aredis.Redis.from_url(url)
    if case == "floor":
        script = floor_client.register_script("return 1")

        async def cycle() -> None:
            await script()
            await script()

    elif case == "pool":
        pool = ResourcePool(client, "bench", lease_timeout=30)
        pool.associate_many(f"r{n}" for n in range(10))

        async def cycle() -> None:
            lease = await pool.aacquire(timeout=0)
            await lease.arelease()

    elif case == "semaphore":
        sem = Semaphore(client, "bench", lease_timeout=30, default_max_size=10)

        async def cycle() -> None:
            await sem.aacquire("me", timeout=0)
            await sem.arelease("me")

    else:
        lock = Lock(client, "bench", lease_timeout=30)

        async def cycle() -> None:
            async with lock:
                pass

    for _ in range(200):
        await cycle()
    started = time.perf_counter()
    for _ in range(cycles):
        await cycle()
    took = time.perf_counter() - started
    await floor_client.aclose()
    return took / cycles * 1e6


def _worker() -> None:
    url, case, cycles = sys.argv[2], sys.argv[3], int(sys.argv[4])
    print(json.dumps(asyncio.run(_measure(url, case, cycles))))


def _round(python_path: str, url: str, case: str, cycles: int) -> float:
    env = dict(os.environ, PYTHONPATH=python_path)
    out = subprocess.run(
        [sys.executable, __file__, "--worker", url, case, str(cycles)],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    return float(out.stdout.strip().splitlines()[-1])


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        _worker()
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--cycles", type=int, default=1000)
    parser.add_argument("--server", default="6.2")
    parser.add_argument("--before", help="also measure our package at this git revision")
    args = parser.parse_args()

    sys.path.insert(0, str(ROOT))
    from django_redis_pool.testing import EmbeddedRedis

    versions = {"now": str(ROOT)}
    with (
        tempfile.TemporaryDirectory() as tmp,
        EmbeddedRedis(
            executable={"6.2": None, "7": "/usr/bin/redis-server"}.get(args.server, args.server)
        ) as server,
    ):
        if args.before:
            before = str(Path(tmp) / "before")
            subprocess.run(
                ["git", "-C", str(ROOT), "worktree", "add", "-q", "--detach", before, args.before],
                check=True,
            )
            versions[f"before ({args.before})"] = before
        try:
            results: dict[tuple[str, str], list[float]] = {}
            for _ in range(args.rounds):
                for label, path in versions.items():
                    for case in CASES:
                        if case == "floor" and label != "now":
                            continue
                        us = _round(path, server.url, case, args.cycles)
                        results.setdefault((label, case), []).append(us)
        finally:
            if args.before:
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", before])
        floor = statistics.median(results[("now", "floor")])
        print(f"redis-server {args.server}; {args.rounds} rounds of {args.cycles} cycles\n")
        print("| case | µs per cycle (median) | over the floor |")
        print("|---|---:|---:|")
        for (label, case), values in results.items():
            median = statistics.median(values)
            over = "" if case == "floor" else f"{median - floor:.1f}"
            print(f"| {label}: {case} | {median:.1f} | {over} |")


if __name__ == "__main__":
    main()
