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
    heading,
    ints,
    lua_paths,
    median,
    num,
    pct,
    plural,
    ratio,
    say,
    skipped,
    span,
    spread,
    table,
)
from benchmarks.workers import STEP_LIMIT, CaseWorker, Gang, Revision
from django_redis_pool import ResourcePool

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


# -- tables ----------------------------------------------------------------------------


def single_table(run: dict[str, Any], labels: dict[str, str]) -> str:
    base = median(r["rate"] for r in run["single"].get("allocator", []))
    rows = []
    for case, label in labels.items():
        rounds = run["single"].get(case)
        if not rounds:
            rows.append([label, "failed", "", "", "", "", "", ""])
            continue
        rate = median(r["rate"] for r in rounds)
        lua = median(r["lua"] for r in rounds)
        rows.append(
            [
                label,
                num(rate),
                spread([r["rate"] for r in rounds]),
                ratio(rate, base),
                num(lua, 1) if lua else "-",
                num(median(r["server"] for r in rounds), 1),
                num(median(r["cpu"] for r in rounds), 1),
                num(median(r["sent"] for r in rounds), 0),
            ]
        )
    header = [
        "case",
        "cycles/s (median)",
        "rounds min-max",
        "vs redis-allocator",
        "Lua µs/cycle",
        "server µs/cycle",
        "Redis CPU µs/cycle",
        "commands/cycle",
    ]
    return table(header, rows)


def aggregate_table(run: dict[str, Any], counts: list[int], labels: dict[str, str]) -> str:
    rows = []
    for n in counts:
        base = median(r for r, _ in run["aggregate"].get("allocator", {}).get(str(n), []))
        for case, label in labels.items():
            rounds = run["aggregate"].get(case, {}).get(str(n))
            if not rounds:
                rows.append([str(n), label, "failed", "", "", ""])
                continue
            rate = median(r for r, _ in rounds)
            rows.append(
                [
                    str(n),
                    label,
                    num(rate),
                    spread([r for r, _ in rounds]),
                    ratio(rate, base),
                    num(median(c for _, c in rounds), 0),
                ]
            )
    header = [
        "processes",
        "case",
        "cycles/s, all processes (median)",
        "rounds min-max",
        "vs redis-allocator",
        "Redis CPU %",
    ]
    return table(header, rows, right_from=2)


def handoff_table(run: dict[str, Any], labels: dict[str, str]) -> str:
    rows = []
    for case, label in labels.items():
        lat = run["handoff"].get(case)
        if not lat:
            rows.append([label, "failed", "", "", "", ""])
            continue
        rows.append(
            [
                label,
                num(len(lat)),
                num(pct(lat, 50), 2),
                num(pct(lat, 99), 2),
                num(pct(lat, 99.9), 2),
                num(max(lat), 2),
            ]
        )
    return table(["case", "hand-offs", "p50 ms", "p99 ms", "p999 ms", "max ms"], rows)


def scaling_table(run: dict[str, Any]) -> str:
    rows = []
    for n in sorted({*run["scaling"], *run["scaling_memory"]}, key=int):
        rounds = run["scaling"].get(n, [])
        memory, keys = run["scaling_memory"].get(n, [float("nan"), 0])
        rows.append(
            [
                num(int(n)),
                num(run["scaling_fill"].get(n), 2),
                num(median(r["rate"] for r in rounds)) if rounds else "failed",
                spread([r["rate"] for r in rounds]),
                num(median(r["lua"] for r in rounds), 1),
                num(median(r["cpu"] for r in rounds), 1),
                num(memory, 1),
                str(keys),
                num(run["scaling_keys_after"].get(n)),
            ]
        )
    header = [
        "resources",
        "fill s",
        "cycles/s (median)",
        "rounds min-max",
        "Lua µs/cycle",
        "Redis CPU µs/cycle",
        "bytes per idle resource",
        "keys (idle)",
        "keys after the rounds",
    ]
    return table(header, rows)


