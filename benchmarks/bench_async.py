"""The asyncio path's own cost per call: ours next to the same cycle on the blocking path.

    .venv/bin/python benchmarks/bench_async.py [--rounds 9] [--cycles 1000]
        [--server 6.2|7|PATH] [--before REF] [--instructions | --calls]

One client, one cycle at a time: the floor is two EVAL of ``return 1`` (a
``Script``) per cycle; ours is acquire + release of a ResourcePool, a
Semaphore and a Lock (``with lock`` / ``async with lock``). Each case runs
blocking (``redis.Redis``) and awaited (``redis.asyncio``; ours on the blocking
client's asyncio twin, as Django builds them). What the asyncio path of ours
adds to a call, beyond what asyncio adds to any call, is
``(ours awaited - ours blocking) - (floor awaited - floor blocking)``, halved
(two calls a cycle): Redis's own time (our scripts' Lua) cancels out. Each
round of each case runs in a fresh worker process, so that ``--before REF``
(our package at another git revision) runs in the same rounds, interleaved
with today's; medians are reported. Starts its own embedded redis-server.

``--calls`` counts instead of timing: the Python calls per cycle of our
package's functions and of what they call directly (cProfile), so neither the
machine nor how many event-loop turns a reply takes moves it (the floor's is 0).

``--instructions`` counts instead of timing: each worker runs under
valgrind's callgrind, twice (``--cycles`` and twice as many), and the
difference of its instructions, per cycle, is the case's cost on the client
(the server runs natively, outside the count). The same on any machine for the
same interpreter and packages, so one round is enough: where a timing on a
shared VM cannot tell a few µs apart, this can.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import json
import os
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

CASES = ["floor", "pool", "semaphore", "lock"]
ROOT = Path(__file__).resolve().parent.parent


def _sync_cycle(client: Any, case: str) -> Callable[[], Any]:
    """One blocking cycle of ``case``."""
    from django_redis_pool import Lock, ResourcePool, Semaphore

    if case == "floor":
        script = client.register_script("return 1")
        return lambda: (script(), script())
    if case == "pool":
        pool = ResourcePool(client, "bench", lease_timeout=30)
        pool.associate_many(f"r{n}" for n in range(10))
        return lambda: pool.acquire(timeout=0).release()
    if case == "semaphore":
        sem = Semaphore(client, "bench", lease_timeout=30, default_max_size=10)
        return lambda: (sem.acquire("me", timeout=0), sem.release("me"))
    lock = Lock(client, "bench", lease_timeout=30)

    def lock_cycle() -> None:
        with lock:
            pass

    return lock_cycle


def _measure_sync(url: str, case: str, cycles: int) -> float:
    """µs per blocking cycle of ``case`` (run in a worker process)."""
    import redis

    client = redis.Redis.from_url(url)
    client.flushall()
    cycle = _sync_cycle(client, case)
    for _ in range(200):
        cycle()
    profile = _profile()
    started = time.perf_counter()
    for _ in range(cycles):
        cycle()
    took = time.perf_counter() - started
    return took / cycles * 1e6 if profile is None else _calls_by_ours(profile, cycles)


async def _measure(url: str, case: str, cycles: int) -> float:
    """µs per awaited cycle of ``case`` (run in a worker process)."""
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
    profile = _profile()
    started = time.perf_counter()
    for _ in range(cycles):
        await cycle()
    took = time.perf_counter() - started
    await floor_client.aclose()
    return took / cycles * 1e6 if profile is None else _calls_by_ours(profile, cycles)


def _profile() -> cProfile.Profile | None:
    """With ``--calls``: a profile, running (else None)."""
    if not os.environ.get("BENCH_ASYNC_CALLS"):
        return None
    profile = cProfile.Profile()
    profile.enable()
    return profile


def _calls_by_ours(profile: cProfile.Profile, cycles: int) -> float:
    """``--calls``: Python calls per cycle of our package's functions and of
    what they call directly (redis-py's methods, builtins): what the event
    loop and redis-py's reads do meanwhile (how many turns a reply takes
    moves with the machine) is not counted."""
    profile.disable()
    total = 0
    for (path, _, _), (_, calls, _, _, callers) in pstats.Stats(profile).stats.items():
        if _OURS in path:
            total += calls
        else:
            total += sum(by[0] for (caller, _, _), by in callers.items() if _OURS in caller)
    return total / cycles


_OURS = f"{os.sep}django_redis_pool{os.sep}"


def _worker() -> None:
    url, case, mode, cycles = sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
    if os.environ.get("BENCH_ASYNC_COUNTING"):
        # Under callgrind a run lasts ~50x longer, and the metrics' flush every
        # 2 s (one Redis call per 10,000 cycles at full speed) would add a share
        # that grows with the run's duration: here they stay in memory.
        with contextlib.suppress(ImportError):
            from django_redis_pool.primitives import counts

            counts.background = False
    if mode == "sync":
        print(json.dumps(_measure_sync(url, case, cycles)))
    else:
        print(json.dumps(asyncio.run(_measure(url, case, cycles))))


def _round(python_path: str, url: str, case: str, mode: str, cycles: int) -> float:
    env = dict(os.environ, PYTHONPATH=python_path)
    out = subprocess.run(
        [sys.executable, __file__, "--worker", url, case, mode, str(cycles)],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    return float(out.stdout.strip().splitlines()[-1])


def _instructions(python_path: str, url: str, case: str, mode: str, cycles: int) -> float:
    """Client instructions per cycle of ``case`` (``--instructions``)."""
    env = dict(os.environ, PYTHONPATH=python_path, BENCH_ASYNC_COUNTING="1")
    totals = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in (cycles, 2 * cycles):
            out = f"{tmp}/callgrind.{n}"
            command = [sys.executable, __file__, "--worker", url, case, mode, str(n)]
            subprocess.run(
                ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *command],
                env=env,
                check=True,
                capture_output=True,
            )
            with open(out) as lines:
                totals.append(next(int(x.split()[1]) for x in lines if x.startswith("summary:")))
    return (totals[1] - totals[0]) / cycles


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        _worker()
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--cycles", type=int, default=1000)
    parser.add_argument("--server", default="6.2")
    parser.add_argument("--before", help="also measure our package at this git revision")
    parser.add_argument(
        "--instructions", action="store_true", help="count client instructions (valgrind)"
    )
    parser.add_argument(
        "--calls", action="store_true", help="count the Python calls of our code (cProfile)"
    )
    args = parser.parse_args()
    measure = _instructions if args.instructions else _round
    unit = "instructions" if args.instructions else "calls by ours" if args.calls else "µs"
    if args.calls:
        os.environ["BENCH_ASYNC_CALLS"] = "1"  # (the workers inherit it)

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
            results: dict[tuple[str, str, str], list[float]] = {}
            for _ in range(args.rounds):
                for label, path in versions.items():
                    for case in CASES:
                        if case == "floor" and label != "now":
                            continue
                        for mode in ("sync", "async"):
                            us = measure(path, server.url, case, mode, args.cycles)
                            results.setdefault((label, case, mode), []).append(us)
        finally:
            if args.before:
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", before])
        median = {key: statistics.median(values) for key, values in results.items()}
        asyncio_cost = median[("now", "floor", "async")] - median[("now", "floor", "sync")]
        print(f"redis-server {args.server}; {args.rounds} rounds of {args.cycles} cycles\n")
        print(
            f"| case | blocking {unit}/cycle | awaited {unit}/cycle | awaited - blocking "
            "| ours per call, beyond asyncio's |"
        )
        print("|---|---:|---:|---:|---:|")
        for label in versions:
            for case in CASES:
                if (label, case, "sync") not in median:
                    continue
                sync, awaited = median[(label, case, "sync")], median[(label, case, "async")]
                fmt = "{:,.0f}" if args.instructions else "{:.1f}"
                own = "" if case == "floor" else fmt.format((awaited - sync - asyncio_cost) / 2)
                cells = " | ".join(fmt.format(x) for x in (sync, awaited, awaited - sync))
                cells += f" | {own}"
                print(f"| {label}: {case} | {cells} |")


if __name__ == "__main__":
    main()
