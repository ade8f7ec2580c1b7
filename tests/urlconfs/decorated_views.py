"""URLconf with views decorated by ``@with_resource``, for tests/django/test_decorators.py.

Views note what they saw in :data:`RECORD` (reset by the tests before each one).
Async views never call Redis themselves on the event loop: whatever they check
while holding goes through ``sync_to_async``.
"""

from __future__ import annotations

import asyncio
import io
import threading
import time
from collections.abc import Iterator
from typing import Any

from asgiref.sync import sync_to_async
from django.http import FileResponse, HttpRequest, HttpResponse, StreamingHttpResponse
from django.urls import path
from django.utils.decorators import method_decorator
from django.views import View

from django_redis_pool import get_lock, get_pool, get_semaphore
from django_redis_pool.decorators import with_resource
from tests.support.waiting import wait_for


class Record:
    """What the views saw, for the tests to check."""

    def __init__(self) -> None:
        self.mutex = threading.Lock()
        self.reset()

    def reset(self) -> None:
        self.seen: list[dict[str, Any]] = []
        self.active = 0
        self.max_active = 0
        self.held_ids: set[str] = set()
        self.overlaps: list[str] = []
        self.entered = 0
        self.gate = threading.Event()

    def note(self, request: HttpRequest, **extra: Any) -> None:
        with self.mutex:
            self.seen.append({"resources": dict(request.resources), **extra})


RECORD = Record()


def _pool_state(resource: str) -> bool:
    return get_pool("printers").is_occupied(resource)


# --------------------------------------------------------------- unavailable views


def unavailable_sync(request: HttpRequest, exception: Exception) -> HttpResponse:
    name = exception.name  # type: ignore[attr-defined]
    status = exception.status  # type: ignore[attr-defined]
    retry_after = exception.retry_after  # type: ignore[attr-defined]
    return HttpResponse(f"sync busy: {name} {status} {retry_after}", status=status)


def unavailable_with_header(request: HttpRequest, exception: Exception) -> HttpResponse:
    response = HttpResponse("come back later", status=exception.status)  # type: ignore[attr-defined]
    response["Retry-After"] = "99"
    return response


def unavailable_broken(request: HttpRequest, exception: Exception) -> HttpResponse:
    raise RuntimeError("the unavailable view itself is broken")


def unavailable_not_a_response(request: HttpRequest, exception: Exception) -> str:
    return "not a response"


async def unavailable_async(request: HttpRequest, exception: Exception) -> HttpResponse:
    await asyncio.sleep(0)
    name = exception.name  # type: ignore[attr-defined]
    status = exception.status  # type: ignore[attr-defined]
    retry_after = exception.retry_after  # type: ignore[attr-defined]
    return HttpResponse(f"async busy: {name} {status} {retry_after}", status=status)


def user_identity(request: HttpRequest) -> str:
    return f"user-{request.GET['user']}"


# --------------------------------------------------------------------- sync views


@with_resource("printers", timeout=0)
def pool_view(request: HttpRequest) -> HttpResponse:
    lease = request.resources["printers"]  # type: ignore[attr-defined]
    RECORD.note(request, occupied=_pool_state(lease.resource))
    return HttpResponse(f"printing on {lease.resource}")


@with_resource("printers", timeout=0)
def plain_view(request: HttpRequest) -> HttpResponse:
    RECORD.note(request)
    return HttpResponse("ok")


@with_resource("printers", timeout=0.2)
def pool_short_view(request: HttpRequest) -> HttpResponse:
    RECORD.note(request)
    return HttpResponse("ok")


@with_resource("printers", timeout=2.5)
def pool_longer_view(request: HttpRequest) -> HttpResponse:
    RECORD.note(request)
    return HttpResponse("ok")


#: How long ``pool_wait_view`` waits for a printer (long: a test tells a wake
#: by a release's hand-off from the end of this wait).
POOL_WAIT_TIMEOUT = 20


@with_resource("printers", timeout=POOL_WAIT_TIMEOUT)
def pool_wait_view(request: HttpRequest) -> HttpResponse:
    RECORD.note(request, at=time.monotonic())
    return HttpResponse("ok")


@with_resource("printers", timeout=0, status=429, retry_after=7)
def pool_custom_status_view(request: HttpRequest) -> HttpResponse:
    return HttpResponse("ok")


