"""Our Allocator next to redis-allocator 0.7.0, with 1,000 and 100,000 keys.

    python -m benchmarks allocator [--quick] [--servers 6.2,7]

One client, malloc_key + free_keys cycles (ours: an exclusive allocator with
leases of 30 s; redis-allocator: ``malloc_key(timeout=30)``), and the floor
(two EVALSHA of ``return 1``). The three cases are interleaved round by round
on each server, each round on a freshly filled allocator; the table gives the
median cycles/s with the min-max over rounds, the median Lua µs per cycle
(``INFO commandstats``) and the ratios. The 2-, 4- and 8-process aggregate of
both allocators (1,000 keys) is in ``engine``'s section 2.

Needs the ``bench`` extra (redis-allocator 0.7.0; without it, that case is skipped).
"""

from __future__ import annotations

import argparse
from typing import Any

from benchmarks import cases, servers
from benchmarks.results import (
    cell,
    choose,
    heading,
    median,
    num,
    plural,
    ratio,
    say,
    skipped,
    table,
)

NAME = "allocator"
HELP = "our Allocator vs redis-allocator, 1,000 and 100,000 keys"

SIZES = (1_000, 100_000)
CASES = {"floor": "floor", "our-allocator": "ours: Allocator", "allocator": "redis-allocator"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    servers.add_option(parser, multiple=True, default="6.2,7")
    parser.add_argument("--rounds", type=int, help="default 5 (--quick: 2)")
    parser.add_argument("--cycles", type=int, help="per round (default 2000; --quick: 200)")


def bench(srv: servers.Server, names: list[str], rounds: int, cycles: int) -> dict[str, Any]:
    """{case: {keys: [round, ...]}}."""
    runs: dict[str, Any] = {}
    client, dclient = srv.client(), srv.client(decode_responses=True)
    for _ in range(rounds):
        for size in SIZES:
            for case in names:
                client.flushall()
                cases.setup(case, client, dclient, "alloc", size)
                cycle = cases.cycle(case, client, dclient, "alloc", "main")
                for _ in range(cases.WARMUP):
                    cycle()
                row, _ = cases.measure(case, client, cycle, cycles)
                runs.setdefault(case, {}).setdefault(str(size), []).append(row)
    client.flushall()
    return runs


def run(args: argparse.Namespace) -> dict[str, Any] | None:
    s = choose(args, {"rounds": 5, "cycles": 2000}, {"rounds": 2, "cycles": 200})
    skip = [{"case": c, "reason": why} for c in CASES if (why := cases.missing(c))]
    names = [c for c in CASES if not cases.missing(c)]
    for item in skip:
        say(f"(skipped {item['case']}: {item['reason']})")
    runs = []
    for srv in servers.each(args.servers):
        say(f"{srv.describe()}: {s['rounds']} rounds of {s['cycles']} cycles")
        runs.append({"version": srv.version, "cases": bench(srv, names, s["rounds"], s["cycles"])})
    if not runs:
        return None
    labels = {c: CASES[c] for c in names}
    return {
        "settings": {**s, "servers": args.servers, "sizes": list(SIZES)},
        "results": {"cases": labels, "runs": runs},
        "skipped": skip,
    }


def render(doc: dict[str, Any]) -> str:
    parts = [heading(doc)]
    s = doc["settings"]
    for one in doc["results"]["runs"]:
        runs = one["cases"]
        lines = [
            f"### Redis {one['version']}: {s['rounds']} rounds of {s['cycles']} cycles",
            "",
            "| keys | case | cycles/s (min-max) | vs floor | vs redis-allocator | Lua µs/cycle |",
            "|---:|---|---:|---:|---:|---:|",
        ]
        for size in map(str, s["sizes"]):
            floor = median(r["rate"] for r in runs.get("floor", {}).get(size, []))
            peer = median(r["rate"] for r in runs.get("allocator", {}).get(size, []))
            for case, label in doc["results"]["cases"].items():
                rates = [r["rate"] for r in runs[case][size]]
                rate = median(rates)
                lua = median(r["lua"] for r in runs[case][size])
                lines.append(
                    f"| {int(size):,} | {label} | {rate:,.0f} ({min(rates):,.0f}-"
                    f"{max(rates):,.0f}) | {ratio(rate, floor)} | {ratio(rate, peer)} | {lua:.1f} |"
                )
        parts.append("\n".join(lines))
    if doc.get("skipped"):
        parts.append(skipped(doc))
    return "\n\n".join(parts)


# -- docs/performance.md ------------------------------------------------------------------

DOCS_PARTS = ("",)


def docs(found: list[dict[str, Any]], part: str) -> str:
    """docs/performance.md's table: each case by size, both servers side by side."""
    doc = found[0]
    s, res = doc["settings"], doc["results"]
    runs = res["runs"]
    header = ["keys", "case"]
    for one in runs:
        header += [f"Redis {one['version']}: cycles/s", "vs redis-allocator", "Lua µs/cycle"]
    rows = []
    for size in map(str, s["sizes"]):
        for case in sorted(
            res["cases"], key=lambda c: ("ours" not in res["cases"][c], c == "floor")
        ):
            row = [f"{int(size):,}", res["cases"][case]]
            for one in runs:
                got = one["cases"].get(case, {}).get(size, [])
                rates = [r["rate"] for r in got]
                peer = median(r["rate"] for r in one["cases"].get("allocator", {}).get(size, []))
                row += [
                    cell(rates),
                    ratio(median(rates), peer) if rates else "",
                    num(median(r["lua"] for r in got), 1) if got else "",
                ]
            rows.append(row)
    return "\n".join(
        [
            f"One client, {plural(s['rounds'])} of {s['cycles']:,} cycles per case and size on "
            "each line, each round on a freshly filled allocator; the median round, with the "
            "slowest and fastest.",
            "",
            table(header, rows, right_from=2),
        ]
    )
