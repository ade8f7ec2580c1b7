"""URLconf of ``tests/django/test_permits_django.py``: views holding a semaphore's
permits through ``@with_resource(permits=)``, a semaphore's default ``PERMITS``
and ``MIDDLEWARE`` rules' ``PERMITS`` (the plain view, which no decorator holds).

Each view answers what it saw: the permits of its hold, and the permits held
in the semaphore while it ran.
"""

from __future__ import annotations

import threading
from typing import Any

from django.http import HttpRequest, JsonResponse
from django.urls import path

from django_redis_pool import Lease, get_semaphore
from django_redis_pool.decorators import with_resource

#: Gated views wait for it (set by the tests).
GATE = threading.Event()
#: How many gated views were entered.
ENTERED: list[str] = []


def seen(request: HttpRequest) -> JsonResponse:
    resources: dict[str, Any] = getattr(request, "resources", None) or {}
    lease = resources.get("jobs")
    return JsonResponse(
        {
            "permits": lease.permits if isinstance(lease, Lease) else None,
            "held": get_semaphore("jobs").get_held_permits(),
        }
    )


@with_resource("jobs", timeout=0, permits=3)
def three(request: HttpRequest) -> JsonResponse:
    return seen(request)


@with_resource("jobs", timeout=0, permits=3)
def three_gated(request: HttpRequest) -> JsonResponse:
    ENTERED.append(request.path)
    GATE.wait(10)
    return seen(request)


@with_resource("jobs", timeout=0, permits=2)
async def two_async(request: HttpRequest) -> JsonResponse:
    return seen(request)


@with_resource("jobs", timeout=0)
def entry_default(request: HttpRequest) -> JsonResponse:
    return seen(request)


@with_resource("printers", timeout=0, permits=2)
def pool_with_permits(request: HttpRequest) -> JsonResponse:
    return seen(request)


def plain(request: HttpRequest) -> JsonResponse:
    return seen(request)


urlpatterns = [
    path("three/", three),
    path("three-gated/", three_gated),
    path("two-async/", two_async),
    path("default/", entry_default),
    path("pool/", pool_with_permits),
    path("mw/", plain),
]