@with_resource("reports", timeout=0)
def semaphore_view(request: HttpRequest) -> HttpResponse:
    semaphore = get_semaphore("reports")
    RECORD.note(request, size=semaphore.get_current_size())
    return HttpResponse("ok")


@with_resource("reports", timeout=POOL_WAIT_TIMEOUT)
def semaphore_wait_view(request: HttpRequest) -> HttpResponse:
    RECORD.note(request)
    return HttpResponse("ok")


@with_resource("reports", timeout=0, identity=lambda request: f"user-{request.GET['user']}")
def semaphore_identity_view(request: HttpRequest) -> HttpResponse:
    with RECORD.mutex:
        RECORD.entered += 1
    RECORD.gate.wait(10)
    RECORD.note(request)
    return HttpResponse("ok")


@with_resource("reports", timeout=0, identity=lambda request: 42)
def semaphore_number_identity_view(request: HttpRequest) -> HttpResponse:
    """An identity function that returns a number (a programming error)."""
    return HttpResponse("never reached")


@with_resource("reports", timeout=0, identity="tests.urlconfs.decorated_views.user_identity")
def semaphore_dotted_identity_view(request: HttpRequest) -> HttpResponse:
    RECORD.note(request)
    return HttpResponse("ok")


@with_resource("imports", timeout=0)
def lock_view(request: HttpRequest) -> HttpResponse:
    lock = request.resources["imports"]  # type: ignore[attr-defined]
    RECORD.note(request, owned=lock.owned(), fence=lock.fence, locked=get_lock("imports").locked())
    return HttpResponse("ok")


@with_resource("imports")
def lock_default_timeout_view(request: HttpRequest) -> HttpResponse:
    return HttpResponse("ok")


@with_resource("imports", timeout=1, identity=lambda request: "same-user")
def lock_identity_view(request: HttpRequest) -> HttpResponse:
    return HttpResponse("ok")


@with_resource("imports", timeout=0, lease_timeout=0.3)
def lock_expiring_view(request: HttpRequest) -> HttpResponse:
    lock = request.resources["imports"]  # type: ignore[attr-defined]
    wait_for(lambda: not lock.owned(), what="the lease to expire (on the Redis clock)")
    RECORD.note(request)
    return HttpResponse("ok")


@with_resource("printers", timeout=0)
def pool_force_released_view(request: HttpRequest) -> HttpResponse:
    lease = request.resources["printers"]  # type: ignore[attr-defined]
    get_pool("printers").release(lease.resource)  # an operator's force-release
    RECORD.note(request)
    return HttpResponse("ok")


class Boom(Exception):
    """Raised by the failing views."""


@with_resource("printers", timeout=0)
def raising_view(request: HttpRequest) -> HttpResponse:
    RECORD.note(request)
    raise Boom("sync view failed")


@with_resource("printers", timeout=0)
def stream_view(request: HttpRequest) -> StreamingHttpResponse:
    RECORD.note(request)

    def chunks() -> Iterator[bytes]:
        for i in range(3):
            yield f"chunk{i}\n".encode()

    return StreamingHttpResponse(chunks())


@with_resource("printers", timeout=0)
def file_view(request: HttpRequest) -> FileResponse:
    RECORD.note(request)
    response = FileResponse(io.BytesIO(b"x" * 10), filename="data.bin")
    response.block_size = 4  # three chunks: 4 + 4 + 2 bytes
    return response


@with_resource("printers", timeout=10)
def concurrent_view(request: HttpRequest) -> HttpResponse:
    lease = request.resources["printers"]  # type: ignore[attr-defined]
    with RECORD.mutex:
        RECORD.active += 1
        RECORD.max_active = max(RECORD.max_active, RECORD.active)
        if lease.resource in RECORD.held_ids:
            RECORD.overlaps.append(lease.resource)
        RECORD.held_ids.add(lease.resource)
    time.sleep(0.02)
    with RECORD.mutex:
        RECORD.held_ids.discard(lease.resource)
        RECORD.active -= 1
    return HttpResponse("ok")


@with_resource("printers", timeout=0)
@with_resource("imports", timeout=0)
def stacked_view(request: HttpRequest) -> HttpResponse:
    lock = request.resources["imports"]  # type: ignore[attr-defined]
    lease = request.resources["printers"]  # type: ignore[attr-defined]
    RECORD.note(request, owned=lock.owned(), occupied=_pool_state(lease.resource))
    return HttpResponse("ok")


