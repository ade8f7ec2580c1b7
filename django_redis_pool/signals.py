"""Signals sent by django-redis-pool.

Every signal's ``sender`` is the primitive's class (:class:`ResourcePool`,
:class:`Semaphore`, :class:`Lock`) and carries the primitive's configured
``name``. Receivers run in the thread that sent the signal (for an async view,
a worker thread): keep them quick, and never let them raise.

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

from django.dispatch import Signal

__all__ = [
    "lease_lost",
    "lease_reclaimed",
    "resource_acquired",
    "resource_released",
    "resource_unavailable",
]

resource_acquired = Signal()
resource_released = Signal()
resource_unavailable = Signal()
lease_lost = Signal()
lease_reclaimed = Signal()
