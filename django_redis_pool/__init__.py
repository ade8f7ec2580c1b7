"""Distributed coordination primitives for Django, backed by Redis.

The Redis primitives (:class:`ResourcePool`, :class:`Semaphore`, :class:`Lock`,
...) work with a bare redis-py client and never import Django. The ``get_*`` accessors read the
``DJANGO_REDIS_POOL`` setting; they are imported lazily so that importing this
package does not require configured Django settings.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .exceptions import (
    BackendUnavailable,
    NotConfigured,
    NotOwned,
    PoolError,
    ResourceUnavailable,
)
from .primitives.lease import Lease
from .primitives.lock import Lock
from .primitives.pool import ResourcePool
from .primitives.semaphore import Semaphore

if TYPE_CHECKING:
    from .registry import get_lock, get_pool, get_resource, get_semaphore

__version__ = "0.1.0.dev0"

__all__ = [
    "BackendUnavailable",
    "Lease",
    "Lock",
    "NotConfigured",
    "NotOwned",
    "PoolError",
    "ResourcePool",
    "ResourceUnavailable",
    "Semaphore",
    "get_lock",
    "get_pool",
    "get_resource",
    "get_semaphore",
]

_REGISTRY_NAMES = {"get_lock", "get_pool", "get_resource", "get_semaphore"}


def __getattr__(name: str) -> Any:
    if name in _REGISTRY_NAMES:
        from . import registry

        return getattr(registry, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
