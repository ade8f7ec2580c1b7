"""Async views on an ASGI server next to sync views on a threaded WSGI server.

One Django project (``asgi_app.py``): a view that holds one resource of a pool
of 10 for ``--holds`` milliseconds (2 and 20: the resource's use), waiting up to
30 s for it, and the same view without the pool (Django's own ceiling). In the
same run, round by round:

* **async**: ``async def`` views under uvicorn (uvloop, httptools), one worker
  process;
* **sync**: ``def`` views under gunicorn, one worker process with 500 threads
  (``gthread``: a sync view needs a thread per concurrent request to wait).

``wrk`` keeps ``--clients`` (500) connections busy for ``--seconds`` per
measurement, after a 2 s warm-up. Reported per server and view: requests/s,
latency p50 and p99 (wrk's), non-2xx answers, and the serving process's
threads and RSS (the highest seen, sampled every 0.25 s). Then the hand-off
latency (a release -> the next waiter holds it), in one process: 500 asyncio
tasks, then 500 threads, on a pool of 10, each holding for 1 ms.

    .venv/bin/python benchmarks/bench_asgi.py [--rounds 3] [--seconds 10]

Needs ``wrk`` (Debian's package) and the ``bench`` extra (uvicorn, gunicorn).
Uses ``REDIS_URL`` if set (it is flushed!), else starts an embedded redis-server.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import redis
from benchmark_redis import benchmark_redis

from django_redis_pool import ResourcePool

HERE = Path(__file__).resolve().parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def server_command(kind: str, port: int, threads: int, connections: int = 0) -> list[str]:
    """uvicorn (``async``) or gunicorn gthread with ``threads`` threads (``sync``)
    serving ``asgi_app``, for up to ``connections`` clients (default ``threads``)."""
    if kind == "async":
        return [
            sys.executable, "-m", "uvicorn", "asgi_app:application",
            "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
            "--log-level", "warning", "--no-access-log", "--backlog", "4096",
            "--loop", "uvloop", "--http", "httptools",
        ]  # fmt: skip
    return [
        sys.executable, "-m", "gunicorn", "asgi_app:wsgi",
        "-k", "gthread", "-w", "1", "--threads", str(threads),
        "-b", f"127.0.0.1:{port}", "--backlog", "4096", "--log-level", "warning",
        "--worker-connections", str((connections or threads) * 2), "--keep-alive", "30",
    ]  # fmt: skip


def worker_pid(server: subprocess.Popen[bytes], kind: str) -> int:
    """The process serving requests: gunicorn's worker (its only child)."""
    if kind == "async":
        return server.pid
    children = Path(f"/proc/{server.pid}/task/{server.pid}/children")
    for _ in range(100):
        pids = children.read_text().split() if children.exists() else []
        if pids:
            return int(pids[0])
        time.sleep(0.05)
    raise RuntimeError("gunicorn started no worker")


def sample(pid: int, stop: threading.Event, seen: dict[str, int]) -> None:
    while not stop.is_set():
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            return
        for field, key in (("Threads", "threads"), ("VmRSS", "rss_kb")):
            match = re.search(rf"^{field}:\s+(\d+)", status, re.M)
            if match:
                seen[key] = max(seen.get(key, 0), int(match[1]))
        stop.wait(0.25)


@contextlib.contextmanager
def sampling(pid: int) -> Iterator[dict[str, int]]:
    """Yield the highest threads and RSS of process ``pid`` seen while inside (read
    the dict after the block)."""
    seen: dict[str, int] = {}
    stop = threading.Event()
    watcher = threading.Thread(target=sample, args=(pid, stop, seen))
    watcher.start()
    try:
        yield seen
    finally:
        stop.set()
        watcher.join()


