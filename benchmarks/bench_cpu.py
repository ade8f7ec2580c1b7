"""What a cycle costs in CPU time when many processes share the machine.

    .venv/bin/python benchmarks/bench_cpu.py [--server 6.2|7|PATH] [--processes 4,8]
        [--cases allocator,pool,semaphore,lock,floor] [--rounds 4] [--duration 3]

``bench_engine.py`` reports the aggregate cycles/s of N processes; this says
where that rate goes. For each number of processes, the cases run in turn,
round by round (the workers of ``engine_workers.Gang``, started together by a
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
from typing import Any

import engine_cases as cases
import redis
from engine_workers import Gang

from django_redis_pool.testing import EmbeddedRedis, find_redis_binary

TICK = os.sysconf("SC_CLK_TCK")


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


def measure(url: str, redis_pid: int, n: int, names: list[str], s: Any) -> dict[str, list[Any]]:
    """Per case, one row per round: (cycles/s, the per-cycle differences of :func:`reading`)."""
    client, dclient = redis.Redis.from_url(url), redis.Redis.from_url(url, decode_responses=True)
    gang = Gang(url, n, [n])
    try:
        gang.ready()
        pids = [p.pid for p in gang.processes][:n]
        rows: dict[str, list[Any]] = {case: [] for case in names}
        for _ in range(s.rounds):
            for case in names:
                client.flushall()
                cases.setup(case, client, dclient, "cpu")
                per_worker, before, after = gang.throughput(
                    case, "cpu", n, s.duration, lambda: reading(pids, redis_pid)
                )
                rate = sum(count / seconds for count, seconds in per_worker)
                cycles = rate * s.duration
                spent = [(b - a) / cycles for a, b in zip(before, after, strict=True)]
                rows[case].append((rate, spent))
        return rows
    finally:
        gang.stop()


def report(n: int, names: list[str], rows: dict[str, list[Any]]) -> None:
    print(f"\n{n} processes\n")
    print(
        "| case | cycles/s | vs first | client CPU µs (kernel) | Redis CPU µs (kernel) "
        "| switches (voluntary / involuntary) |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    first = statistics.median(rate for rate, _ in rows[names[0]])
    for case in names:
        rate = statistics.median(r for r, _ in rows[case])
        m = [statistics.median(d[i] for _, d in rows[case]) for i in range(6)]
        print(
            f"| {cases.CASES.get(case, case)} | {rate:,.0f} | {rate / first:.2f}x "
            f"| {(m[0] + m[1]) * 1e6:.0f} ({m[1] * 1e6:.0f}) | {(m[2] + m[3]) * 1e6:.0f} "
            f"({m[3] * 1e6:.0f}) | {m[4]:.2f} / {m[5]:.2f} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--server", default="6.2")
    parser.add_argument("--processes", default="4,8")
    parser.add_argument("--cases", default="allocator,pool,semaphore,lock,floor")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--duration", type=float, default=3.0)
    s = parser.parse_args()
    binary = {"6.2": None, "7": "/usr/bin/redis-server"}.get(s.server, s.server)
    names = s.cases.split(",")
    with EmbeddedRedis(executable=binary or find_redis_binary()) as srv:
        client = srv.client()
        redis_pid = int(client.info("server")["process_id"])
        print(f"Redis {client.info('server')['redis_version']}, {os.cpu_count()} CPUs")
        for n in (int(x) for x in s.processes.split(",")):
            report(n, names, measure(srv.url, redis_pid, n, names, s))


if __name__ == "__main__":
    main()
