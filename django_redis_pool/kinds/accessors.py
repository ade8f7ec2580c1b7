"""The typed accessors of the built-in kinds: ``get_pool("printers")`` is the
:class:`ResourcePool` configured in ``DJANGO_REDIS_POOL["POOLS"]["printers"]``.

Each asks the registry (:func:`django_redis_pool.registry.get`) for its
kind's primitive: a kind module reads no settings and never asks the registry.
Importing this module (the app config does) also lets an object pool's
``GLOBAL_LIMIT``, or the ``global_limit`` of one built outside the setting,
name a configured semaphore (``global_limit.semaphore_by_name``).
"""

from __future__ import annotations

from typing import Any

from .. import registry
from ..primitives.leased.allocator import Allocator
from ..primitives.leased.lock import Lock
from ..primitives.leased.pool import ResourcePool
from ..primitives.leased.semaphore import Semaphore
from ..primitives.object_pool import global_limit
from ..primitives.object_pool.pool import ObjectPool
from ..primitives.queue.taskqueue import TaskQueue
from ..primitives.ratelimit.limiter import RateLimiter
from . import allocator, lock, object_pool, pool, queue, ratelimit, semaphore

__all__ = [
    "get_allocator",
    "get_lock",
    "get_object_pool",
    "get_pool",
    "get_queue",
    "get_ratelimit",
    "get_semaphore",
]


def get_pool(name: str) -> ResourcePool:
    """The :class:`ResourcePool` configured in ``DJANGO_REDIS_POOL["POOLS"][name]``."""
    return registry.get(pool.KIND, name)


def get_semaphore(name: str) -> Semaphore:
    """The :class:`Semaphore` configured in ``DJANGO_REDIS_POOL["SEMAPHORES"][name]``.

    Its ``MAX_SIZE`` is stored in Redis by the first acquire that finds no max
    size there (``manage.py pool_sync`` overwrites it). Building it does no I/O.
    """
    return registry.get(semaphore.KIND, name)


def get_lock(name: str) -> Lock:
    """The :class:`Lock` configured in ``DJANGO_REDIS_POOL["LOCKS"][name]``.

    One Lock object per process: its default holder is still unique per thread.
    """
    return registry.get(lock.KIND, name)


def get_allocator(name: str) -> Allocator:
    """The :class:`Allocator` configured in ``DJANGO_REDIS_POOL["ALLOCATORS"][name]``."""
    return registry.get(allocator.KIND, name)


def get_queue(name: str) -> TaskQueue:
    """The :class:`TaskQueue` configured in ``DJANGO_REDIS_POOL["QUEUES"][name]``;
    its ``task_fn`` runs the ``@task`` handlers registered for ``name``."""
    return registry.get(queue.KIND, name)


def get_object_pool(name: str) -> ObjectPool[Any]:
    """This process's :class:`ObjectPool` configured in
    ``DJANGO_REDIS_POOL["OBJECT_POOLS"][name]``."""
    return object_pool.started(registry.get(object_pool.KIND, name))


def get_ratelimit(name: str) -> RateLimiter:
    """The :class:`RateLimiter` configured in ``DJANGO_REDIS_POOL["RATE_LIMITS"][name]``."""
    return registry.get(ratelimit.KIND, name)


#: An object pool's ``GLOBAL_LIMIT`` (or the ``global_limit`` of one built
#: outside the setting) names a configured semaphore: found here when its
#: first object is made.
global_limit.semaphore_by_name = get_semaphore
