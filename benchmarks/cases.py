"""The cases several benchmarks measure: ours, the peers, the WATCH/MULTI designs, the floor.

An acquire + release *cycle* of each case (:func:`setup`, :func:`cycle`), its
hand-off *baton* (:func:`baton`) and one rate-limit *decision* (:func:`decider`)
are built here, for one client in a benchmark's own process, for the worker
processes (``workers.py``) and for another revision's package (``--before
REF``), so that every subcommand measures the same code: ``engine``,
``allocator``, ``calls``, ``cpu`` and ``redis-cost`` time or count these
cycles, ``ratelimit`` and ``redis-cost`` these decisions. Nothing here starts
a server; only :func:`cycle_of` flushes one.

The two WATCH/MULTI baselines are a resource pool on two Redis sets (WATCH +
SRANDMEMBER, then MULTI/SMOVE/EXEC) and a counting semaphore with identities
(WATCH + SCARD + GET, then MULTI/SADD/EXEC), the way such code is commonly
written; they send the same commands in the same order as that code.

The peers' packages (the ``bench`` extra) are imported only by the cases that
use them: :func:`missing` tells which package a case lacks here.
"""

from __future__ import annotations

import functools
import importlib.util
import itertools
import time
from collections.abc import Callable
from typing import Any

import redis
from redis.exceptions import WatchError

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
    "watch-pool": "WATCH/MULTI pool",
    "watch-semaphore": "WATCH/MULTI semaphore",
}

#: The package each peer needs (module, pip name), for :func:`missing`.
NEEDS: dict[str, tuple[str, str]] = {
    "allocator": ("redis_allocator", "redis-allocator==0.7.0"),
    "redis_lock": ("redis_lock", "python-redis-lock"),
    "limits-moving": ("limits", "limits"),
    "limits-fixed": ("limits", "limits"),
    "django-ratelimit": ("django_ratelimit", "django-ratelimit"),
}


def missing(case: str) -> str | None:
    """Why ``case`` cannot run here (a package of the ``bench`` extra missing), or None."""
    module, name = NEEDS.get(case.removeprefix("before:"), ("", ""))
    if module and importlib.util.find_spec(module) is None:
        return f"needs {name} (pip install {name!r}, or the bench extra)"
    return None


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
    "watch-pool": {"watch": 1, "srandmember": 1, "multi": 1, "exec": 1, "smove": 1},
    "watch-semaphore": {"watch": 1, "scard": 1, "get": 1, "multi": 1, "exec": 1, "srem": 1},
}

#: Our primitives, measured again from an earlier revision with ``--before REF``
#: (as cases ``before:<case>``, run by a worker of ``workers.Revision``).
BEFORE_CASES = ("pool", "semaphore", "lock")

#: Commands that run (or contain) other commands and whose time includes theirs.
SCRIPT_COMMANDS = ("evalsha", "eval", "fcall", "evalsha_ro", "eval_ro", "fcall_ro")


# -- the WATCH/MULTI baselines --------------------------------------------------------


class WatchPool:
    """A resource pool on WATCH/MULTI: a set of available and a set of occupied ids."""

    def __init__(self, client: redis.Redis, name: str) -> None:
        self.client = client
        self.available_set = f"ResourcePool:{name}:available"
        self.occupied_set = f"ResourcePool:{name}:occupied"

    def associate_many(self, resources: list[str]) -> None:
        """Fill the pool (such code adds one at a time under WATCH; setup only)."""
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


class WatchSemaphore:
    """A counting semaphore on WATCH/MULTI: a set of holder identities and a max size."""

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
        pool.associate_many(resource_ids(min(FILL_CHUNK, n - start), start))


def allocator(dclient: redis.Redis, name: str) -> Any:
    """redis-allocator's ``RedisAllocator`` (the peer of our Allocator)."""
    from redis_allocator import RedisAllocator

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
    elif case == "watch-pool":
        WatchPool(client, name).associate_many(resource_ids(POOL_SIZE))
    elif case == "watch-semaphore":
        WatchSemaphore(client, name).set_max_size(POOL_SIZE)


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
    if case in ("semaphore", "watch-semaphore"):
        sem: Any
        if case == "semaphore":
            sem = Semaphore(client, name, lease_timeout=LEASE)
            take = functools.partial(sem.acquire, timeout=0)
        else:
            sem = WatchSemaphore(client, name)
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
            import redis_lock

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
    if case == "watch-pool":
        watched = WatchPool(client, name)

        def watch_cycle() -> None:
            resource = watched.acquire()
            if resource is None:
                raise _failed(case)
            if not watched.release(resource):
                raise RuntimeError(f"{case}: a release returned False")

        return watch_cycle
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
        import redis_lock

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


