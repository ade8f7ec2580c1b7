"""The response to a request that got nothing in time (or found Redis down):
``UNAVAILABLE_VIEW``'s, else a plain one, always with a ``Retry-After`` header.

``error`` is the :class:`ResourceUnavailable` or :class:`BackendUnavailable`
the guard raised on the request's behalf; it carries ``name``, ``status`` and
``retry_after``, and may carry ``headers`` of its kind (what is left of a
quota), which the response gets unless it sets them itself.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from asgiref.sync import async_to_sync, iscoroutinefunction, sync_to_async
from django.http import HttpRequest, HttpResponse
from django.http.response import HttpResponseBase

from . import conf, registry
from .exceptions import PoolError, ResourceUnavailable

__all__ = ["arespond", "respond", "with_headers"]

logger = logging.getLogger("django_redis_pool")


def respond(request: HttpRequest, error: PoolError) -> HttpResponseBase:
    """The refusal for ``request``: ``UNAVAILABLE_VIEW(request, error)`` (sync or
    async) if it gives a response, else the default."""
    view = _unavailable_view()
    response = None
    if view is not None:
        try:
            if iscoroutinefunction(view):
                response = async_to_sync(view)(request, error)
            else:
                response = view(request, error)
        except Exception:
            logger.exception("UNAVAILABLE_VIEW %r failed; sending the default answer", view)
    return _finished(view, response, error)


async def arespond(request: HttpRequest, error: PoolError) -> HttpResponseBase:
    """:func:`respond` for async code."""
    view = _unavailable_view()
    response = None
    if view is not None:
        try:
            if iscoroutinefunction(view):
                response = await view(request, error)
            else:
                response = await sync_to_async(view)(request, error)
        except Exception:
            logger.exception("UNAVAILABLE_VIEW %r failed; sending the default answer", view)
    return _finished(view, response, error)


def _unavailable_view() -> Callable[..., Any] | None:
    view = registry.get_config().unavailable_view
    if view is None:
        return None
    return conf.import_callable(view, conf.setting_path("UNAVAILABLE_VIEW"))


def _finished(view: Any, response: Any, error: PoolError) -> HttpResponseBase:
    """``response`` if the unavailable view gave one, else the default; with
    ``Retry-After``."""
    if not isinstance(response, HttpResponseBase):
        if view is not None and response is not None:
            logger.error("UNAVAILABLE_VIEW %r returned %r, not a response", view, response)
        seconds = error.retry_after  # type: ignore[attr-defined]
        status = error.status  # type: ignore[attr-defined]
        what = "Too many requests" if status == 429 else "Temporarily unavailable"
        response = HttpResponse(
            f"{what}, please retry in {seconds} s.\n",
            status=status,
            content_type="text/plain; charset=utf-8",
        )
    if not response.has_header("Retry-After"):
        response["Retry-After"] = str(error.retry_after)  # type: ignore[attr-defined]
    _add_headers(response, getattr(error, "headers", None))
    if isinstance(error, ResourceUnavailable):
        # A refusal by design (load shed, a quota spent), logged once by the
        # guard at INFO with its reason: not a server error for django.request
        # (which would log every 503 at ERROR, and an error tracker report it).
        response._has_been_logged = True  # type: ignore[attr-defined]
    return response


def with_headers(response: Any, held: Any) -> Any:
    """``response`` with the ``headers`` of ``held`` (a :class:`~.kinds.Grant`,
    or None) that it does not set itself (e.g. what is left of a quota)."""
    if held is not None and held.headers and isinstance(response, HttpResponseBase):
        _add_headers(response, held.headers)
    return response


def _add_headers(response: HttpResponseBase, headers: Any) -> None:
    """Set ``headers`` that ``response`` does not set itself; a mapping with
    an ``add_to(response)`` method adds itself (e.g. combining with what an
    inner hold's headers already set)."""
    add_to = getattr(headers, "add_to", None)
    if add_to is not None:
        add_to(response)
        return
    for header, value in (headers or {}).items():
        if not response.has_header(header):
            response[header] = value
