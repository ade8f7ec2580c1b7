"""The built-in kinds, in the order the settings, the checks and the pages list
them: :data:`KINDS`, one ``KIND`` of each kind module.

Read by the registry alone (:mod:`django_redis_pool.registry`), which looks
the kinds up for everyone else (``registry.by_name()``) and gives them to the
settings reader.
"""

from __future__ import annotations

from typing import Any

from . import allocator, lock, object_pool, pool, queue, ratelimit, semaphore
from .contract import Kind

__all__ = ["KINDS"]

KINDS: tuple[Kind[Any], ...] = (
    pool.KIND,
    semaphore.KIND,
    lock.KIND,
    allocator.KIND,
    queue.KIND,
    object_pool.KIND,
    ratelimit.KIND,
)
