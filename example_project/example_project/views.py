"""Views of the example project: a guided tour of every primitive.

The home page (:func:`index`) explains each primitive, links its demo and its
page in the admin. The demos: a print job (a pool of printers, held by
``@with_resource``; :func:`printers` shows the pool and can occupy every printer
to show the 503 page), a report (a semaphore of 2 slots, held by
``ResourceMiddleware``: see the settings), an import (a lock, one at a time), a
fetch through an outbound proxy (an allocator, soft-bound per visitor: fetch as
two visitors at once and each keeps its own proxy), a task started by a form,
whose page shows its progress (a task queue; ``tasks.py`` holds it,
``pool_worker`` runs it), a kept-alive HTTP client (an object pool of this
process, capped across processes by a semaphore) and a search (a rate limit per
visitor: 2 in quick succession, then one every 12 s). When nothing is granted in
time, or Redis is down, ``busy`` answers (it is the ``UNAVAILABLE_VIEW``
setting)."""

import json
import math
import time
from dataclasses import dataclass
from datetime import datetime
from datetime import timezone as dt_timezone

from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.middleware.csrf import get_token
from django.urls import reverse
from django.utils import dateformat, timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_http_methods

from django_redis_pool import (
    BackendUnavailable,
    PoolError,
    Task,
    get_allocator,
    get_pool,
    get_queue,
    get_ratelimit,
    get_semaphore,
)
from django_redis_pool.decorators import with_resource

POOL = "printers"
#: The longest a print job may be asked to take (``/print/?seconds=``).
MAX_PRINT_SECONDS = 15
#: The longest a fetch may be asked to hold its proxy (``/fetch/?seconds=``).
MAX_FETCH_SECONDS = 5
#: The visitors of the fetch demo.
VISITORS = ("ann", "bob")
#: How many of the tasks a visitor started ``/task/`` lists (kept in its session).
RECENT_TASKS = 10
#: The most a task may be asked to count to (``/task/``'s form).
MAX_COUNT = 50

NAV = (
    ("/", "tour"),
    ("/printers/", "printers"),
    ("/print/", "print"),
    ("/report/", "report"),
    ("/import/", "import"),
    ("/fetch/?visitor=ann", "fetch"),
    ("/task/", "task"),
    ("/client/", "client"),
    ("/search/", "search"),
    ("/admin/django_redis_pool/dashboard/", "admin dashboard"),
)


