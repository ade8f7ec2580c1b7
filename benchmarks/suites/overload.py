"""A pooled view overloaded: what the clients get when demand exceeds the pool.

One Django project (``assets/asgi_app.py``, shared with ``asgi``): a view under
``@with_resource("printers", timeout=5)`` holds one resource of a pool of 10 for
20 ms (``time.sleep``; its ``async def`` twin ``await asyncio.sleep``), so the
pool grants at most 10 / 0.02 s = 500 requests/s, however many ask. Each case
asks for more, for ``--seconds`` (15), ``wrk -t 4``:

* **sync**: gunicorn ``-k gthread``, one worker process, 200 threads under 400
  connections, then 500 threads under 1000 connections;
* **async**: uvicorn (uvloop, httptools), one worker process, the async view,
  under 400 then 1000 connections;

each with the pool's ``MAX_WAITING`` unset (every request queues, up to its
5 s) and set to ``--max-waiting`` (20: past 20 queued, a request is refused at
once). A request refused, at once or after waiting 5 s, is answered 503.

Each case starts its own server on a flushed Redis, warms it up (``wrk`` for
2 s), waits until the pool has nothing held and nobody waiting, then measures.
Reported per case (the median of ``--rounds``; the cases interleaved round by
round, in reverse order every other round), as a Markdown table:

* what the clients saw (wrk, ``--latency``, responses counted by status by
  ``assets/wrk_statuses.lua``): responses/s, 2xx/s (the goodput) and its share of the
  pool's 500/s ceiling, 503/s, latency p50 and p99 of all responses;
* what the pool counted (``ResourcePool.activity().totals``, which the server
  adds into Redis every 2 s, at exit, and when ``/flush-counts/`` asks: after
  the warm-up and after the run, since uvicorn exits by its SIGTERM raised
  again, running no exit handler), read once the server has exited, minus what
  was there after the warm-up: requests granted, refused after waiting 5 s
  (``refused_timeout``), refused at once (``refused_full``), and the mean wait
  of a granted one. These include the requests still in the server when wrk
  stopped (served to closed connections), so they may exceed what wrk saw;
* how the pool recovers: the seconds after wrk stopped until nothing was held
  and nobody waited (``snapshot(limit=0)``, polled), and the holds and waiters
  left once the server has exited (0/0 expected);
* the serving process's threads and RSS (the highest seen, sampled every 0.25 s).

Anything odd (a status other than 200 and 503, socket errors, leases lost or
reclaimed, fewer grants counted than 2xx answered, a pool that did not settle)
is listed under the table.

    python -m benchmarks overload [--quick] [--seconds 15] [--rounds 1]
        [--cases 'sync-*,*-max20'] [--server 6.2|7|PATH|URL]

``--quick``: a smoke run (3 s per case, 1 s warm-up, loads of 50 threads / 100
connections and 100 / 200). ``--cases``: comma-separated patterns (fnmatch) of
case ids, e.g. ``sync-c400-unbounded``, ``async-c1000-max20``; ``--list``
prints them. ``--loads`` (``THREADS:CONNECTIONS,...``) replaces the loads.

Needs ``wrk`` (Debian's package) and the ``bench`` extra (uvicorn, gunicorn):
a case whose tools are missing is skipped.
"""

from __future__ import annotations

import argparse
import fnmatch
import statistics
import time
import urllib.request
from dataclasses import dataclass
from typing import Any

import redis

from benchmarks import servers, web
from benchmarks.results import choose, heading, say, skipped
from django_redis_pool import ResourcePool

NAME = "overload"
HELP = "a pooled view past its pool's capacity: goodput, 503s, recovery"

POOL = "printers"  #: asgi_app.py's pool
POOL_SIZE = 10
HOLD_MS = 20
WAIT_S = 5  #: the views' ``timeout``
CEILING = POOL_SIZE * 1000 / HOLD_MS  #: the most grants per second the pool can give
WRK_THREADS = 4
#: (gunicorn threads, connections) of each load.
LOADS = ((200, 400), (500, 1000))
QUICK_LOADS = ((50, 100), (100, 200))
#: How long a pool may take to settle once wrk stops: a waiter's 5 s, and
#: gthread's queue of requests read but not yet given a thread.
SETTLE_WITHIN = 60.0
#: The counts reported (``django_redis_pool.primitives.counts.FIELDS``).
COUNTED = ("acquired", "refused_timeout", "refused_full", "wait_us", "lost", "reclaimed")


@dataclass(frozen=True)
class Case:
    kind: str  #: "sync" (gunicorn gthread, the def view) or "async" (uvicorn, async def)
    threads: int  #: gunicorn's threads (sync only)
    connections: int  #: wrk's
    max_waiting: int | None  #: the pool's MAX_WAITING (None: no limit)

    @property
    def id(self) -> str:
        waiting = "unbounded" if self.max_waiting is None else f"max{self.max_waiting}"
        return f"{self.kind}-c{self.connections}-{waiting}"

    @property
    def label(self) -> str:
        server = (
            f"gunicorn gthread, {self.threads} threads"
            if self.kind == "sync"
            else "uvicorn, async view"
        )
        waiting = "unbounded" if self.max_waiting is None else f"≤ {self.max_waiting}"
        return f"{server}, {self.connections} conns, waiting {waiting}"


