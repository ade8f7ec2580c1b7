"""Markdown tables (and plots) from the JSON results of the other subcommands.

    python -m benchmarks report [NAME ...] [--results DIR] [--plots DIR] [--write-docs]

Prints, for each results file in ``--results`` (default ``benchmarks/results/``;
``benchmarks/results/quick/`` for the ``--quick`` runs), or for the NAMEs
given (subcommands, or paths of results files), the Markdown its subcommand
printed. ``--plots DIR`` also draws the engine's plots (PNG, matplotlib: the
``bench`` extra) into DIR. ``--write-docs`` writes the engine's full-run
section into ``docs/performance.md`` (between its ``bench_engine`` markers; the
rest of the page is left alone) and its plots into ``docs/img/``
(``--docs-dir`` elsewhere).
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

from benchmarks import results
from benchmarks.results import ROOT, median
from benchmarks.suites import engine

NAME = "report"
HELP = "Markdown tables, plots and docs/performance.md from the results"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "names", nargs="*", metavar="NAME", help="subcommands or results files (default: all)"
    )
    parser.add_argument(
        "--results", type=Path, default=results.RESULTS, help="where the results files are"
    )
    parser.add_argument("--plots", type=Path, metavar="DIR", help="draw the engine's plots here")
    parser.add_argument(
        "--write-docs",
        action="store_true",
        help="write the engine's section of docs/performance.md and its plots",
    )
    parser.add_argument(
        "--docs-dir", type=Path, default=ROOT / "docs", help="where --write-docs writes"
    )


def documents(args: argparse.Namespace) -> list[dict[str, Any]]:
    paths = []
    for name in args.names or sorted(p.stem for p in args.results.glob("*.json")):
        path = Path(name)
        paths.append(path if path.suffix == ".json" else args.results / f"{name}.json")
    docs = []
    for path in paths:
        if not path.is_file():
            raise SystemExit(f"no results file {path}")
        docs.append(results.read(path))
    return docs


def render_one(doc: dict[str, Any]) -> str:
    """The Markdown of one results document, by its subcommand's ``render``."""
    from benchmarks import suites

    return str(suites.load(doc["benchmark"]).render(doc))


def run(args: argparse.Namespace) -> None:
    docs = documents(args)
    if not docs:
        raise SystemExit(f"no results in {args.results}")
    for doc in docs:
        print(render_one(doc), end="\n\n", flush=True)
    engine_doc = next((d for d in docs if d["benchmark"] == "engine"), None)
    written: list[Path] = []
    if args.plots or args.write_docs:
        if engine_doc is None:
            raise SystemExit("the plots are the engine's: no engine results")
        written += plots(engine_doc, args.plots or args.docs_dir / "img")
    if args.write_docs:
        assert engine_doc is not None
        page = args.docs_dir / "performance.md"
        generated = docs_page(engine_doc)
        page.write_text(replace_generated(page.read_text() if page.exists() else "", generated))
        written.insert(0, page)
    for path in written:
        results.say(f"wrote {path}")


# -- plots -----------------------------------------------------------------------------