def _page(title: str, body: str, *, status: int = 200) -> HttpResponse:
    nav = format_html_join(" · ", "<a href='{}'>{}</a>", NAV)
    html = format_html(
        "<!doctype html><html><head><meta charset='utf-8'><title>{}</title>"
        "<style>body{{font-family:system-ui,sans-serif;max-width:62rem;margin:1.5rem auto;"
        "padding:0 1rem;line-height:1.45}}section{{border-top:1px solid #ddd}}"
        "code{{background:#f3f3f3;padding:0 .2em}}</style></head>"
        "<body><h1>{}</h1>{}<nav><p>{}</p></nav></body></html>",
        title,
        title,
        body,
        nav,
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


@dataclass(frozen=True)
class Stop:
    """One stop of the tour: a primitive, what it does here, where to try it."""

    name: str  #: its name in the DJANGO_REDIS_POOL setting
    kind: str
    explains: str
    demo: str  #: the demo page's URL
    try_it: str  #: what to do there
    also: tuple[str, ...] = ()  #: other primitives this stop uses (admin links too)

    def admin_links(self) -> str:
        """Links to this stop's primitives' pages in the admin."""
        return format_html_join(
            " · ",
            "<a class='admin' href='{}'>{} in the admin</a>",
            (
                (reverse("admin:django_redis_pool_primitive", args=[name]), name)
                for name in (self.name, *self.also)
            ),
        )


TOUR = (
    Stop(
        "printers",
        "Resource pool",
        'Three printers; a view decorated with @with_resource("printers", timeout=2) '
        "borrows one for the request and gives it back after the response. Each hold "
        "has a fence (a number that only grows) and expires if its process dies.",
        "/printers/",
        "See who holds which printer, print, or occupy all three and watch the next "
        "request get the 503 page.",
    ),
    Stop(
        "reports",
        "Semaphore",
        "At most 2 reports are built at once. No view code: ResourceMiddleware holds a "
        "slot for every request under /report/ (the MIDDLEWARE rule in the settings).",
        "/report/",
        "Build a report (it takes a second) and see its slot in the admin while it runs.",
    ),
    Stop(
        "import",
        "Lock",
        "One import at a time across every process, renewed while it runs. Its "
        "TIMEOUT is 0: a second import is refused at once instead of waiting.",
        "/import/",
        "Run an import; run another within a second to be refused.",
    ),
    Stop(
        "proxies",
        "Allocator",
        "Outbound proxies, one per fetch, handed out by priority (proxy-fast first "
        "when no binding says otherwise). A visitor is bound to the proxy it got last "
        "(soft binding) and gets that one again while it is free, even when "
        "proxy-fast is free too.",
        "/fetch/?visitor=ann",
        "Fetch as ann and bob at once: while ann's fetch holds its proxy, bob's gets "
        "another one. Then fetch as each alone: each gets its own proxy again.",
    ),
    Stop(
        "default",
        "Task queue",
        "Tasks with JSON payloads run by manage.py pool_worker (scripts/dev.py example "
        "starts one); a task reports its progress, and is redelivered if its worker dies.",
        "/task/",
        "Start a task with the form and watch its progress bar.",
    ),
    Stop(
        "http-clients",
        "Object pool",
        "Up to 3 HTTP clients per process, kept alive between requests and created on "
        "demand; a semaphore (http-clients-everywhere, 6 slots) caps them across "
        "every process of the site.",
        "/client/",
        "Borrow a client twice: the second request reuses the first client.",
        also=("http-clients-everywhere",),
    ),
    Stop(
        "search",
        "Rate limit",
        "5 searches a minute per visitor, with a burst of 2: a visitor who has not "
        "searched for 24 s may search twice in quick succession, and then once every "
        '12 s, as each spent search comes back. @with_resource("search") counts each '
        "one against the visitor (the user, else the address), decided in one Redis "
        "script. A search over the limit is answered 429 with Retry-After, and every "
        "answer says what is left in its RateLimit-* headers.",
        "/search/",
        "Search, then reload at once: the third search in quick succession gets the "
        "429 page, which says to retry in 12 s; see the search's row in the admin, and "
        "reset it there.",
    ),
)


def index(request: HttpRequest) -> HttpResponse:
    """The tour: each primitive, what it does here, its demo and its admin page."""
    stops = format_html_join(
        "",
        "<section id='tour-{}'><h2>{} <code>{}</code></h2><p>{}</p>"
        "<p><a class='demo' href='{}'>Try it</a>: {}</p><p>{}</p></section>",
        ((s.name, s.kind, s.name, s.explains, s.demo, s.try_it, s.admin_links()) for s in TOUR),
    )
    intro = mark_safe(
        "<p>Every primitive of django-redis-pool, configured in "
        "<code>example_project/settings.py</code>. The admin (user <code>admin</code>, "
        "password <code>admin</code> when started by <code>scripts/dev.py example</code>) "
        "shows each one live: holders, fences, time left, waiters, and actions, with "
        "the last hour charted; <a href='/metrics/'>/metrics/</a> is what Prometheus "
        "scrapes.</p>"
    )
    return _page("django-redis-pool: a guided tour", intro + stops)


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
        return _redis_down(exc)
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
    return _page(f"Pool {POOL!r}", body)


#: Starts one long print job per printer (without waiting for them), so that
#: the next request finds none free and gets the 503 page after its 2 s.
OCCUPY_SCRIPT = mark_safe(
    """
document.getElementById("occupy").addEventListener("click", (event) => {
  const count = Number(event.target.dataset.printers);
  const seconds = event.target.dataset.seconds;
  // (distinct URLs: a browser sends identical GETs one after the other)
  for (let i = 1; i <= count; i++) fetch(`/print/?seconds=${seconds}&job=${i}`);
  document.getElementById("occupied").innerHTML =
    "Every printer is busy now: <a id='print-now' href='/print/'>print</a> to see the 503 page.";
});
"""
)


def _seconds(request: HttpRequest, default: float, most: float) -> float:
    """``?seconds=`` as a number from 0 to ``most`` (``default`` if not a number)."""
    try:
        seconds = float(request.GET.get("seconds", default))
    except ValueError:
        return default
    return min(max(seconds, 0.0), most) if math.isfinite(seconds) else default


@with_resource("printers", timeout=2)
def print_job(request: HttpRequest) -> HttpResponse:
    """Hold a printer for a second, or ``?seconds=`` (at most ``MAX_PRINT_SECONDS``);
    it is released once the response is sent."""
    lease = request.resources["printers"]
    time.sleep(_seconds(request, 1.0, MAX_PRINT_SECONDS))  # "printing"
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
    """ "Fetch" a page through an outbound proxy, held for ``?seconds=`` (0 by
    default, at most ``MAX_FETCH_SECONDS``) and freed once the response is sent;
    the visitor is bound to that proxy, and gets it again while it is free."""
    proxy = request.resources["proxies"]
    time.sleep(_seconds(request, 0.0, MAX_FETCH_SECONDS))  # "fetching"
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
    return _page("Fetched", body)


#: Fetches as ann, and half a second later as bob, while ann's fetch holds its
#: proxy (``?seconds=``), then shows what each got and the links to fetch again.
TOGETHER_SCRIPT = mark_safe(
    """
document.getElementById("together").addEventListener("click", async (event) => {
  const seconds = event.target.dataset.seconds;
  const results = document.getElementById("together-results");
  results.textContent = "";
  const fetchAs = async (visitor) => {
    const response = await fetch(`/fetch/?visitor=${visitor}&seconds=${seconds}`);
    const page = new DOMParser().parseFromString(await response.text(), "text/html");
    const fetched = page.getElementById("fetched") || page.querySelector("h1");
    const item = document.createElement("li");
    item.className = "together-result";
    item.textContent = fetched.textContent;
    results.append(item);
  };
  const ann = fetchAs("ann");
  await new Promise((resolve) => setTimeout(resolve, 500));
  await Promise.all([ann, fetchAs("bob")]);
  const again = document.createElement("li");
  again.id = "fetch-alone";
  again.innerHTML = "Now fetch alone as <a href='?visitor=ann'>ann</a> or " +
    "<a href='?visitor=bob'>bob</a>: each gets its own proxy again.";
  results.append(again);
});
"""
)


@with_resource("http-clients", timeout=2)
def use_client(request: HttpRequest) -> HttpResponse:
    """Borrow a kept-alive HTTP client of this process's object pool."""
    client = request.resources["http-clients"]
    return _page("Fetched with a pooled client", format_html("<p>{}</p>", client.get("/status")))


@with_resource("search")
def search(request: HttpRequest) -> HttpResponse:
    """A "search", limited per visitor: the decision says what is left."""
    decision = request.resources["search"]
    limiter = get_ratelimit("search")
    return _page(
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


@require_http_methods(["GET", "POST"])
def tasks(request: HttpRequest) -> HttpResponse:
    """GET: the form that starts a "count" task, and the tasks this visitor
    started (kept in its session) as they are now. POST: enqueue one, and go to
    its page."""
    queue = get_queue("default")
    started: list[str] = request.session.get("tasks", [])
    if request.method == "POST":
        try:
            to = min(max(int(request.POST.get("to", 10)), 1), MAX_COUNT)
        except ValueError:
            to = 10
        try:
            task_id = queue.enqueue("count", {"to": to})
        except BackendUnavailable as exc:
            return _redis_down(exc)
        request.session["tasks"] = [task_id, *started][:RECENT_TASKS]
        return HttpResponseRedirect(f"/task/{task_id}/", status=303)
    try:
        recent = [task for task in map(queue.get_task, started) if task is not None]
    except BackendUnavailable as exc:
        return _redis_down(exc)
    rows = format_html_join(
        "",
        "<tr><td><a href='/task/{}/'>{}</a></td><td>{}</td><td>{}</td></tr>",
        ((task.id, task.id, task.status, _outcome(task)) for task in recent),
    )
    body = format_html(
        "<form method='post' action='/task/'><input type='hidden' name='csrfmiddlewaretoken' "
        "value='{}'><label>Count to <input type='number' name='to' value='10' min='1' "
        "max='{}'></label> (a step every 0.2 s) <button id='start' type='submit'>Start a "
        "task</button></form><h2>Your recent tasks</h2>{}",
        get_token(request),
        MAX_COUNT,
        format_html(
            "<table id='recent' border='1'><tr><th>task</th><th>status</th><th>result</th>"
            "</tr>{}</table>",
            rows,
        )
        if recent
        else mark_safe("<p id='recent'>None yet (a task is kept 10 minutes after it ends).</p>"),
    )
    return _page("Tasks", body)


def _outcome(task: Task) -> str:
    """A task's result as JSON, or its error; empty while it has neither."""
    if task.status == "done":
        return json.dumps(task.result)
    return task.error or ""


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
        "" if running else f"result: {_outcome(task)}" if task.status == "done" else task.error,
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
        "search": "Too many searches: slow down",
    }
    name = exception.name  # type: ignore[attr-defined]
    retry_after = exception.retry_after  # type: ignore[attr-defined]
    body = format_html("<p>Try again in {} s.</p>", retry_after)
    if name == "search":
        body = format_html(
            "<p>No search is left: try again in {} s, when a spent one is back.</p>", retry_after
        )
    return _page(titles.get(name, "Busy"), body, status=exception.status)  # type: ignore[attr-defined]
