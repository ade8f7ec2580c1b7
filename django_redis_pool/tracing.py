"""One OpenTelemetry span per hold (``pip install django-redis-pool[otel]``).

Every hold taken by ``@with_resource``, ``ResourceMiddleware`` or
``holding()`` (the guard, :mod:`.guard`) records one span covering its wait,
a child of the span current at the call (the request's, the task's), named
``django_redis_pool.hold <name>``, with the attributes of :data:`ATTRIBUTES`;
a hold refused or failed sets the span's status to error. ``docs/metrics.md``
shows one.

Without ``opentelemetry-api``, or while the global tracer provider is the
API's default (a proxy or no-op provider: nobody configured tracing), no span
is made at all: :func:`start` costs a global read and, once the API is
imported, one call of ``trace.get_tracer_provider()`` and an identity check.
The API is imported once, on the first hold; the provider is checked on every
hold, so one set later (``trace.set_tracer_provider``) is used from the next.
"""

from __future__ import annotations

import time
from typing import Any

__all__ = ["ATTRIBUTES", "SPAN_NAME", "finish", "start"]

#: The span's name, with the primitive's configured name.
SPAN_NAME = "django_redis_pool.hold {name}"

#: The span's attributes (OpenTelemetry's naming: namespaced, snake_case).
ATTRIBUTES = {
    "django_redis_pool.primitive.name": "the configured name, e.g. 'printers'",
    "django_redis_pool.primitive.kind": "its kind, as the status command's --json names it",
    "django_redis_pool.wait.seconds": "the seconds the hold waited (float)",
    "django_redis_pool.hold.outcome": "held, refused, full (max_waiting) or unavailable (Redis)",
    "django_redis_pool.hold.reason": "a refusal's reason: timeout, full or limited",
    "django_redis_pool.hold.fence": "the granted lease's fencing token (leased kinds)",
    "django_redis_pool.hold.outside_request": "True for holding() (a task, a command)",
}

#: ``opentelemetry.trace`` once imported; False when it is not installed;
#: None until the first hold.
_trace: Any = None
#: (the provider last seen, its tracer or None when it is the API's default).
_seen: tuple[Any, Any] = (None, None)


def _api() -> Any:
    """``opentelemetry.trace``, imported on first use (False without it)."""
    global _trace
    try:
        from opentelemetry import trace
    except ImportError:
        _trace = False
    else:
        _trace = trace
    return _trace


def _tracer() -> Any:
    """The tracer of the global provider, or None when no provider is set."""
    global _seen
    trace = _trace if _trace is not None else _api()
    if trace is False:
        return None
    provider = trace.get_tracer_provider()
    seen, tracer = _seen
    if provider is seen:
        return tracer
    if isinstance(provider, (trace.ProxyTracerProvider, trace.NoOpTracerProvider)):
        tracer = None
    else:
        tracer = provider.get_tracer("django_redis_pool")
    _seen = (provider, tracer)
    return tracer


def start(name: str, started: float, outside_request: bool = False) -> Any:
    """A span for the hold of ``name`` (a child of the current span) begun at
    ``started`` (``time.monotonic()`` when the hold began waiting), or None
    when tracing is off. ``outside_request``: a hold of ``holding()``."""
    if _trace is False:
        return None
    tracer = _tracer()
    if tracer is None:
        return None
    attributes: dict[str, Any] = {"django_redis_pool.primitive.name": name}
    if outside_request:
        attributes["django_redis_pool.hold.outside_request"] = True
    begun = time.time_ns() - int((time.monotonic() - started) * 1e9)
    return tracer.start_span(SPAN_NAME.format(name=name), attributes=attributes, start_time=begun)


def finish(span: Any, primitive: Any, outcome: Any, started: float, raised: Any) -> None:
    """End ``span`` with what the hold came to: ``outcome`` is the guard's
    (a ``Grant``, a ``Refusal``, or None: Redis failed and ``FAIL_OPEN`` let
    it run, or an error was ``raised``); ``started``: ``time.monotonic()``
    when it began waiting."""
    trace = _trace
    error = getattr(outcome, "error", None)
    if outcome is not None and error is None:
        label = "held"
        lease = getattr(outcome, "lease", None)
        if lease is not None:
            span.set_attribute("django_redis_pool.hold.fence", lease.fence)
        waited = getattr(outcome, "granted_at", time.monotonic()) - started
    else:
        waited = time.monotonic() - started
        failure = error if error is not None else raised
        reason = getattr(failure, "reason", None)
        if reason is None:
            label = "unavailable"
        else:
            label = "full" if reason == "full" else "refused"
            span.set_attribute("django_redis_pool.hold.reason", reason)
        if failure is not None:
            span.record_exception(failure)
        span.set_status(
            trace.Status(trace.StatusCode.ERROR, f"{label}: {failure}" if failure else label)
        )
    if primitive is not None:
        span.set_attribute("django_redis_pool.primitive.kind", primitive.kind)
    span.set_attribute("django_redis_pool.wait.seconds", max(0.0, waited))
    span.set_attribute("django_redis_pool.hold.outcome", label)
    span.end()
