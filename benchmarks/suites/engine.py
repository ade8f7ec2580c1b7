"""The lease engine's primitives next to their peers, the WATCH/MULTI designs and the floor.

    python -m benchmarks engine [--quick] [--servers 6.2,7] [--before REF] [--rounds 5] ...

Starts its own redis-server for each of ``--servers``, one at a time, and on
each, in this order:

1. one client, acquire + release: cycles/s, Lua µs, server µs and Redis CPU µs
   per cycle for ours (ResourcePool, Semaphore, Lock, Allocator),
   redis-allocator, redis-py's Lock, python-redis-lock, the WATCH/MULTI pool,
   the WATCH/MULTI semaphore and the floor (two EVALSHA of ``return 1``);
2. aggregate cycles/s of 2, 4 and 8 processes, one client each, started
   together by a barrier and run for a fixed time;
3. hand-off latency from ``release()`` to the blocked waiter (in another
   process) holding it, the waiter checked to be blocked in BLPOP first;
4. ResourcePool from 100 to 1,000,000 resources: cycles/s, Lua µs per cycle,
   memory per idle resource;
5. contention: 8 threads on one pool of 4 resources, with a check that no
   resource is ever held twice at once.

Cases within a section are interleaved round by round (A, B, C, ..., then
again); the tables give the median and the min-max over rounds. ``--before
REF`` also measures our primitives (section 1) at git revision REF, from a
worktree, in the same rounds. ``--quick`` shrinks everything (about 20 s for
both servers on a 2-core VM); the full run takes about 8 minutes. ``python -m
benchmarks report --write-docs`` writes the tables and plots into
docs/performance.md and docs/img/.

Needs the ``bench`` extra (redis-allocator 0.7.0, python-redis-lock); a case
whose package is missing is skipped.
"""

from __future__ import annotations

import argparse
import os
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import redis

from benchmarks import cases, servers
from benchmarks.results import (
    ROOT,
    ints,
    say,
)
from benchmarks.suites.engine_tables import DOCS_PARTS, docs, render
from benchmarks.workers import STEP_LIMIT, CaseWorker, Gang, Revision
from django_redis_pool import ResourcePool

__all__ = ["DOCS_PARTS", "HELP", "NAME", "add_arguments", "docs", "render", "run"]

NAME = "engine"
HELP = "acquire + release: ours vs the peers, WATCH/MULTI and the floor"

#: Section 2's cases, in the tables' order.
AGGREGATE_CASES = ("floor", "pool", "semaphore", "lock", "our-allocator", "allocator")


@dataclass
class Settings:
    rounds: int  # single-client and scaling rounds; hand-offs are split over as many
    cycles: int  # single-client cycles per round
    agg_rounds: int
    duration: float  # seconds per aggregate run
    processes: list[int]
    handoffs: int  # per case, all rounds together
    sizes: list[int]  # scaling
    contention_rounds: int
    contention_duration: float
    threads: int = 8
    contention_resources: int = 4

    @classmethod
    def preset(cls, quick: bool) -> Settings:
        if quick:
            return cls(2, 150, 1, 0.3, [2, 4, 8], 40, [100, 10_000], 1, 1.0)
        return cls(5, 2000, 3, 3.0, [2, 4, 8], 1000, [100, 10_000, 100_000, 1_000_000], 3, 5.0)


