"""Rate limit decisions: our RateLimiter next to limits and django-ratelimit, on Redis 6.2 and 7.

    python -m benchmarks ratelimit [--quick] [--servers 6.2,7] [--rounds 5] [--duration 3] ...

Starts its own redis-server for each of ``--servers``, all of them first
(Django's cache settings are made once). Every case limits to 100 decisions
per second per key:

* **ours**: ``RateLimiter(client, "bench", rate=100, per=1)`` (burst 100),
  ``acquire(key)``: GCRA on the Redis clock, one script per decision;
* **limits-moving**: the ``limits`` library's ``MovingWindowRateLimiter`` on
  its ``RedisStorage``, ``hit(RateLimitItemPerSecond(100), "bench", key)`` (a
  log of timestamps taken on the client's clock, one script);
* **limits-fixed**: its ``FixedWindowRateLimiter`` (INCRBY + EXPIRE in one
  script; the window starts at a key's first hit);
* **django-ratelimit**: ``is_ratelimited(request, group="bench", key=...,
  rate="100/s", increment=True)`` on Django's ``RedisCache`` (``cache.add``,
  then ``cache.incr``: SET NX, then EXISTS and INCRBY; a window aligned on the
  client's clock);
* **floor**: one EVALSHA of ``return 1``, the least a one-call decision costs.

Two scenarios: **spread** (1,000 keys in turn: every decision passes) and
**hot** (one key: almost every decision is refused).

1. *One client*: ``--decisions`` decisions per round (after a warm-up), the
   server flushed before each: decisions/s; Redis µs per decision: the
   ``usec`` of ``INFO commandstats`` (reset before the round) of the commands
   the client sent (a script whole: its time includes the commands it runs;
   django-ratelimit sends plain commands), and Redis CPU µs (``INFO cpu``)
   per decision.
2. *Processes*: 4 and 8 forked processes, one client each, started together
   by a barrier, each deciding for ``--duration`` seconds: decisions/s in all.
3. *Exactness*: from the 8-process runs of the hot key, the most decisions
   that passed within any 1-second window against what the algorithm allows.
   Each pass is known by the client's clock before and after its call (one
   host, one clock): *certainly* counts the passes whose whole call lies in
   the window (a lower bound of the true most: above the bound, the limit
   was exceeded), *by midpoint* places each at its call's midpoint.

Cases are interleaved round by round; medians, with the min-max over rounds.
``--quick`` is a smoke run (under a minute for both servers on a 2-core VM).
Needs the ``bench`` extra (limits, django-ratelimit; a case whose package is
missing is skipped).
"""

from __future__ import annotations

import argparse
import bisect
import contextlib
import multiprocessing
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import redis

from benchmarks import cases, servers
from benchmarks.cases import RATE
from benchmarks.results import (
    cell,
    choose,
    heading,
    lua_paths,
    median,
    num,
    plural,
    ratio,
    say,
    skipped,
    span,
    spread,
    table,
)
from django_redis_pool.primitives import counts

NAME = "ratelimit"
HELP = "rate-limit decisions: ours vs limits, django-ratelimit, floor"

PEERS = ("limits-moving", "limits-fixed", "django-ratelimit")
SCENARIOS = ("spread", "hot")
#: What each case's algorithm lets pass within any 1-second window.
BOUND = {
    "ours": (2 * RATE, "burst + rate"),
    "limits-moving": (RATE, "the limit"),
    "limits-fixed": (2 * RATE, "2 x the limit across a window's edge"),
    "django-ratelimit": (2 * RATE, "2 x the limit across a window's edge"),
}
mp = multiprocessing.get_context("fork")


@dataclass
class Settings:
    rounds: int
    decisions: int  # per one-client round
    agg_rounds: int
    duration: float  # seconds per process run
    warmup: int  # decisions before any measurement, on keys no round uses
    processes: tuple[int, ...] = (4, 8)

    @classmethod
    def preset(cls, quick: bool, rounds: int) -> Settings:
        if quick:
            return cls(1, 200, 1, 0.3, 20)
        return cls(rounds, 3000, 3, 3.0, 200)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    servers.add_option(parser, multiple=True, default="6.2,7")
    parser.add_argument("--rounds", type=int, help="one-client rounds (default 5; --quick: 1)")
    parser.add_argument(
        "--decisions", type=int, help="per one-client round (default 3000; --quick: 200)"
    )
    parser.add_argument("--agg-rounds", type=int, help="process rounds (default 3; --quick: 1)")
    parser.add_argument(
        "--duration", type=float, help="seconds per process run (default 3; --quick: 0.3)"
    )


