"""The home page of the example: a guided tour of every primitive, one stop
each (what it does here, a page to try it, what to do there, its page in the
admin)."""

from dataclasses import dataclass

from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.utils.html import format_html_join
from django.utils.safestring import mark_safe

from .pages import page

#: How long the report page's button builds a report (``/report/?seconds=``).
LONG_REPORT_SECONDS = 30
#: The most a report may be asked to take (``/report/?seconds=``).
MAX_REPORT_SECONDS = 30


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
            ((admin_url(name), name) for name in (self.name, *self.also)),
        )


def admin_url(name: str) -> str:
    """The page of the primitive ``name`` in the admin."""
    return reverse("admin:django_redis_pool_primitive", args=[name])


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
        "Build a report (it takes a second); then build a long one with the button "
        f"there ({LONG_REPORT_SECONDS} s) and, while it runs, open the semaphore in the "
        "admin: its slot is among the holders, with the request that holds it.",
    ),
    Stop(
        "import",
        "Lock",
        "One import at a time across every process, renewed while it runs. Its "
        "TIMEOUT is 0: a second import is refused at once instead of waiting.",
        "/import/",
        "Run an import; then run two at once with the button there: the second, "
        "started while the first holds the lock, is refused.",
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
        "Start a task with the form and watch its progress bar fill until its result.",
    ),
    Stop(
        "http-clients",
        "Object pool",
        "Up to 3 HTTP clients per process, kept alive between requests and created on "
        "demand; a semaphore (http-clients-everywhere, 6 slots) caps them across "
        "every process of the site.",
        "/client/",
        "Borrow a client, then reload the page: the second request reuses the first client.",
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
        "<p><a class='demo' href='{}'>Try it</a>: <span class='try-it'>{}</span></p>"
        "<p>{}</p></section>",
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
    return page("django-redis-pool: a guided tour", intro + stops)
