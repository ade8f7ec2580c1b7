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
    scaling_keys_after: dict[int, int] = field(default_factory=dict)  # pool keys after rounds
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
        return "-"
    return f"{value:,.{digits}f}"


def spread(values: list[float]) -> str:
    return f"{min(values):,.0f}-{max(values):,.0f}" if values else "-"


def ratio(value: float, base: float) -> str:
    if math.isnan(value) or math.isnan(base) or not base:
        return "-"
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
                num(lua, 1) if lua else "-",
                num(median([r.server for r in rounds]), 1),
                num(median([r.cpu for r in rounds]), 1),
                num(median([r.sent for r in rounds]), 0),
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


AGGREGATE_CASES = ("floor", "pool", "semaphore", "lock", "our-allocator", "allocator")


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
        "rounds min-max",
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
                num(run.scaling_keys_after.get(n, math.nan)),
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
        "rounds min-max",
        "vs one uncontended client",
        "cycles checked",
        "violations",
        "most held at once",
        "releases that returned False",
    ]
    return table(header, rows)


def server_heading(run: ServerRun) -> str:
    return f"Redis {run.version} ({run.binary}, hz {run.hz}); our Lua ran as {run.path}"


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
    ax.set_xlabel("acquire + release cycles/s, one client (median; bars: rounds min-max)")
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
    for ax, run in zip(axes[0], runs, strict=True):
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
        axes,
        ("cycles/s, one client (median)", "Lua µs per cycle", "bytes per idle resource"),
        strict=True,
    ):
        ax.set_xscale("log")
        ax.set_xlabel("resources in the pool")
        ax.set_ylabel(ylabel)
        ax.set_ylim(bottom=0)
        ax.legend()
    fig.suptitle("ResourcePool: acquire(timeout=0) + release vs pool size")
    save(fig, "bench-scaling.png")
    return written


# -- the docs page ---------------------------------------------------------------------

METHOD = """\
Every case runs against a private `redis-server` started by the benchmark on
loopback, one server at a time; nothing else uses it while it runs (other
processes on the machine may, see the load average above). Within a section
the cases are interleaved round by round (A, B, C, ..., then A, B, C again);
tables give the median round and the slowest and fastest round. Before each
round of sections 1 and 2 the server is flushed (`FLUSHALL`) and the case's
state is created again, so every round starts from the same state.

**The cases.** *Ours*: `ResourcePool(client, name, lease_timeout=30)`,
`Semaphore(client, name, lease_timeout=30)` and `Lock(client, name,
lease_timeout=30)`. *Peers*: redis-allocator 0.7.0 (`RedisAllocator(client,
prefix, shared=False)`, on a client with `decode_responses=True`, filled
with `extend()`; a cycle is `malloc_key(timeout=30)` + `free_keys(key)`),
redis-py's `client.lock(name, timeout=30)` and python-redis-lock's
`redis_lock.Lock(client, name, expire=30)`. *Hand-written
WATCH/MULTI designs*: a resource pool on two sets (acquire = WATCH,
SRANDMEMBER, then MULTI/SMOVE/EXEC; release = SMOVE) and a counting semaphore
with identities (acquire = WATCH, SCARD, GET, then MULTI/SADD/EXEC; release =
SREM), the way such code is commonly written, reimplemented in
`benchmarks/engine_cases.py`.
*Floor*: two EVALSHA of `return 1` on one key, the least any two-call acquire
+ release can cost. Pools, allocators and semaphores have 1,000 resources,
keys or slots.

1. **One client.** One process, one client, one thread: acquire (never
   waiting) + release in a loop, {cycles:,} cycles per round, {rounds} rounds,
   after {warmup} unmeasured cycles. Semaphores take a new identity every cycle.
   * *Lua µs/cycle*: the `usec` of `cmdstat_evalsha` + `cmdstat_fcall` in
     `INFO commandstats` (reset before the round) per cycle. A script's time
     already includes the commands it runs.
   * *server µs/cycle*: Lua µs plus the time of the commands the case sends
     itself. `INFO commandstats` does not tell a command sent by the client
     from the same command run inside a script or an EXEC, so each case
     declares which commands it sends itself, and how many per cycle
     (redis-py Lock: SET; python-redis-lock: GET and SET; WATCH/MULTI pool: WATCH,
     SRANDMEMBER, MULTI, EXEC, SMOVE; WATCH/MULTI semaphore: WATCH, SCARD, GET, MULTI,
     EXEC, SREM; ours, redis-allocator and the floor: none). Such a command
     counts for the share of its calls the case sent (e.g. python-redis-lock's
     GET: 1 of 2 per cycle; its release script runs the other); the rest ran
     inside a script or an EXEC, whose time already includes it.
   * *Redis CPU µs/cycle*: `used_cpu_user` + `used_cpu_sys` of `INFO cpu`,
     before and after the round, per cycle: everything the server spent,
     including reading requests and writing replies.
   * *commands/cycle*: top-level commands the server ran per cycle (scripts +
     the commands above; commands queued in MULTI run inside EXEC).
   * *vs redis-allocator*: cycles/s against redis-allocator's median.
2. **Aggregate.** {processes} processes (started with `spawn` once per server,
   each with its own client), {agg_rounds} round(s) of {duration:g} s: each
   process sets up its case and runs {warmup} cycles, then all of them
   and the parent meet at a `multiprocessing.Barrier`; each counts its cycles
   until {duration:g} s have passed; the aggregate is the sum of each
   process's cycles/s. Pool: one shared pool of 1,000; semaphore: one shared
   semaphore of max 1,000, each process its own identity; lock: each process
   its own lock name (a shared lock would measure contention); redis-allocator:
   one shared allocator of 1,000 keys. *Redis CPU %*: server CPU over the
   window, per wall second (100 % = one core busy; Redis runs commands on one).
3. **Hand-off.** Two of those processes play ping-pong: in turn one holds the
   token while the other waits for it (`acquire` with no timeout). The waiter
   says it is about to acquire; the holder waits until it really is blocked
   (ours: `waiting_count() == 1`; every case: `CLIENT LIST` shows the waiter's
   connection blocked in BLPOP), then releases at once. Latency runs from
   just before `release()` to just after the waiter's `acquire()` returns,
   both on `time.monotonic_ns()` (CLOCK_MONOTONIC, one clock for all processes
   on Linux). The holder never asks again before the waiter has it
   (python-redis-lock is not fair). {handoffs:,} hand-offs per case split over
   {rounds} ping-pongs, each with its first {handoff_warmup} dropped;
   percentiles are nearest-rank. Pool: 1 resource; semaphore: max 1, one
   identity per process; floor: an RPUSH in one process waking a BLPOP in the
   other. redis-py's Lock is not here: its waiter polls (`sleep`, 0.1 s by
   default) and is never blocked.
4. **Scaling.** Pools of {sizes} resources, filled with the engine's
   `pool_associate` (10,000 ids per call; *fill s* is the whole fill), then
   measured as in section 1. *bytes per idle resource*: `MEMORY USAGE key
   SAMPLES 0` (exact) summed over every key of the pool, found by `SCAN MATCH`
   on its hash-tagged prefix `drp:{{pool:NAME}}`, right after the fill (no lease
   granted yet), divided by the number of resources. *keys after the rounds*:
   the pool's keys once every round is over and every lease released (what
   a release leaves behind for a while, such as the `:done:` markers that
   let a retried release answer the same).
5. **Contention.** {threads} threads of one process share one `ResourcePool`
   of {resources} resources (and one client); each runs
   `acquire(timeout=None)` + `release()` for {contention_duration:g} s
   ({contention_rounds} round(s)). Right after an acquire returns, the thread
   records the resource in a dict shared by all threads, under a
   `threading.Lock`, and removes it just before releasing: a resource already
   in the dict would be held by two threads at once (a *violation*; must be
   0). *most held at once*: the most resources in that dict at any moment
   (at most {resources}); *releases that returned False*: leases found gone at
   release (must be 0: leases live 30 s). *vs one uncontended client*: against
   section 1's ResourcePool median.
"""


