"""The demo pages of the example project (the tour, its home page, is
``tour.py``; the task queue's pages are ``task_pages.py``).

A print job (a pool of printers, held by ``@with_resource``; :func:`printers`
shows the pool and can occupy every printer to show the 503 page), a report (a
semaphore of 2 slots, held by ``ResourceMiddleware``: see the settings; its
page starts a long one to watch in the admin), an import (a lock, one at a
time; its page runs two at once), a fetch through an outbound proxy (an
allocator, soft-bound per visitor: fetch as two visitors at once and each keeps
its own proxy), a kept-alive HTTP client (an object pool of this process,
capped across processes by a semaphore) and a search (a rate limit per
visitor: 2 in quick succession, then one every 12 s). When nothing is granted
in time, or Redis is down, ``busy`` answers (it is the ``UNAVAILABLE_VIEW``
setting); ``favicon`` is the site's icon."""

import math
import time
from datetime import datetime
from datetime import timezone as dt_timezone

from django.http import HttpRequest, HttpResponse
from django.utils import dateformat, timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import mark_safe
from django.views.decorators.cache import cache_control

from django_redis_pool import (
    BackendUnavailable,
    PoolError,
    get_allocator,
    get_pool,
    get_ratelimit,
    get_semaphore,
)
from django_redis_pool.decorators import with_resource

from .page_scripts import LONG_REPORT_SCRIPT, OCCUPY_SCRIPT, TOGETHER_SCRIPT, TWO_IMPORTS_SCRIPT
from .pages import FAVICON_SVG, page, redis_down, seconds
from .tour import LONG_REPORT_SECONDS, MAX_REPORT_SECONDS, admin_url

POOL = "printers"
#: The longest a print job may be asked to take (``/print/?seconds=``).
MAX_PRINT_SECONDS = 15
#: The longest an import may be asked to take (``/import/?seconds=``).
MAX_IMPORT_SECONDS = 5
#: How long each import of the import page's button takes.
TWO_IMPORTS_SECONDS = 2
#: The longest a fetch may be asked to hold its proxy (``/fetch/?seconds=``).
MAX_FETCH_SECONDS = 5
#: The visitors of the fetch demo.
VISITORS = ("ann", "bob")


def _expiry(expires_at: float | None, now: float) -> str:
    """When a hold expires (``expires_at`` and ``now``: unix seconds on the Redis
    clock), as a time of ``TIME_ZONE`` and how far off ("2026-11-28 09:48:27 UTC,
    in 12 s")."""
    if expires_at is None:
        return "never"
    at = timezone.localtime(datetime.fromtimestamp(expires_at, tz=dt_timezone.utc))
    return f"{dateformat.format(at, 'Y-m-d H:i:s T')}, in {max(0, math.ceil(expires_at - now))} s"


def printers(request: HttpRequest) -> HttpResponse:
    """Counts of the printers pool and who holds which printer."""
    try:
        snapshot = get_pool(POOL).snapshot()  # (one read, with the Redis clock's time)
    except BackendUnavailable as exc:
        return redis_down(exc)
    counts = (snapshot.available_count, snapshot.held_count, snapshot.size or 0)
    rows = format_html_join(
        "",
        "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
        (
            (lease.resource, lease.holder, lease.fence, _expiry(lease.expires_at, snapshot.now))
            for lease in snapshot.leases
        ),
    )
    hint = (
        mark_safe("<p>The pool is empty: run <code>python manage.py pool_sync</code>.</p>")
        if counts[2] == 0
        else ""
    )
    body = format_html(
        "<p id='counts'>available: {}, leased: {}, total: {}</p>{}"
        "<table border='1'><tr><th>printer</th><th>holder</th><th>fence</th>"
        "<th>expires (Redis clock)</th></tr>{}</table>"
        "<p><a href='/print/'>Print</a> (holds a printer for a second).</p>"
        "<p><button id='occupy' type='button' data-printers='{}' data-seconds='{}'>"
        "Occupy every printer for {} s</button> <span id='occupied'></span></p>"
        "<script>{}</script>",
        *counts,
        hint,
        rows,
        counts[2],
        MAX_PRINT_SECONDS,
        MAX_PRINT_SECONDS,
        OCCUPY_SCRIPT,
    )
    return page(f"Pool {POOL!r}", body)


@with_resource("printers", timeout=2)
def print_job(request: HttpRequest) -> HttpResponse:
    """Hold a printer for a second, or ``?seconds=`` (at most ``MAX_PRINT_SECONDS``);
    it is released once the response is sent."""
    lease = request.resources["printers"]
    time.sleep(seconds(request, 1.0, MAX_PRINT_SECONDS))  # "printing"
    return page(
        "Printed",
        format_html("<p>Printed on <b>{}</b> with fence {}.</p>", lease.resource, lease.fence),
    )


def report(request: HttpRequest) -> HttpResponse:
    """Build a "report" for a second, or ``?seconds=`` (at most
    ``MAX_REPORT_SECONDS``); ResourceMiddleware holds one of the 2 slots
    meanwhile. The page's button starts a long one, to watch in the admin."""
    lease = request.resources["reports"]
    time.sleep(seconds(request, 1.0, MAX_REPORT_SECONDS))  # "building the report"
    semaphore = get_semaphore("reports")
    body = format_html(
        "<p id='built'>Built as {} (fence {}); {} of {} slots were in use.</p>"
        "<p><button id='long-report' type='button' data-seconds='{}'>Build a {} s "
        "report</button> (in the background: this page stays).</p>"
        "<p id='long-report-started' hidden>A long report is "
        "<span id='long-report-state'></span>. While it runs, <a id='report-admin' "
        "href='{}' target='_blank' rel='noopener'>open <code>reports</code> in the "
        "admin</a> (in a new tab): its slot is among the "
        "holders, with the request that holds it. The admin page shows what it read "
        "when it loaded: reload it to see the slot go once the report is built.</p>"
        "<script>{}</script>",
        lease.holder,
        lease.fence,
        semaphore.get_current_size(),
        semaphore.get_max_size(),
        LONG_REPORT_SECONDS,
        LONG_REPORT_SECONDS,
        admin_url("reports"),
        LONG_REPORT_SCRIPT,
    )
    return page("Report built", body)