def contention_table(run: dict[str, Any]) -> str:
    rounds = run["contention"]
    if not rounds:
        return "failed"
    rates = [c["rate"] for c in rounds]
    uncontended = median(r["rate"] for r in run["single"].get("pool", []))
    rows = [
        [
            str(rounds[0]["threads"]),
            str(rounds[0]["resources"]),
            num(median(rates)),
            spread(rates),
            ratio(median(rates), uncontended),
            num(sum(c["cycles"] for c in rounds)),
            str(sum(c["violations"] for c in rounds)),
            str(max(c["max_held"] for c in rounds)),
            str(sum(c["lost"] for c in rounds)),
        ]
    ]
    header = [
        "threads",
        "resources",
        "cycles/s, all threads (median)",
        "rounds min-max",
        "vs one uncontended client",
        "cycles checked",
        "violations",
        "most held at once",
        "releases that returned False",
    ]
    return table(header, rows)


def server_heading(run: dict[str, Any]) -> str:
    return f"Redis {run['version']} ({run['binary']}, hz {run['hz']}); our Lua ran as {run['path']}"


def server_report(doc: dict[str, Any], run: dict[str, Any], level: str = "###") -> str:
    res, counts = doc["results"], doc["settings"]["processes"]
    parts = [
        f"{level} 1. One client: acquire + release\n\n{single_table(run, res['cases'])}",
        f"{level} 2. Aggregate throughput, one client per process\n\n"
        f"{aggregate_table(run, counts, res['aggregate_cases'])}",
        f"{level} 3. Hand-off latency: release → the blocked waiter holds it\n\n"
        f"{handoff_table(run, res['handoff_cases'])}",
        f"{level} 4. ResourcePool scaling\n\n{scaling_table(run)}",
        f"{level} 5. Contention: threads on one small pool\n\n{contention_table(run)}",
    ]
    if run["errors"]:
        lines = "\n".join(
            f"* **{where}**: `{err.strip().splitlines()[-1]}`"
            for where, err in run["errors"].items()
        )
        parts.append(f"{level} Failures\n\n{lines}")
    return "\n\n".join(parts)


def render(doc: dict[str, Any]) -> str:
    parts = [heading(doc)]
    for run in doc["results"]["runs"]:
        parts.append(f"### {server_heading(run)}")
        parts.append(server_report(doc, run, level="####"))
    if doc.get("skipped"):
        parts.append(skipped(doc))
    return "\n\n".join(parts)


# -- docs/performance.md ------------------------------------------------------------------

#: The parts of docs/performance.md generated from these results (``docs``).
DOCS_PARTS = ("one-client", "processes", "handoff")


def docs_order(labels: dict[str, str]) -> list[str]:
    """The cases as the docs page lists them: ours, the peers, WATCH/MULTI, the floor."""

    def group(case: str) -> int:
        if labels[case].startswith("ours"):
            return 0
        return 3 if case == "floor" else 2 if case.startswith("watch") else 1

    return sorted(labels, key=group)


def docs(found: list[dict[str, Any]], part: str) -> str:
    """One generated part of docs/performance.md (``DOCS_PARTS``)."""
    doc = found[0]
    s, res = doc["settings"], doc["results"]
    runs = res["runs"]
    if part == "one-client":
        return _docs_one_client(doc, s, res, runs)
    if part == "processes":
        return _docs_processes(s, res, runs)
    if part == "handoff":
        return _docs_handoff(s, res, runs)
    raise ValueError(f"engine has no docs part {part!r}")


