"""The tables of ``python -m benchmarks engine`` and its sections of
docs/performance.md, rendered from its JSON results (see :mod:`.engine`)."""

from __future__ import annotations

from typing import Any

from benchmarks import cases
from benchmarks.results import (
    heading,
    lua_paths,
    median,
    num,
    pct,
    plural,
    ratio,
    skipped,
    span,
    spread,
    table,
)

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