def plots(doc: dict[str, Any], img_dir: Path) -> list[Path]:
    """Write the engine's PNG plots; return their paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs, res = doc["results"]["runs"], doc["results"]
    counts = doc["settings"]["processes"]
    img_dir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    labels = list(res["cases"].values())
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
        for case in res["cases"]:
            rates = [r["rate"] for r in run["single"].get(case, [])] or [math.nan]
            m = median(rates)
            meds.append(m)
            lows.append(m - min(rates))
            highs.append(max(rates) - m)
        ys = [i + (k - (len(runs) - 1) / 2) * width for i in range(len(labels))]
        ax.barh(ys, meds, height=width, xerr=[lows, highs], label=f"Redis {run['version']}")
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
            values = [median(r[attr] for r in run["single"].get(case, [])) for case in res["cases"]]
            ys = [i + (k - (len(runs) - 1) / 2) * width for i in range(len(labels))]
            ax.barh(ys, values, height=width, label=f"Redis {run['version']}")
        ax.set_title(title)
        ax.set_xlabel("µs per acquire + release (median)")
    axes[0].set_yticks(range(len(labels)), labels)
    axes[0].invert_yaxis()
    axes[0].legend()
    save(fig, "bench-lua.png")

    # aggregate cycles/s vs processes
    fig, axes = plt.subplots(1, len(runs), figsize=(6 * len(runs), 4.5), squeeze=False)
    for ax, run in zip(axes[0], runs, strict=True):
        for case, label in res["aggregate_cases"].items():
            by_n = run["aggregate"].get(case, {})
            ys = [median(r for r, _ in by_n.get(str(n), [])) for n in counts]
            ax.plot(counts, ys, marker="o", label=label)
        ax.set_xticks(counts)
        ax.set_xlabel("processes (one client each)")
        ax.set_ylabel("cycles/s, all processes (median)")
        ax.set_title(f"Redis {run['version']}")
        ax.set_ylim(bottom=0)
        ax.legend(fontsize="small")
    save(fig, "bench-aggregate.png")

    # scaling of ResourcePool with its size
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.5))
    for run in runs:
        scaling, memory = run["scaling"], run["scaling_memory"]
        sizes = sorted(scaling, key=int)
        label = f"Redis {run['version']}"
        xs = [int(n) for n in sizes]
        axes[0].plot(xs, [median(r["rate"] for r in scaling[n]) for n in sizes], "o-", label=label)
        axes[1].plot(xs, [median(r["lua"] for r in scaling[n]) for n in sizes], "o-", label=label)
        mem = sorted(memory, key=int)
        axes[2].plot([int(n) for n in mem], [memory[n][0] for n in mem], "o-", label=label)
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
`benchmarks/cases.py`.
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


def facts(doc: dict[str, Any]) -> list[str]:
    """The machine and the software, one line each, as the docs page lists them."""
    env = doc["environment"]
    packages = env["packages"]
    load = ", ".join(f"{x:.2f}" for x in env.get("load_average", []))
    lines = [
        f"Python: {env['python']}",
        f"OS: {env['platform']}",
        f"CPU: {env['cpu']}; {env['cores']} cores ({env['usable_cores']} usable)",
        f"load average at start (1, 5, 15 min): {load or '?'}",
        f"redis-py: {packages['redis']}",
        f"django-redis-pool: {packages['django-redis-pool']} (git {env['git']})",
        f"redis-allocator: {packages['redis-allocator']}",
        f"python-redis-lock: {packages['python-redis-lock']}",
    ]
    if env.get("warning"):
        lines.append(f"WARNING: {env['warning']}")
    return lines


def docs_page(doc: dict[str, Any]) -> str:
    """The engine's section of docs/performance.md."""
    from benchmarks.workers import HANDOFF_WARMUP

    settings, res = doc["settings"], doc["results"]
    lines = [
        "## The lease engine next to its peers: the full run",
        "",
        f"Generated by `.venv/bin/{doc['command']}` and `.venv/bin/python -m benchmarks "
        f"report --write-docs`; the run took {doc['seconds'] / 60:.1f} min.",
    ]
    if doc.get("quick"):
        lines += [
            "",
            "**This page comes from a `--quick` run: too few rounds and cycles for the "
            "numbers to mean much. Run it without `--quick` for real figures.**",
        ]
    lines += ["", "### The machine", ""]
    lines += [f"* {line}" for line in facts(doc)]
    for run in res["runs"]:
        lines.append(f"* {engine.server_heading(run)}")
    for label in doc["environment"].get("servers_skipped", []):
        lines.append(f"* server `{label}`: not run (no such redis-server on this machine)")
    lines += [
        "",
        "Compare ratios and server-side figures, not absolute rates: on a small VM "
        "most of a cycle is the loopback round trip and the Python client.",
        "",
        "### What is measured",
        "",
        METHOD.format(
            cycles=settings["cycles"],
            rounds=settings["rounds"],
            warmup=res["warmup"],
            processes=", ".join(map(str, settings["processes"])),
            agg_rounds=settings["agg_rounds"],
            duration=settings["duration"],
            handoffs=settings["handoffs"],
            handoff_warmup=HANDOFF_WARMUP,
            sizes=", ".join(f"{n:,}" for n in settings["sizes"]),
            threads=settings["threads"],
            resources=settings["contention_resources"],
            contention_duration=settings["contention_duration"],
            contention_rounds=settings["contention_rounds"],
        ),
    ]
    for run in res["runs"]:
        lines += [
            f"### Redis {run['version']}",
            "",
            f"Server: {engine.server_heading(run)}.",
            "",
            engine.server_report(doc, run, level="####"),
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
    "<!-- bench_engine: generated from here on by `python -m benchmarks report --write-docs`. -->"
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