# -- rate-limit decisions ------------------------------------------------------------------

#: Decisions per second per key every rate-limit case allows.
RATE = 100
#: The keys of the "spread" scenario, in turn.
KEYS = [f"user-{i}" for i in range(1000)]
#: The rate-limit cases: ours and the peers (``limits``' two strategies,
#: django-ratelimit), then the floor (one EVALSHA of ``return 1``).
RATE_CASES = ("ours", "limits-moving", "limits-fixed", "django-ratelimit", "floor")


def keys_of(scenario: str, offset: int = 0) -> Callable[[], str]:
    """The next key of ``scenario`` per call (``offset``: where in the 1,000 it starts):
    ``hot`` is one key, ``spread`` the 1,000 keys in turn."""
    if scenario == "hot":
        return lambda: "hot"
    return itertools.cycle(KEYS[offset:] + KEYS[:offset]).__next__


def decider(case: str, url: str, cache: str = "") -> Callable[[str], bool]:
    """One decision of ``case`` on a key per call: True if it passed.
    ``cache``: the Django cache alias django-ratelimit uses (Django set up with it)."""
    if case == "ours":
        from django_redis_pool import RateLimiter

        limiter = RateLimiter(redis.Redis.from_url(url), "bench", rate=RATE, per=1)
        return limiter.acquire
    if case in ("limits-moving", "limits-fixed"):
        from limits import RateLimitItemPerSecond, strategies
        from limits.storage import RedisStorage

        storage = RedisStorage(url)
        strategy = (
            strategies.MovingWindowRateLimiter(storage)
            if case == "limits-moving"
            else strategies.FixedWindowRateLimiter(storage)
        )
        item = RateLimitItemPerSecond(RATE, 1)
        return lambda key: strategy.hit(item, "bench", key)
    if case == "django-ratelimit":
        from django.conf import settings
        from django.test import RequestFactory
        from django_ratelimit.core import is_ratelimited

        settings.RATELIMIT_USE_CACHE = cache
        request = RequestFactory().get("/")

        def key_of(group: str, request: Any) -> str:
            return request.bench_key  # type: ignore[no-any-return]

        def decide(key: str) -> bool:
            request.bench_key = key
            return not is_ratelimited(
                request, group="bench", key=key_of, rate=f"{RATE}/s", increment=True
            )

        return decide
    if case == "floor":
        script = redis.Redis.from_url(url).register_script("return 1")
        return lambda key: script(keys=[key]) == 1
    raise ValueError(case)


# -- any of them, by name --------------------------------------------------------------------

#: The rate-limit decisions ``redis-cost`` counts: ours on 1,000 keys in turn
#: and on one key, ``limits``' two on 1,000 keys, and one EVALSHA of ``return 1``.
RATE_COST_CASES = ("rate-spread", "rate-hot", "limits-moving", "limits-fixed", "rate-floor")


def cycle_of(case: str, url: str, name: str = "cost", me: str = "me") -> Cycle:
    """Flush the server at ``url``, set ``case`` up and return one cycle of it: an
    acquire + release of :data:`CASES` or a decision of :data:`RATE_COST_CASES`."""
    client = redis.Redis.from_url(url)
    dclient = redis.Redis.from_url(url, decode_responses=True)
    client.flushall()
    if case in CASES:
        setup(case, client, dclient, name)
        return cycle(case, client, dclient, name, me)
    if case == "rate-floor":
        script = client.register_script("return 1")
        return lambda: script(keys=["k"])
    if case.startswith("rate-"):
        decide = decider("ours", url)
        next_key = keys_of(case.removeprefix("rate-"))
    else:
        decide = decider(case, url)
        next_key = keys_of("spread")
    return lambda: decide(next_key())
