"""What ``@with_resource`` and ``ResourceMiddleware`` add to a request.

In the same run, interleaved round by round, through Django's test ``Client``
(one process, one thread, loopback Redis):

* plain        - an undecorated view returning ``HttpResponse("ok")``, no middleware;
* pool         - the same view under ``@with_resource("printers", timeout=0)``;
* semaphore    - under ``@with_resource("reports", timeout=0)`` (MAX_SIZE 4);
* lock         - under ``@with_resource("imports", timeout=0)``;
* middleware   - the plain view held by a ``ResourceMiddleware`` rule (pool);
* passthrough  - the plain view with ``ResourceMiddleware`` installed, on a path
                 no rule matches (the cost of having the middleware);
* direct       - no request at all: ``pool.acquire(timeout=0)`` + ``lease.release()``,
                 the two Redis round trips any hold needs;
* pool traced  - ``pool`` with an OpenTelemetry SDK tracer provider (one span per
                 hold, kept by an in-memory exporter); every other case runs with
                 ``opentelemetry-api`` installed and no provider, as an
                 application that does not trace does.

"Added" is a case's time minus plain's minus direct's (the two round trips):
the cost of the Django layer itself (target: <= 0.2 ms). Cases run in blocks
of ``--requests``, rotating case by case for ``--rounds`` rounds; the median
block is reported. The async cases do the same for ``async def`` views through
``AsyncClient``; there the hold is taken and released on the event loop, on
the ``redis.asyncio`` twin of the client.

End-to-end differences carry the jitter of two Redis round trips, so the guard's
own cost is also measured directly, per kind: ``Guard.enter`` + ``Guard.exit``
on a ``RequestFactory`` request, minus the time spent in the kind's acquire and
release (timed by wrapping its kind's ``hold``).

    python -m benchmarks views [--quick] [--requests 200] [--rounds 25] [--server 6.2|7|PATH|URL]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Callable
from typing import Any

from django.http import HttpRequest, HttpResponse

from benchmarks import servers
from benchmarks.results import choose, heading, plural, say, table

NAME = "views"
HELP = "what @with_resource and ResourceMiddleware add to a request"


def plain(request: HttpRequest) -> HttpResponse:
    return HttpResponse("ok")


async def aplain(request: HttpRequest) -> HttpResponse:
    return HttpResponse("ok")


urlpatterns: list[Any] = []  # (made once Django is set up)


def make_urls() -> None:
    from django.urls import path

    from django_redis_pool.decorators import with_resource

    urlpatterns[:] = [
        path("plain/", plain),
        path("pool/", with_resource("printers", timeout=0)(plain)),
        path("semaphore/", with_resource("reports", timeout=0)(plain)),
        path("lock/", with_resource("imports", timeout=0)(plain)),
        path("mw/", plain),
        path("aplain/", aplain),
        path("apool/", with_resource("printers", timeout=0)(aplain)),
    ]


#: case -> (URL, whether ResourceMiddleware is installed)
SYNC_CASES = {
    "plain": ("/plain/", False),
    "pool": ("/pool/", False),
    "semaphore": ("/semaphore/", False),
    "lock": ("/lock/", False),
    "middleware": ("/mw/", True),
    "passthrough": ("/plain/", True),
}
MIDDLEWARE = ["django_redis_pool.middleware.ResourceMiddleware"]
ASYNC_CASES = {"async plain": "/aplain/", "async pool": "/apool/"}


def traced(case: Callable[[int], float]) -> Callable[[int], float] | None:
    """``case`` run with an OpenTelemetry SDK tracer provider (spans kept by an
    in-memory exporter, cleared after each block); None without the SDK."""
    try:
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
            InMemorySpanExporter,
        )
    except ImportError:
        say("no opentelemetry-sdk: the traced case is skipped")
        return None
    provider, exporter = TracerProvider(), InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))

    def run(n: int) -> float:
        # (the global provider can be set once per process: the benchmark
        # swaps what the API answers instead, block by block)
        untraced = trace.get_tracer_provider
        trace.get_tracer_provider = lambda: provider
        try:
            return case(n)
        finally:
            trace.get_tracer_provider = untraced
            assert len(exporter.get_finished_spans()) == n, "one span per hold"
            exporter.clear()

    return run


def configure(url: str) -> None:
    import django
    from django.conf import settings

    settings.configure(
        DEBUG=False,
        SECRET_KEY="bench",
        ALLOWED_HOSTS=["testserver"],
        ROOT_URLCONF=__name__,
        INSTALLED_APPS=["django_redis_pool"],
        MIDDLEWARE=[],
        DJANGO_REDIS_POOL={
            "CONNECTION": {"URL": url},
            "POOLS": {"printers": {"RESOURCES": ["p1", "p2"], "LEASE_TIMEOUT": 30}},
            "SEMAPHORES": {"reports": {"MAX_SIZE": 4, "LEASE_TIMEOUT": 30}},
            "LOCKS": {"imports": {"LEASE_TIMEOUT": 30}},
            "MIDDLEWARE": [{"PATH": r"^/mw/", "RESOURCE": "printers", "TIMEOUT": 0}],
        },
    )
    django.setup()
    make_urls()


GUARDED = {"pool": "printers", "semaphore": "reports", "lock": "imports"}


def guard_cost(kind: str, n: int) -> tuple[float, float]:
    """(microseconds in Guard.enter + Guard.exit, of which in the kind's acquire
    and release) per request, over ``n`` requests."""
    from django.test import RequestFactory

    from django_redis_pool import registry
    from django_redis_pool.guard import Guard
    from django_redis_pool.kinds import Grant

    spent = [0.0]
    held_kind = registry.by_name()[kind]
    original = held_kind.grant

    def timed_acquire(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        held = original(*args, **kwargs)
        spent[0] += time.perf_counter() - start
        release = held.release

        def timed_release() -> bool:
            start = time.perf_counter()
            ok = release()
            spent[0] += time.perf_counter() - start
            return bool(ok)

        held.release = timed_release
        return held

    guard = Guard(GUARDED[kind], timeout=0)
    request = RequestFactory().get("/bench/")
    held_kind.grant = timed_acquire  # type: ignore[method-assign]
    try:
        start = time.perf_counter()
        for _ in range(n):
            held = guard.enter(request)
            assert isinstance(held, Grant)
            guard.exit(request, held)
        total = time.perf_counter() - start
    finally:
        del held_kind.grant  # the class's method again
    return total / n * 1e6, spent[0] / n * 1e6


def timed(run_once: Callable[[], Any], n: int) -> float:
    """Microseconds per call of ``run_once``, over ``n`` calls."""
    start = time.perf_counter()
    for _ in range(n):
        run_once()
    return (time.perf_counter() - start) / n * 1e6


def add_arguments(parser: argparse.ArgumentParser) -> None:
    servers.add_option(parser, multiple=False)
    parser.add_argument(
        "--requests", type=int, help="per case per round (default 200; --quick: 20)"
    )
    parser.add_argument("--rounds", type=int, help="default 25 (--quick: 2)")


def run(args: argparse.Namespace) -> dict[str, Any] | None:
    s = choose(args, {"requests": 200, "rounds": 25}, {"requests": 20, "rounds": 2})
    with servers.redis_server(args.server) as srv:
        configure(srv.url)
        import django
        from django.conf import settings
        from django.core.management import call_command
        from django.test import AsyncClient, Client

        from django_redis_pool import get_pool

        call_command("pool_sync", verbosity=0)
        pool = get_pool("printers")
        # A test client loads the middleware chain on its first request.
        bare, aclient = Client(), AsyncClient()
        bare.get("/plain/")
        asyncio.run(aclient.get("/aplain/"))
        settings.MIDDLEWARE = MIDDLEWARE
        with_middleware = Client()
        with_middleware.get("/plain/")

        def sync_case(url: str, middleware: bool) -> Callable[[int], float]:
            client = with_middleware if middleware else bare

            def run() -> None:
                response = client.get(url)
                assert response.status_code == 200, (url, response.status_code)

            return lambda n: timed(run, n)

        def direct() -> None:
            lease = pool.acquire(timeout=0)
            assert lease is not None
            lease.release()

        async def arequests(url: str, n: int) -> float:
            start = time.perf_counter()
            for _ in range(n):
                response = await aclient.get(url)
                assert response.status_code == 200, (url, response.status_code)
            return (time.perf_counter() - start) / n * 1e6

        cases = {name: sync_case(*case) for name, case in SYNC_CASES.items()}
        cases["direct"] = lambda n: timed(direct, n)
        traced_pool = traced(sync_case(*SYNC_CASES["pool"]))
        if traced_pool is not None:
            cases["pool traced"] = traced_pool
        for name, url in ASYNC_CASES.items():
            cases[name] = lambda n, url=url: asyncio.run(arequests(url, n))

        for case in cases.values():  # warm up: imports, script loading, URL resolving
            case(200)
        samples: dict[str, list[float]] = {name: [] for name in cases}
        for round_ in range(s["rounds"]):
            say(f"round {round_ + 1} of {s['rounds']}")
            for name, case in cases.items():
                samples[name].append(case(s["requests"]))
        own = {kind: guard_cost(kind, s["requests"] * s["rounds"]) for kind in GUARDED}
    return {
        "settings": {**s, "server": args.server, "django": django.get_version()},
        "results": {
            "samples": samples,  # case -> [µs per request, per round]
            # kind -> [µs in Guard.enter + Guard.exit, of which in the kind's acquire + release]
            "guard": own,
        },
    }


def render(doc: dict[str, Any]) -> str:
    s, res = doc["settings"], doc["results"]
    median = {name: statistics.median(values) for name, values in res["samples"].items()}
    lines = [
        heading(doc),
        "",
        "```",
        f"django {s['django']}, {s['requests']} requests x {s['rounds']} rounds, "
        "median round, microseconds per request",
    ]
    base, trips, abase = median["plain"], median["direct"], median["async plain"]
    lines.append(f"{'case':<14}{'us/request':>12}{'vs plain':>12}{'added':>10}")
    for name, value in median.items():
        if name == "direct":
            lines.append(
                f"{name:<14}{value:>12.1f}{'':>12}{'':>10}  (acquire + release, no request)"
            )
            continue
        reference = abase if name.startswith("async") else base
        extra = value - reference
        holds = name not in ("plain", "passthrough", "async plain")
        added = f"{extra - trips:>10.1f}" if holds else f"{'':>10}"
        lines.append(f"{name:<14}{value:>12.1f}{extra:>+12.1f}{added}")
    lines.append("\nthe guard's own cost (enter + exit minus the kind's acquire + release):")
    for kind, (total, redis_part) in res["guard"].items():
        lines.append(
            f"{kind:<14}{total:>8.1f} us in the guard, {redis_part:>8.1f} us in acquire + "
            f"release: {total - redis_part:>6.1f} us added"
        )
    lines.append("```")
    return "\n".join(lines)


# -- docs/performance.md ------------------------------------------------------------------

DOCS_PARTS = ("",)
#: The cases as the docs page names them.
DOCS_LABELS = {
    "plain": "plain view, no middleware",
    "pool": "`@with_resource`: pool",
    "semaphore": "`@with_resource`: semaphore",
    "lock": "`@with_resource`: lock",
    "middleware": "`ResourceMiddleware` rule (pool)",
    "passthrough": "`ResourceMiddleware` installed, no rule matches",
    "direct": "`acquire(timeout=0)` + `release()`, no request",
    "async plain": "async plain view (`AsyncClient`)",
    "async pool": "async view, `@with_resource`: pool",
    "pool traced": "`@with_resource`: pool, traced (OpenTelemetry SDK, in-memory exporter)",
}


def docs(found: list[dict[str, Any]], part: str) -> str:
    """docs/performance.md's two tables: µs per request by case; the guard's own cost."""
    doc = found[0]
    s, res = doc["settings"], doc["results"]
    med = {name: statistics.median(values) for name, values in res["samples"].items()}
    base, trips, abase = med["plain"], med["direct"], med["async plain"]
    rows = []
    for name, value in med.items():
        label = DOCS_LABELS.get(name, name)
        if name == "direct":
            rows.append([label, f"{value:,.1f}", "", ""])
            continue
        extra = value - (abase if name.startswith("async") else base)
        holds = name not in ("plain", "passthrough", "async plain")
        vs = "" if name in ("plain", "async plain") else f"{extra:+,.1f}"
        rows.append([label, f"{value:,.1f}", vs, f"{extra - trips:,.1f}" if holds else ""])
    guard = [
        [kind, f"{total:,.1f}", f"{inside:,.1f}", f"**{total - inside:,.1f}**"]
        for kind, (total, inside) in res["guard"].items()
    ]
    version = next(iter(doc["environment"].get("servers", [])), {}).get("version", "?")
    return "\n".join(
        [
            f"Django {s['django']}, Redis {version}; {plural(s['rounds'])} of {s['requests']} "
            "requests per case, the median round; µs per request.",
            "",
            table(
                ["case", "µs/request", "vs the plain view", "added beyond the two round trips"],
                rows,
            ),
            "",
            table(
                ["the guard's own cost", "µs in the guard", "in acquire + release", "added"],
                guard,
            ),
        ]
    )
