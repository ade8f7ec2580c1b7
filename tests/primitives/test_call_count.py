"""The Python calls our own code adds to one acquire + release (issue: lean client path).

cProfile counts every Python and C function call of a cycle: a count, not a
timing, so neither a busy machine nor the launcher moves it. redis-py's own
calls per command differ between its versions (about 150 per command on
redis-py 5, 210 on 8), so the budget is on what ours adds to the floor: two
``Script`` calls of ``return 1`` on the same client, measured in the same test.
On 2026-11-26 ours added 31-56 calls a cycle on redis-py 5.3 and 8.1, Python
3.10-3.13, as few as redis-allocator adds (149-171 before the lean path:
operations run by the driver without generator layers, deadlines armed only
where something reads them, validators' and holders' common cases taken at
once, fewer and packed arguments, a grant answered as one string);
``python -m benchmarks calls`` prints the whole table. The budget keeps a later
change from bringing calls back unnoticed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from django_redis_pool import Allocator, Lock, ResourcePool, Semaphore
from tests.support.primitive_helpers import awaited_calls_by_ours, calls_per_cycle

#: Most calls ours may add to the floor per acquire + release.
BUDGET = 70
#: Most calls of our code (and of what it calls directly) per awaited acquire +
#: release: 106-127 on 2026-11-27 (243-296 before the lean path).
ASYNC_BUDGET = 170


def cycle_of(kind: str, client: Any) -> Callable[[], None]:
    if kind == "pool":
        pool = ResourcePool(client, "calls-pool")
        pool.associate_many(["r1", "r2"])

        def pool_cycle() -> None:
            lease = pool.acquire(timeout=0)
            assert lease is not None and lease.release()

        return pool_cycle
    if kind == "semaphore":
        sem = Semaphore(client, "calls-sem", default_max_size=2)

        def sem_cycle() -> None:
            assert sem.acquire("me", timeout=0) and sem.release("me")

        return sem_cycle
    if kind == "lock":
        lock = Lock(client, "calls-lock")

        def lock_cycle() -> None:
            assert lock.acquire()
            lock.release()

        return lock_cycle
    allocator = Allocator(client, "calls-alloc")
    allocator.extend(["k1", "k2"])

    def alloc_cycle() -> None:
        key = allocator.malloc_key()
        assert key is not None and allocator.free_keys(key) == 1

    return alloc_cycle


@pytest.mark.parametrize("kind", ["pool", "semaphore", "lock", "allocator"])
def test_an_acquire_and_release_adds_at_most_the_budgeted_python_calls(
    redis_client: Any, kind: str
) -> None:
    script = redis_client.register_script("return 1")
    floor = calls_per_cycle(lambda: (script(["calls-floor"]), script(["calls-floor"])))
    ours = calls_per_cycle(cycle_of(kind, redis_client)) - floor
    assert ours <= BUDGET, f"{kind}: {ours:.0f} calls a cycle over the floor (budget {BUDGET})"


def awaited_cycle_of(kind: str, client: Any) -> Callable[[], Awaitable[None]]:
    if kind == "pool":
        pool = ResourcePool(client, "acalls-pool")
        pool.associate_many(["r1", "r2"])

        async def pool_cycle() -> None:
            lease = await pool.aacquire(timeout=0)
            assert lease is not None and await lease.arelease()

        return pool_cycle
    if kind == "semaphore":
        sem = Semaphore(client, "acalls-sem", default_max_size=2)

        async def sem_cycle() -> None:
            assert await sem.aacquire("me", timeout=0) and await sem.arelease("me")

        return sem_cycle
    lock = Lock(client, "acalls-lock")

    async def lock_cycle() -> None:
        async with lock:
            pass

    return lock_cycle


@pytest.mark.parametrize("kind", ["pool", "semaphore", "lock"])
def test_an_awaited_acquire_and_release_makes_at_most_the_budgeted_calls_of_ours(
    redis_client: Any, kind: str
) -> None:
    ours = asyncio.run(awaited_calls_by_ours(awaited_cycle_of(kind, redis_client)))
    assert ours <= ASYNC_BUDGET, f"{kind}: {ours:.0f} calls of ours (budget {ASYNC_BUDGET})"
