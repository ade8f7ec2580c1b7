"""What each case of ``bench_engine.py`` runs: ours, the peers, the seeds, the floor.

Every case is built here, both for one client in the benchmark's own process
and for the worker processes (``engine_workers.py``), so that all sections
measure the same code. Nothing here starts a server or flushes anything.

The two seed baselines are reimplemented from the text of the seeds
(``shared/seeds/000_*.txt``: a resource pool on two Redis sets, WATCH +
SRANDMEMBER, then MULTI/SMOVE/EXEC; ``shared/seeds/002_*.txt``: a counting
semaphore with identities, WATCH + SCARD + GET, then MULTI/SADD/EXEC). They
send the same commands in the same order as the seeds' code.
"""

from __future__ import annotations

import functools
import itertools
import time
from collections.abc import Callable
from typing import Any

import redis
import redis_lock
from redis.exceptions import WatchError
from redis_allocator import RedisAllocator

from django_redis_pool import Lock, ResourcePool, Semaphore

#: Seconds every lease, lock or allocation lives; never reached in a run.
LEASE = 30
#: Resources in every pool, keys in every allocator, slots in every semaphore.
POOL_SIZE = 1000
#: Ids per ``pool_associate`` call when filling a pool.
FILL_CHUNK = 10_000
#: Unmeasured cycles before every measurement, after its setup.
WARMUP = 20

Cycle = Callable[[], None]

#: case -> label, in report order. "ours" are the package's primitives.
CASES: dict[str, str] = {
    "floor": "floor: 2 x EVALSHA `return 1`",
    "pool": "ours: ResourcePool",
    "semaphore": "ours: Semaphore",
    "lock": "ours: Lock",
    "our-allocator": "ours: Allocator",
    "allocator": "redis-allocator",
    "redis-py": "redis-py Lock",
    "redis_lock": "python-redis-lock",
    "seed000": "WATCH/MULTI pool",
    "seed002": "WATCH/MULTI semaphore",
}

#: Commands each case sends itself per cycle, besides scripts (EVALSHA/FCALL),
#: and how many of each. A command also run inside a script or a MULTI/EXEC
#: shows up in the same ``INFO commandstats`` line, so only this share of its
#: time is counted (see ``server_usec``).
DIRECT: dict[str, dict[str, int]] = {
    "floor": {},
    "pool": {},
    "semaphore": {},
    "lock": {},
    "our-allocator": {},
    "allocator": {},
    "redis-py": {"set": 1},  # acquire: SET NX PX; release: EVALSHA (GET, DEL)
    # acquire: GET (its `_held` check), SET NX EX; release: EVALSHA (GET, DEL...)
    "redis_lock": {"get": 1, "set": 1},
    # SMOVE twice: once queued in MULTI (run by EXEC, counted in it), once to release
    "seed000": {"watch": 1, "srandmember": 1, "multi": 1, "exec": 1, "smove": 1},
    "seed002": {"watch": 1, "scard": 1, "get": 1, "multi": 1, "exec": 1, "srem": 1},
}

#: Our primitives, measured again from an earlier revision with ``--before REF``
#: (as cases ``before:<case>``, run by ``engine_before.py``).
BEFORE_CASES = ("pool", "semaphore", "lock")

#: Commands that run (or contain) other commands and whose time includes theirs.
SCRIPT_COMMANDS = ("evalsha", "eval", "fcall", "evalsha_ro", "eval_ro", "fcall_ro")


# -- the seed baselines -----------------------------------------------------------


class Seed000Pool:
    """Seed 000's resource pool: a set of available and a set of occupied ids."""

    def __init__(self, client: redis.Redis, name: str) -> None:
        self.client = client
        self.available_set = f"ResourcePool:{name}:available"
        self.occupied_set = f"ResourcePool:{name}:occupied"

    def associate_many(self, resources: list[str]) -> None:
        """Fill the pool (the seed adds one at a time under WATCH; setup only)."""
        self.client.sadd(self.available_set, *resources)

    def acquire(self) -> Any:
        """A random available resource, or None (pool empty or a WATCH conflict)."""
        with self.client.pipeline() as tx:
            try:
                tx.watch(self.available_set, self.occupied_set)
                resource = tx.srandmember(self.available_set)
                if resource is not None:
                    tx.multi()
                    tx.smove(self.available_set, self.occupied_set, resource)
                    if tx.execute()[0] == 1:
                        return resource
            except WatchError:
                pass
        return None

    def release(self, resource: Any) -> bool:
        return bool(self.client.smove(self.occupied_set, self.available_set, resource))


