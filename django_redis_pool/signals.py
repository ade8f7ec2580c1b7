"""Signals sent by django-redis-pool.

Every signal's ``sender`` is the primitive's class (its kind's ``primitive``)
and carries the primitive's configured ``name``. Receivers run in the thread
that sent the signal; for an async view they are sent as Django's
``Signal.asend`` sends them (async receivers on the event loop, sync ones in a
thread). Keep them quick, and never let them raise.

=========================  ===============================================================
Signal                     Keyword arguments
=========================  ===============================================================
``resource_acquired``      ``name``, ``hold`` (what the view sees in
                           ``request.resources[name]``), ``lease``, ``request``,
                           ``waited`` (seconds spent acquiring)
``resource_released``      ``name``, ``hold``, ``lease``, ``request``, ``held`` (seconds
                           from grant to release), ``lost`` (True if the hold was already
                           gone: expired, force-released or removed)
``resource_unavailable``   ``name``, ``request``, ``error`` (:class:`ResourceUnavailable`,
                           or :class:`BackendUnavailable` when Redis was down),
                           ``waited``
``lease_lost``             ``name``, ``lease``: a renewal or a release found a hold gone
``lease_reclaimed``        ``name``, ``lease``: ``pool_gc`` (or the admin) reclaimed an
                           expired hold
=========================  ===============================================================
"""

from __future__ import annotations

import logging
from typing import Any

from django.dispatch import Signal

__all__ = [
    "asend",
    "lease_lost",
    "lease_reclaimed",
    "resource_acquired",
    "resource_released",
    "resource_unavailable",
    "send",
]

logger = logging.getLogger("django_redis_pool")

resource_acquired = Signal()
resource_released = Signal()
resource_unavailable = Signal()
lease_lost = Signal()
lease_reclaimed = Signal()


def send(signal: Signal, sender: Any, **kwargs: Any) -> None:
    """Send ``signal``; a receiver that raises is logged, never breaks a request."""
    _log_failures(signal.send_robust(sender, **kwargs))


async def asend(signal: Signal, sender: Any, **kwargs: Any) -> None:
    """:func:`send` from async code (Django's ``asend_robust``: async receivers
    run on the loop, sync ones in a thread)."""
    _log_failures(await signal.asend_robust(sender, **kwargs))


def _log_failures(results: list[tuple[Any, Any]]) -> None:
    for receiver, result in results:
        if isinstance(result, Exception):
            logger.error("signal receiver %r failed", receiver, exc_info=result)
