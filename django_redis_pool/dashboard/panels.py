"""Which panels the dashboard gives each kind: :data:`PANELS`, by kind class,
and :func:`register_panels`, which the app config calls with every kind when
Django starts. A kind gets the panels of its class, or of its nearest base in
:data:`PANELS`: a kind built on another kind's class is shown as that kind, and
one built on ``LeaseKind`` with the panels every kind on the lease engine has.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable
from typing import Any

from ..kinds.allocator import AllocatorKind
from ..kinds.contract import Kind
from ..kinds.leased import LeaseKind
from ..kinds.lock import LockKind
from ..kinds.object_pool import ObjectPoolKind
from ..kinds.pool import PoolKind
from ..kinds.queue import QueueKind
from ..kinds.ratelimit import RateLimitKind
from ..kinds.semaphore import SemaphoreKind
from . import lease_panels
from .allocator_panels import register_allocator
from .object_pool_panels import register_object_pool
from .queue_panels import register_queue
from .ratelimit_panels import register_ratelimit

__all__ = ["PANELS", "panels_of", "register_panels"]

#: Kind class -> the function registering the dashboard panels of one kind of
#: that class (its summary, sections and actions). A kind defined elsewhere
#: adds its class here when it wants panels of its own.
PANELS: dict[type[Kind], Callable[[Any], None]] = {
    LeaseKind: lease_panels.register,
    PoolKind: lease_panels.register_pool,
    SemaphoreKind: lease_panels.register_semaphore,
    LockKind: lease_panels.register_lock,
    AllocatorKind: register_allocator,
    QueueKind: register_queue,
    ObjectPoolKind: register_object_pool,
    RateLimitKind: register_ratelimit,
}

_registered: weakref.WeakSet[Kind] = weakref.WeakSet()


def panels_of(kind: Kind) -> Callable[[Any], None] | None:
    """What registers the panels of ``kind`` (None: it has none)."""
    for cls in type(kind).__mro__:
        if cls in PANELS:
            return PANELS[cls]
    return None


def register_panels(kinds: Iterable[Kind]) -> None:
    """Register the panels of each of ``kinds`` (once per kind)."""
    for kind in kinds:
        if kind in _registered:
            continue
        register = panels_of(kind)
        if register is not None:
            register(kind)
        _registered.add(kind)