class Seed002Semaphore:
    """Seed 002's counting semaphore: a set of holder identities and a max size."""

    def __init__(self, client: redis.Redis, name: str) -> None:
        self.client = client
        self.holder_key = f"semaphore::{name}::holders"
        self.size_key = f"semaphore::{name}::max_size"

    def set_max_size(self, size: int) -> None:
        self.client.set(self.size_key, size)

    def acquire(self, identity: str) -> bool:
        with self.client.pipeline() as pipe:
            try:
                pipe.watch(self.size_key, self.holder_key)
                current_size = pipe.scard(self.holder_key)
                max_size = pipe.get(self.size_key)
                if max_size is None:
                    raise TypeError("Semaphore max size not set")
                if current_size < int(max_size):
                    pipe.multi()
                    pipe.sadd(self.holder_key, identity)
                    pipe.execute()
                    return True
                return False
            except WatchError:
                return False
            finally:
                pipe.unwatch()  # sends nothing once EXEC has run (redis-py tracks it)

    def release(self, identity: str) -> bool:
        return self.client.srem(self.holder_key, identity) == 1


# -- setup (run once per measurement, on a flushed server) --------------------------


def resource_ids(n: int, start: int = 0) -> list[str]:
    return [f"r{i}" for i in range(start, start + n)]


def fill_pool(pool: ResourcePool, n: int) -> None:
    """Associate ``n`` resources, ``FILL_CHUNK`` per call."""
    for start in range(0, n, FILL_CHUNK):
        pool._engine.run("pool_associate", *resource_ids(min(FILL_CHUNK, n - start), start))


def allocator(dclient: redis.Redis, name: str) -> RedisAllocator:
    return RedisAllocator(dclient, f"bench-{name}", shared=False)


def setup(
    case: str, client: redis.Redis, dclient: redis.Redis, name: str, size: int = POOL_SIZE
) -> None:
    """Create the state ``case`` needs under ``name`` (shared by all its users);
    ``size``: keys of an allocator."""
    if case == "our-allocator":
        from django_redis_pool import Allocator  # (not in the revisions --before measures)

        keys = resource_ids(size)
        for start in range(0, size, FILL_CHUNK):
            Allocator(client, name).extend(keys[start : start + FILL_CHUNK])
        return
    if case == "allocator":
        keys = resource_ids(size)
        for start in range(0, size, FILL_CHUNK):
            allocator(dclient, name).extend(keys[start : start + FILL_CHUNK])
        return
    if case == "pool":
        fill_pool(ResourcePool(client, name, lease_timeout=LEASE), POOL_SIZE)
    elif case == "semaphore":
        Semaphore(client, name, lease_timeout=LEASE).set_max_size(POOL_SIZE)
    elif case == "seed000":
        Seed000Pool(client, name).associate_many(resource_ids(POOL_SIZE))
    elif case == "seed002":
        Seed002Semaphore(client, name).set_max_size(POOL_SIZE)


# -- one acquire + release ------------------------------------------------------------


def _failed(case: str) -> RuntimeError:
    return RuntimeError(f"{case}: an uncontended acquire was refused")


