"""The built-in kinds, in the order the settings, the checks and the pages list
them: :data:`KINDS`, one ``KIND`` of each kind module.

Imported by :func:`django_redis_pool.kinds.all_kinds` on first use (each kind
module loads the settings reader and the registry, which look the kinds up
only when they run).
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
