"""Distributed coordination primitives for Django, backed by Redis.

The Redis primitives (:class:`ResourcePool`, :class:`Semaphore`, :class:`Lock`,
:class:`RateLimiter`, ...) work with a bare redis-py client and never import
Django. The ``get_*`` accessors read the ``DJANGO_REDIS_POOL`` setting; they,
``with_resource`` and ``holding`` are imported lazily so that importing this package does
not require configured Django settings.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .exceptions import (
    BackendUnavailable,
    CorruptRecord,
    NotConfigured,
    NotOwned,
    PoolError,
    ResourceUnavailable,
)
from .primitives.leased.allocator import AllocatedKey, Allocator, AllocatorObject
from .primitives.leased.lease import Lease
from .primitives.leased.lock import Lock
from .primitives.leased.pool import ResourcePool
from .primitives.leased.semaphore import Semaphore
from .primitives.object_pool.pool import ObjectPool
from .primitives.queue.taskqueue import Task, TaskExecutePolicy, TaskFailed, TaskQueue, WorkerLost
from .primitives.ratelimit.limiter import Decision, KeyState, RateLimiter
from .primitives.validators import DEFAULT

if TYPE_CHECKING:
    from .decorators import with_resource
    from .holds import holding
    from .kinds.accessors import (
        get_allocator,
        get_lock,
        get_object_pool,
        get_pool,
        get_queue,
        get_ratelimit,
        get_semaphore,
    )
    from .kinds.queue import task
    from .registry import get_resource

__version__ = "0.1.0.dev0"

__all__ = [
    "DEFAULT",
    "AllocatedKey",
    "Allocator",
    "AllocatorObject",
    "BackendUnavailable",
    "CorruptRecord",
    "Decision",
    "KeyState",
    "Lease",
    "Lock",
    "NotConfigured",
    "NotOwned",
    "ObjectPool",
    "PoolError",
    "RateLimiter",
    "ResourcePool",
    "ResourceUnavailable",
    "Semaphore",
    "Task",
    "TaskExecutePolicy",
    "TaskFailed",
    "TaskQueue",
    "WorkerLost",
    "get_allocator",
    "get_lock",
    "get_object_pool",
    "get_pool",
    "get_queue",
    "get_ratelimit",
    "get_resource",
    "get_semaphore",
    "holding",
    "task",
    "with_resource",
]

#: What needs configured settings (or Django) is imported on first use.
_LAZY = {
    "get_allocator": "django_redis_pool.kinds.accessors.get_allocator",
    "get_lock": "django_redis_pool.kinds.accessors.get_lock",
    "get_object_pool": "django_redis_pool.kinds.accessors.get_object_pool",
    "get_pool": "django_redis_pool.kinds.accessors.get_pool",
    "get_resource": "django_redis_pool.registry.get_resource",
    "get_queue": "django_redis_pool.kinds.accessors.get_queue",
    "get_ratelimit": "django_redis_pool.kinds.accessors.get_ratelimit",
    "get_semaphore": "django_redis_pool.kinds.accessors.get_semaphore",
    "holding": "django_redis_pool.holds.holding",
    "task": "django_redis_pool.kinds.queue.task",
    "with_resource": "django_redis_pool.decorators.with_resource",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from django.utils.module_loading import import_string

        return import_string(_LAZY[name])
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