def settle(pool: ResourcePool) -> float | None:
    """Seconds until ``pool`` has nothing held and nobody waiting (polled), or
    None if that did not happen within :data:`SETTLE_WITHIN`."""
    start = time.monotonic()
    while time.monotonic() - start < SETTLE_WITHIN:
        snap = pool.snapshot(limit=0)
        if snap.held_count == 0 and snap.waiting_count == 0:
            return time.monotonic() - start
        time.sleep(0.02)
    return None


def flush_counts(root: str) -> int:
    """Have the server add the counts it recorded into Redis now; how many
    primitives' counts it could not add."""
    with urllib.request.urlopen(f"{root}/flush-counts/", timeout=30) as answer:
        return int(answer.read().decode().rpartition(" ")[2])


def measure(case: Case, url: str, client: redis.Redis, s: dict[str, Any]) -> dict[str, Any]:
    client.flushall()
    pool = ResourcePool(client, POOL)
    env = {
        "REDIS_URL": url,
        "HOLD_MS": str(HOLD_MS),
        "POOL_SIZE": str(POOL_SIZE),
        "WAIT_S": str(WAIT_S),
        "MAX_WAITING": "" if case.max_waiting is None else str(case.max_waiting),
    }
    # (ready: one request restores the flushed pool's resources, before many at once try)
    server = web.serving(case.kind, env, case.threads, case.connections, ready=f"{case.kind}/")
    with server as (root, pid):
        target = f"{root}/{case.kind}/"
        web.wrk(target, case.connections, s["warmup"], threads=WRK_THREADS)
        warmed = settle(pool)
        unflushed = flush_counts(root)
        before = pool.activity().totals
        with web.sampling(pid) as seen:
            result = web.wrk(
                target, case.connections, s["seconds"], threads=WRK_THREADS, script=web.STATUSES
            )
        settled = settle(pool)
        # (uvicorn exits by its SIGTERM raised again: no exit handler flushes its counts)
        unflushed += flush_counts(root)
    after = pool.activity().totals  # once the server has exited
    left = pool.snapshot(limit=0)
    counted = {field: after.get(field, 0) - before.get(field, 0) for field in COUNTED}
    statuses: dict[int, int] = result.pop("statuses")
    per_second = result["rps"] / max(1, result.pop("requests"))
    ok = sum(count for status, count in statuses.items() if 200 <= status < 300)
    odd = [
        f"status {status}: {count}"
        for status, count in sorted(statuses.items())
        if not (200 <= status < 300 or status == 503)
    ]
    if result["errors"]:
        odd.append(f"socket errors: {result['errors']}")
    odd += [f"{field}: {counted[field]}" for field in ("lost", "reclaimed") if counted[field]]
    if counted["acquired"] < ok:
        odd.append(f"{counted['acquired']} grants counted < {ok} 2xx answered")
    if warmed is None or settled is None:
        odd.append(f"not settled within {SETTLE_WITHIN:g} s (after warm-up: {warmed})")
    if unflushed:
        odd.append(f"the server could not add its counts into Redis ({unflushed} failures)")
    if left.held_count or left.waiting_count:
        odd.append(f"left: {left.held_count} held, {left.waiting_count} waiting")
    return {
        **result,
        "ok_rps": ok * per_second,
        "refused_rps": statuses.get(503, 0) * per_second,
        "errors_5xx": sum(n for status, n in statuses.items() if status >= 500 and status != 503),
        "granted": counted["acquired"],
        "refused_timeout": counted["refused_timeout"],
        "refused_full": counted["refused_full"],
        "wait_ms": counted["wait_us"] / 1000 / max(1, counted["acquired"]),
        "settled": SETTLE_WITHIN if settled is None else settled,
        "held_left": left.held_count,
        "waiting_left": left.waiting_count,
        **seen,
        "odd": odd,
    }


def parse_loads(text: str) -> list[tuple[int, int]]:
    loads = []
    for item in text.split(","):
        threads, _, connections = item.partition(":")
        loads.append((int(threads), int(connections or threads)))
    return loads


def all_cases(loads: Any, max_waiting: int, patterns: list[str]) -> list[Case]:
    found = [
        Case(kind, threads, connections, waiting)
        for kind in ("sync", "async")
        for threads, connections in loads
        for waiting in (None, max_waiting)
    ]
    return [case for case in found if any(fnmatch.fnmatch(case.id, p) for p in patterns)]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    servers.add_option(parser, multiple=False)
    parser.add_argument("--seconds", type=float, help="per case (default 15; --quick: 3)")
    parser.add_argument("--rounds", type=int, help="default 1")
    parser.add_argument("--warmup", type=float, help="seconds (default 2; --quick: 1)")
    parser.add_argument("--cases", default="*", help="comma-separated patterns of case ids")
    parser.add_argument("--loads", help="THREADS:CONNECTIONS,... (gunicorn's threads, wrk's -c)")
    parser.add_argument("--max-waiting", type=int, default=20, help="the bounded cases' limit")
    parser.add_argument("--list", action="store_true", help="print the case ids and exit")


