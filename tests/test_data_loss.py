"""What happens when Redis loses a primitive's data: a restart without
persistence, an eviction under ``allkeys-*``, or a ``FLUSHDB`` (what
``cache.clear()`` does when the cache shares the database).

Fences must never go backwards: a holder that was cut off keeps its old fence,
and a fencing check can only reject it if every fence handed out afterwards is
larger. Every test runs against a real redis-server and the real Cluster.
"""

from __future__ import annotations

from typing import Any

import pytest

from django_redis_pool import Allocator, Lock, ResourcePool, Semaphore
from django_redis_pool.primitives.base import LeasedPrimitive

from .primitive_helpers import pool_of


def lose(client: Any, primitive: LeasedPrimitive, suffix: str = "") -> None:
    """Delete the primitive's keys (only ``base + suffix`` when given), as a
    restart without persistence or an eviction would."""
    base = primitive._engine.base
    keys = [base + suffix] if suffix else list(client.scan_iter(match=f"{base}*"))
    client.delete(*keys)


def _pool(client: Any) -> ResourcePool:
    return pool_of(client, "printers", "p1", "p2", lease_timeout=30)


def take(primitive: Any, who: str) -> tuple[int, Any]:
    """One acquisition by ``who``: (its fence, what ends it)."""
    if isinstance(primitive, Allocator):
        key = primitive.malloc_key()
        return key.fence, lambda: primitive.free_keys(key)
    if isinstance(primitive, Lock):
        assert primitive.acquire(timeout=1)
        return primitive.fence, primitive.release
    if isinstance(primitive, Semaphore):
        lease = primitive.acquire_lease(who, timeout=1)
    else:
        lease = primitive.acquire(timeout=1)
    return lease.fence, lease.release


def _fences(primitive: Any, n: int = 3) -> list[int]:
    """Fences of ``n`` acquire + release cycles."""
    fences = []
    for _ in range(n):
        fence, end = take(primitive, "a")
        fences.append(fence)
        end()
    return fences


MAKERS = {
    "pool": (_pool, lambda pool: [pool.associate("p1"), pool.associate("p2")]),
    "semaphore": (lambda c: Semaphore(c, "reports", default_max_size=2, lease_timeout=30), None),
    "lock": (lambda c: Lock(c, "nightly", lease_timeout=30), None),
    "allocator": (
        lambda c: _with_keys(Allocator(c, "proxies", lease_timeout=30)),
        lambda allocator: allocator.extend(["k1", "k2"]),
    ),
}


def _with_keys(allocator: Allocator) -> Allocator:
    allocator.extend(["k1", "k2"])
    return allocator


@pytest.mark.parametrize("kind", list(MAKERS))
def test_fences_never_go_backwards_after_all_data_is_lost(client, kind):
    make, restore = MAKERS[kind]
    primitive = make(client)
    before = _fences(primitive)
    assert before == sorted(before) and len(set(before)) == len(before)
    lose(client, primitive)
    if restore:
        restore(primitive)  # what pool_sync does for a pool, extend for an allocator
    after = _fences(primitive)
    assert min(after) > max(before), "a fence after the loss repeats or undercuts an older one"


@pytest.mark.parametrize("kind", list(MAKERS))
def test_a_lost_counter_restarts_above_a_live_holders_fence(client, kind):
    """An eviction can take the counter alone: the next holder's fence is still
    above the live holder's (a lock's next holder comes after its release)."""
    primitive = MAKERS[kind][0](client)
    live, end = take(primitive, "a")
    lose(client, primitive, ":seq")
    if kind == "lock":
        end()
    nxt, _ = take(primitive, "b")
    assert nxt > live
