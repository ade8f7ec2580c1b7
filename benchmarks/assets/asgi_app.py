"""The Django project the ``asgi`` and ``overload`` benchmarks serve (``web.py``):
one pooled view, async and sync.

``/async/`` (``async def``, for an ASGI server) and ``/sync/`` (``def``, for a
WSGI server) each hold a resource of the pool ``printers`` (``POOL_SIZE``
resources, default 10) for ``HOLD_MS`` milliseconds (default 2; ``asyncio.sleep``
or ``time.sleep``: the resource's use), waiting up to ``WAIT_S`` seconds for one
(default 30; then a 503). ``MAX_WAITING`` (default unset: no limit) is the
pool's ``MAX_WAITING``: past it, a request is refused at once (a 503).
``/flush-counts/`` adds the counts this process recorded into Redis now (the
pool's ``activity()``). Redis is ``REDIS_URL``. ``application`` is the ASGI
app, ``wsgi`` the WSGI one.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time

import django
from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.urls import path

HOLD = float(os.environ.get("HOLD_MS", "2")) / 1000
SIZE = int(os.environ.get("POOL_SIZE", "10"))
WAIT = float(os.environ.get("WAIT_S", "30"))
MAX_WAITING = int(os.environ["MAX_WAITING"]) if os.environ.get("MAX_WAITING") else None

settings.configure(
    DEBUG=False,
    SECRET_KEY="bench-not-secret",
    ALLOWED_HOSTS=["*"],
    ROOT_URLCONF=__name__,
    INSTALLED_APPS=["django_redis_pool"],
    MIDDLEWARE=[],
    DATABASES={},
    LOGGING_CONFIG=None,
    DJANGO_REDIS_POOL={
        "CONNECTION": {"URL": os.environ["REDIS_URL"]},
        "POOLS": {
            "printers": {
                "RESOURCES": [f"p{i}" for i in range(SIZE)],
                "LEASE_TIMEOUT": 30,
                "MAX_WAITING": MAX_WAITING,
            }
        },
    },
)
django.setup()
# No error on stderr per 503 (Django's "Service Unavailable: ..."): under overload
# they are the expected answer, and printing each would slow the server.
logging.getLogger("django.request").addFilter(lambda rec: getattr(rec, "status_code", 0) != 503)

from django.core.asgi import get_asgi_application  # noqa: E402
from django.core.wsgi import get_wsgi_application  # noqa: E402

from django_redis_pool import with_resource  # noqa: E402
from django_redis_pool.primitives import counts  # noqa: E402


@with_resource("printers", timeout=WAIT)
async def pooled_async(request: HttpRequest) -> HttpResponse:
    await asyncio.sleep(HOLD)
    return HttpResponse("ok")


@with_resource("printers", timeout=WAIT)
def pooled_sync(request: HttpRequest) -> HttpResponse:
    time.sleep(HOLD)
    return HttpResponse("ok")


async def plain_async(request: HttpRequest) -> HttpResponse:
    await asyncio.sleep(HOLD)
    return HttpResponse("ok")


def plain_sync(request: HttpRequest) -> HttpResponse:
    time.sleep(HOLD)
    return HttpResponse("ok")


def flush_counts(request: HttpRequest) -> HttpResponse:
    return HttpResponse(f"failed: {counts.flush()}")


urlpatterns = [
    path("async/", pooled_async),
    path("sync/", pooled_sync),
    path("plain-async/", plain_async),
    path("plain-sync/", plain_sync),
    path("flush-counts/", flush_counts),
]

application = get_asgi_application()
wsgi = get_wsgi_application()
