"""URLconf of ``tests/django/test_ratelimit_django.py``: views limited by
``@with_resource`` (sync and async), plain ones for the middleware rules, the
admin and the metrics.

Each view answers what it found in ``request.resources`` as JSON (the
:class:`Decision`'s fields, or null), so the tests see what the view saw.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import path

from django_redis_pool.decorators import with_resource
from django_redis_pool.metrics import metrics_view

FIELDS = ("allowed", "remaining", "retry_after", "reset_after", "limit", "waited")


def seen(request: HttpRequest) -> JsonResponse:
    resources = getattr(request, "resources", None)
    decision = None if resources is None else resources.get("api")
    fields = None if decision is None else {f: getattr(decision, f) for f in FIELDS}
    return JsonResponse({"decision": fields, "type": type(decision).__name__})


def tenant_of(request: HttpRequest) -> str | None:
    """A ``KEY`` function: the ``X-Tenant`` header; staff (``X-Staff``) are not limited."""
    if request.headers.get("X-Staff"):
        return None
    return f"tenant:{request.headers.get('X-Tenant', 'none')}"


def unavailable(request: HttpRequest, exception: Any) -> HttpResponse:
    """An ``UNAVAILABLE_VIEW``: what the refusal carried, in its body."""
    return HttpResponse(
        f"{exception.reason} {exception.status} {exception.retry_after} "
        f"{exception.decision.allowed} {sorted(exception.headers)}",
        status=exception.status,
    )


def huge_key(request: HttpRequest) -> str:
    return "k" * 5000


def not_a_str(request: HttpRequest) -> Any:
    return 42


@with_resource("api")
def limited(request: HttpRequest) -> JsonResponse:
    return seen(request)


@with_resource("api")
async def alimited(request: HttpRequest) -> JsonResponse:
    return seen(request)


@with_resource("api", status=418, retry_after=7)
def custom(request: HttpRequest) -> JsonResponse:
    return seen(request)


@with_resource("api", timeout=3)
def patient(request: HttpRequest) -> JsonResponse:
    return seen(request)


@with_resource("api", identity=lambda request: f"team:{request.GET['team']}")
def by_team(request: HttpRequest) -> JsonResponse:
    return seen(request)


@with_resource("hourly")
@with_resource("api")
def stacked(request: HttpRequest) -> JsonResponse:
    return seen(request)


def plain(request: HttpRequest) -> JsonResponse:
    return seen(request)


async def aplain(request: HttpRequest) -> JsonResponse:
    return seen(request)


urlpatterns = [
    path("limited/", limited),
    path("alimited/", alimited),
    path("custom/", custom),
    path("patient/", patient),
    path("team/", by_team),
    path("stacked/", stacked),
    path("plain/", plain),
    path("aplain/", aplain),
    path("admin/", admin.site.urls),
    path("metrics/", metrics_view),
]