#: The options that change a preset: option -> (type, help); each is a field of Settings.
OPTIONS: dict[str, tuple[Callable[[str], Any], str]] = {
    "rounds": (int, "one-client and scaling rounds; hand-off ping-pongs (default 5; --quick: 2)"),
    "cycles": (int, "one-client cycles per round (default 2000; --quick: 150)"),
    "agg_rounds": (int, "aggregate rounds (default 3; --quick: 1)"),
    "duration": (float, "seconds per aggregate run (default 3; --quick: 0.3)"),
    "processes": (ints, "aggregate process counts (default 2,4,8)"),
    "handoffs": (int, "hand-offs per case, all rounds (default 1000; --quick: 40)"),
    "sizes": (ints, "scaling pool sizes (default 100,10000,100000,1000000; --quick: 100,10000)"),
    "contention_rounds": (int, "contention rounds (default 3; --quick: 1)"),
    "contention_duration": (float, "seconds per contention round (default 5; --quick: 1)"),
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    servers.add_option(parser, multiple=True, default="6.2,7")
    parser.add_argument(
        "--before",
        metavar="REF",
        help="also measure our primitives (one client) at git revision REF, side by side",
    )
    for name, (kind, text) in OPTIONS.items():
        parser.add_argument(f"--{name.replace('_', '-')}", type=kind, help=text)


# -- measuring ------------------------------------------------------------------------


def new_run(server: servers.Server) -> dict[str, Any]:
    """Everything measured on one server (keys of numbers are strings: JSON's)."""
    shown = server.binary or server.url
    if shown.startswith(f"{ROOT}{os.sep}"):
        shown = os.path.relpath(shown, ROOT)
    return {
        "label": server.label,
        "version": server.version,
        "binary": shown,
        "hz": server.hz,
        "path": "?",  # how our Lua ran: FCALL or EVALSHA
        "single": {},  # case -> [round: {rate, lua, server, cpu, sent}]
        "aggregate": {},  # case -> {processes: [[cycles/s, Redis CPU %], ...]}
        "handoff": {},  # case -> [ms, ...]
        "scaling": {},  # resources -> [round]
        "scaling_memory": {},  # resources -> [bytes per idle resource, keys]
        "scaling_fill": {},  # resources -> seconds
        "scaling_keys_after": {},  # resources -> the pool's keys after the rounds
        "contention": [],  # one dict per round
        "errors": {},  # "section: case" -> traceback
        "seconds": {},  # section -> wall seconds
    }


def attempt(run: dict[str, Any], where: str, job: Callable[[], Any]) -> bool:
    """Run ``job``; on an error, note it under ``where`` and say False."""
    try:
        job()
    except Exception:
        run["errors"][where] = traceback.format_exc()
        say(f"  ! {where} failed: {run['errors'][where].strip().splitlines()[-1]}")
        return False
    return True


def single_section(
    srv: servers.Server,
    run: dict[str, Any],
    s: Settings,
    order: list[str],
    before: CaseWorker | None,
) -> None:
    client, dclient = srv.client(), srv.client(decode_responses=True)
    failed: set[str] = set()
    for _ in range(s.rounds):
        for case in order:
            if case in failed:
                continue

            def job(case: str = case) -> None:
                if case.startswith("before:"):
                    assert before is not None
                    bare = case.removeprefix("before:")
                    before.setup(srv.url, bare, "single", "main", cases.WARMUP)
                    run["single"].setdefault(case, []).append(before.measure(s.cycles))
                    return
                client.flushall()
                cases.setup(case, client, dclient, "single")
                cycle = cases.cycle(case, client, dclient, "single", "main")
                for _ in range(cases.WARMUP):
                    cycle()
                row, stats = cases.measure(case, client, cycle, s.cycles)
                run["single"].setdefault(case, []).append(row)
                if case == "pool":
                    run["path"] = "FCALL (function library)" if "fcall" in stats else "EVALSHA"

            if not attempt(run, f"1. one client: {case}", job):
                failed.add(case)
                run["single"].pop(case, None)


def aggregate_section(
    srv: servers.Server, run: dict[str, Any], s: Settings, gang: Gang, order: list[str]
) -> None:
    client, dclient = srv.client(), srv.client(decode_responses=True)
    failed: set[tuple[str, int]] = set()
    for _ in range(s.agg_rounds):
        for n in s.processes:
            for case in order:
                if (case, n) in failed:
                    continue

                def job(case: str = case, n: int = n) -> None:
                    client.flushall()
                    cases.setup(case, client, dclient, "agg")
                    per_worker, before, after = gang.throughput(
                        case, "agg", n, s.duration, lambda: cases.redis_cpu(client)
                    )
                    rate = sum(count / seconds for count, seconds in per_worker)
                    busy = (after - before) / s.duration * 100
                    by_n = run["aggregate"].setdefault(case, {})
                    by_n.setdefault(str(n), []).append([rate, busy])

                if not attempt(run, f"2. aggregate: {case} x {n}", job):
                    failed.add((case, n))
                    run["aggregate"].get(case, {}).pop(str(n), None)


def handoff_section(
    srv: servers.Server, run: dict[str, Any], s: Settings, gang: Gang, order: list[str]
) -> None:
    client = srv.client()
    failed: set[str] = set()
    for r in range(s.rounds):
        n = s.handoffs // s.rounds + (1 if r < s.handoffs % s.rounds else 0)
        for case in order:
            if case in failed or not n:
                continue

            def job(case: str = case, r: int = r, n: int = n) -> None:
                client.flushall()
                name = f"handoff-{case}-{r}"
                cases.setup_handoff(case, client, name)
                latencies = [round(ms, 4) for ms in gang.handoffs(case, name, n)]
                run["handoff"].setdefault(case, []).extend(latencies)

            if not attempt(run, f"3. hand-off: {case}", job):
                failed.add(case)
                run["handoff"].pop(case, None)


def pool_memory(client: redis.Redis, name: str) -> tuple[int, int]:
    """(bytes, keys) of every key of pool ``name``: SCAN on its hash-tagged prefix,
    ``MEMORY USAGE ... SAMPLES 0`` (exact) of each."""
    total, keys = 0, 0
    for key in client.scan_iter(match=f"drp:{{pool:{name}}}*", count=1000):
        total += int(client.memory_usage(key, samples=0) or 0)
        keys += 1
    return total, keys


def scaling_section(srv: servers.Server, run: dict[str, Any], s: Settings) -> None:
    client, dclient = srv.client(), srv.client(decode_responses=True)
    client.flushall()
    sizes: list[int] = []
    for n in s.sizes:

        def fill(n: int = n) -> None:
            name = f"scale-{n}"
            started = time.perf_counter()
            cases.fill_pool(ResourcePool(client, name, lease_timeout=cases.LEASE), n)
            run["scaling_fill"][str(n)] = time.perf_counter() - started
            total, keys = pool_memory(client, name)
            if not keys:
                raise RuntimeError(f"no key found for pool {name!r}")
            run["scaling_memory"][str(n)] = [total / n, keys]

        if attempt(run, f"4. scaling: fill {n:,}", fill):
            sizes.append(n)
    failed: set[int] = set()
    for _ in range(s.rounds):
        for n in sizes:
            if n in failed:
                continue

            def job(n: int = n) -> None:
                cycle = cases.cycle("pool", client, dclient, f"scale-{n}", "main")
                for _ in range(cases.WARMUP):
                    cycle()
                row, _ = cases.measure("pool", client, cycle, s.cycles)
                run["scaling"].setdefault(str(n), []).append(row)

            if not attempt(run, f"4. scaling: {n:,}", job):
                failed.add(n)
                run["scaling"].pop(str(n), None)
    for n in sizes:  # released leases leave keys behind (e.g. done markers with a TTL)
        pattern = f"drp:{{pool:scale-{n}}}*"
        count = sum(1 for _ in client.scan_iter(match=pattern, count=1000))
        run["scaling_keys_after"][str(n)] = count


def contention_round(srv: servers.Server, s: Settings) -> dict[str, Any]:
    """``s.threads`` threads share one ResourcePool (and one client) of
    ``s.contention_resources`` resources: acquire(timeout=None) + release in a
    loop for ``s.contention_duration`` s. A shared dict, under a lock, says who
    holds what, from the grant until just before the release, with a yield to
    the other threads in between: a resource found already held is a violation."""
    client = srv.client()
    client.flushall()
    pool = ResourcePool(client, "contention", lease_timeout=cases.LEASE)
    cases.fill_pool(pool, s.contention_resources)
    held: dict[str, int] = {}
    mutex = threading.Lock()
    counts = [0] * s.threads
    tally = {"violations": 0, "max_held": 0, "lost": 0, "none": 0}
    errors: list[str] = []
    start = threading.Barrier(s.threads + 1)

    def worker(i: int) -> None:
        try:
            start.wait(timeout=STEP_LIMIT)
            deadline = time.perf_counter() + s.contention_duration
            while time.perf_counter() < deadline:
                lease = pool.acquire(timeout=None)
                if lease is None:
                    with mutex:
                        tally["none"] += 1
                    continue
                with mutex:
                    if lease.resource in held:
                        tally["violations"] += 1
                    held[lease.resource] = i
                    tally["max_held"] = max(tally["max_held"], len(held))
                time.sleep(0)  # hold it while the other threads run
                with mutex:
                    if held.get(lease.resource) == i:
                        del held[lease.resource]
                if not lease.release():
                    with mutex:
                        tally["lost"] += 1
                counts[i] += 1
        except BaseException:
            errors.append(traceback.format_exc())

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(s.threads)]
    for t in threads:
        t.start()
    start.wait(timeout=STEP_LIMIT)
    started = time.perf_counter()
    for t in threads:
        t.join(timeout=s.contention_duration + STEP_LIMIT)
    elapsed = time.perf_counter() - started
    stuck = sum(t.is_alive() for t in threads)
    if errors or stuck or tally["none"]:
        raise RuntimeError(
            f"{stuck} thread(s) stuck, {tally['none']} acquire(timeout=None) returned None; "
            + "\n".join(errors)
        )
    return {
        "threads": s.threads,
        "resources": s.contention_resources,
        "cycles": sum(counts),
        "rate": sum(counts) / elapsed,
        **tally,
    }


