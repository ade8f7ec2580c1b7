"""URLconf of ``tests/django/test_middleware.py``: plain views, none of them decorated.

``ResourceMiddleware`` does all the holding; the views only report what they saw
(``request.resources``, the pool's free count from inside the view) and record
what happened in :data:`PROBE`, which the tests reset before each test.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

from asgiref.sync import sync_to_async
from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.urls import path

from django_redis_pool import Lease, Lock, get_pool


class Probe:
    """What the views saw, shared with the test (and its threads)."""

    def __init__(self) -> None:
        self.mutex = threading.Lock()
        self.reset()

    def reset(self) -> None:
        with self.mutex:
            self.calls = 0  #: views entered
            self.seen: list[dict[str, Any]] = []  #: describe() of each request entered
            self.gate = threading.Event()  #: gated views wait for it
            self.active = 0  #: busy views running now
            self.max_active = 0
            self.in_use: set[str] = set()  #: pool resources held by running busy views
            self.overlaps: list[str] = []  #: a resource found in use by another request

    def enter(self, seen: dict[str, Any]) -> None:
        with self.mutex:
            self.calls += 1
            self.seen.append(seen)


PROBE = Probe()


def user_of(request: HttpRequest) -> str:
    """The ``IDENTITY`` of the semaphore rules: the ``X-User`` header."""
    return str(request.headers["X-User"])


def describe_hold(hold: Any) -> dict[str, Any]:
    if isinstance(hold, Lock):
        return {"type": "Lock", "name": hold.name, "owned": hold.owned()}
    if isinstance(hold, Lease):
        return {
            "type": "Lease",
            "kind": hold.primitive_kind,
            "resource": hold.resource,
            "holder": hold.holder,
            "lease_timeout": hold.lease_timeout,
        }
    return {"type": type(hold).__name__}


def describe(request: HttpRequest) -> dict[str, Any]:
    """What the view sees (calls Redis: from a worker thread in async views)."""
    resources = getattr(request, "resources", None)
    return {
        "path": request.path,
        "method": request.method,
        "resources": None
        if resources is None
        else {name: describe_hold(hold) for name, hold in resources.items()},
        "printers_available": get_pool("printers").available_count(),
    }


def plain(request: HttpRequest) -> HttpResponse:
    """Reports what it holds without calling Redis itself."""
    resources = getattr(request, "resources", None)
    PROBE.enter({"resources": None if resources is None else sorted(resources)})
    return JsonResponse({"resources": None if resources is None else sorted(resources)})


def record(request: HttpRequest) -> HttpResponse:
    seen = describe(request)
    PROBE.enter(seen)
    return JsonResponse(seen)


async def arecord(request: HttpRequest) -> HttpResponse:
    seen = await sync_to_async(describe)(request)
    PROBE.enter(seen)
    return JsonResponse(seen)


def stream(request: HttpRequest) -> StreamingHttpResponse:
    PROBE.enter(describe(request))

    def chunks() -> Iterator[bytes]:
        yield b"one,"
        yield b"two,"
        yield b"three"

    return StreamingHttpResponse(chunks(), content_type="text/plain")


def boom(request: HttpRequest) -> HttpResponse:
    PROBE.enter(describe(request))
    raise RuntimeError("the view failed")


async def aboom(request: HttpRequest) -> HttpResponse:
    PROBE.enter(await sync_to_async(describe)(request))
    raise RuntimeError("the async view failed")


def gated(request: HttpRequest) -> HttpResponse:
    """Records the request, then waits until the test opens ``PROBE.gate``."""
    seen = describe(request)
    PROBE.enter(seen)
    if not PROBE.gate.wait(timeout=60):
        return HttpResponse("gate never opened", status=504)
    return JsonResponse(seen)


def _busy_enter(request: HttpRequest) -> str:
    resource = request.resources["printers"].resource  # type: ignore[attr-defined]
    with PROBE.mutex:
        PROBE.calls += 1
        PROBE.active += 1
        PROBE.max_active = max(PROBE.max_active, PROBE.active)
        if resource in PROBE.in_use:
            PROBE.overlaps.append(resource)
        PROBE.in_use.add(resource)
    return str(resource)


def _busy_exit(resource: str) -> None:
    with PROBE.mutex:
        PROBE.active -= 1
        PROBE.in_use.discard(resource)


def busy(request: HttpRequest) -> HttpResponse:
    """Counts how many requests run it at once (and which printer each holds)."""
    resource = _busy_enter(request)
    try:
        time.sleep(0.02)
    finally:
        _busy_exit(resource)
    return HttpResponse(resource)


async def abusy(request: HttpRequest) -> HttpResponse:
    resource = _busy_enter(request)
    try:
        await asyncio.sleep(0.02)
    finally:
        _busy_exit(resource)
    return HttpResponse(resource)


async def ahang(request: HttpRequest) -> HttpResponse:
    """Records the request, then runs until the client goes away (cancelled)."""
    PROBE.enter(await sync_to_async(describe)(request))
    await asyncio.sleep(60)
    return HttpResponse("the client never left", status=504)


async def astream(request: HttpRequest) -> StreamingHttpResponse:
    PROBE.enter(await sync_to_async(describe)(request))

    async def chunks() -> AsyncIterator[bytes]:
        for chunk in (b"one,", b"two,", b"three"):
            yield chunk

    return StreamingHttpResponse(chunks(), content_type="text/plain")


urlpatterns = [
    path("print/", record),
    path("print/a/", record),
    path("x/print/", record),
    path("scan/", record),
    path("free/", record),
    path("plain/", plain),
    path("async/print/", arecord),
    path("async/scan/", arecord),
    path("async/hang/print/", ahang),
    path("stream/print/", stream),
    path("async/stream/print/", astream),
    path("boom/print/", boom),
    path("async/boom/print/", aboom),
    path("gate/", gated),
    path("busy/", busy),
    path("async/busy/", abusy),
]
