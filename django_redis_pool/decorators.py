"""``@with_resource``: hold a configured primitive while a view runs."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

from asgiref.sync import iscoroutinefunction
from django.http import HttpRequest

from .guard import Guard, on_event_loop
from .primitives.validators import DEFAULT, Seconds

__all__ = ["with_resource"]

View = TypeVar("View", bound=Callable[..., Any])


def with_resource(
    name: str,
    *,
    timeout: Seconds = DEFAULT,
    lease_timeout: Seconds = DEFAULT,
    identity: Callable[[HttpRequest], str] | str | None = None,
    status: int | None = None,
    retry_after: float | None = None,
    permits: int | None = None,
) -> Callable[[View], View]:
    """Hold the configured primitive ``name`` while the decorated view runs.

    Before the view, acquire what the primitive's kind holds for a request
    (:meth:`Kind.grant <django_redis_pool.kinds.Kind.grant>`; the kind's docs say
    what: a :class:`Lease`, or an object of the request's own), as the holder
    ``identity(request)`` (default: a unique id per request). The hold is
    ``request.resources[name]``. It is released once the response is closed (for a
    streaming or file response: after its last chunk), or at once if the view
    raises.

    ``timeout``: how long to wait (DEFAULT: the primitive's own ``TIMEOUT`` if
    its kind has one, else forever; None: forever; 0: do not wait).
    ``lease_timeout``: the hold's lease (DEFAULT: the primitive's default;
    with no expiry, or None: ``REQUEST_LEASE``, renewed while the view runs).
    ``identity``: a function of the request (or its dotted path) naming the
    holder; where holds are per identity (slots), requests with the same
    identity share one. ``permits``: how many permits
    each request's hold takes, an int >= 1, for a kind whose holds take
    permits (None: the entry's ``PERMITS`` setting, 1 by default); naming a
    primitive of any other kind with it is the system check E038, asking more
    than its configured size E039.

    When nothing is granted in time, the response has ``status`` (default
    None: the kind's :attr:`~django_redis_pool.kinds.Kind.refusal_status`, 503
    unless the kind answers otherwise, e.g. 429 Too Many Requests) and a
    ``Retry-After`` header of ``retry_after`` seconds (default: when the kind
    says the turn comes: its own next turn, or its estimate from the recent
    hold times and the callers waiting, :meth:`Kind.turn
    <.kinds.Kind.turn>`; else the ceiling of ``timeout``, else 1), rounded up;
    ``DJANGO_REDIS_POOL["UNAVAILABLE_VIEW"]`` replaces its body. A kind may add
    headers to refusals and to the view's responses (what is left of a quota).
    When Redis is down, the same response is sent (503 unless ``status`` is
    given) and an error is logged, unless ``FAIL_OPEN`` is set: then the view
    runs with ``request.resources[name] = None`` and a warning is logged.

    Works on sync and async views, on class-based views via
    ``method_decorator``, and stacked (the outer one acquires first). An async
    view waits on the event loop through ``redis.asyncio``, holding no thread;
    a request cancelled while it waits (the client went away) stops waiting
    at once, and a grant that raced the cancellation is given back at once.
    """
    guard = Guard(
        name,
        timeout=timeout,
        lease_timeout=lease_timeout,
        identity=identity,
        status=status,
        retry_after=retry_after,
        permits=permits,
    )

    def decorator(view: View) -> View:
        if iscoroutinefunction(view):

            @functools.wraps(view)
            async def async_wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
                return await guard.acall(request, view, args, kwargs)

            wrapped: Any = async_wrapped
        else:

            @functools.wraps(view)
            def sync_wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
                if on_event_loop():  # e.g. dispatch() of an async class-based view
                    return guard.acall(request, view, args, kwargs)
                return guard.call(request, view, args, kwargs)

            wrapped = sync_wrapped
        wrapped.resource_guards = (guard, *getattr(view, "resource_guards", ()))
        return wrapped  # type: ignore[no-any-return]

    return decorator
