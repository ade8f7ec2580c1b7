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
from django_redis_pool.primitives.leased.primitive import LeasedPrimitive
from tests.support.primitive_helpers import expire_now, ops, pool_of, slot_lease


def lose(client: Any, primitive: LeasedPrimitive, suffix: str = "") -> None:
    """Delete the primitive's keys (only ``base + suffix`` when given), as a
    restart without persistence or an eviction would."""
    base = ops(primitive).base
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
        lease = slot_lease(primitive, who, timeout=1)
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


# -- self-healing ------------------------------------------------------------------


def test_a_pool_whose_keys_were_lost_gets_its_resources_back_at_the_next_acquire(client, caplog):
    pool = ResourcePool(client, "printers", resources=["p1", "p2"], lease_timeout=30)
    lease = pool.acquire(timeout=0)
    assert lease is not None, "a pool that never had its resources is healed too"
    lease.release()
    lose(client, pool)
    with caplog.at_level("WARNING", logger="django_redis_pool"):
        again = pool.acquire(timeout=0)
    assert again is not None and again.resource in {"p1", "p2"}
    assert again.fence > lease.fence
    assert "associated its 2 configured resources" in caplog.text
    assert sorted(pool.available()) == sorted({"p1", "p2"} - {again.resource})


def test_a_pool_that_is_only_busy_is_not_healed(client):
    pool = ResourcePool(client, "printers", resources=["p1"], lease_timeout=30)
    held = pool.acquire(timeout=0)
    assert held is not None
    assert pool.acquire(timeout=0) is None, "all busy is not lost: nothing is added"
    assert pool.disassociate("p1")
    assert pool.acquire(timeout=0) is not None, "no resource at all: healed"


def test_a_pool_without_configured_resources_stays_empty(client):
    pool = ResourcePool(client, "printers")
    assert pool.acquire(timeout=0) is None
    assert pool.available() == []


def test_an_allocator_whose_keys_were_lost_gets_them_back_at_the_next_malloc(client, caplog):
    allocator = Allocator(client, "proxies", keys={"fast": 5, "slow": 0}, lease_timeout=30)
    first = allocator.malloc_key()
    assert first == "fast", "an allocator that never had its keys is healed too"
    allocator.free_keys(first)
    lose(client, allocator)
    with caplog.at_level("WARNING", logger="django_redis_pool"):
        again = allocator.malloc_key()
    assert again == "fast" and again.fence > first.fence, "priorities come back too"
    assert "added its 2 configured keys" in caplog.text
    assert allocator.malloc_key() == "slow"
    assert allocator.malloc_key() is None, "all busy is not lost: nothing is added"


def test_bad_configured_members_name_the_value(client):
    with pytest.raises(ValueError, match="resources must be a list"):
        ResourcePool(client, "p", resources="p1")
    with pytest.raises(ValueError, match="resources"):
        ResourcePool(client, "p", resources=["ok", "two words"])
    with pytest.raises(ValueError, match="keys must be a list"):
        Allocator(client, "a", keys="k1")
    with pytest.raises(ValueError, match="priority"):
        Allocator(client, "a", keys={"k1": "high"})


def test_pool_gc_heals_a_pool_and_an_allocator_whose_keys_were_lost(client):
    pool = ResourcePool(client, "printers", resources=["p1", "p2"])
    allocator = Allocator(client, "proxies", keys=["k1"])
    pool.collect()
    allocator.collect()
    assert pool.total_count() == 2 and len(allocator) == 1
    lose(client, pool)
    lose(client, allocator)
    pool.collect(dry_run=True)
    assert pool.total_count() == 0, "a dry run changes nothing"
    pool.collect()
    allocator.collect()
    assert sorted(pool.available()) == ["p1", "p2"] and allocator.keys() == ["k1"]


def test_configured_pools_and_allocators_heal_without_pool_sync(settings, redis_url, redis_client):
    from django_redis_pool import get_allocator, get_pool

    settings.DJANGO_REDIS_POOL = {
        "CONNECTION": {"URL": redis_url},
        "POOLS": {"printers": {"RESOURCES": ["p1", "p2"], "LEASE_TIMEOUT": 30}},
        "ALLOCATORS": {"proxies": {"KEYS": {"fast": 1, "slow": 0}}},
    }
    for _ in range(2):  # never synced, then everything lost (cache.clear() does this)
        lease = get_pool("printers").acquire(timeout=0)
        assert lease is not None and lease.resource == "p1"
        lease.release()
        key = get_allocator("proxies").malloc_key()
        assert key == "fast"
        get_allocator("proxies").free_keys(key)
        redis_client.flushdb()


@pytest.mark.parametrize("kind", list(MAKERS))
def test_a_counter_behind_still_gives_higher_fences(client, kind):
    """A failover to a replica that missed the last writes leaves the counter
    behind the fences already handed out: the next fence is still higher."""
    primitive = MAKERS[kind][0](client)
    live, end = take(primitive, "a")
    client.set(f"{ops(primitive).base}:seq", live - 1000)  # as the lagging replica has it
    if kind == "lock":
        end()
    nxt, _ = take(primitive, "b")
    assert nxt > live


def _script_runs(client: Any, call: Any) -> int:
    """How many scripts or functions ``call`` ran on ``client``'s Redis."""
    client.config_resetstat()
    call()
    stats = client.info("commandstats")
    return sum(stats.get(f"cmdstat_{c}", {}).get("calls", 0) for c in ("evalsha", "fcall"))


def test_a_busy_pool_or_allocator_that_can_heal_is_refused_in_one_script_run(redis_client):
    """Being able to restore lost members costs nothing while members exist:
    an exhausted pool or allocator answers from its common-case script."""
    pool = ResourcePool(redis_client, "printers", resources=["p1"], lease_timeout=30)
    allocator = Allocator(redis_client, "proxies", keys=["k1"], lease_timeout=30)
    assert pool.acquire(timeout=0) is not None and allocator.malloc_key() is not None
    assert _script_runs(redis_client, lambda: pool.acquire(timeout=0)) == 1
    assert _script_runs(redis_client, lambda: allocator.malloc_key()) == 1


def test_an_expired_lease_whose_record_was_lost_is_reclaimed_with_only_its_resource(client):
    pool = _pool(client)
    lease = pool.acquire(holder="cut-off")
    expire_now(lease)
    client.hdel(f"{ops(pool).base}:info", lease.resource)  # its record alone is lost
    (reclaimed,) = pool.collect().reclaimed
    assert (reclaimed.resource, reclaimed.holder, reclaimed.token, reclaimed.fence) == (
        lease.resource,
        "",
        "",
        0,
    )
    assert (reclaimed.expires_at, reclaimed.lease_timeout, reclaimed.acquired_at) == (None,) * 3
    assert pool.is_available(lease.resource), "and the resource goes round"