def run(args: argparse.Namespace) -> dict[str, Any] | None:
    s = choose(
        args,
        {"seconds": 15.0, "rounds": 1, "warmup": 2.0},
        {"seconds": 3.0, "warmup": 1.0},
    )
    loads = parse_loads(args.loads) if args.loads else QUICK_LOADS if args.quick else LOADS
    cases = all_cases(loads, args.max_waiting, args.cases.split(","))
    if args.list or not cases:
        print("\n".join(case.id for case in cases) or f"no case matches {args.cases!r}")
        raise SystemExit(0)
    skip = [{"case": c.id, "reason": why} for c in cases if (why := web.missing(c.kind))]
    for item in skip:
        say(f"(skipped {item['case']}: {item['reason']})")
    cases = [c for c in cases if not web.missing(c.kind)]
    if not cases:
        say("overload: every case was skipped")
        return None
    results: dict[Case, list[dict[str, Any]]] = {case: [] for case in cases}
    with servers.redis_server(args.server) as srv:
        client = srv.client()
        for round_ in range(s["rounds"]):
            for case in cases if round_ % 2 == 0 else cases[::-1]:
                results[case].append(measure(case, srv.url, client, s))
                say(f"round {round_ + 1}, {case.id}: {results[case][-1]}")
    return {
        "settings": {
            **s,
            "server": args.server,
            "loads": [list(load) for load in loads],
            "max_waiting": args.max_waiting,
            "cases": args.cases,
            "pool_size": POOL_SIZE,
            "hold_ms": HOLD_MS,
            "wait_s": WAIT_S,
            "wrk_threads": WRK_THREADS,
        },
        # case id -> {"label": ..., "runs": [one dict per round: see measure()]}
        "results": {case.id: {"label": case.label, "runs": results[case]} for case in cases},
        "skipped": skip,
    }


def render(doc: dict[str, Any]) -> str:
    return f"{heading(doc)}\n\n{table(doc)}"


def table(doc: dict[str, Any]) -> str:
    """The cases' table, what was odd, and what was skipped."""
    s = doc["settings"]
    ceiling = s["pool_size"] * 1000 / s["hold_ms"]
    lines = [
        f"Pool of {s['pool_size']}, each request holding one for {s['hold_ms']} ms (ceiling "
        f"{ceiling:.0f} grants/s), waiting up to {s['wait_s']} s; median of {s['rounds']} "
        f"run(s) of {s['seconds']:g} s, wrk -t {s['wrk_threads']}:",
        "",
        "| case | responses/s | 2xx/s | 2xx % of ceiling | 503/s | p50 ms | p99 ms "
        "| granted | refused: timeout | refused: full | mean wait ms | settled in s "
        "| held/waiting left | other 5xx | threads | RSS MB |",
        "|---|" + "---:|" * 15,
    ]
    notes = []
    for case_id, case in doc["results"].items():
        runs = case["runs"]

        def median(key: str, runs: list[dict[str, Any]] = runs) -> float:
            return statistics.median(run.get(key, 0) for run in runs)

        left = f"{max(r['held_left'] for r in runs)}/{max(r['waiting_left'] for r in runs)}"
        lines.append(
            f"| {case['label']} | {median('rps'):.0f} | {median('ok_rps'):.0f} "
            f"| {median('ok_rps') / ceiling:.0%} | {median('refused_rps'):.0f} "
            f"| {median('p50'):.1f} | {median('p99'):.1f} | {median('granted'):.0f} "
            f"| {median('refused_timeout'):.0f} | {median('refused_full'):.0f} "
            f"| {median('wait_ms'):.1f} | {max(r['settled'] for r in runs):.1f} | {left} "
            f"| {max(r['errors_5xx'] for r in runs)} | {median('threads'):.0f} "
            f"| {median('rss_kb') / 1024:.0f} |"
        )
        notes += [
            f"- {case_id}, round {i + 1}: {'; '.join(run['odd'])}"
            for i, run in enumerate(runs)
            if run["odd"]
        ]
    lines.append("\nOdd:\n\n" + "\n".join(notes) if notes else "\nNothing odd.")
    if doc.get("skipped"):
        lines += ["", skipped(doc)]
    return "\n".join(lines)


# -- docs/performance.md ------------------------------------------------------------------

DOCS_PARTS = ("",)


def docs(found: list[dict[str, Any]], part: str) -> str:
    """docs/performance.md's table: the render's."""
    return table(found[0])