def contention_section(srv: servers.Server, run: dict[str, Any], s: Settings) -> None:
    for _ in range(s.contention_rounds):
        if not attempt(
            run, "5. contention", lambda: run["contention"].append(contention_round(srv, s))
        ):
            return


def bench_server(
    srv: servers.Server,
    s: Settings,
    order: list[str],
    revision: Revision | None,
) -> dict[str, Any]:
    run = new_run(srv)
    say(f"\n## {srv.describe()}\n")
    aggregate = [c for c in AGGREGATE_CASES if c in order]
    handoff = [c for c in cases.HANDOFF_CASES if c in order]
    gang = Gang(srv.url, max(s.processes), s.processes)
    before: CaseWorker | None = None
    try:
        before = revision.cases() if revision is not None else None
        gang.ready()
        sections: list[tuple[str, Callable[[], None]]] = [
            ("1. one client", lambda: single_section(srv, run, s, order, before)),
            ("2. aggregate", lambda: aggregate_section(srv, run, s, gang, aggregate)),
            ("3. hand-off", lambda: handoff_section(srv, run, s, gang, handoff)),
            ("4. scaling", lambda: scaling_section(srv, run, s)),
            ("5. contention", lambda: contention_section(srv, run, s)),
        ]
        for name, section in sections:
            started = time.perf_counter()
            section()
            run["seconds"][name] = time.perf_counter() - started
            say(f"  {name}: {run['seconds'][name]:.1f} s")
    finally:
        gang.stop()
        if before is not None:
            before.stop()
        srv.client().flushall()
    return run