def cycle(
    case: str,
    client: redis.Redis,
    dclient: redis.Redis,
    name: str,
    me: str,
    *,
    new_identity: bool = True,
) -> Cycle:
    """One acquire + release of ``case`` on the state ``setup`` made under ``name``.

    ``me`` tells users apart: each has its own lock (``name-me``: a shared one
    would measure contention) and semaphore identity (``me``, or ``me-<n>``, a
    new one every cycle, with ``new_identity``)."""
    if case == "floor":
        script = client.register_script("return 1")
        keys = [f"floor:{name}"]

        def floor_cycle() -> None:
            script(keys)
            script(keys)

        return floor_cycle
    if case == "pool":
        pool = ResourcePool(client, name, lease_timeout=LEASE)

        def pool_cycle() -> None:
            lease = pool.acquire(timeout=0)
            if lease is None:
                raise _failed(case)
            if not lease.release():
                raise RuntimeError(f"{case}: a release returned False")

        return pool_cycle
    if case in ("semaphore", "seed002"):
        sem: Any
        if case == "semaphore":
            sem = Semaphore(client, name, lease_timeout=LEASE)
            take = functools.partial(sem.acquire, timeout=0)
        else:
            sem = Seed002Semaphore(client, name)
            take = sem.acquire
        counter = itertools.count()

        def sem_cycle() -> None:
            identity = f"{me}-{next(counter)}" if new_identity else me
            if not take(identity):
                raise _failed(case)
            if not sem.release(identity):
                raise RuntimeError(f"{case}: a release returned False")

        return sem_cycle
    if case in ("lock", "redis-py", "redis_lock"):
        lock_name = f"{name}-{me}"
        lock: Any
        if case == "lock":
            lock = Lock(client, lock_name, lease_timeout=LEASE)
        elif case == "redis-py":
            lock = client.lock(lock_name, timeout=LEASE)
        else:
            lock = redis_lock.Lock(client, lock_name, expire=LEASE)

        def lock_cycle() -> None:
            if not lock.acquire():
                raise _failed(case)
            lock.release()

        return lock_cycle
    if case == "our-allocator":
        from django_redis_pool import Allocator

        ours = Allocator(client, name, lease_timeout=LEASE)

        def our_alloc_cycle() -> None:
            key = ours.malloc_key()
            if key is None:
                raise _failed(case)
            if ours.free_keys(key) != 1:
                raise RuntimeError(f"{case}: a free freed nothing")

        return our_alloc_cycle
    if case == "allocator":
        alloc = allocator(dclient, name)

        def alloc_cycle() -> None:
            key = alloc.malloc_key(timeout=LEASE)
            if key is None:
                raise _failed(case)
            alloc.free_keys(key)

        return alloc_cycle
    if case == "seed000":
        seed = Seed000Pool(client, name)

        def seed_cycle() -> None:
            resource = seed.acquire()
            if resource is None:
                raise _failed(case)
            if not seed.release(resource):
                raise RuntimeError(f"{case}: a release returned False")

        return seed_cycle
    raise ValueError(case)


# -- hand-off: one side of a ping-pong ---------------------------------------------------

#: case -> label of the hand-off section.
HANDOFF_CASES: dict[str, str] = {
    "floor": "floor: RPUSH wakes BLPOP",
    "pool": "ours: ResourcePool (1 resource)",
    "semaphore": "ours: Semaphore (max 1)",
    "lock": "ours: Lock",
    "redis_lock": "python-redis-lock",
}


class ListBaton:
    """Hand-off floor: the token is an element of a list; acquire = BLPOP,
    release = RPUSH. No ownership, no expiry, no queue."""

    def __init__(self, client: redis.Redis, name: str) -> None:
        self.client, self.key = client, f"baton:{name}"

    def acquire(self) -> bool:
        return self.client.blpop([self.key], timeout=0) is not None

    def release(self) -> None:
        self.client.rpush(self.key, 1)


class PoolBaton:
    """A pool of one resource: acquire waits for it, release gives the lease back."""

    def __init__(self, client: redis.Redis, name: str) -> None:
        self.primitive = ResourcePool(client, name, lease_timeout=LEASE)
        self.lease: Any = None

    def acquire(self) -> bool:
        self.lease = self.primitive.acquire(timeout=None)
        return self.lease is not None

    def release(self) -> None:
        if not self.lease.release():
            raise RuntimeError("pool: a hand-off release returned False")