def wrk(
    url: str, clients: int, seconds: float, threads: int = 2, script: Path | None = None
) -> dict[str, Any]:
    """wrk's requests/s, latency p50 and p99 (ms), non-2xx answers, socket errors;
    with ``script``, also what it prints as ``status <code>: <count>`` lines
    (``statuses``: count by HTTP status) and the ``requests`` answered."""
    duration = f"-d{max(1, round(seconds))}s"
    extra = ["-s", str(script)] if script else []
    out = subprocess.run(
        ["wrk", f"-t{threads}", f"-c{clients}", duration, "--latency", "--timeout", "30s",
         *extra, url],
        capture_output=True,
        text=True,
        check=True,
    ).stdout  # fmt: skip

    def ms(label: str) -> float:
        match = re.search(rf"^\s+{label}\s+([\d.]+)(us|ms|s)\s*$", out, re.M)
        assert match, out
        return float(match[1]) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[match[2]]

    rps = re.search(r"Requests/sec:\s+([\d.]+)", out)
    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    errors = re.search(r"Socket errors: (.*)", out)
    requests = re.search(r"^\s*(\d+) requests in ", out, re.M)
    assert rps and requests, out
    result: dict[str, Any] = {
        "rps": float(rps[1]),
        "p50": ms("50%"),
        "p99": ms("99%"),
        "non2xx": int(bad[1]) if bad else 0,
        "errors": errors[1].strip() if errors else "",
    }
    if script:
        statuses = re.findall(r"^status (\d+): (\d+)$", out, re.M)
        result["statuses"] = {int(code): int(count) for code, count in statuses}
        result["requests"] = int(requests[1])
    return result


@contextlib.contextmanager
def serving(
    kind: str, env: dict[str, str], threads: int, connections: int = 0, ready: str = ""
) -> Iterator[tuple[str, int]]:
    """Start ``server_command(kind, ...)`` with ``env`` added to the environment, wait
    until ``/<ready>`` answers, yield (its root URL, the pid serving requests);
    stop it when the block ends (SIGTERM: gunicorn's worker runs its exit handlers;
    uvicorn, which raises the signal again once shut down, does not), killed if it
    takes more than 30 s."""
    port = free_port()
    env = {
        **os.environ,
        **env,
        "PYTHONPATH": f"{HERE}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
    }
    command = server_command(kind, port, threads, connections)
    server = subprocess.Popen(command, cwd=HERE, env=env)
    try:
        root = f"http://127.0.0.1:{port}"
        for _ in range(200):
            try:
                urllib.request.urlopen(f"{root}/{ready}", timeout=5).read()
                break
            except OSError:
                time.sleep(0.05)
        yield root, worker_pid(server, kind)
    finally:
        server.terminate()
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def measure(
    kind: str, view: str, hold_ms: float, url: str, args: argparse.Namespace
) -> dict[str, Any]:
    env = {"REDIS_URL": url, "HOLD_MS": str(hold_ms), "POOL_SIZE": str(args.pool_size)}
    with serving(kind, env, args.clients, ready=f"{view}/") as (root, pid):
        base = f"{root}/{view}/"
        wrk(base, args.clients, 2)  # warm-up: connections, threads, Django's first requests
        with sampling(pid) as seen:
            result = wrk(base, args.clients, args.seconds)
    return {**result, **seen}


# -- hand-off latency, in one process ---------------------------------------------------


def handoffs_async(client: redis.Redis, waiters: int, size: int, rounds: int) -> list[float]:
    pool = ResourcePool(client, "handoff-async", lease_timeout=30)
    pool.associate_many([f"r{i}" for i in range(size)])
    released: dict[str, float] = {}
    delays: list[float] = []

    async def one() -> None:
        for _ in range(rounds):
            lease = await pool.aacquire(timeout=60)
            assert lease is not None
            at = time.perf_counter()
            if lease.resource in released:
                delays.append(at - released.pop(lease.resource))
            await asyncio.sleep(0.001)
            released[lease.resource] = time.perf_counter()
            await lease.arelease()

    async def main() -> None:
        await asyncio.gather(*(one() for _ in range(waiters)))

    asyncio.run(main())
    return delays


