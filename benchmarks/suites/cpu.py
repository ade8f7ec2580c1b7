"""What a cycle costs in CPU time when many processes share the machine.

    python -m benchmarks cpu [--quick] [--server 6.2|7|PATH] [--processes 4,8]
        [--cases allocator,pool,semaphore,lock,floor] [--rounds 4] [--duration 3]

``engine`` reports the aggregate cycles/s of N processes; this says
where that rate goes. For each number of processes, the cases run in turn,
round by round (the workers of ``workers.Gang``, started together by a
barrier, for ``--duration`` seconds each); around each run the CPU time of the
workers and of Redis is read from ``/proc/<pid>/stat`` (user and system) and
their context switches from ``/proc/<pid>/status``. Printed per case, medians
of the rounds: the aggregate cycles/s and its ratio to the first case, then
per cycle the client CPU µs (all workers; of it in the kernel), Redis CPU µs
(of it in the kernel), and the workers' voluntary and involuntary context
switches. With more processes than cores the machine's CPU is the limit, and
the rate is about the cores over the total CPU a cycle takes. Linux only;
needs the ``bench`` extra.
"""

from __future__ import annotations

import argparse
import os
import statistics
from pathlib import Path
from typing import Any

import redis

from benchmarks import cases, servers
from benchmarks.results import choose, heading, ints, say, skipped
from benchmarks.workers import Gang

NAME = "cpu"
HELP = "client and Redis CPU time per cycle under N processes"

TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def cpu_times(pid: int) -> tuple[float, float]:
    """(user, system) CPU seconds of process ``pid``."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return int(fields[11]) / TICK, int(fields[12]) / TICK


def switches(pid: int) -> tuple[int, int]:
    """(voluntary, involuntary) context switches of process ``pid``."""
    counts = {}
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            name, _, value = line.partition(":")
            if name.endswith("ctxt_switches"):
                counts[name] = int(value)
    return counts["voluntary_ctxt_switches"], counts["nonvoluntary_ctxt_switches"]


def reading(workers: list[int], redis_pid: int) -> list[float]:
    """[client user, client system, Redis user, Redis system, voluntary, involuntary]."""
    client = [cpu_times(pid) for pid in workers]
    ctx = [switches(pid) for pid in workers]
    return [
        sum(u for u, _ in client),
        sum(s for _, s in client),
        *cpu_times(redis_pid),
        sum(v for v, _ in ctx),
        sum(n for _, n in ctx),
    ]


def measure(
    url: str, redis_pid: int, n: int, names: list[str], s: dict[str, Any]
) -> dict[str, list[Any]]:
    """Per case, one row per round: (cycles/s, the per-cycle differences of :func:`reading`)."""
    client, dclient = redis.Redis.from_url(url), redis.Redis.from_url(url, decode_responses=True)
    gang = Gang(url, n, [n])
    try:
        gang.ready()
        pids = [p.pid for p in gang.processes][:n]
        rows: dict[str, list[Any]] = {case: [] for case in names}
        for _ in range(s["rounds"]):
            for case in names:
                client.flushall()
                cases.setup(case, client, dclient, "cpu")
                per_worker, before, after = gang.throughput(
                    case, "cpu", n, s["duration"], lambda: reading(pids, redis_pid)
                )
                rate = sum(count / seconds for count, seconds in per_worker)
                cycles = rate * s["duration"]
                spent = [(b - a) / cycles for a, b in zip(before, after, strict=True)]
                rows[case].append((rate, spent))
        return rows
    finally:
        gang.stop()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    servers.add_option(parser, multiple=False)
    parser.add_argument("--processes", help="comma-separated (default 4,8; --quick: 2)")
    parser.add_argument(
        "--cases", help="comma-separated (default allocator,pool,semaphore,lock,floor)"
    )
    parser.add_argument("--rounds", type=int, help="default 4 (--quick: 1)")
    parser.add_argument("--duration", type=float, help="seconds per run (default 3; --quick: 0.5)")


def run(args: argparse.Namespace) -> dict[str, Any] | None:
    if not Path("/proc/self/stat").exists():
        say("cpu reads /proc/<pid>/stat: Linux only")
        return None
    s = choose(
        args,
        {"processes": "4,8", "cases": "allocator,pool,semaphore,lock,floor", "rounds": 4,
         "duration": 3.0},
        {"processes": "2", "rounds": 1, "duration": 0.5},
    )  # fmt: skip
    skip = [{"case": c, "reason": why} for c in s["cases"].split(",") if (why := cases.missing(c))]
    names = [c for c in s["cases"].split(",") if not cases.missing(c)]
    for item in skip:
        say(f"(skipped {item['case']}: {item['reason']})")
    runs: dict[str, Any] = {}
    with servers.redis_server(args.server) as srv:
        if srv.binary is None:
            say("cpu reads the server's /proc/<pid>: it needs a private server, not a URL")
            return None
        for n in ints(s["processes"]):
            say(f"{n} processes")
            rows = measure(srv.url, srv.pid, n, names, s)
            runs[str(n)] = {case: [[rate, spent] for rate, spent in rows[case]] for case in names}
    return {
        "settings": {**s, "server": args.server},
        "results": {
            "cases": {c: cases.CASES.get(c, c) for c in names},
            # processes -> case -> [[cycles/s, [per cycle: client user s, client system s,
            # Redis user s, Redis system s, voluntary, involuntary switches]] per round]
            "runs": runs,
        },
        "skipped": skip,
    }


def render(doc: dict[str, Any]) -> str:
    parts = [heading(doc)]
    labels = doc["results"]["cases"]
    names = list(labels)
    for n, rows in doc["results"]["runs"].items():
        lines = [
            f"### {n} processes",
            "",
            "| case | cycles/s | vs first | client CPU µs (kernel) | Redis CPU µs (kernel) "
            "| switches (voluntary / involuntary) |",
            "|---|---:|---:|---:|---:|---:|",
        ]
        first = statistics.median(rate for rate, _ in rows[names[0]])
        for case in names:
            rate = statistics.median(r for r, _ in rows[case])
            m = [statistics.median(d[i] for _, d in rows[case]) for i in range(6)]
            lines.append(
                f"| {labels[case]} | {rate:,.0f} | {rate / first:.2f}x "
                f"| {(m[0] + m[1]) * 1e6:.0f} ({m[1] * 1e6:.0f}) | {(m[2] + m[3]) * 1e6:.0f} "
                f"({m[3] * 1e6:.0f}) | {m[4]:.2f} / {m[5]:.2f} |"
            )
        parts.append("\n".join(lines))
    if doc.get("skipped"):
        parts.append(skipped(doc))
    return "\n\n".join(parts)
