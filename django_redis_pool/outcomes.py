"""What one request's acquire or release came to, for the request guard
(:mod:`.guard`), or one hold's outside a request (``holding()``, ``request``
None: logged with its caller, not a method and path): the hold, kept as
``request.resources[name]``; a refusal
(:class:`Refusal`: nothing granted in time, refused at once, or Redis
failed); or, when Redis failed and ``FAIL_OPEN`` is set, the view's pass
without a hold. Each is logged here, with the signal that reports it
(:class:`PendingSignal`), which the guard sends once the outcome is settled
(awaited on the event loop for an async view).
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass
from typing import Any, Protocol

from django.dispatch import Signal
from django.http import HttpRequest

from . import registry, signals
from .exceptions import BackendUnavailable, PoolError, ResourceUnavailable
from .kinds import Grant
from .primitives.text import escaped

__all__ = [
    "Guarded",
    "PendingSignal",
    "Refusal",
    "held_or_refused",
    "redis_failed",
    "refusal",
    "refused_at_once",
    "release_failed",
    "released",
    "resources_of",
    "subject",
]

logger = logging.getLogger("django_redis_pool")


class Guarded(Protocol):
    """What an outcome reads of the hold it reports (a :class:`.guard.Guard`)."""

    name: str
    status: int | None
    retry_after: int | None
    caller: str | None  #: who holds outside a request (None: a request's guard)

    def wait_of(self, primitive: Any) -> float | None:
        """The seconds the hold waits for ``primitive``."""
        ...

    def retry_after_for(self, primitive: Any) -> int:
        """The ``Retry-After`` of a refusal of ``primitive``."""
        ...

    def turn_after(self, primitive: Any) -> float:
        """The ``retry_after`` of a refusal of ``primitive`` outside a request."""
        ...


def subject(guard: Guarded, request: HttpRequest | None) -> str:
    """Who held, in log lines: the request's method and path, else the
    caller of ``holding()``."""
    if request is None:
        return f"holding({guard.name!r}) in {escaped(guard.caller or '-')}"
    return f"{request.method} {escaped(request.path)}"


@dataclass
class Refusal:
    """Nothing was held: ``error`` says why (and carries name, status, retry_after;
    a :class:`ResourceUnavailable`'s ``reason`` tells a timeout from a refusal at
    once, ``max_waiting`` callers already waiting)."""

    error: PoolError


@dataclass
class PendingSignal:
    """A signal to send, once the outcome it reports is settled."""

    signal: Signal
    sender: Any
    kwargs: dict[str, Any]

    def send(self) -> None:
        signals.send(self.signal, self.sender, **self.kwargs)

    async def asend(self) -> None:
        await signals.asend(self.signal, self.sender, **self.kwargs)


def held_or_refused(
    guard: Guarded,
    request: HttpRequest | None,
    primitive: Any,
    held: Grant | None,
    watched: bool,
    started: float,
    turn: float | None = None,
) -> tuple[Grant | Refusal, PendingSignal]:
    """What an acquire that answered ``held`` means for the request, and the
    signal to send about it. ``watched``: the hold needs a watchdog lease,
    renewed while the request runs; ``turn``: a refusal's estimated turn
    (see :func:`refusal`)."""
    if held is None:
        error = ResourceUnavailable(
            f"{primitive.kind} {guard.name!r}: nothing was granted within "
            f"{guard.wait_of(primitive)} s"
        )
        logger.info("%s refused (%s): %s", subject(guard, request), error.reason, error)
        return refusal(guard, request, primitive, error, started, turn=turn)
    if watched and held.lease is not None:
        held.lease.start_auto_renew()
    waited = held.granted_at - started
    held.primitive = primitive
    if request is not None:
        resources_of(request)[guard.name] = held.hold
    logger.debug(
        "%s holds %s %r (fence %s) after waiting %.1f ms",
        subject(guard, request),
        primitive.kind,
        guard.name,
        held.lease.fence if held.lease else None,
        waited * 1000,
    )
    return held, PendingSignal(
        signals.resource_acquired,
        type(primitive),
        {
            "name": guard.name,
            "hold": held.hold,
            "lease": held.lease,
            "request": request,
            "waited": waited,
        },
    )


def refused_at_once(
    guard: Guarded,
    request: HttpRequest | None,
    primitive: Any,
    error: ResourceUnavailable,
    started: float,
    turn: float | None = None,
) -> tuple[Refusal, PendingSignal]:
    """The kind refused the request at once (``error.reason``: ``max_waiting``
    callers already wait): the refusal, without waiting (``turn``: see
    :func:`refusal`)."""
    logger.info("%s refused (%s): %s", subject(guard, request), error.reason, error)
    return refusal(guard, request, primitive, error, started, turn=turn)


def redis_failed(
    guard: Guarded, request: HttpRequest | None, primitive: Any, exc: PoolError, started: float
) -> tuple[Refusal | None, PendingSignal | None]:
    """Redis failed (unreachable, or refusing: OOM...): None when
    ``FAIL_OPEN`` lets the view run without a hold, else the refusal (and
    its signal)."""
    failed = "failed"
    if isinstance(exc, BackendUnavailable):
        failed = (
            "answered, but this process was too busy to read the reply in time"
            if exc.answered
            else "is unreachable"
        )
    if registry.get_config().fail_open:
        logger.warning(
            "%s runs without holding %r: Redis %s and FAIL_OPEN is set (%s)",
            subject(guard, request),
            guard.name,
            failed,
            exc,
        )
        if request is not None:
            resources_of(request)[guard.name] = None
        return None, None
    status = guard.status or 503  # Redis failed: not the kind's refusal
    logger.error(
        "%s %s without holding %r: Redis %s (%s)",
        subject(guard, request),
        "failed" if request is None else f"answered {status}",
        guard.name,
        failed,
        exc,
    )
    return refusal(guard, request, primitive, exc, started, status)


def refusal(
    guard: Guarded,
    request: HttpRequest | None,
    primitive: Any,
    error: PoolError,
    started: float,
    status: int | None = None,
    turn: float | None = None,
) -> tuple[Refusal, PendingSignal]:
    """The refusal carrying ``error``, and its ``resource_unavailable``
    signal. ``primitive`` is None when Redis failed before it could be built.
    ``status``: the guard's, else its kind's ``refusal_status``; the
    ``Retry-After`` seconds are the guard's ``retry_after``, else the
    kind's on ``error`` (when it tells when to retry), else ``turn`` (the
    kind's estimate of the next turn, :meth:`.guard.Guard.turn_of`), else the
    wait's."""
    error.name = guard.name  # type: ignore[attr-defined]
    if status is None:
        status = guard.status or registry.by_name()[primitive.kind].refusal_status
    error.status = status  # type: ignore[attr-defined]
    told = getattr(error, "retry_after", None)
    if told is None:
        told = turn
    if request is None:  # holding(): the seconds as the kind told them, else the guard's guess
        if isinstance(error, ResourceUnavailable):
            turn = told if told is not None else guard.turn_after(primitive)
            error.retry_after = guard.retry_after if guard.retry_after is not None else turn
    elif guard.retry_after is None and told:  # a request's Retry-After: whole seconds
        error.retry_after = max(1, math.ceil(told))  # type: ignore[attr-defined]
    else:
        error.retry_after = guard.retry_after_for(primitive)  # type: ignore[attr-defined]
    if primitive is not None:
        sender: type = type(primitive)
    else:
        entry = registry.get_config().entries.get(guard.name)
        sender = (entry.kind.primitive if entry else None) or object
    kwargs = {
        "name": guard.name,
        "request": request,
        "error": error,
        "waited": time.monotonic() - started,
    }
    return Refusal(error), PendingSignal(signals.resource_unavailable, sender, kwargs)