def handoffs_sync(client: redis.Redis, waiters: int, size: int, rounds: int) -> list[float]:
    pool = ResourcePool(client, "handoff-sync", lease_timeout=30)
    pool.associate_many([f"r{i}" for i in range(size)])
    released: dict[str, float] = {}
    delays: list[float] = []
    mutex = threading.Lock()

    def one() -> None:
        for _ in range(rounds):
            lease = pool.acquire(timeout=60)
            assert lease is not None
            at = time.perf_counter()
            with mutex:
                if lease.resource in released:
                    delays.append(at - released.pop(lease.resource))
            time.sleep(0.001)
            with mutex:
                released[lease.resource] = time.perf_counter()
            lease.release()

    threads = [threading.Thread(target=one) for _ in range(waiters)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return delays


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


#: (server, view, label) measured for each hold time.
CASES = (
    ("async", "async", "uvicorn, async view, `@with_resource`"),
    ("sync", "sync", "gunicorn gthread, sync view, `@with_resource`"),
    ("async", "plain-async", "uvicorn, async view, no pool"),
    ("sync", "plain-sync", "gunicorn gthread, sync view, no pool"),
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--clients", type=int, default=500)
    parser.add_argument("--pool-size", type=int, default=10)
    parser.add_argument("--holds", default="2,20", help="hold times in ms, comma-separated")
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        sys.exit("wrk is needed: apt-get install wrk")
    holds = [float(h) for h in args.holds.split(",")]
    with benchmark_redis() as (url, client):
        for hold in holds:
            results: dict[str, list[dict[str, Any]]] = {view: [] for _, view, _ in CASES}
            for round_ in range(args.rounds):
                order = CASES if round_ % 2 == 0 else CASES[::-1]
                for kind, view, _ in order:
                    client.flushall()
                    results[view].append(measure(kind, view, hold, url, args))
                    print(f"hold {hold:g} ms, round {round_ + 1}, {view}: {results[view][-1]}")
            print(
                f"\n{args.clients} clients, pool of {args.pool_size}, hold {hold:g} ms, "
                f"median of {args.rounds} runs of {args.seconds:g} s:\n"
            )
            print("| server, view | requests/s | p50 ms | p99 ms | non-2xx | threads | RSS MB |")
            print("|---|---:|---:|---:|---:|---:|---:|")
            medians = {}
            for _, view, label in CASES:
                keys = ("rps", "p50", "p99", "non2xx", "threads", "rss_kb")
                row = {key: statistics.median(r[key] for r in results[view]) for key in keys}
                medians[view] = row
                print(
                    f"| {label} | {row['rps']:.0f} | {row['p50']:.1f} | {row['p99']:.1f} | "
                    f"{row['non2xx']:.0f} | {row['threads']:.0f} | {row['rss_kb'] / 1024:.0f} |"
                )
            ratio = medians["async"]["rps"] / medians["sync"]["rps"]
            print(f"\npooled async / pooled sync throughput: {ratio:.2f}x", flush=True)
        client.flushall()
        print(f"\nHand-off (release -> the next waiter holds it), {args.clients} waiters:\n")
        print("| waiters | hand-offs | p50 ms | p99 ms |")
        print("|---|---:|---:|---:|")
        # (redis-py 8 caps a client's pool at 100 connections: one per waiter here)
        client = redis.Redis.from_url(url, max_connections=args.clients * 2)
        for label, run in (("asyncio tasks", handoffs_async), ("threads", handoffs_sync)):
            delays = run(client, args.clients, 10, 10)
            print(
                f"| {args.clients} {label} | {len(delays)} | {percentile(delays, 0.5) * 1000:.2f} "
                f"| {percentile(delays, 0.99) * 1000:.2f} |"
            )


if __name__ == "__main__":
    main()
