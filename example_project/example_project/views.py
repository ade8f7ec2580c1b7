"""Views of the example project: the printers pool's state, a print job (pool), a
report (semaphore: at most 2 at once) and an import (lock: one at a time)."""

import time

from django.http import HttpRequest, HttpResponse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import mark_safe

from django_redis_pool import (
    BackendUnavailable,
    ResourceUnavailable,
    get_lock,
    get_pool,
    get_semaphore,
)

POOL = "printers"


def _page(title: str, body: str, *, status: int = 200) -> HttpResponse:
    html = format_html(
        "<!doctype html><html><head><meta charset='utf-8'><title>{}</title></head>"
        "<body><h1>{}</h1>{}<p><a href='/'>state</a> · <a href='/print/'>print</a> · "
        "<a href='/report/'>report</a> · <a href='/import/'>import</a></p>"
        "</body></html>",
        title,
        title,
        body,
    )
    return HttpResponse(html, status=status)


def _redis_down(exc: BackendUnavailable) -> HttpResponse:
    response = _page(
        "Redis unavailable",
        format_html("<p>{}</p><p>Start Redis or set REDIS_URL.</p>", exc),
        status=503,
    )
    response["Retry-After"] = "5"
    return response


def index(request: HttpRequest) -> HttpResponse:
    """Counts of the printers pool and who holds which printer."""
    pool = get_pool(POOL)
    try:
        counts = (pool.available_count(), pool.occupied_count(), pool.total_count())
        leases = pool.leases()
    except BackendUnavailable as exc:
        return _redis_down(exc)
    rows = format_html_join(
        "",
        "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
        (
            (
                lease.resource,
                lease.holder,
                lease.fence,
                "never" if lease.expires_at is None else f"{lease.expires_at:.3f}",
            )
            for lease in leases
        ),
    )
    hint = (
        mark_safe("<p>The pool is empty: run <code>python manage.py pool_sync</code>.</p>")
        if counts[2] == 0
        else ""
    )
    body = format_html(
        "<p>available: {}, leased: {}, total: {}</p>{}"
        "<table border='1'><tr><th>printer</th><th>holder</th><th>fence</th>"
        "<th>expires at (unix s, Redis clock)</th></tr>{}</table>",
        *counts,
        hint,
        rows,
    )
    return _page(f"Pool {POOL!r}", body)


def print_job(request: HttpRequest) -> HttpResponse:
    """Hold a printer for about a second; 503 + Retry-After when all are busy."""
    try:
        with get_pool(POOL).lease(timeout=2) as lease:
            time.sleep(1)  # "printing"
    except ResourceUnavailable:
        response = _page("All printers are busy", mark_safe("<p>Try again.</p>"), status=503)
        response["Retry-After"] = "1"
        return response
    except BackendUnavailable as exc:
        return _redis_down(exc)
    return _page(
        "Printed",
        format_html("<p>Printed on <b>{}</b> with fence {}.</p>", lease.resource, lease.fence),
    )


def _busy(title: str) -> HttpResponse:
    response = _page(title, mark_safe("<p>Try again.</p>"), status=503)
    response["Retry-After"] = "1"
    return response


def report(request: HttpRequest) -> HttpResponse:
    """Build a "report" for a second while holding one of the 2 semaphore slots."""
    semaphore = get_semaphore("reports")
    try:
        with semaphore.hold(timeout=2) as lease:
            time.sleep(1)  # "building the report"
            busy = semaphore.get_current_size()
    except ResourceUnavailable:
        return _busy("Too many reports are being built")
    except BackendUnavailable as exc:
        return _redis_down(exc)
    return _page(
        "Report built",
        format_html(
            "<p>Built as {} (fence {}); {} of {} slots were in use.</p>",
            lease.holder,
            lease.fence,
            busy,
            semaphore.get_max_size(),
        ),
    )


def run_import(request: HttpRequest) -> HttpResponse:
    """Run an "import" for a second under the lock; 503 if one is already running."""
    try:
        with get_lock("import") as lock:
            time.sleep(1)  # "importing"
    except ResourceUnavailable:
        return _busy("An import is already running")
    except BackendUnavailable as exc:
        return _redis_down(exc)
    return _page("Imported", format_html("<p>Imported with fence {}.</p>", lock.fence))
