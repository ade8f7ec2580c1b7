"""The asyncio path's own cost per call: ours next to the same cycle on the blocking path.

    python -m benchmarks async [--quick] [--rounds 9] [--cycles 1000]
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
with today's; medians are reported.

``--calls`` counts instead of timing: the Python calls per cycle of our
package's functions and of what they call directly (cProfile), so neither the
machine nor how many event-loop turns a reply takes moves it (the floor's is 0).

``--instructions`` counts instead of timing: each worker runs under
valgrind's callgrind, twice (``--cycles`` and twice as many), and the
difference of its instructions, per cycle, is the case's cost on the client
(the server runs natively, outside the count). The same on any machine for the
same interpreter and packages, so one round is enough: where a timing on a
shared VM cannot tell a few µs apart, this can. Needs valgrind
(``apt-get install valgrind``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import json
import os
import pstats
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from typing import Any

from benchmarks import servers
from benchmarks.results import ROOT, choose, heading, say
from benchmarks.workers import Revision, worker_command, worker_env

NAME = "async"
HELP = "what the asyncio path adds to an acquire + release"

CASES = ["floor", "pool", "semaphore", "lock"]


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


def worker(url: str, case: str, mode: str, cycles: str) -> None:
    """``--worker async URL CASE MODE CYCLES``: one round, its figure on stdout."""
    if os.environ.get("BENCH_ASYNC_COUNTING"):
        # Under callgrind a run lasts ~50x longer, and the metrics' flush every
        # 2 s (one Redis call per 10,000 cycles at full speed) would add a share
        # that grows with the run's duration: here they stay in memory.
        with contextlib.suppress(ImportError):
            from django_redis_pool.primitives import counts

            counts.background = False
    if mode == "sync":
        print(json.dumps(_measure_sync(url, case, int(cycles))))
    else:
        print(json.dumps(asyncio.run(_measure(url, case, int(cycles)))))


def _round(env: dict[str, str], url: str, case: str, mode: str, cycles: int) -> float:
    out = subprocess.run(
        worker_command("async", url, case, mode, cycles),
        env=env,
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    )
    return float(out.stdout.strip().splitlines()[-1])


def _instructions(env: dict[str, str], url: str, case: str, mode: str, cycles: int) -> float:
    """Client instructions per cycle of ``case`` (``--instructions``)."""
    env = dict(env, BENCH_ASYNC_COUNTING="1")
    totals = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in (cycles, 2 * cycles):
            out = f"{tmp}/callgrind.{n}"
            command = worker_command("async", url, case, mode, n)
            subprocess.run(
                ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *command],
                env=env,
                cwd=ROOT,
                check=True,
                capture_output=True,
            )
            with open(out) as lines:
                totals.append(next(int(x.split()[1]) for x in lines if x.startswith("summary:")))
    return (totals[1] - totals[0]) / cycles


def add_arguments(parser: argparse.ArgumentParser) -> None:
    servers.add_option(parser, multiple=False)
    parser.add_argument("--rounds", type=int, help="default 9 (--quick: 1)")
    parser.add_argument("--cycles", type=int, help="per round (default 1000; --quick: 200)")
    parser.add_argument(
        "--before", metavar="REF", help="also measure our package at this git revision"
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument(
        "--instructions", action="store_true", help="count client instructions (valgrind)"
    )
    mode.add_argument(
        "--calls", action="store_true", help="count the Python calls of our code (cProfile)"
    )


def run(args: argparse.Namespace) -> dict[str, Any] | None:
    s = choose(args, {"rounds": 9, "cycles": 1000}, {"rounds": 1, "cycles": 200})
    if args.instructions and shutil.which("valgrind") is None:
        say("--instructions needs valgrind (apt-get install valgrind): nothing measured")
        return None
    measure = _instructions if args.instructions else _round
    unit = "instructions" if args.instructions else "calls by ours" if args.calls else "µs"
    extra = {"BENCH_ASYNC_CALLS": "1"} if args.calls else {}
    revision = Revision(args.before) if args.before else None
    versions = {"now": worker_env(**extra)}
    if revision is not None:
        versions[f"before ({args.before})"] = revision.env(**extra)
    results: dict[str, dict[str, dict[str, list[float]]]] = {}
    try:
        with servers.redis_server(args.server) as server:
            for round_ in range(s["rounds"]):
                say(f"round {round_ + 1} of {s['rounds']}")
                for label, env in versions.items():
                    for case in CASES:
                        if case == "floor" and label != "now":
                            continue
                        for mode in ("sync", "async"):
                            figure = measure(env, server.url, case, mode, s["cycles"])
                            by_case = results.setdefault(label, {}).setdefault(case, {})
                            by_case.setdefault(mode, []).append(figure)
    finally:
        if revision is not None:
            revision.remove()
    return {
        "settings": {
            **s,
            "server": args.server,
            "before": args.before,
            "measure": "instructions" if args.instructions else "calls" if args.calls else "time",
        },
        # version ("now", "before (REF)") -> case -> {"sync": [...], "async": [...]}: per
        # round, µs per cycle, or client instructions or Python calls of ours per cycle
        "results": {"unit": unit, "versions": results},
    }


def render(doc: dict[str, Any]) -> str:
    s, res = doc["settings"], doc["results"]
    unit, versions = res["unit"], res["versions"]
    median = {
        (label, case, mode): statistics.median(values)
        for label, by_case in versions.items()
        for case, by_mode in by_case.items()
        for mode, values in by_mode.items()
    }
    asyncio_cost = median[("now", "floor", "async")] - median[("now", "floor", "sync")]
    lines = [
        heading(doc),
        "",
        f"redis-server {s['server']}; {s['rounds']} rounds of {s['cycles']} cycles",
        "",
        f"| case | blocking {unit}/cycle | awaited {unit}/cycle | awaited - blocking "
        "| ours per call, beyond asyncio's |",
        "|---|---:|---:|---:|---:|",
    ]
    fmt = "{:,.0f}" if s["measure"] == "instructions" else "{:.1f}"
    for label in versions:
        for case in CASES:
            if (label, case, "sync") not in median:
                continue
            sync, awaited = median[(label, case, "sync")], median[(label, case, "async")]
            own = "" if case == "floor" else fmt.format((awaited - sync - asyncio_cost) / 2)
            cells = " | ".join(fmt.format(x) for x in (sync, awaited, awaited - sync))
            lines.append(f"| {label}: {case} | {cells} | {own} |")
    return "\n".join(lines)
