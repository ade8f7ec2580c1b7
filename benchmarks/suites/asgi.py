"""Async views on an ASGI server next to sync views on a threaded WSGI server.

One Django project (``assets/asgi_app.py``): a view that holds one resource of a pool
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

    python -m benchmarks asgi [--quick] [--rounds 3] [--seconds 10] [--holds 2,20]
        [--clients 500] [--server 6.2|7|PATH|URL]

Needs ``wrk`` (Debian's package) and the ``bench`` extra (uvicorn, gunicorn):
a server whose tools are missing is skipped (the hand-off latency needs none).
``--quick``: 1 round of 1 s, 50 clients, a hold of 2 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import threading
import time
from typing import Any

import redis

from benchmarks import servers, web
from benchmarks.results import choose, heading, quantile, say, skipped
from django_redis_pool import ResourcePool

NAME = "asgi"
HELP = "a pooled view, uvicorn async vs gunicorn sync (wrk); hand-offs"


def measure(kind: str, view: str, hold_ms: float, url: str, s: dict[str, Any]) -> dict[str, Any]:
    env = {"REDIS_URL": url, "HOLD_MS": str(hold_ms), "POOL_SIZE": str(s["pool_size"])}
    with web.serving(kind, env, s["clients"], ready=f"{view}/") as (root, pid):
        base = f"{root}/{view}/"
        web.wrk(base, s["clients"], 2)  # warm-up: connections, threads, Django's first requests
        with web.sampling(pid) as seen:
            result = web.wrk(base, s["clients"], s["seconds"])
    return {**result, **seen}


#: (server, view, label) measured for each hold time.
CASES = (
    ("async", "async", "uvicorn, async view, `@with_resource`"),
    ("sync", "sync", "gunicorn gthread, sync view, `@with_resource`"),
    ("async", "plain-async", "uvicorn, async view, no pool"),
    ("sync", "plain-sync", "gunicorn gthread, sync view, no pool"),
)


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


def add_arguments(parser: argparse.ArgumentParser) -> None:
    servers.add_option(parser, multiple=False)
    parser.add_argument("--rounds", type=int, help="default 3 (--quick: 1)")
    parser.add_argument("--seconds", type=float, help="per measurement (default 10; --quick: 1)")
    parser.add_argument("--clients", type=int, help="wrk's connections (default 500; --quick: 50)")
    parser.add_argument("--pool-size", type=int, help="default 10")
    parser.add_argument(
        "--holds", help="hold times in ms, comma-separated (default 2,20; --quick: 2)"
    )


def run(args: argparse.Namespace) -> dict[str, Any] | None:
    s = choose(
        args,
        {"rounds": 3, "seconds": 10.0, "clients": 500, "pool_size": 10, "holds": "2,20"},
        {"rounds": 1, "seconds": 1.0, "clients": 50, "holds": "2"},
    )
    holds = [float(h) for h in str(s["holds"]).split(",")]
    skip = [
        {"case": f"{kind}: {label}", "reason": why}
        for kind, _, label in CASES
        if (why := web.missing(kind))
    ]
    for item in skip:
        say(f"(skipped {item['case']}: {item['reason']})")
    cases = [c for c in CASES if not web.missing(c[0])]
    http: dict[str, dict[str, list[dict[str, Any]]]] = {}
    with servers.redis_server(args.server) as srv:
        url, client = srv.url, srv.client()
        for hold in holds if cases else []:
            results: dict[str, list[dict[str, Any]]] = {view: [] for _, view, _ in cases}
            for round_ in range(s["rounds"]):
                order = cases if round_ % 2 == 0 else cases[::-1]
                for kind, view, _ in order:
                    client.flushall()
                    results[view].append(measure(kind, view, hold, url, s))
                    say(f"hold {hold:g} ms, round {round_ + 1}, {view}: {results[view][-1]}")
            http[f"{hold:g}"] = results
        client.flushall()
        say(f"hand-offs, {s['clients']} waiters")
        handoffs = {}
        # (redis-py 8 caps a client's pool at 100 connections: one per waiter here)
        client = redis.Redis.from_url(url, max_connections=s["clients"] * 2)
        for label, measure_ in (("asyncio tasks", handoffs_async), ("threads", handoffs_sync)):
            delays = measure_(client, s["clients"], 10, 10)
            handoffs[label] = {
                "count": len(delays),
                "p50_ms": quantile(delays, 0.5) * 1000,
                "p99_ms": quantile(delays, 0.99) * 1000,
            }
    return {
        "settings": {**s, "server": args.server},
        "results": {
            "views": {view: label for _, view, label in cases},
            # hold ms -> view -> [wrk's {rps, p50, p99, non2xx, errors} + the serving
            # process's highest {threads, rss_kb}, per round]
            "http": http,
            "handoffs": handoffs,  # waiters -> {count, p50_ms, p99_ms}
        },
        "skipped": skip,
    }


def render(doc: dict[str, Any]) -> str:
    return f"{heading(doc)}\n\n{docs([doc], '')}"


def tables(doc: dict[str, Any]) -> list[str]:
    """One table per hold time, then the hand-off latency's."""
    s, res = doc["settings"], doc["results"]
    parts = []
    for hold, results in res["http"].items():
        lines = [
            f"{s['clients']} clients, pool of {s['pool_size']}, hold {hold} ms, "
            f"median of {s['rounds']} runs of {s['seconds']:g} s:",
            "",
            "| server, view | requests/s | p50 ms | p99 ms | non-2xx | threads | RSS MB |",
            "|---|---:|---:|---:|---:|---:|---:|",
        ]
        medians = {}
        for view, label in res["views"].items():
            keys = ("rps", "p50", "p99", "non2xx", "threads", "rss_kb")
            row = {key: statistics.median(r.get(key, 0) for r in results[view]) for key in keys}
            medians[view] = row
            lines.append(
                f"| {label} | {row['rps']:.0f} | {row['p50']:.1f} | {row['p99']:.1f} | "
                f"{row['non2xx']:.0f} | {row['threads']:.0f} | {row['rss_kb'] / 1024:.0f} |"
            )
        if "async" in medians and "sync" in medians:
            ratio = medians["async"]["rps"] / medians["sync"]["rps"]
            lines += ["", f"pooled async / pooled sync throughput: {ratio:.2f}x"]
        parts.append("\n".join(lines))
    lines = [
        f"Hand-off (release -> the next waiter holds it), {s['clients']} waiters:",
        "",
        "| waiters | hand-offs | p50 ms | p99 ms |",
        "|---|---:|---:|---:|",
    ]
    for label, h in res["handoffs"].items():
        lines.append(
            f"| {s['clients']} {label} | {h['count']} | {h['p50_ms']:.2f} | {h['p99_ms']:.2f} |"
        )
    parts.append("\n".join(lines))
    return parts


# -- docs/performance.md ------------------------------------------------------------------

DOCS_PARTS = ("",)


def docs(found: list[dict[str, Any]], part: str) -> str:
    """docs/performance.md's tables (the render's, without its heading), and what
    was skipped."""
    doc = found[0]
    return "\n\n".join([*tables(doc), *([skipped(doc)] if doc.get("skipped") else [])])