class SemaphoreBaton:
    """A semaphore of one slot; each side has its own identity."""

    def __init__(self, client: redis.Redis, name: str, identity: str) -> None:
        self.primitive = Semaphore(client, name, lease_timeout=LEASE)
        self.identity = identity

    def acquire(self) -> bool:
        return self.primitive.acquire(self.identity, timeout=None)

    def release(self) -> None:
        if not self.primitive.release(self.identity):
            raise RuntimeError("semaphore: a hand-off release returned False")


class OurLockBaton:
    def __init__(self, client: redis.Redis, name: str) -> None:
        self.primitive = Lock(client, name, lease_timeout=LEASE)

    def acquire(self) -> bool:
        return self.primitive.acquire()

    def release(self) -> None:
        self.primitive.release()


def setup_handoff(case: str, client: redis.Redis, name: str) -> None:
    """The state a hand-off ping-pong starts from: one token, free."""
    if case == "floor":
        client.rpush(f"baton:{name}", 1)
    elif case == "pool":
        ResourcePool(client, name, lease_timeout=LEASE).associate("r0")
    elif case == "semaphore":
        Semaphore(client, name, lease_timeout=LEASE).set_max_size(1)


def baton(case: str, client: redis.Redis, name: str, role: int) -> Any:
    """An object with blocking ``acquire()`` and ``release()``; ``.primitive``
    (ours only) has ``waiting_count()``."""
    if case == "floor":
        return ListBaton(client, name)
    if case == "pool":
        return PoolBaton(client, name)
    if case == "semaphore":
        return SemaphoreBaton(client, name, f"player-{role}")
    if case == "lock":
        return OurLockBaton(client, name)
    if case == "redis_lock":
        return redis_lock.Lock(client, name, expire=LEASE)
    raise ValueError(case)


# -- reading INFO -----------------------------------------------------------------------


def redis_cpu(client: redis.Redis) -> float:
    """Seconds of CPU the server has used (user + system)."""
    info = client.info("cpu")
    return float(info["used_cpu_sys"]) + float(info["used_cpu_user"])


def command_stats(client: redis.Redis) -> dict[str, tuple[int, int]]:
    """``INFO commandstats`` as {command: (calls, usec)}."""
    return {
        name.removeprefix("cmdstat_"): (int(v["calls"]), int(v["usec"]))
        for name, v in client.info("commandstats").items()
    }


def lua_usec(stats: dict[str, tuple[int, int]]) -> float:
    """Microseconds spent in scripts (EVALSHA, FCALL...), nested commands included."""
    return float(sum(stats[c][1] for c in SCRIPT_COMMANDS if c in stats))


def measure(case: str, client: redis.Redis, cycle: Cycle, n: int) -> tuple[dict[str, float], Any]:
    """Run ``n`` cycles; per cycle: rate (cycles/s), lua, server and cpu (µs),
    sent (commands). Also returns the raw ``INFO commandstats``."""
    client.config_resetstat()
    cpu = redis_cpu(client)
    started = time.perf_counter()
    for _ in range(n):
        cycle()
    elapsed = time.perf_counter() - started
    cpu = redis_cpu(client) - cpu
    stats = command_stats(client)
    server, sent = server_usec(case, stats, n)
    row = {
        "rate": n / elapsed,
        "lua": lua_usec(stats) / n,
        "server": server / n,
        "cpu": cpu * 1e6 / n,
        "sent": sent / n,
    }
    return row, stats


def server_usec(case: str, stats: dict[str, tuple[int, int]], cycles: int) -> tuple[float, float]:
    """(server microseconds, commands sent) for ``cycles`` cycles of ``case``.

    Scripts count whole. A command ``case`` sends itself counts for the share of
    its calls that it sent (``DIRECT`` per cycle x cycles, out of all its calls;
    the rest ran inside a script or an EXEC, whose time already includes it)."""
    usec = lua_usec(stats)
    sent = float(sum(stats[c][0] for c in SCRIPT_COMMANDS if c in stats))
    for command, per_cycle in DIRECT[case].items():
        calls, total = stats.get(command, (0, 0))
        own = min(calls, per_cycle * cycles)
        if calls:
            usec += total * own / calls
        sent += own
    return usec, sent
