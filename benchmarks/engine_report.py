"""Tables, plots and the generated docs page of ``bench_engine.py``."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import engine_cases as cases

# -- results ---------------------------------------------------------------------------


@dataclass
class Round:
    """One measured round of one case on one client."""

    rate: float  # cycles per second
    lua: float  # µs of EVALSHA/FCALL per cycle
    server: float  # µs of server time per cycle (see cases.server_usec)
    cpu: float  # µs of Redis CPU (user + sys) per cycle
    sent: float  # top-level commands per cycle


@dataclass
class ServerRun:
    """Everything measured on one server."""

    label: str
    version: str = "?"
    binary: str = "?"
    hz: str = "?"
    path: str = "?"  # how our Lua ran: FCALL or EVALSHA
    single: dict[str, list[Round]] = field(default_factory=dict)
    aggregate: dict[tuple[str, int], list[tuple[float, float]]] = field(default_factory=dict)
    handoff: dict[str, list[float]] = field(default_factory=dict)
    scaling: dict[int, list[Round]] = field(default_factory=dict)
    scaling_memory: dict[int, tuple[float, int]] = field(default_factory=dict)  # bytes/res, keys
    scaling_fill: dict[int, float] = field(default_factory=dict)  # seconds
    contention: list[dict[str, Any]] = field(default_factory=list)
    errors: dict[str, str] = field(default_factory=dict)  # "section: case" -> error
    seconds: dict[str, float] = field(default_factory=dict)  # section -> wall seconds


def median(values: list[float]) -> float:
    return statistics.median(values) if values else math.nan


def pct(values: list[float], q: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)] if ordered else math.nan


def num(value: float, digits: int = 0) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return f"{value:,.{digits}f}"


def spread(values: list[float]) -> str:
    return f"{min(values):,.0f}–{max(values):,.0f}" if values else "–"


def ratio(value: float, base: float) -> str:
    if math.isnan(value) or math.isnan(base) or not base:
        return "–"
    return f"{value / base:.2f}x"


# -- tables ----------------------------------------------------------------------------


def table(header: list[str], rows: list[list[str]], right_from: int = 1) -> str:
    align = ["---" if i < right_from else "---:" for i in range(len(header))]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(align) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def single_table(run: ServerRun) -> str:
    base = median([r.rate for r in run.single.get("allocator", [])])
    rows = []
    for case, label in cases.CASES.items():
        rounds = run.single.get(case)
        if not rounds:
            rows.append([label, "failed", "", "", "", "", "", ""])
            continue
        rate = median([r.rate for r in rounds])
        lua = median([r.lua for r in rounds])
        rows.append(
            [
                label,
                num(rate),
                spread([r.rate for r in rounds]),
                ratio(rate, base),
                num(lua, 1) if lua else "–",
                num(median([r.server for r in rounds]), 1),
                num(median([r.cpu for r in rounds]), 1),
                num(median([r.sent for r in rounds]), 0),
            ]
        )
    header = [
        "case",
        "cycles/s (median)",
        "rounds min–max",
        "vs redis-allocator",
        "Lua µs/cycle",
        "server µs/cycle",
        "Redis CPU µs/cycle",
        "commands/cycle",
    ]
    return table(header, rows)


AGGREGATE_CASES = ("floor", "pool", "semaphore", "lock", "allocator")


def aggregate_table(run: ServerRun, counts: list[int]) -> str:
    rows = []
    for n in counts:
        base = median([r for r, _ in run.aggregate.get(("allocator", n), [])])
        for case in AGGREGATE_CASES:
            rounds = run.aggregate.get((case, n))
            label = cases.CASES[case]
            if not rounds:
                rows.append([str(n), label, "failed", "", "", ""])
                continue
            rate = median([r for r, _ in rounds])
            rows.append(
                [
                    str(n),
                    label,
                    num(rate),
                    spread([r for r, _ in rounds]),
                    ratio(rate, base),
                    num(median([c for _, c in rounds]), 0),
                ]
            )
    header = [
        "processes",
        "case",
        "cycles/s, all processes (median)",
        "rounds min–max",
        "vs redis-allocator",
        "Redis CPU %",
    ]
    return table(header, rows, right_from=2)


def handoff_table(run: ServerRun) -> str:
    rows = []
    for case, label in cases.HANDOFF_CASES.items():
        lat = run.handoff.get(case)
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


def scaling_table(run: ServerRun) -> str:
    rows = []
    for n in sorted(set(run.scaling) | set(run.scaling_memory)):
        rounds = run.scaling.get(n, [])
        memory, keys = run.scaling_memory.get(n, (math.nan, 0))
        rows.append(
            [
                num(n),
                num(run.scaling_fill.get(n, math.nan), 2),
                num(median([r.rate for r in rounds])) if rounds else "failed",
                spread([r.rate for r in rounds]),
                num(median([r.lua for r in rounds]), 1),
                num(median([r.cpu for r in rounds]), 1),
                num(memory, 1),
                str(keys),
            ]
        )
    header = [
        "resources",
        "fill s",
        "cycles/s (median)",
        "rounds min–max",
        "Lua µs/cycle",
        "Redis CPU µs/cycle",
        "bytes per idle resource",
        "keys",
    ]
    return table(header, rows)


def contention_table(run: ServerRun) -> str:
    if not run.contention:
        return "failed"
    first = run.contention[0]
    rates = [c["rate"] for c in run.contention]
    uncontended = median([r.rate for r in run.single.get("pool", [])])
    rows = [
        [
            str(first["threads"]),
            str(first["resources"]),
            num(median(rates)),
            spread(rates),
            ratio(median(rates), uncontended),
            num(sum(c["cycles"] for c in run.contention)),
            str(sum(c["violations"] for c in run.contention)),
            str(max(c["max_held"] for c in run.contention)),
            str(sum(c["lost"] for c in run.contention)),
        ]
    ]
    header = [
        "threads",
        "resources",
        "cycles/s, all threads (median)",
        "rounds min–max",
        "vs one uncontended client",
        "cycles checked",
        "violations",
        "most held at once",
        "releases that returned False",
    ]
    return table(header, rows)


def server_heading(run: ServerRun) -> str:
    return (
        f"Redis {run.version} ({run.binary}, hz {run.hz}); "
        f"our Lua ran as {run.path}"
    )


def server_report(run: ServerRun, counts: list[int], level: str = "###") -> str:
    parts = [
        f"{level} 1. One client: acquire + release\n\n{single_table(run)}",
        f"{level} 2. Aggregate throughput, one client per process\n\n"
        f"{aggregate_table(run, counts)}",
        f"{level} 3. Hand-off latency: release → the blocked waiter holds it\n\n"
        f"{handoff_table(run)}",
        f"{level} 4. ResourcePool scaling\n\n{scaling_table(run)}",
        f"{level} 5. Contention: threads on one small pool\n\n{contention_table(run)}",
    ]
    if run.errors:
        lines = "\n".join(
            f"* **{where}**: `{err.strip().splitlines()[-1]}`" for where, err in run.errors.items()
        )
        parts.append(f"{level} Failures\n\n{lines}")
    return "\n\n".join(parts)


# -- plots -----------------------------------------------------------------------------


def plots(runs: list[ServerRun], img_dir: Path, counts: list[int]) -> list[Path]:
    """Write the PNG plots; return their paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    img_dir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    labels = list(cases.CASES.values())
    width = 0.8 / max(1, len(runs))

    def save(fig: Any, name: str) -> None:
        path = img_dir / name
        fig.tight_layout()
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)

    # single-client cycles/s by case, one bar per server
    fig, ax = plt.subplots(figsize=(9, 5))
    for k, run in enumerate(runs):
        meds, lows, highs = [], [], []
        for case in cases.CASES:
            rates = [r.rate for r in run.single.get(case, [])] or [math.nan]
            m = median(rates)
            meds.append(m)
            lows.append(m - min(rates))
            highs.append(max(rates) - m)
        ys = [i + (k - (len(runs) - 1) / 2) * width for i in range(len(labels))]
        ax.barh(ys, meds, height=width, xerr=[lows, highs], label=f"Redis {run.version}")
    ax.set_yticks(range(len(labels)), labels)
    ax.invert_yaxis()
    ax.set_xlabel("acquire + release cycles/s, one client (median; bars: rounds min–max)")
    ax.legend()
    save(fig, "bench-single.png")

    # Lua µs and Redis CPU µs per cycle by case
    fig, axes = plt.subplots(1, 2, figsize=(12, 5), sharey=True)
    for ax, attr, title in (
        (axes[0], "lua", "Lua µs per cycle (EVALSHA + FCALL)"),
        (axes[1], "cpu", "Redis CPU µs per cycle (user + sys)"),
    ):
        for k, run in enumerate(runs):
            values = [
                median([getattr(r, attr) for r in run.single.get(case, [])]) for case in cases.CASES
            ]
            ys = [i + (k - (len(runs) - 1) / 2) * width for i in range(len(labels))]
            ax.barh(ys, values, height=width, label=f"Redis {run.version}")
        ax.set_title(title)
        ax.set_xlabel("µs per acquire + release (median)")
    axes[0].set_yticks(range(len(labels)), labels)
    axes[0].invert_yaxis()
    axes[0].legend()
    save(fig, "bench-lua.png")

    # aggregate cycles/s vs processes
    fig, axes = plt.subplots(1, len(runs), figsize=(6 * len(runs), 4.5), squeeze=False)
    for ax, run in zip(axes[0], runs):
        for case in AGGREGATE_CASES:
            ys = [median([r for r, _ in run.aggregate.get((case, n), [])]) for n in counts]
            ax.plot(counts, ys, marker="o", label=cases.CASES[case])
        ax.set_xticks(counts)
        ax.set_xlabel("processes (one client each)")
        ax.set_ylabel("cycles/s, all processes (median)")
        ax.set_title(f"Redis {run.version}")
        ax.set_ylim(bottom=0)
        ax.legend(fontsize="small")
    save(fig, "bench-aggregate.png")

    # scaling of ResourcePool with its size
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.5))
    for run in runs:
        sizes = sorted(run.scaling)
        label = f"Redis {run.version}"
        axes[0].plot(
            sizes, [median([r.rate for r in run.scaling[n]]) for n in sizes], "o-", label=label
        )
        axes[1].plot(
            sizes, [median([r.lua for r in run.scaling[n]]) for n in sizes], "o-", label=label
        )
        mem = sorted(run.scaling_memory)
        axes[2].plot(mem, [run.scaling_memory[n][0] for n in mem], "o-", label=label)
    for ax, ylabel in zip(
        axes, ("cycles/s, one client (median)", "Lua µs per cycle", "bytes per idle resource")
    ):
        ax.set_xscale("log")
        ax.set_xlabel("resources in the pool")
        ax.set_ylabel(ylabel)
        ax.set_ylim(bottom=0)
        ax.legend()
    fig.suptitle("ResourcePool: acquire(timeout=0) + release vs pool size")
    save(fig, "bench-scaling.png")
    return written