def configure_django(urls: dict[str, str]) -> None:
    """One Django cache per server (alias = its label), for django-ratelimit."""
    import django
    from django.conf import settings

    settings.configure(
        CACHES={
            label: {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": url}
            for label, url in urls.items()
        },
        ALLOWED_HOSTS=["*"],
        RATELIMIT_ENABLE=True,
    )
    django.setup()


def warm(decide: Callable[[str], bool], n: int) -> None:
    """Connections made and scripts loaded, on keys no round uses."""
    for i in range(n):
        decide(f"warm-{i}")


# -- one client ---------------------------------------------------------------------------


def one_client(
    case: str, scenario: str, url: str, label: str, n: int, warmup: int
) -> dict[str, float]:
    """decisions/s, Redis µs and Redis CPU µs per decision, and the share that passed."""
    admin = redis.Redis.from_url(url)
    decide, next_key = cases.decider(case, url, label), cases.keys_of(scenario)
    warm(decide, warmup)
    admin.flushall()
    admin.config_resetstat()
    used = cases.redis_cpu(admin)
    passed = 0
    started = time.perf_counter()
    for _ in range(n):
        passed += decide(next_key())
    elapsed = time.perf_counter() - started
    used = cases.redis_cpu(admin) - used
    ran = cases.command_stats(admin)
    scripts = [c for c in cases.SCRIPT_COMMANDS if c in ran]
    sent = scripts or [c for c in ran if c not in ("info", "config|resetstat", "config")]
    return {
        "rate": n / elapsed,
        "usec": sum(ran[c][1] for c in sent) / n,
        "cpu": used * 1e6 / n,
        "commands": sum(ran[c][0] for c in sent) / n,
        "passed": passed / n,
    }


# -- processes -----------------------------------------------------------------------------


def _process(
    case: str,
    scenario: str,
    url: str,
    label: str,
    index: int,
    barriers: tuple[Any, Any],
    duration: float,
    warmup: int,
    out: Any,
) -> None:
    try:
        decide, next_key = cases.decider(case, url, label), cases.keys_of(scenario, index * 125)
        warm(decide, warmup)
        barriers[0].wait(120)  # (all warm; then the parent flushes the keys they warmed)
        barriers[1].wait(120)
        times: list[tuple[float, float]] = []
        done = 0
        started = time.perf_counter()
        until = started + duration
        while time.perf_counter() < until:
            before = time.time()
            if decide(next_key()):
                times.append((before, time.time()))
            done += 1
        out.put((index, done, time.perf_counter() - started, times if scenario == "hot" else []))
    except BaseException as exc:  # (reported by the parent)
        out.put((index, -1, 0.0, repr(exc)))


def processes(
    case: str, scenario: str, url: str, label: str, count: int, duration: float, warmup: int
) -> tuple[float, list[float]]:
    """(decisions/s of ``count`` processes together, the (before, after) client
    times of the calls that passed, in order)."""
    barriers, out = (mp.Barrier(count + 1), mp.Barrier(count + 1)), mp.Queue()
    common = (case, scenario, url, label)
    procs = [
        mp.Process(target=_process, args=(*common, i, barriers, duration, warmup, out))
        for i in range(count)
    ]
    for proc in procs:
        proc.start()
    barriers[0].wait(120)
    redis.Redis.from_url(url).flushall()  # (every run starts from no state)
    barriers[1].wait(120)
    results = [out.get(timeout=120) for _ in procs]
    for proc in procs:
        proc.join(30)
    failed = [r for r in results if r[1] < 0]
    if failed:
        raise RuntimeError(f"{case}: a process failed: {failed[0][3]}")
    rate = sum(done / elapsed for _, done, elapsed, _ in results)
    return rate, sorted(t for *_, times in results for t in times)


def most_in_a_second(calls: list[tuple[float, float]]) -> tuple[int, int]:
    """The most passes within any window of 1 second (closed), from the
    (before, after) times of their calls, sorted: (counting those whose whole
    call lies in the window, counting each at its call's midpoint)."""
    middles = sorted((before + after) / 2 for before, after in calls)
    by_middle = max(
        (bisect.bisect_right(middles, at + 1.0) - i for i, at in enumerate(middles)), default=0
    )
    certain = 0
    for i, (start, _) in enumerate(calls):  # (a window starting at a call's start)
        inside = 0
        for before, after in calls[i:]:
            if before > start + 1.0:
                break
            inside += after <= start + 1.0
        certain = max(certain, inside)
    return certain, by_middle


# -- the run ---------------------------------------------------------------------------------


def bench_server(label: str, srv: servers.Server, s: Settings, names: list[str]) -> dict[str, Any]:
    """Everything measured on one server."""
    from django_redis_pool import RateLimiter
    from django_redis_pool.primitives.wire.scripts import runner_for

    url = srv.url
    client = redis.Redis.from_url(url)
    RateLimiter(client, "probe", rate=1, per=1).status()
    path = "FCALL (function library)" if runner_for(client).functions else "EVALSHA"
    say(f"{srv.describe()}: our Lua runs as {path}")
    single: dict[str, dict[str, list[dict[str, float]]]] = {}
    for _ in range(s.rounds):
        for scenario in SCENARIOS:
            for case in names:
                row = one_client(case, scenario, url, label, s.decisions, s.warmup)
                single.setdefault(case, {}).setdefault(scenario, []).append(row)
    agg: dict[str, dict[str, dict[str, list[float]]]] = {}
    passes: dict[str, list[tuple[int, int, int]]] = {}
    for _ in range(s.agg_rounds):
        for n in s.processes:
            for scenario in SCENARIOS:
                for case in names:
                    rate, times = processes(case, scenario, url, label, n, s.duration, s.warmup)
                    by_scenario = agg.setdefault(case, {}).setdefault(scenario, {})
                    by_scenario.setdefault(str(n), []).append(rate)
                    if scenario == "hot" and n == max(s.processes) and case in BOUND:
                        passes.setdefault(case, []).append((*most_in_a_second(times), len(times)))
    return {
        "label": label,
        "version": srv.version,
        "hz": srv.hz,
        "path": path,
        "single": single,  # case -> scenario -> [{rate, usec, cpu, commands, passed}]
        "processes": agg,  # case -> scenario -> {processes: [decisions/s per round]}
        # case -> [[most passes in any 1 s certainly, by midpoint, passes in the run]]
        "exactness": passes,
    }


def run(args: argparse.Namespace) -> dict[str, Any] | None:
    chosen = choose(args, {"rounds": 5}, {"rounds": 1})
    s = Settings.preset(args.quick, chosen["rounds"])
    for name in ("decisions", "agg_rounds", "duration"):
        if getattr(args, name, None) is not None:
            setattr(s, name, getattr(args, name))
    skip = [{"case": c, "reason": why} for c in cases.RATE_CASES if (why := cases.missing(c))]
    names = [c for c in cases.RATE_CASES if not cases.missing(c)]
    for item in skip:
        say(f"(skipped {item['case']}: {item['reason']})")
    counts.background = False  # (nothing flushed while timing)
    runs = []
    with contextlib.ExitStack() as stack:
        started: dict[str, servers.Server] = {}
        for label in servers.labels(args.servers):
            if not label.startswith(servers.URL_SCHEMES) and servers.binary(label) is None:
                say(f"(Redis {label}: no binary here, skipped)")
                servers.SKIPPED.append(label)
                continue
            started[label] = stack.enter_context(servers.redis_server(label))
        if not started:
            return None
        configure_django({label: srv.url for label, srv in started.items()})
        for label, srv in started.items():
            runs.append(bench_server(label, srv, s, names))
    return {
        "settings": {**asdict(s), "servers": args.servers, "rate": RATE},
        "results": {
            "cases": names,
            "bounds": {c: b for c, b in BOUND.items() if c in names},
            "runs": runs,
        },
        "skipped": skip,
    }


def render(doc: dict[str, Any]) -> str:
    s, res = doc["settings"], doc["results"]
    names, counts_ = res["cases"], s["processes"]
    parts = [heading(doc)]
    for run_ in res["runs"]:
        lines = [
            f"### Redis {run_['version']} (hz {run_['hz']})",
            "",
            f"Our Lua ran as {run_['path']}.",
            "",
        ]
        single, agg = run_["single"], run_["processes"]
        header = " | ".join(f"{n} processes/s" for n in counts_)
        for scenario in SCENARIOS:
            what = "1,000 keys in turn" if scenario == "spread" else "one key"
            lines += [
                f"#### {scenario}: {what}",
                "",
                f"| case | passed | 1 client, decisions/s | vs fastest peer | {header} "
                "| Redis µs/decision | Redis CPU µs/decision | commands/decision |",
                "|---|---:|---:|---:|" + "---:|" * len(counts_) + "---:|---:|---:|",
            ]
            peers = [median(r["rate"] for r in single[p][scenario]) for p in PEERS if p in names]
            best = max(peers, default=float("nan"))
            for case in names:
                rows = single[case][scenario]
                rates = [r["rate"] for r in rows]
                ratio = f"{median(rates) / best:.2f}x" if case != "floor" and peers else ""
                aggs = " | ".join(span(agg[case][scenario][str(n)]) for n in counts_)
                passed = median(r["passed"] for r in rows)
                commands = median(r["commands"] for r in rows)
                lines.append(
                    f"| {case} | {passed:.0%} | {span(rates)} | {ratio} | {aggs} "
                    f"| {span([r['usec'] for r in rows], '.1f')} "
                    f"| {median(r['cpu'] for r in rows):.1f} | {commands:.1f} |"
                )
            lines.append("")
        lines += [
            f"#### Exactness: {max(counts_)} processes on one key, {s['duration']:g} s runs",
            "",
            "| case | lets pass in any 1 s | most in any 1 s, certainly (each run) "
            f"| by midpoint | passed in each {s['duration']:g} s run |",
            "|---|---:|---:|---:|---:|",
        ]
        for case, (bound, why) in res["bounds"].items():
            runs = run_["exactness"].get(case, [])
            certain, middle, total = (", ".join(str(r[k]) for r in runs) for k in range(3))
            lines.append(f"| {case} | {bound} ({why}) | {certain} | {middle} | {total} |")
        parts.append("\n".join(lines))
    if doc.get("skipped"):
        parts.append(skipped(doc))
    return "\n\n".join(parts)


# -- docs/performance.md ------------------------------------------------------------------

DOCS_PARTS = ("speed", "exactness")
#: The scenarios as the docs page names them.
SCENARIO_TITLES = {
    "spread": "1,000 keys in turn: every decision passes",
    "hot": "one key: almost every decision is refused",
}


def docs(found: list[dict[str, Any]], part: str) -> str:
    """One generated part of docs/performance.md (``DOCS_PARTS``)."""
    doc = found[0]
    s, res = doc["settings"], doc["results"]
    names, runs, most = res["cases"], res["runs"], max(s["processes"])
    if part == "speed":
        out = [
            f"Every case limits to {s['rate']} decisions per second per key. One client: "
            f"{plural(s['rounds'])} of {s['decisions']:,} decisions per case and scenario on each "
            f"line; processes: {plural(s['agg_rounds'])} of {s['duration']:g} s, one client "
            "each. Decisions/s, the median round with the slowest and fastest; *vs the fastest "
            "peer*: against the fastest of limits and django-ratelimit. " + lua_paths(runs),
        ]
        for scenario in SCENARIOS:
            header = ["case", "commands/decision"]
            for r in runs:
                header += [
                    f"Redis {r['version']}: one client",
                    "vs the fastest peer",
                    f"{most} processes",
                ]
            rows = []
            for case in names:
                sent = [
                    x["commands"] for r in runs for x in r["single"].get(case, {}).get(scenario, [])
                ]
                row = [case, num(median(sent), 1) if sent else "-"]
                for r in runs:
                    one = r["single"].get(case, {}).get(scenario, [])
                    rates = [x["rate"] for x in one]
                    peers = [
                        median(x["rate"] for x in r["single"][p][scenario])
                        for p in PEERS
                        if p in r["single"]
                    ]
                    best = max(peers, default=float("nan"))
                    procs = r["processes"].get(case, {}).get(scenario, {}).get(str(most), [])
                    row += [
                        cell(rates),
                        ratio(median(rates), best) if rates and case != "floor" else "",
                        cell(procs),
                    ]
                rows.append(row)
            out += ["", f"**{SCENARIO_TITLES[scenario]}**", "", table(header, rows)]
        out += ["", "![Rate-limit decisions/s by case, one client](img/bench-ratelimit.png)"]
        return "\n".join(out)
    if part == "exactness":
        header = ["case", "lets pass in any 1 s"]
        for r in runs:
            header += [
                f"Redis {r['version']}: most in any 1 s, certainly",
                "by midpoint",
                f"passed per {s['duration']:g} s run",
            ]
        rows = []
        for case, (bound, why) in res["bounds"].items():
            row = [case, f"{bound} ({why})"]
            for r in runs:
                got = r["exactness"].get(case, [])
                row += [
                    str(max(x[0] for x in got)) if got else "-",
                    str(max(x[1] for x in got)) if got else "-",
                    spread([x[2] for x in got]) if got else "-",
                ]
            rows.append(row)
        return "\n".join(
            [
                f"{most} processes on one key, {plural(s['agg_rounds'], 'run')} of "
                f"{s['duration']:g} s on each line; the most decisions that passed within "
                "any one second, over the runs.",
                "",
                table(header, rows),
            ]
        )
    raise ValueError(f"ratelimit has no docs part {part!r}")