def release_failed(guard: Guarded, request: HttpRequest | None, exc: Exception) -> bool:
    """Log a release that raised: the hold stays until its lease expires."""
    logger.error(
        "releasing %r for %s failed; it stays held until its lease expires: %s",
        guard.name,
        subject(guard, request),
        exc,
    )
    return False


def released(guard: Guarded, request: HttpRequest | None, held: Grant, ok: bool) -> PendingSignal:
    """Log the release of ``held`` (``ok``: it was still there), and the
    ``resource_released`` signal to send about it."""
    held_for = time.monotonic() - held.granted_at
    logger.debug(
        "%s released %r after holding it %.1f ms%s",
        subject(guard, request),
        guard.name,
        held_for * 1000,
        "" if ok else " (it was already gone)",
    )
    return PendingSignal(
        signals.resource_released,
        type(held.primitive),
        {
            "name": guard.name,
            "hold": held.hold,
            "lease": held.lease,
            "request": request,
            "held": held_for,
            "lost": not ok,
        },
    )


def resources_of(request: HttpRequest) -> dict[str, Any]:
    """``request.resources``: the holds of ``request`` by name (made on first use)."""
    resources: dict[str, Any] | None = getattr(request, "resources", None)
    if resources is None:
        resources = {}
        request.resources = resources  # type: ignore[attr-defined]
    return resources
