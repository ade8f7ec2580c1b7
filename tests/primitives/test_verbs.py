"""One verb, one meaning: ``acquire`` tries and returns the hold or a falsy
value, ``hold()`` is the context manager that raises ``ResourceUnavailable``
(``reason``, ``retry_after``); ``DEFAULT`` is "the primitive's default" and
``None`` "forever" / "no expiry" everywhere; the names they replace still
work and warn (``DeprecationWarning``).
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from django_redis_pool import (
    DEFAULT,
    AllocatedKey,
    Allocator,
    Lease,
    Lock,
    ObjectPool,
    ResourcePool,
    ResourceUnavailable,
    Semaphore,
    primitives,
)
from tests.support.waiting import wait_for


def pool_of(client: Any, **kwargs: Any) -> ResourcePool:
    pool = ResourcePool(client, "verbs", **kwargs)
    pool.associate("r1")
    return pool


# -- DEFAULT and None ------------------------------------------------------------


def test_default_is_one_sentinel_exported_by_the_package_and_the_primitives() -> None:
    assert primitives.DEFAULT is DEFAULT
    assert repr(DEFAULT) == "DEFAULT" and DEFAULT is not None


def test_an_omitted_lease_timeout_is_the_pools_and_none_is_no_expiry(client: Any) -> None:
    pool = pool_of(client, lease_timeout=30)
    lease = pool.acquire()
    assert lease is not None and lease.lease_timeout == 30 and lease.expires_at is not None
    lease.release()
    forever = pool.acquire(lease_timeout=None)
    assert forever is not None and forever.lease_timeout is None and forever.expires_at is None
    forever.release()


def test_a_semaphores_lease_timeout_none_is_no_expiry(client: Any) -> None:
    sem = Semaphore(client, "verbs", lease_timeout=30, default_max_size=1)
    with sem.hold("a", lease_timeout=None) as lease:
        assert lease.expires_at is None
    with sem.hold("a") as lease:
        assert lease.lease_timeout == 30 and lease.expires_at is not None


def test_renew_keeps_the_duration_by_default_and_none_ends_the_expiry(client: Any) -> None:
    lease = pool_of(client, lease_timeout=30).acquire()
    assert lease is not None
    assert lease.renew() and lease.lease_timeout == 30 and lease.expires_at is not None
    assert lease.renew(None) and lease.lease_timeout is None and lease.expires_at is None
    assert lease.release()


def test_lock_extend_default_is_its_own_lease_and_none_no_expiry(client: Any) -> None:
    lock = Lock(client, "verbs", lease_timeout=30)
    with lock.hold() as lease:
        assert lock.extend(None) and lock.lease_of(lease.holder).expires_at is None
        assert lock.extend() and lock.lease_of(lease.holder).expires_at is not None


def test_an_object_pools_timeout_default_is_acquire_timeout_and_none_waits_for_ever() -> None:
    pool: ObjectPool[object] = ObjectPool(object, max=1, acquire_timeout=0.05)
    held = pool.acquire()
    with pytest.raises(ResourceUnavailable):
        pool.acquire()  # DEFAULT: acquire_timeout
    got: list[object] = []
    waiter = threading.Thread(target=lambda: got.append(pool.acquire(timeout=None)))
    waiter.start()
    wait_for(lambda: pool.pending == 1, what="the caller to wait")
    pool.release(held)  # (long after acquire_timeout, under load or not)
    waiter.join(10)
    assert got == [held], "None waits for ever"


# -- hold() ----------------------------------------------------------------------


def test_pool_hold_tells_a_full_queue_from_a_timeout(client: Any) -> None:
    pool = pool_of(client, max_waiting=0)
    with pool.hold(timeout=0) as lease:
        assert isinstance(lease, Lease)
        with pytest.raises(ResourceUnavailable) as full, pool.hold(timeout=5):
            pass
        assert full.value.reason == ResourceUnavailable.FULL
        assert pool.acquire(timeout=5) is None, "acquire never raises for a refusal"
    timed_out = pool_of(client)
    with (
        timed_out.hold(timeout=0),
        pytest.raises(ResourceUnavailable) as late,
        timed_out.hold(timeout=0.05),
    ):
        pass
    assert late.value.reason == ResourceUnavailable.TIMEOUT
    assert timed_out.available() == ["r1"], "released on exit"


def test_lock_hold_yields_the_lease_and_releases_on_exit(client: Any) -> None:
    lock = Lock(client, "verbs", timeout=0)
    with lock.hold() as lease:
        assert isinstance(lease, Lease) and lease.fence == lock.fence and lock.owned()
        other = Lock(client, "verbs")
        with pytest.raises(ResourceUnavailable), other.hold(timeout=0):
            pass
    assert not lock.locked()


def test_allocator_hold_yields_a_key_frees_it_and_refuses_at_once(client: Any) -> None:
    allocator = Allocator(client, "verbs")
    allocator.extend(["k1"])
    with allocator.hold() as key:
        assert isinstance(key, AllocatedKey) and allocator.is_locked("k1")
        with pytest.raises(ResourceUnavailable), allocator.hold():
            pass
    assert not allocator.is_locked("k1")


def test_object_pool_hold_releases_and_destroys_on_error() -> None:
    destroyed: list[object] = []
    pool: ObjectPool[object] = ObjectPool(object, destroy=destroyed.append, max=1)
    with pool.hold() as obj:
        assert pool.borrowed == 1
    assert pool.available == 1
    with pytest.raises(KeyError), pool.hold() as obj:
        raise KeyError
    assert destroyed == [obj]


def test_the_async_holds_are_for_async_with(redis_client: Any) -> None:
    pool = pool_of(redis_client)
    sem = Semaphore(redis_client, "verbs", default_max_size=1)
    objects: ObjectPool[object] = ObjectPool(object, max=1)

    async def scenario() -> None:
        async with pool.ahold(timeout=1) as lease, sem.ahold("a", timeout=1) as slot:
            assert lease.resource == "r1" and slot.resource == "a"
        async with objects.ahold(timeout=1) as obj:
            assert obj is not None
        with pytest.raises(TypeError, match="async with"), pool.ahold():
            pass

    asyncio.run(scenario())
    assert pool.available() == ["r1"] and sem.get_current_size() == 0


# -- the old names warn and still work -----------------------------------------


def test_pool_lease_and_alease_warn_and_hold(redis_client: Any) -> None:
    pool = pool_of(redis_client)
    with pytest.warns(DeprecationWarning, match=r"ResourcePool\.hold"), pool.lease() as lease:
        assert lease.resource == "r1"

    async def scenario() -> None:
        with pytest.warns(DeprecationWarning, match=r"ResourcePool\.ahold"):
            manager = pool.alease(timeout=1)
        async with manager as lease:
            assert lease.resource == "r1"

    asyncio.run(scenario())
    assert pool.available() == ["r1"]


def test_semaphore_acquire_lease_warns_and_returns_the_lease(redis_client: Any) -> None:
    sem = Semaphore(redis_client, "verbs", default_max_size=1)
    with pytest.warns(DeprecationWarning, match="acquire_lease"):
        lease = sem.acquire_lease("a", lease_timeout=30)
    assert isinstance(lease, Lease) and lease.resource == "a"
    with pytest.warns(DeprecationWarning, match="acquire_lease"):
        assert sem.acquire_lease("b") is None, "full: None, as before"
    with pytest.warns(DeprecationWarning, match="aacquire_lease"):
        assert asyncio.run(sem.aacquire_lease("b", timeout=0)) is None
    assert lease.release()


def test_lock_lease_property_warns(redis_client: Any) -> None:
    lock = Lock(redis_client, "verbs")
    assert lock.acquire()
    with pytest.warns(DeprecationWarning, match=r"Lock\.lease"):
        assert lock.lease is not None
    lock.release()


def test_object_pool_borrow_warns_and_holds() -> None:
    pool: ObjectPool[object] = ObjectPool(object, max=1)
    with pytest.warns(DeprecationWarning, match=r"ObjectPool\.hold"), pool.borrow() as obj:
        assert obj is not None and pool.borrowed == 1
    assert pool.available == 1


def test_allocator_timeout_keywords_warn_and_keep_their_meaning(redis_client: Any) -> None:
    allocator = Allocator(redis_client, "verbs", lease_timeout=30)
    with pytest.warns(DeprecationWarning, match="lease_timeout="):
        allocator.extend(["k1", "k2"], timeout=None)  # (None: for ever, as before)
    with pytest.warns(DeprecationWarning, match="lease_timeout="):
        allocator.assign(["k1", "k2"], timeout=None)
    with pytest.warns(DeprecationWarning, match="lease_timeout="):
        key = allocator.malloc_key(timeout=None)  # (None: the allocator's, as before)
    assert key is not None and key.lease is not None and key.lease.lease_timeout == 30
    with pytest.warns(DeprecationWarning, match="lease_timeout="):
        made = allocator.malloc(timeout=5)
    assert made is not None and made.key.lease is not None
    assert made.key.lease.lease_timeout == 5
    with pytest.warns(DeprecationWarning, match="lease_timeout="):
        assert made.update(timeout=7) and made.key.lease.lease_timeout == 7
    with pytest.warns(DeprecationWarning, match="cache_timeout="):
        allocator.update_soft_bind("n", "k1", timeout=60)
    assert allocator.get_soft_bind("n") == "k1"
    assert allocator.free(key) and made.close()
    with allocator.malloc(lease_timeout=None) as forever:
        assert forever.key.lease is not None and forever.key.lease.expires_at is None


def test_take_and_atake_left_the_public_surface() -> None:
    for cls in (ResourcePool, Semaphore, Lock):
        assert not hasattr(cls, "take") and not hasattr(cls, "atake"), cls
    assert DEFAULT is not None