def run(args: argparse.Namespace) -> dict[str, Any] | None:
    s = Settings.preset(args.quick)
    for name in OPTIONS:
        if getattr(args, name, None) is not None:
            setattr(s, name, getattr(args, name))
    labels = dict(cases.CASES)
    if args.before:
        for case in cases.BEFORE_CASES:
            label = cases.CASES[case].removeprefix("ours: ")
            labels[f"before:{case}"] = f"before ({args.before}): {label}"
    skip = [{"case": case, "reason": why} for case in labels if (why := cases.missing(case))]
    for item in skip:
        say(f"(skipped {item['case']}: {item['reason']})")
    labels = {case: label for case, label in labels.items() if not cases.missing(case)}
    order = list(labels)
    revision = Revision(args.before) if args.before else None
    runs: list[dict[str, Any]] = []
    try:
        for srv in servers.each(args.servers):
            runs.append(bench_server(srv, s, order, revision))
    finally:
        if revision is not None:
            revision.remove()
    if not runs:
        say("no server could be started")
        return None
    return {
        "settings": {**asdict(s), "servers": args.servers, "before": args.before},
        "results": {
            "cases": labels,
            "aggregate_cases": {c: labels[c] for c in AGGREGATE_CASES if c in labels},
            "handoff_cases": {c: v for c, v in cases.HANDOFF_CASES.items() if c in labels},
            "warmup": cases.WARMUP,
            "runs": runs,
        },
        "skipped": skip,
    }
