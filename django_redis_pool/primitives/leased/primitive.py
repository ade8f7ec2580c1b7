"""What every lease-engine primitive shares: its keys, reads, waiters and gc."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from ...exceptions import ResourceUnavailable
from .. import counts
from ..clients.deadlines import deadline
from ..counts import Activity
from ..validators import (
    check_client,
    check_count,
    check_holder,
    check_lease_timeout,
    check_max_waiting,
    check_name,
)
from ..wire.channel import Channel
from ..wire.keys import DEFAULT_KEY_PREFIX, to_ms
from ..wire.steps import Steps
from . import records, turns
from .engine import LeaseEngine
from .lease import Lease
from .records import Waiter

__all__ = [
    "DEFAULT_KEY_PREFIX",
    "AsyncHold",
    "Collected",
    "Hold",
    "LeasedPrimitive",
    "Snapshot",
    "lease_as_dict",
    "waiter_as_dict",
]


logger = logging.getLogger("django_redis_pool")


class Hold:
    """What ``hold()`` returns: a context manager for one ``with`` block.

    Entering takes the hold as ``hold()`` was asked (waiting up to its
    ``timeout``) and returns it: a :class:`Lease`. A refusal raises
    :class:`ResourceUnavailable`: ``reason`` ``"timeout"`` (nothing granted in
    time) or ``"full"`` (refused at once: ``max_waiting`` callers already
    wait), ``retry_after`` when a turn is expected
    (:meth:`LeasedPrimitive.turn_estimate`). ``auto_renew`` renews the lease in
    the background until the block exits. Leaving releases it.
    """

    __slots__ = ("_auto_renew", "_owner", "_permits", "_release", "_take", "_unavailable", "held")

    def __init__(
        self,
        owner: LeasedPrimitive,
        take: Callable[[], Any],
        unavailable: str,
        *,
        release: Callable[[Any], Any] | None = None,
        permits: int = 1,
        auto_renew: bool = False,
    ) -> None:
        self._owner, self._take, self._unavailable = owner, take, unavailable
        self._release, self._permits, self._auto_renew = release, permits, auto_renew
        #: What entering took (a :class:`Lease`, an allocator's key; None before).
        self.held: Any = None

    def granted(self) -> Any:
        """What entering takes, as a caller that keeps it past one ``with``
        block and answers a refusal itself needs it (the request guard, through
        its kind): the hold, or None when nothing was granted in time; refused
        at once, :class:`ResourceUnavailable` (``reason`` ``"full"``) with no
        ``retry_after`` (no estimate is read: the caller reads one if it needs
        it)."""
        return self._take()

    def __enter__(self) -> Lease:
        try:
            lease = self._take()
        except ResourceUnavailable as exc:  # refused at once: max_waiting callers wait
            if exc.retry_after is None:
                exc.retry_after = self._owner.turn_estimate(self._permits)
            raise
        if lease is None:
            turn = self._owner.turn_estimate(self._permits)
            raise ResourceUnavailable(self._unavailable, retry_after=turn)
        return self._entered(lease)

    def _entered(self, held: Any) -> Any:
        if self._auto_renew:
            held.start_auto_renew()
        self.held = held
        return held

    def __exit__(self, *exc_info: object) -> None:
        held, self.held = self.held, None
        if held is not None:
            (self._release or Lease.release)(held)


class AsyncHold(Hold):
    """What ``ahold()`` returns: :class:`Hold` for an ``async with`` block (its
    ``take`` and ``release`` are coroutine functions; the renewal is a task of
    the loop)."""

    __slots__ = ()

    def __enter__(self) -> Lease:
        raise TypeError("ahold() is for `async with`; use hold() in a `with` block")

    async def agranted(self) -> Any:  # type: ignore[override]
        """:meth:`Hold.granted` on the event loop."""
        return await self._take()

    async def __aenter__(self) -> Lease:
        try:
            lease = await self._take()
        except ResourceUnavailable as exc:
            if exc.retry_after is None:
                exc.retry_after = await self._owner.aturn_estimate(self._permits)
            raise
        if lease is None:
            turn = await self._owner.aturn_estimate(self._permits)
            raise ResourceUnavailable(self._unavailable, retry_after=turn)
        return self._entered(lease)

    async def __aexit__(self, *exc_info: object) -> None:
        held, self.held = self.held, None
        if held is not None:
            await (self._release or Lease.arelease)(held)


@dataclass(frozen=True)
class Snapshot:
    """A primitive's state at one instant (``now``, unix seconds on the Redis clock).

    The lists may be one page of the whole (see :meth:`LeasedPrimitive.snapshot`);
    the ``*_count`` fields always count everything.
    """

    kind: str
    name: str
    now: float
    #: Slots or resources in all: a pool's available + held resources, a
    #: semaphore's max size (if unset: its ``default_max_size``, else None), 1
    #: for a lock.
    size: int | None
    available: list[str]  #: a pool's available resource ids (empty for slots)
    leases: list[Lease]  #: the live holds, soonest expiry first
    waiters: list[Waiter]  #: blocked callers, in the order they will be served
    available_count: int = 0  #: a pool's available resources (expired holds included)
    held_count: int = 0  #: live holds
    waiting_count: int = 0  #: blocked callers
    expired_count: int = 0  #: expired holds not reclaimed yet (the next acquire or gc does)
    #: When the oldest live hold began (unix seconds, Redis clock; None: no hold),
    #: among the first 1,000 live holds (soonest expiry first). Read by a
    #: counts-only or a whole snapshot, not by a page.
    oldest_since: float | None = None
    #: Whether the holds are of named resources (a pool's, an allocator's
    #: keys), not of slots: the primitive's :attr:`LeasedPrimitive.named_resources`.
    named_resources: bool = False
    #: The permits the live holds take (a semaphore's weighted holds count
    #: theirs, every other hold one; None: ``held_count``).
    permits_count: int | None = None

    @property
    def held_permits(self) -> int:
        """The permits the live holds take: a semaphore's permits in use, out of
        its ``size``; for any other kind, ``held_count``."""
        return self.held_count if self.permits_count is None else self.permits_count

    @property
    def free(self) -> int:
        """How many more holds could be granted now: the available resources,
        or the slots (a semaphore's permits) not held."""
        if self.named_resources:
            return self.available_count
        return max(0, (self.size or 0) - self.held_permits)

    def seconds_left(self, lease: Lease) -> float | None:
        """Seconds until ``lease`` expires on the Redis clock (None: never)."""
        if lease.expires_at is None:
            return None
        return round(max(0.0, lease.expires_at - self.now), 3)

    def as_dict(self) -> dict[str, Any]:
        """The snapshot as JSON-ready data (times in unix seconds, Redis clock)."""
        return {
            "kind": self.kind,
            "name": self.name,
            "time": self.now,
            "size": self.size,
            "free": self.free,
            "held": self.held_permits,
            "holds": self.held_count,
            "waiting": self.waiting_count,
            "expired": self.expired_count,
            "oldest_since": self.oldest_since,
            "available": self.available,
            "holders": [
                {**lease_as_dict(lease), "seconds_left": self.seconds_left(lease)}
                for lease in self.leases
            ],
            "waiters": [
                {**waiter_as_dict(waiter), "waited": round(max(0.0, self.now - waiter.since), 3)}
                for waiter in self.waiters
            ],
        }


def lease_as_dict(lease: Lease) -> dict[str, Any]:
    """A lease as JSON-ready data."""
    return {
        "resource": lease.resource,
        "holder": lease.holder,
        "fence": lease.fence,
        "permits": lease.permits,
        "acquired_at": lease.acquired_at,
        "expires_at": lease.expires_at,
    }


def waiter_as_dict(waiter: Waiter) -> dict[str, Any]:
    """A waiter as JSON-ready data."""
    return {
        "holder": waiter.holder,
        "priority": waiter.priority,
        "permits": waiter.permits,
        "since": waiter.since,
        "deadline": waiter.deadline,
    }


@dataclass(frozen=True)
class Collected:
    """What a garbage collection reclaimed (or, in a dry run, would reclaim)."""

    reclaimed: list[Lease]  #: expired leases ended
    dropped: list[Waiter]  #: waiters that stopped checking in, or timed out
    #: An allocator's upkeep (None for other primitives): ``removed`` (keys
    #: whose lifetime ended), ``healed`` (keys whose cooldown ended, back in
    #: rotation), ``unbound`` (expired soft bindings dropped).
    upkeep: dict[str, int] | None = None

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready data."""
        return {
            "reclaimed": [lease_as_dict(lease) for lease in self.reclaimed],
            "dropped": [waiter_as_dict(waiter) for waiter in self.dropped],
            **(self.upkeep or {}),
        }


class LeasedPrimitive:
    """Base of the leased primitives: :class:`ResourcePool`, :class:`Semaphore`,
    :class:`Lock` and :class:`Allocator`.

    Holds the validated ``client``, ``name``, ``key_prefix`` and ``max_waiting``,
    the :class:`Channel` that runs the primitive's operations (``mode`` is
    sent with each) and the :class:`LeaseEngine` of its lease protocol over it
    (``default_max`` and ``heal`` are the engine's). Building one does no I/O.
    """

    #: The kind of primitive; with ``name`` it makes the Redis Cluster hash tag.
    kind: ClassVar[str]
    #: Whether it leases named resources that are available or not (a pool's
    #: resources, an allocator's keys), rather than slots named after their
    #: holder (a semaphore's, a lock's).
    named_resources: ClassVar[bool] = False

    def __init__(
        self,
        client: Any,
        name: str,
        *,
        key_prefix: str,
        mode: str,
        default_max: int | None = None,
        heal: Callable[[], Steps[object]] | None = None,
        max_waiting: int | None = None,
    ) -> None:
        self.client = check_client(client)
        self.name = check_name(name)
        self.key_prefix = check_name(key_prefix, "key_prefix")
        #: The most callers that may wait at once, counted in Redis across every
        #: process and host (None: no limit; 0: none ever waits). One more is
        #: refused at once, as a timeout refuses it. Each caller's own applies.
        self.max_waiting = check_max_waiting(max_waiting)
        #: How the primitive runs its operations (:mod:`.channel`).
        self._channel = Channel(
            client, kind=self.kind, name=self.name, mode=mode, prefix=self.key_prefix
        )
        #: The lease protocol over it (:mod:`.engine`).
        self._engine = LeaseEngine(self._channel, default_max=default_max, heal=heal)
        #: Its refusals' estimates, kept a short while (:mod:`.turns`).
        self._turns = turns.Turns()

    @property
    def lease_timeout(self) -> float | None:
        """Seconds each lease lives unless renewed (None: no expiry), when the
        caller names none."""
        return self._lease_timeout

    @lease_timeout.setter
    def lease_timeout(self, value: float | None) -> None:
        self._lease_timeout = check_lease_timeout(value)
        self._lease_ms = to_ms(self._lease_timeout)  # (what an acquire sends, at once)

    def _read(self, what: str, resource: str = "") -> Any:
        return self._channel.run(self._channel.op("read", what, resource))

    def _counts(self) -> tuple[int, int, int, int, int]:
        """(available (a semaphore's free permits), held by a live lease,
        waiting, size, permits of the live leases) on the Redis clock."""
        available, held, waiting, size, permits = self._read("counts")
        return int(available), int(held), int(waiting), int(size), int(permits)

    def _live_leases(self) -> list[Lease]:
        return records.leases(self._engine, self._read("leases"))

    def lease_of(self, resource: str) -> Lease | None:
        """The live hold on ``resource`` (a pool's resource id, a semaphore
        holder's identity, a lock's holder), or None."""
        resource = check_holder(resource, "resource")
        raw = self._read("record", resource)
        return records.lease_of(self._engine, resource, raw)[0] if raw else None

    def waiting_count(self) -> int:
        """How many callers are blocked in ``acquire``."""
        return self._counts()[2]

    def waiters(self) -> list[Waiter]:
        """The callers blocked in ``acquire``, in the order they will be served."""
        return records.waiters(self._read("waiters"))

    def activity(self, minutes: int = 0) -> Activity:
        """What every process counted for this primitive (grants, refusals,
        wait and hold times...: :mod:`.counts`): the totals and the last
        ``minutes`` minutes (at most a day), in one round trip. A process's
        counts reach Redis within a few seconds (:func:`.counts.flush`: now)."""
        return counts.read(self._channel, minutes)

    def turn_estimate(self, permits: int = 1) -> float | None:
        """Seconds until a caller refused now (asking for ``permits``) can
        expect its turn, from the live holds, the callers waiting and the mean
        recent hold (:func:`.turns.turn_in`); None when not known (no hold
        timed recently, nothing that can free enough, or Redis did not answer
        within :data:`.turns.READ_DEADLINE`). Reads Redis (a snapshot page,
        and the counts every :data:`.turns.MEAN_FRESH_FOR` s) at most once per
        :data:`.turns.FRESH_FOR` s in this process; never raises."""
        try:
            with deadline(turns.READ_DEADLINE):
                return self._channel.run(self._estimate(permits))  # type: ignore[no-any-return]
        except Exception:  # (logged by :meth:`_estimate`)
            return None

    async def aturn_estimate(self, permits: int = 1) -> float | None:
        """:meth:`turn_estimate` on the event loop."""
        try:
            with deadline(turns.READ_DEADLINE):
                return await self._channel.arun(self._estimate(permits))  # type: ignore[no-any-return]
        except Exception:
            return None

    def _estimate(self, permits: int) -> Steps[float | None]:
        """The operation behind :meth:`turn_estimate` and its twin: what is
        kept while fresh, else (one reader at a time) a read of what
        :meth:`_turn_read` reads, kept for the others."""
        known, turn = self._turns.kept(permits)
        if known:
            return turn
        if not self._turns.claim():  # another thread or task reads: what it read last
            return self._turns.kept(permits, stale=True)[1]
        mean_wanted = self._turns.mean_wanted()
        read: tuple[turns.Queue | None, float | None] = (None, None)
        try:
            read = yield from self._turn_read(mean_wanted)
        except Exception as exc:
            logger.debug("%s: reading its turn estimate failed: %s", self._channel.label, exc)
        finally:
            self._turns.keep(*read, read=mean_wanted and read[0] is not None)
        return self._turns.kept(permits, stale=True)[1]

    def _turn_read(self, mean_wanted: bool) -> Steps[tuple[turns.Queue | None, float | None]]:
        """A page of the snapshot as a :class:`.turns.Queue`, and the mean
        recent hold if ``mean_wanted`` (else None)."""
        snap = yield from self._snapshot(turns.HOLDS_READ, 0, 0, 0)
        mean = None
        if mean_wanted:
            activity = yield from counts.read_steps(self._channel, turns.RECENT_MINUTES)
            mean = turns.mean_hold(activity)
        return turns.Queue.of(snap), mean

    def snapshot(
        self,
        *,
        limit: int | None = None,
        available_offset: int = 0,
        holders_offset: int = 0,
        waiters_offset: int = 0,
    ) -> Snapshot:
        """Everything about the primitive at one instant, read in one round trip.

        ``limit`` (None: everything) bounds each list to one page, starting at
        its offset (0: only the counts); the counts always cover everything. A page costs
        O(log n + limit + offset) in Redis, whatever the primitive's size.
        """
        limit = -1 if limit is None else check_count(limit, "limit")
        offsets = [
            check_count(value, what)
            for value, what in (
                (available_offset, "available_offset"),
                (holders_offset, "holders_offset"),
                (waiters_offset, "waiters_offset"),
            )
        ]
        return self._channel.run(self._snapshot(limit, *offsets))

    def _snapshot(self, limit: int, *offsets: int) -> Steps[Snapshot]:
        """The operation behind :meth:`snapshot` (``limit`` -1: everything)."""
        reply = yield self._channel.op("read", "snapshot", limit, *offsets)
        now_ms, size, available_count, available, held, leases, waiting, waiters = reply[:8]
        expired, oldest, permits = reply[8:]
        return Snapshot(
            kind=self.kind,
            name=self.name,
            now=int(now_ms) / 1000,
            # unset: the max size a semaphore's first acquire would store, if any
            size=getattr(self, "default_max_size", None) if int(size) < 0 else int(size),
            available=[str(r) for r in available],
            leases=records.leases(self._engine, leases),
            waiters=records.waiters(waiters),
            available_count=int(available_count),
            held_count=int(held),
            waiting_count=int(waiting),
            expired_count=int(expired),
            oldest_since=None if int(oldest) < 0 else int(oldest) / 1000,
            named_resources=self.named_resources,
            permits_count=int(permits),
        )

    def force_release(self, resource: str, *, fence: int | None = None) -> bool:
        """End the live hold on ``resource`` (a pool's resource id, a semaphore
        holder's identity, a lock's holder) whoever holds it: an operator's
        action. With ``fence``, only if the hold still has that fence, so a
        hold granted since the operator looked is never ended by mistake. A
        reentrant lock's hold ends entirely. The holder's next renewal or
        release finds the lease lost. Returns False if there was no such hold.
        """
        resource = check_holder(resource, "resource")
        fence = None if fence is None else check_count(fence, "fence")
        return self._engine.release(resource, fence=fence, force=True) != 0

    def collect(self, *, dry_run: bool = False) -> Collected:
        """Reclaim every expired lease and drop the waiters that died, now (also
        done lazily by every acquire); returns what was reclaimed and dropped.
        ``dry_run=True`` only reports what would be, changing nothing."""
        leases, waiters = self._engine.expired() if dry_run else self._engine.gc()
        return Collected(reclaimed=leases, dropped=waiters)

    def gc(self) -> int:
        """Reclaim every expired lease now (also done lazily by every acquire);
        returns how many were reclaimed. Also drops waiters that died."""
        return len(self.collect().reclaimed)