def docs_page(
    runs: list[ServerRun],
    facts: dict[str, str],
    settings: Any,
    command: str,
    skipped: list[str],
    seconds: float,
) -> str:
    from engine_workers import HANDOFF_WARMUP

    quick = settings.cycles < 1000
    lines = [
        "## The lease engine next to its peers: the full run",
        "",
        f"Generated by `{command} --write-docs` in {seconds / 60:.1f} min.",
    ]
    if quick:
        lines += [
            "",
            "**This page comes from a `--quick` run: too few rounds and cycles for the "
            "numbers to mean much. Run it without `--quick` for real figures.**",
        ]
    lines += ["", "### The machine", ""]
    lines += [f"* {key}: {value}" for key, value in facts.items()]
    for run in runs:
        lines.append(f"* {server_heading(run)}")
    for label in skipped:
        lines.append(f"* server `{label}`: not run (no such redis-server on this machine)")
    lines += [
        "",
        "Compare ratios and server-side figures, not absolute rates: on a small VM "
        "most of a cycle is the loopback round trip and the Python client.",
        "",
        "### What is measured",
        "",
        METHOD.format(
            cycles=settings.cycles,
            rounds=settings.rounds,
            warmup=cases.WARMUP,
            processes=", ".join(map(str, settings.processes)),
            agg_rounds=settings.agg_rounds,
            duration=settings.duration,
            handoffs=settings.handoffs,
            handoff_warmup=HANDOFF_WARMUP,
            sizes=", ".join(f"{n:,}" for n in settings.sizes),
            threads=settings.threads,
            resources=settings.contention_resources,
            contention_duration=settings.contention_duration,
            contention_rounds=settings.contention_rounds,
        ),
    ]
    for run in runs:
        lines += [
            f"### Redis {run.version}",
            "",
            f"Server: {server_heading(run)}.",
            "",
            server_report(run, settings.processes, level="####"),
            "",
        ]
    lines += [
        "### Plots",
        "",
        "![One client: cycles/s by case](img/bench-single.png)",
        "",
        "![Lua µs and Redis CPU µs per cycle by case](img/bench-lua.png)",
        "",
        "![Aggregate cycles/s vs processes](img/bench-aggregate.png)",
        "",
        "![ResourcePool scaling with its size](img/bench-scaling.png)",
        "",
    ]
    return "\n".join(lines)


#: The markers around the generated part of ``docs/performance.md``.
BEGIN = (
    "<!-- bench_engine: generated from here on by `benchmarks/bench_engine.py --write-docs`. -->"
)
END = "<!-- bench_engine: end of the generated part. -->"


def replace_generated(page: str, generated: str) -> str:
    """``page`` with the part between the markers replaced by ``generated``
    (appended, with the markers, if the page has none)."""
    block = f"{BEGIN}\n\n{generated.rstrip()}\n\n{END}"
    if BEGIN in page and END in page:
        head, rest = page.split(BEGIN, 1)
        return head + block + rest.split(END, 1)[1]
    return f"{page.rstrip()}\n\n{block}\n" if page.strip() else block + "\n"