@with_resource("import")  # the lock's TIMEOUT is 0: a second import is refused at once
def run_import(request: HttpRequest) -> HttpResponse:
    """Run an "import" for a second, or ``?seconds=`` (at most
    ``MAX_IMPORT_SECONDS``), under the lock. The page's button runs two at once."""
    lock = request.resources["import"]
    time.sleep(seconds(request, 1.0, MAX_IMPORT_SECONDS))  # "importing"
    body = format_html(
        "<p id='imported'>Imported with fence {}.</p>"
        "<p><button id='two-imports' type='button' data-seconds='{}'>Run two imports at "
        "once</button>: the first holds the lock for {} s; the second, started half a "
        "second later, finds it taken and is refused at once (the lock's TIMEOUT is "
        "0).</p><ul id='two-imports-results'></ul><script>{}</script>",
        lock.fence,
        TWO_IMPORTS_SECONDS,
        TWO_IMPORTS_SECONDS,
        TWO_IMPORTS_SCRIPT,
    )
    return page("Imported", body)


def _visitor(request: HttpRequest) -> str:
    """Who is fetching: the soft-binding name (a real site would use the user)."""
    return request.GET.get("visitor", "anonymous")[:50] or "anonymous"


@with_resource("proxies", identity=_visitor)
def fetch(request: HttpRequest) -> HttpResponse:
    """ "Fetch" a page through an outbound proxy, held for ``?seconds=`` (0 by
    default, at most ``MAX_FETCH_SECONDS``) and freed once the response is sent;
    the visitor is bound to that proxy, and gets it again while it is free."""
    proxy = request.resources["proxies"]
    time.sleep(seconds(request, 0.0, MAX_FETCH_SECONDS))  # "fetching"
    allocator = get_allocator("proxies")
    bindings = format_html_join(
        ", ",
        "{} → <b>{}</b>",
        ((name, allocator.get_soft_bind(name) or "none yet") for name in VISITORS),
    )
    body = format_html(
        "<p id='fetched'>Fetched for {} through <b>{}</b> (fence {}).</p>"
        "<p id='bindings'>Soft bindings now: {}.</p>"
        "<p id='alone'>Fetch alone as <a href='?visitor=ann'>ann</a> or "
        "<a href='?visitor=bob'>bob</a>: each gets the proxy it is bound to while that "
        "one is free.</p>"
        "<p><button id='together' type='button' data-seconds='2'>Fetch as ann and bob at "
        "once</button>: ann's fetch holds its proxy for 2 s, and bob's, started half a "
        "second later, finds it taken and gets another one; each is then bound to its "
        "own.</p><ul id='together-results'></ul><script>{}</script>",
        proxy.holder,
        proxy,
        proxy.fence,
        bindings,
        TOGETHER_SCRIPT,
    )
    return page("Fetched", body)


@with_resource("http-clients", timeout=2)
def use_client(request: HttpRequest) -> HttpResponse:
    """Borrow a kept-alive HTTP client of this process's object pool."""
    client = request.resources["http-clients"]
    body = format_html(
        "<p id='client'>{}</p><p>Reload this page: the next request borrows the same "
        "client, kept alive by this process (its request number grows).</p>",
        client.get("/status"),
    )
    return page("Fetched with a pooled client", body)


@with_resource("search")
def search(request: HttpRequest) -> HttpResponse:
    """A "search", limited per visitor: the decision says what is left."""
    decision = request.resources["search"]
    limiter = get_ratelimit("search")
    return page(
        "Searched",
        format_html(
            "<p id='left'>{} search{} left now.</p><p>A visitor who has not searched "
            "for a while has {} (the burst: searches that may follow in quick "
            "succession); a spent one comes back every {} s, and all {} are back in "
            "{} s.</p><p>See the <code>RateLimit-*</code> headers of this page, and "
            "reload it at once: a search with none left gets the 429 page.</p>",
            decision.remaining,
            "" if decision.remaining == 1 else "es",
            decision.limit,
            f"{limiter.per / limiter.rate:g}",
            decision.limit,
            math.ceil(decision.reset_after),
        ),
    )


def busy(request: HttpRequest, exception: PoolError) -> HttpResponse:
    """The UNAVAILABLE_VIEW: nothing was granted in time, or Redis is down."""
    if isinstance(exception, BackendUnavailable):
        return redis_down(exception)
    titles = {
        "printers": "All printers are busy",
        "reports": "Too many reports are being built",
        "import": "An import is already running",
        "proxies": "Every outbound proxy is in use",
        "search": "Too many searches: slow down",
    }
    name = exception.name  # type: ignore[attr-defined]
    retry_after = exception.retry_after  # type: ignore[attr-defined]
    body = format_html("<p>Try again in {} s.</p>", retry_after)
    if name == "search":
        body = format_html(
            "<p>No search is left: try again in {} s, when a spent one is back.</p>", retry_after
        )
    return page(titles.get(name, "Busy"), body, status=exception.status)  # type: ignore[attr-defined]


@cache_control(max_age=86400)
def favicon(request: HttpRequest) -> HttpResponse:
    """The site's icon (``/favicon.ico``, which browsers ask for on every site;
    the admin's pages too)."""
    return HttpResponse(FAVICON_SVG, content_type="image/svg+xml")
