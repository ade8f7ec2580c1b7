"""Python calls per acquire + release from one client: ours next to the peers and the floor.

    python -m benchmarks calls [--quick] [--cycles 300] [--rounds 7] [--server 6.2|7|PATH]

A count, not a timing: cProfile counts every Python and C function call of
``--cycles`` cycles (after a warm-up), so machine noise does not move it.
Then the same cases are timed, interleaved round by round (``--rounds``), one
client, and the median cycles/s reported. Last, what counting
(:mod:`django_redis_pool.primitives.counts`) costs: each of ours runs counted
and with its counts switched off, back to back in alternating order, over many
short rounds (``--cost-rounds`` of ``--cost-cycles``); the median of the
per-round ratios is reported (1.000: no cost).

Cases (``cases.py``): the floor (two EVALSHA of ``return 1``),
redis-allocator 0.7.0 (``malloc_key`` + ``free_keys``), redis-py's ``Lock``,
ours (ResourcePool, Semaphore, Lock, Allocator). Needs the ``bench`` extra.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import pstats
import statistics
import time
from collections.abc import Iterator
from typing import Any

from benchmarks import cases, servers
from benchmarks.results import choose, heading, say, skipped, table
from django_redis_pool.primitives import counts

NAME = "calls"
HELP = "Python calls per acquire + release; what our counting costs"

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


def add_arguments(parser: argparse.ArgumentParser) -> None:
    servers.add_option(parser, multiple=False)
    parser.add_argument("--cycles", type=int, help="profiled cycles (default 300; --quick: 100)")
    parser.add_argument("--rounds", type=int, help="timed rounds (default 7; --quick: 2)")
    parser.add_argument("--timed-cycles", type=int, help="per timed round (default 2000)")
    parser.add_argument("--cost-rounds", type=int, help="of counting's cost (default 40)")
    parser.add_argument("--cost-cycles", type=int, help="per cost round (default 300)")


def run(args: argparse.Namespace) -> dict[str, Any] | None:
    s = choose(
        args,
        {"cycles": 300, "rounds": 7, "timed_cycles": 2000, "cost_rounds": 40, "cost_cycles": 300},
        {"cycles": 100, "rounds": 2, "timed_cycles": 300, "cost_rounds": 4, "cost_cycles": 100},
    )
    skip = [{"case": c, "reason": why} for c in CASES if (why := cases.missing(c))]
    names = [c for c in CASES if not cases.missing(c)]
    for item in skip:
        say(f"(skipped {item['case']}: {item['reason']})")
    ours = [c for c in names if c in OURS]
    counts.background = False  # (nothing is flushed while timing)
    with servers.redis_server(args.server) as srv:
        client, dclient = srv.client(), srv.client(decode_responses=True)
        runs: dict[str, Any] = {}
        for case in names:
            cases.setup(case, client, dclient, f"calls-{case}")
            runs[case] = cases.cycle(case, client, dclient, f"calls-{case}", "me")
        say("profiling")
        table = {case: calls_per_cycle(run, s["cycles"]) for case, run in runs.items()}
        with counting_off():
            off = {case: calls_per_cycle(runs[case], s["cycles"]) for case in ours}
        say("timing")
        rates: dict[str, list[float]] = {}
        for _ in range(s["rounds"]):
            for case in names:
                rates.setdefault(case, []).append(rate(runs[case], s["timed_cycles"]))
        # What counting costs: counted and not, back to back, in alternating
        # order, many short rounds; the median of the per-round ratios.
        say("what counting costs")
        ratios: dict[str, list[float]] = {case: [] for case in ours}
        for round_ in range(s["cost_rounds"]):
            for case in sorted(ours):
                order = (False, True) if round_ % 2 == 0 else (True, False)
                got = {}
                for bare in order:
                    with counting_off() if bare else contextlib.nullcontext():
                        got[bare] = rate(runs[case], s["cost_cycles"])
                ratios[case].append(got[False] / got[True])
        counts.forget()
    return {
        "settings": {**s, "server": args.server},
        "results": {
            "cases": {c: LABELS[c] for c in names},
            "ours": ours,
            "calls": table,  # case -> Python calls per cycle
            "calls_counting_off": off,  # ours -> the same with counting off
            "rates": rates,  # case -> [cycles/s per timed round]
            "counting_cost": ratios,  # ours -> [cycles/s counted / not, per round]
        },
        "skipped": skip,
    }


def render(doc: dict[str, Any]) -> str:
    s, res = doc["settings"], doc["results"]
    off, ratios = res["calls_counting_off"], res["counting_cost"]
    lines = [heading(doc), "", f"{s['cycles']} cycles profiled", ""]
    lines.append("| case | Python calls per cycle | counts off | cycles/s (median) |")
    lines.append("|---|---:|---:|---:|")
    for case, label in res["cases"].items():
        extra = f"{off[case]:.0f}" if case in off else ""
        median_rate = statistics.median(res["rates"][case])
        lines.append(f"| {label} | {res['calls'][case]:.0f} | {extra} | {median_rate:,.0f} |")
    lines += [
        "",
        f"What counting costs: {s['cost_rounds']} rounds of {s['cost_cycles']} cycles "
        "counted and not, back to back (order alternating); the median of the ratios "
        "(min-max of the middle half):",
        "",
        "| case | Python calls counted / not | cycles/s counted / not counted |",
        "|---|---:|---:|",
    ]
    for case, label in res["cases"].items():
        if case in ratios:
            ordered = sorted(ratios[case])
            quarter = len(ordered) // 4
            low, high = ordered[quarter], ordered[-1 - quarter]
            lines.append(
                f"| {label} | {res['calls'][case]:.0f} / {off[case]:.0f} "
                f"| {statistics.median(ordered):.3f} ({low:.3f}-{high:.3f}) |"
            )
    if doc.get("skipped"):
        lines += ["", skipped(doc)]
    return "\n".join(lines)


# -- docs/performance.md ------------------------------------------------------------------

DOCS_PARTS = ("",)


def docs(found: list[dict[str, Any]], part: str) -> str:
    """docs/performance.md's table: calls per cycle of each case, one column per
    results file (one per Redis line), and what counting costs ours."""
    found = sorted(found, key=_version)
    header = ["case"]
    for doc in found:
        header += [f"Redis {_version(doc)}: Python calls per cycle", "with counting off"]
    header.append("cycles/s counted / not")
    labels: dict[str, str] = {}
    for doc in found:
        labels.update(doc["results"]["cases"])
    rows = []
    for case, label in labels.items():
        row = [label]
        for doc in found:
            res = doc["results"]
            off = res["calls_counting_off"]
            row += [
                f"{res['calls'][case]:.0f}" if case in res["calls"] else "-",
                f"{off[case]:.0f}" if case in off else "",
            ]
        costs = [
            f"{statistics.median(doc['results']['counting_cost'][case]):.3f}"
            for doc in found
            if case in doc["results"]["counting_cost"]
        ]
        row.append(", ".join(costs))
        rows.append(row)
    s = found[0]["settings"]
    return "\n".join(
        [
            f"cProfile's count of every Python and C call over {s['cycles']} cycles, after a "
            "warm-up. *Cycles/s counted / not*: ours with their counts on and off, back to "
            f"back, {s['cost_rounds']} rounds of {s['cost_cycles']} cycles, the median ratio "
            "(one per line, in the order of the columns).",
            "",
            table(header, rows),
        ]
    )


def _version(doc: dict[str, Any]) -> str:
    servers_ = doc["environment"].get("servers", [])
    return str(servers_[0]["version"]) if servers_ else str(doc["settings"]["server"])