@with_resource("nowhere", timeout=0)
def unknown_name_view(request: HttpRequest) -> HttpResponse:
    return HttpResponse("ok")


# -------------------------------------------------------------------- async views


@with_resource("printers", timeout=0)
async def async_pool_view(request: HttpRequest) -> HttpResponse:
    lease = request.resources["printers"]  # type: ignore[attr-defined]
    occupied = await sync_to_async(_pool_state, thread_sensitive=False)(lease.resource)
    RECORD.note(request, occupied=occupied, loop_thread=threading.get_ident())
    return HttpResponse(f"printing on {lease.resource}")


@with_resource("printers", timeout=5)
async def async_pool_wait_view(request: HttpRequest) -> HttpResponse:
    RECORD.note(request)
    return HttpResponse("ok")


@with_resource("printers", timeout=600)  # (a thousand queue: see test_async_requests.py)
async def async_pool_queue_view(request: HttpRequest) -> HttpResponse:
    RECORD.note(request)
    return HttpResponse("ok")


@with_resource("printers", timeout=0)
async def async_raising_view(request: HttpRequest) -> HttpResponse:
    RECORD.note(request, loop_thread=threading.get_ident())
    raise Boom("async view failed")


@with_resource("printers", timeout=0)
@with_resource("imports", timeout=0)
async def async_stacked_view(request: HttpRequest) -> HttpResponse:
    RECORD.note(request, loop_thread=threading.get_ident())
    return HttpResponse("ok")


# ------------------------------------------------------------- class-based views


@method_decorator(with_resource("printers", timeout=0), name="dispatch")
class SyncDispatchView(View):
    def get(self, request: HttpRequest) -> HttpResponse:
        lease = request.resources["printers"]  # type: ignore[attr-defined]
        RECORD.note(request, occupied=_pool_state(lease.resource))
        return HttpResponse("sync cbv")


class AsyncGetView(View):
    @method_decorator(with_resource("printers", timeout=0))
    async def get(self, request: HttpRequest) -> HttpResponse:
        lease = request.resources["printers"]  # type: ignore[attr-defined]
        occupied = await sync_to_async(_pool_state, thread_sensitive=False)(lease.resource)
        RECORD.note(request, occupied=occupied, loop_thread=threading.get_ident())
        return HttpResponse("async get")


@method_decorator(with_resource("printers", timeout=0), name="dispatch")
class AsyncDispatchView(View):
    async def get(self, request: HttpRequest) -> HttpResponse:
        lease = request.resources["printers"]  # type: ignore[attr-defined]
        occupied = await sync_to_async(_pool_state, thread_sensitive=False)(lease.resource)
        RECORD.note(request, occupied=occupied, loop_thread=threading.get_ident())
        return HttpResponse("async dispatch")


urlpatterns = [
    path("pool/", pool_view),
    path("plain/", plain_view),
    path("pool-short/", pool_short_view),
    path("pool-longer/", pool_longer_view),
    path("pool-wait/", pool_wait_view),
    path("pool-custom-status/", pool_custom_status_view),
    path("semaphore/", semaphore_view),
    path("semaphore-wait/", semaphore_wait_view),
    path("semaphore-identity/", semaphore_identity_view),
    path("semaphore-number-identity/", semaphore_number_identity_view),
    path("semaphore-dotted-identity/", semaphore_dotted_identity_view),
    path("lock/", lock_view),
    path("lock-default-timeout/", lock_default_timeout_view),
    path("lock-identity/", lock_identity_view),
    path("lock-expiring/", lock_expiring_view),
    path("pool-force-released/", pool_force_released_view),
    path("raising/", raising_view),
    path("stream/", stream_view),
    path("file/", file_view),
    path("concurrent/", concurrent_view),
    path("stacked/", stacked_view),
    path("unknown-name/", unknown_name_view),
    path("async/", async_pool_view),
    path("async-wait/", async_pool_wait_view),
    path("async-queue/", async_pool_queue_view),
    path("async-raising/", async_raising_view),
    path("async-stacked/", async_stacked_view),
    path("cbv/sync-dispatch/", SyncDispatchView.as_view()),
    path("cbv/async-get/", AsyncGetView.as_view()),
    path("cbv/async-dispatch/", AsyncDispatchView.as_view()),
]
