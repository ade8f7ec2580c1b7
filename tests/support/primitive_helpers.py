"""Helpers shared by the tests of the lease-engine primitives."""

from __future__ import annotations

import cProfile
import os
import pstats
import threading
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from django_redis_pool import Lease, Lock, ResourcePool, ResourceUnavailable, Semaphore
from django_redis_pool.primitives.leased.primitive import LeasedPrimitive
from django_redis_pool.primitives.validators import check_holder
from tests.support.waiting import wait_for

#: The chunk (the longest blocking read) of the primitives of a test that uses
#: the ``long_client`` fixture: long, so that a wake within half of one is a
#: push's, or timed to an expiry, not the end of a read, however busy the machine.
LONG_CHUNK = 30.0
#: The socket timeout of those tests' clients, longer than a read (their forked
#: children build theirs with ``client_from(spec, socket_timeout=LONG_READ_TIMEOUT)``).
LONG_READ_TIMEOUT = 2 * LONG_CHUNK


class Ops:
    """A primitive's channel and lease engine, as the tests reach them:
    ``run(op, *args)`` runs one named operation now; ``base``, ``client``,
    ``wake_prefix``, ``counts`` and ``chunk()`` are the channel's; anything else
    is the lease engine's (``restore``, ``release``, ``expired``...)."""

    def __init__(self, of: Any) -> None:
        engine = of._owner if isinstance(of, Lease) else getattr(of, "_engine", None)
        channel = getattr(of, "_channel", None) or getattr(of, "channel", None)
        self.engine = engine
        self.channel = channel if channel is not None else engine.channel
        self.base = self.channel.base
        self.client = self.channel.client
        self.wake_prefix = self.channel.wake_prefix
        self.counts = self.channel.counts

    def run(self, op: str, *args: Any) -> Any:
        return self.channel.run(self.channel.op(op, *args))

    def chunk(self) -> float:
        return self.channel.read_chunk()[0]

    def __getattr__(self, name: str) -> Any:
        return getattr(self.engine, name)


def ops(of: Any) -> Ops:
    """:class:`Ops` of the primitive (or the lease's primitive) ``of``."""
    return Ops(of)


def redis_time(client: Any) -> float:
    sec, usec = client.time()
    return float(sec) + usec / 1e6


def pool_of(client: Any, name: str, *resources: str, **kwargs: Any) -> ResourcePool:
    pool = ResourcePool(client, name, **kwargs)
    for resource in resources:
        assert pool.associate(resource)
    return pool


def own_lease(lock: Lock) -> Lease | None:
    """The Lease that this thread's (or task's) holder holds through ``lock``
    (what ``lock.hold()`` yields), from the lock's own record; None once it let
    go. (A test's look inside: the public way to the lease is ``hold()``.)"""
    return lock._leases.get(lock._holder())


def slot_lease(semaphore: Semaphore, identity: str, **kwargs: Any) -> Lease | None:
    """``identity``'s hold of ``semaphore``, kept past any block (the test gives
    it back): what entering ``semaphore.hold()`` takes, not waiting by default
    (``timeout=0``, as ``acquire``); None when refused. ``identity`` is
    required and checked, as ``acquire`` checks it (``hold()`` makes one up
    for None)."""
    kwargs.setdefault("timeout", 0)
    check_holder(identity, "identity")
    try:
        return semaphore.hold(identity, **kwargs).__enter__()
    except ResourceUnavailable:
        return None


async def aslot_lease(semaphore: Semaphore, identity: str, **kwargs: Any) -> Lease | None:
    """:func:`slot_lease` through ``semaphore.ahold()``."""
    kwargs.setdefault("timeout", 0)
    check_holder(identity, "identity")
    try:
        return await semaphore.ahold(identity, **kwargs).__aenter__()
    except ResourceUnavailable:
        return None


def assert_constructor_does_no_io(build: Callable[[Any], object]) -> None:
    """``build(client)`` constructs a primitive on ``client`` (with options of
    the test's choice): it must not touch the client, whose every attribute read
    is recorded and fails (a constructor that caught that failure still fails
    the test). It has ``register_script`` and ``blpop``, which the validation
    of a client looks for."""
    touched: list[str] = []

    class Exploding:
        register_script = blpop = None

        def __getattr__(self, name: str) -> Any:
            touched.append(name)
            raise AssertionError(f"constructor touched the client: {name}")

    build(Exploding())
    assert touched == [], f"the constructor touched the client: {touched}"


def queue_dead_waiter(primitive: LeasedPrimitive, holder: str, priority: int = 0) -> None:
    """Leave in Redis what a caller leaves when it queued (as ``LeaseEngine.acquire``
    does, through the real acquire script) and then never checked in again: its
    1 ms deadline passes at once, so the waiter counts as dead right away."""
    engine = ops(primitive)
    token = uuid.uuid4().hex
    queued_at = redis_time(primitive.client)
    reply = engine.run("acquire", token, -1, priority, 1, -1, 1, engine.restore, 1, holder)
    assert isinstance(reply, int), f"queued, not {reply!r}"
    # past the deadline on the Redis clock (ms), however fast the next call comes
    wait_for(lambda: redis_time(primitive.client) >= queued_at + 0.003, what="1 ms to pass")


def expire(lease: Lease) -> None:
    """Wait until ``lease`` is past its expiry on the Redis clock (reading only)."""
    engine = ops(lease)
    wait_for(
        lambda: engine.run("read", "record", lease.resource) is None,
        what=f"the lease on {lease.resource!r} to expire",
    )


def expire_now(*leases: Lease) -> None:
    """Make each lease expire in 50 ms and wait until it has. (A renewal touches
    only its own lease, whereas an acquire would reclaim an already expired one.)"""
    for lease in leases:
        assert lease.renew(0.05)
    for lease in leases:
        expire(lease)


def in_thread(fn: Callable[[], Any]) -> tuple[threading.Thread, list[Any]]:
    """Start ``fn`` in a daemon thread; its return value (or error) lands in the list."""
    out: list[Any] = []

    def run() -> None:
        try:
            out.append(fn())
        except BaseException as exc:  # surfaced by the test
            out.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, out


def finish(thread: threading.Thread, out: list[Any]) -> Any:
    thread.join(15)
    assert not thread.is_alive(), "thread did not finish"
    assert out, "thread returned nothing"
    if isinstance(out[0], BaseException):
        raise out[0]
    return out[0]


def calls_per_cycle(cycle: Callable[[], object], cycles: int = 200) -> float:
    """Python and C function calls per ``cycle()``, after a warm-up (scripts
    loaded, paths found, caches warm): cProfile's count, so machine noise does
    not move it."""
    for _ in range(30):
        cycle()
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(cycles):
        cycle()
    profile.disable()
    return pstats.Stats(profile).total_calls / cycles  # type: ignore[attr-defined]


async def awaited_calls_by_ours(cycle: Callable[[], Awaitable[object]], cycles: int = 200) -> float:
    """Python calls per awaited ``cycle()`` of the package's own functions and
    of what they call directly: the event loop's turns and redis-py's reads
    (how many a reply takes moves with the machine) are not counted."""
    for _ in range(30):
        await cycle()
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(cycles):
        await cycle()
    profile.disable()
    ours = f"{os.sep}django_redis_pool{os.sep}"
    total = 0
    for (path, _, _), (_, calls, _, _, callers) in pstats.Stats(profile).stats.items():  # type: ignore[attr-defined]
        if ours in path:
            total += calls
        else:
            total += sum(by[0] for (caller, _, _), by in callers.items() if ours in caller)
    return total / cycles
