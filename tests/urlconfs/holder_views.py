"""URLconf of ``tests/django/test_request_holders.py``: the admin, and views that hold a
primitive under their request's holder name until the test opens
:data:`GATE` (so that the test can look at the holders meanwhile)."""

from __future__ import annotations

import threading

from asgiref.sync import sync_to_async
from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.urls import path

from django_redis_pool.decorators import with_resource


class Gate:
    """How many requests are inside a view, and the gate they wait at."""

    def __init__(self) -> None:
        self.mutex = threading.Lock()
        self.reset()

    def reset(self) -> None:
        self.entered = 0
        self.open = threading.Event()

    def wait(self) -> None:
        with self.mutex:
            self.entered += 1
        self.open.wait(15)


GATE = Gate()


@with_resource("printers", timeout=0)
def pool_view(request: HttpRequest, rest: str = "") -> HttpResponse:
    GATE.wait()
    return HttpResponse("ok")


@with_resource("printers", timeout=0)
async def async_pool_view(request: HttpRequest, rest: str = "") -> HttpResponse:
    await sync_to_async(GATE.wait, thread_sensitive=False)()
    return HttpResponse("ok")


@with_resource("imports", timeout=0)
def lock_view(request: HttpRequest) -> HttpResponse:
    GATE.wait()
    return HttpResponse("ok")


@with_resource("reports", timeout=0, identity=lambda request: f"user-{request.GET['user']}")
def identity_view(request: HttpRequest) -> HttpResponse:
    GATE.wait()
    return HttpResponse("ok")


urlpatterns = [
    path("admin/", admin.site.urls),
    path("held/<path:rest>", pool_view),
    path("async-held/<path:rest>", async_pool_view),
    path("lock/", lock_view),
    path("identity/", identity_view),
]
