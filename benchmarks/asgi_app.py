"""The Django project ``bench_asgi.py`` serves: one pooled view, async and sync.

``/async/`` (``async def``, for an ASGI server) and ``/sync/`` (``def``, for a
WSGI server) each hold a resource of the pool ``printers`` (``POOL_SIZE``
resources, default 10) for ``HOLD_MS`` milliseconds (default 2; ``asyncio.sleep``
or ``time.sleep``: the resource's use), waiting up to 30 s for one. Redis is
``REDIS_URL``. ``application`` is the ASGI app, ``wsgi`` the WSGI one.
"""

from __future__ import annotations

import asyncio
import os
import time

import django
from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.urls import path

HOLD = float(os.environ.get("HOLD_MS", "2")) / 1000
SIZE = int(os.environ.get("POOL_SIZE", "10"))

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
        "POOLS": {"printers": {"RESOURCES": [f"p{i}" for i in range(SIZE)], "LEASE_TIMEOUT": 30}},
    },
)
django.setup()

from django.core.asgi import get_asgi_application  # noqa: E402
from django.core.wsgi import get_wsgi_application  # noqa: E402

from django_redis_pool import with_resource  # noqa: E402


@with_resource("printers", timeout=30)
async def pooled_async(request: HttpRequest) -> HttpResponse:
    await asyncio.sleep(HOLD)
    return HttpResponse("ok")


@with_resource("printers", timeout=30)
def pooled_sync(request: HttpRequest) -> HttpResponse:
    time.sleep(HOLD)
    return HttpResponse("ok")


async def plain_async(request: HttpRequest) -> HttpResponse:
    await asyncio.sleep(HOLD)
    return HttpResponse("ok")


def plain_sync(request: HttpRequest) -> HttpResponse:
    time.sleep(HOLD)
    return HttpResponse("ok")


urlpatterns = [
    path("async/", pooled_async),
    path("sync/", pooled_sync),
    path("plain-async/", plain_async),
    path("plain-sync/", plain_sync),
]

application = get_asgi_application()
wsgi = get_wsgi_application()
