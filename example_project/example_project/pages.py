"""What every page of the example shares: its frame (title, style, favicon,
the navigation), the page that says Redis is down, and reading ``?seconds=``."""

import math

from django.http import HttpRequest, HttpResponse
from django.utils.html import format_html, format_html_join

from django_redis_pool import BackendUnavailable

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

#: The example's icon (``/favicon.ico``): a red square with a white "R".
FAVICON_SVG = (
    "<svg xmlns='http://www.w3.org/2000/svg' viewBox='0 0 16 16'>"
    "<rect width='16' height='16' rx='3' fill='#a41e11'/>"
    "<text x='8' y='12.5' font-family='sans-serif' font-size='12' font-weight='bold' "
    "fill='#fff' text-anchor='middle'>R</text></svg>"
)


def page(title: str, body: str, *, status: int = 200) -> HttpResponse:
    """A page of the example: ``title`` as its title and heading, ``body``
    (already escaped HTML), then the navigation."""
    nav = format_html_join(" · ", "<a href='{}'>{}</a>", NAV)
    html = format_html(
        "<!doctype html><html><head><meta charset='utf-8'><title>{}</title>"
        "<link rel='icon' href='/favicon.ico' type='image/svg+xml'>"
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


def redis_down(exc: BackendUnavailable) -> HttpResponse:
    """The 503 page when Redis cannot be reached."""
    response = page(
        "Redis unavailable",
        format_html("<p>{}</p><p>Start Redis or set REDIS_URL.</p>", exc),
        status=503,
    )
    response["Retry-After"] = "5"
    return response


def seconds(request: HttpRequest, default: float, most: float) -> float:
    """``?seconds=`` as a number from 0 to ``most`` (``default`` if not a number)."""
    try:
        asked = float(request.GET.get("seconds", default))
    except ValueError:
        return default
    return min(max(asked, 0.0), most) if math.isfinite(asked) else default