def _docs_one_client(
    doc: dict[str, Any], s: dict[str, Any], res: dict[str, Any], runs: list[dict[str, Any]]
) -> str:
    labels = res["cases"]
    header = ["case", "commands/cycle"]
    for r in runs:
        header += [f"Redis {r['version']}: cycles/s", "vs redis-allocator", "Redis CPU µs/cycle"]
    rows = []
    for case in docs_order(labels):
        sent = [x["sent"] for r in runs for x in r["single"].get(case, [])]
        row = [labels[case], num(median(sent), 0) if sent else "-"]
        for r in runs:
            rounds = r["single"].get(case, [])
            rates = [x["rate"] for x in rounds]
            base = median(x["rate"] for x in r["single"].get("allocator", []))
            row += [
                span(rates) if rates else "failed",
                ratio(median(rates), base) if rates else "",
                num(median(x["cpu"] for x in rounds), 1) if rounds else "",
            ]
        rows.append(row)
    return "\n".join(
        [
            f"One process, one client, {plural(s['rounds'])} of {s['cycles']:,} acquire + "
            f"release cycles (never waiting) per case on each line, after {res['warmup']} "
            f"unmeasured ones; the median round, with the slowest and fastest. Pools, "
            f"semaphores and allocators have {cases.POOL_SIZE:,} resources, slots or keys. "
            + lua_paths(runs),
            "",
            table(header, rows),
            "",
            "![One client: acquire + release cycles/s by case, on each Redis line]"
            "(img/bench-single.png)",
        ]
    )


def _docs_processes(s: dict[str, Any], res: dict[str, Any], runs: list[dict[str, Any]]) -> str:
    labels, counts = res["aggregate_cases"], s["processes"]
    header = ["case"] + [f"Redis {r['version']}: {n} processes" for r in runs for n in counts]
    rows = []
    for case in docs_order(labels):
        row = [labels[case]]
        for r in runs:
            for n in counts:
                rates = [x for x, _ in r["aggregate"].get(case, {}).get(str(n), [])]
                base = median(x for x, _ in r["aggregate"].get("allocator", {}).get(str(n), []))
                rate = median(rates)
                row.append(f"{num(rate)} ({ratio(rate, base)})" if rates else "failed")
        rows.append(row)
    contention = []
    for r in runs:
        rounds = r["contention"]
        if not rounds:
            contention.append([f"Redis {r['version']}", "failed", "", "", ""])
            continue
        uncontended = median(x["rate"] for x in r["single"].get("pool", []))
        contention.append(
            [
                f"Redis {r['version']}",
                num(sum(c["cycles"] for c in rounds)),
                str(sum(c["violations"] for c in rounds)),
                str(sum(c["lost"] for c in rounds)),
                ratio(median(c["rate"] for c in rounds), uncontended),
            ]
        )
    first = runs[0]["contention"][0] if runs and runs[0]["contention"] else {}
    return "\n".join(
        [
            f"{', '.join(map(str, counts))} processes, one client each, started together; "
            f"{plural(s['agg_rounds'])} of {s['duration']:g} s. Cycles/s of all the processes "
            "together (median round), and in brackets its ratio to redis-allocator's.",
            "",
            table(header, rows),
            "",
            "![Cycles/s of all processes together vs processes](img/bench-aggregate.png)",
            "",
            f"Contention: {first.get('threads', s['threads'])} threads of one process on one "
            f"ResourcePool of {first.get('resources', s['contention_resources'])} resources, "
            f"{plural(s['contention_rounds'])} of {s['contention_duration']:g} s, each resource "
            "checked never to be held twice at once:",
            "",
            table(
                [
                    "server",
                    "cycles checked",
                    "held twice at once",
                    "releases that found their lease gone",
                    "vs one uncontended client",
                ],
                contention,
            ),
        ]
    )


def _docs_handoff(s: dict[str, Any], res: dict[str, Any], runs: list[dict[str, Any]]) -> str:
    from benchmarks.workers import HANDOFF_WARMUP

    labels = res["handoff_cases"]
    header = ["case"]
    for r in runs:
        header += [f"Redis {r['version']}: p50 ms", "p99 ms", "p99.9 ms"]
    rows = []
    for case in docs_order(labels):
        row = [labels[case]]
        for r in runs:
            lat = r["handoff"].get(case, [])
            row += [num(pct(lat, q), 2) for q in (50, 99, 99.9)] if lat else ["failed", "", ""]
        rows.append(row)
    return "\n".join(
        [
            f"{s['handoffs']:,} hand-offs per case on each line, over "
            f"{plural(s['rounds'], 'ping-pong')} between two processes (the first "
            f"{HANDOFF_WARMUP} of each dropped); "
            "nearest-rank percentiles, in milliseconds.",
            "",
            table(header, rows),
        ]
    )
