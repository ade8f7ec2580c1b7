"""Views of the example project: the printers pool's state, a print job (a pool,
held by ``@with_resource``), a report (a semaphore of 2 slots, held by
``ResourceMiddleware``: see the settings), an import (a lock, one at a time) and
a fetch through an outbound proxy (an allocator, bound per visitor) and a
task whose page shows its progress (a task queue; ``tasks.py`` holds it).
When nothing is granted in time, or Redis is down, ``busy`` answers (it is the
``UNAVAILABLE_VIEW`` setting)."""

import time

from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.utils.html import format_html, format_html_join
from django.utils.safestring import mark_safe

from django_redis_pool import BackendUnavailable, PoolError, get_pool, get_queue, get_semaphore
from django_redis_pool.decorators import with_resource

POOL = "printers"


def _page(title: str, body: str, *, status: int = 200) -> HttpResponse:
    html = format_html(
        "<!doctype html><html><head><meta charset='utf-8'><title>{}</title></head>"
        "<body><h1>{}</h1>{}<p><a href='/'>state</a> · <a href='/print/'>print</a> · "
        "<a href='/report/'>report</a> · <a href='/import/'>import</a> · "
        "<a href='/fetch/?visitor=ann'>fetch</a> · <a href='/task/'>task</a> · "
        "<a href='/client/'>client</a> · "
        "<a href='/admin/django_redis_pool/dashboard/'>admin dashboard</a></p>"
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


@with_resource("printers", timeout=2)
def print_job(request: HttpRequest) -> HttpResponse:
    """Hold a printer for about a second (released once the response is sent)."""
    lease = request.resources["printers"]
    time.sleep(1)  # "printing"
    return _page(
        "Printed",
        format_html("<p>Printed on <b>{}</b> with fence {}.</p>", lease.resource, lease.fence),
    )


def report(request: HttpRequest) -> HttpResponse:
    """Build a "report" for a second; ResourceMiddleware holds one of the 2 slots."""
    lease = request.resources["reports"]
    time.sleep(1)  # "building the report"
    semaphore = get_semaphore("reports")
    return _page(
        "Report built",
        format_html(
            "<p>Built as {} (fence {}); {} of {} slots were in use.</p>",
            lease.holder,
            lease.fence,
            semaphore.get_current_size(),
            semaphore.get_max_size(),
        ),
    )


@with_resource("import")  # the lock's TIMEOUT is 0: a second import is refused at once
def run_import(request: HttpRequest) -> HttpResponse:
    """Run an "import" for a second under the lock."""
    lock = request.resources["import"]
    time.sleep(1)  # "importing"
    return _page("Imported", format_html("<p>Imported with fence {}.</p>", lock.fence))


def _visitor(request: HttpRequest) -> str:
    """Who is fetching: the soft-binding name (a real site would use the user)."""
    return request.GET.get("visitor", "anonymous")[:50] or "anonymous"


@with_resource("proxies", identity=_visitor)
def fetch(request: HttpRequest) -> HttpResponse:
    """ "Fetch" a page through an outbound proxy; the same visitor gets the same
    proxy again while it is free."""
    proxy = request.resources["proxies"]
    return _page(
        "Fetched",
        format_html(
            "<p>Fetched for {} through <b>{}</b> (fence {}).</p>", proxy.holder, proxy, proxy.fence
        ),
    )


@with_resource("http-clients", timeout=2)
def use_client(request: HttpRequest) -> HttpResponse:
    """Borrow a kept-alive HTTP client of this process's object pool."""
    client = request.resources["http-clients"]
    return _page("Fetched with a pooled client", format_html("<p>{}</p>", client.get("/status")))


def start_task(request: HttpRequest) -> HttpResponse:
    """Enqueue a "count" task and go to its page."""
    task_id = get_queue("default").enqueue("count", {"to": 10})
    return HttpResponseRedirect(f"/task/{task_id}/")


def task_status(request: HttpRequest, task_id: str) -> HttpResponse:
    """A task's status and progress, refreshed every second until it ends."""
    task = get_queue("default").get_task(task_id)
    if task is None:
        return _page("No such task", format_html("<p>{} is gone.</p>", task_id), status=404)
    current, total = task.progress or (0, 0)
    running = task.status in ("queued", "running")
    body = format_html(
        "<p id='status'>{}</p><p><progress id='progress' value='{}' max='{}'></progress> {} of {}"
        "</p><p id='result'>{}</p>{}",
        task.status,
        current,
        total or 1,
        current,
        total,
        "" if running else f"result: {task.result}" if task.status == "done" else task.error,
        mark_safe(
            "<p>Queued until a worker runs it: <code>python manage.py pool_worker</code> "
            "(<code>scripts/dev.py example</code> starts one).</p>"
            if task.status == "queued"
            else ""
        ),
    )
    response = _page(f"Task {task.name}", body)
    if running:
        response["Refresh"] = "1"
    return response


def busy(request: HttpRequest, exception: PoolError) -> HttpResponse:
    """The UNAVAILABLE_VIEW: nothing was granted in time, or Redis is down."""
    if isinstance(exception, BackendUnavailable):
        return _redis_down(exception)
    titles = {
        "printers": "All printers are busy",
        "reports": "Too many reports are being built",
        "import": "An import is already running",
        "proxies": "Every outbound proxy is in use",
    }
    title = titles.get(exception.name, "Busy")  # type: ignore[attr-defined]
    return _page(
        title,
        format_html("<p>Try again in {} s.</p>", exception.retry_after),  # type: ignore[attr-defined]
        status=exception.status,  # type: ignore[attr-defined]
    )
