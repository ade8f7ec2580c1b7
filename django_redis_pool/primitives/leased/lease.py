"""The :class:`Lease`: one granted hold on a resource, shared by every primitive.

A lease renews and releases itself through its owner, the lease engine that
granted it (:class:`LeaseOwner`: the narrow interface a lease needs of it).
:func:`renew_steps` and :func:`release_lease_steps` are the lease's side of
the protocol (what a renewal or a release changes on the lease), used by the
lease engine and by the primitives that release a lease inside an operation
of their own. Nothing here imports Django.
"""

from __future__ import annotations

import asyncio
import heapq
import inspect
import itertools
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable, Hashable
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol

from redis import BlockingConnectionPool, ConnectionPool

from ...exceptions import BackendUnavailable, PoolError
from .. import counts
from ..clients.deadlines import DEADLINE_SLACK, deadline
from ..validators import DEFAULT, Seconds
from ..wire import packing
from ..wire.keys import new_token
from ..wire.protocol import Mode
from ..wire.steps import Op, Steps, new_op
from . import releases

if TYPE_CHECKING:
    from ..wire.channel import Channel

__all__ = ["Lease", "LeaseOwner", "lost_listeners", "release_lease_steps", "renew_steps"]

logger = logging.getLogger("django_redis_pool")

#: Called with every lease found lost (by a renewal, or by a release that found it
#: already gone), after the warning is logged. The Django layer adds one that sends
#: the ``lease_lost`` signal.
lost_listeners: list[Callable[[Lease], None]] = []


class Lease:
    """A granted hold on ``resource``, valid until ``expires_at`` (Redis clock).

    ``fence`` is a fencing token: strictly increasing per primitive across all
    holders ever, so a storage system can reject writes from a holder whose
    lease was reclaimed. ``permits`` is how many of a semaphore's permits the
    hold takes (1 for every other kind). ``released`` becomes True once its
    holder let go of it (:meth:`release`, the lock's ``release``; also when
    the release goes on in the background). ``lost`` becomes True only for a
    hold that was really lost: reclaimed, force-released or removed while held,
    as a renewal, a failing background renewal or the release itself found it.
    """

    __slots__ = (
        "__weakref__",
        "_failing_since",
        "_granted",
        "_owner",
        "_renewing",
        "_term_from",
        "acquired_at",
        "expires_at",
        "fence",
        "holder",
        "lease_timeout",
        "lost",
        "on_lost",
        "permits",
        "released",
        "resource",
        "token",
    )

    def __init__(
        self,
        owner: LeaseOwner,
        *,
        resource: str,
        holder: str,
        fence: int,
        expires_at: float | None,
        lease_timeout: float | None,
        token: str,
        acquired_at: float | None = None,
        permits: int = 1,
        sent: float | None = None,
    ) -> None:
        self._owner = owner
        self._renewing = False  # scheduled with the process's renewer
        self._failing_since: float | None = None  # renewals failing since (monotonic)
        self.resource = resource
        self.holder = holder
        self.fence = fence
        self.expires_at = expires_at
        self.lease_timeout = lease_timeout
        self.token = token
        #: When the hold began (unix seconds, Redis clock; None if unknown).
        self.acquired_at = acquired_at
        #: The permits the hold takes: a semaphore's weighted hold's (kept by
        #: its record for as long as it lasts: a refresh keeps them); else 1.
        self.permits = permits
        # When the call that granted or last renewed the lease was sent (this
        # process's monotonic clock; None if unknown): its current term began
        # after that, so auto-renewal counts from it. Counting from when the
        # reply was read instead would lose what a slow reply took (a busy
        # process, a late start_auto_renew) from the last third of the term.
        self._term_from = sent
        # When the call that granted it was sent (monotonic; None if unknown):
        # its hold time is counted from there (:mod:`.counts`).
        self._granted = sent
        self.lost = False
        self.released = False
        self.on_lost: Callable[[Lease], object] | None = None

    def unexpired(self) -> bool:
        """Whether its lease surely had not run out yet (this host's clock, a
        second of margin for the Redis clock's): one found gone was ended by
        a release (another request's of a shared identity, an operator's)."""
        return self.expires_at is None or self.expires_at > time.time() + 1.0

    @property
    def ended(self) -> bool:
        """Whether the hold is over for its holder: released or lost."""
        return self.lost or self.released

    @classmethod
    def unrecorded(cls, owner: LeaseOwner, resource: str) -> Lease:
        """A lease on ``resource`` whose record was missing when it ended (a
        reclaim found only its expiry): its holder, token and times are
        unknown, its fence is 0."""
        return cls(
            owner,
            resource=resource,
            holder="",
            fence=0,
            expires_at=None,
            lease_timeout=None,
            token="",
        )

    @property
    def primitive_kind(self) -> str:
        """Kind of the primitive that granted the lease ("pool", "semaphore", "lock")."""
        return self._owner.channel.kind

    @property
    def primitive_name(self) -> str:
        """Name of the primitive that granted the lease."""
        return self._owner.channel.name

    def renew(self, lease_timeout: Seconds = DEFAULT) -> bool:
        """Extend the lease by ``lease_timeout`` seconds from now (DEFAULT keeps
        its current duration; None: no expiry from now on). Returns False once
        the lease is lost."""
        return not (self.lost or self.released) and self._owner.channel.run(
            self._renewed(lease_timeout)
        )

    async def arenew(self, lease_timeout: Seconds = DEFAULT) -> bool:
        """:meth:`renew` on the event loop."""
        return not (self.lost or self.released) and await self._owner.channel.arun(
            self._renewed(lease_timeout)
        )

    def _renewed(self, lease_timeout: Seconds) -> Steps[bool]:
        ok = yield from renew_steps(self, lease_timeout)
        if not ok:
            self._mark_lost("renewal found it gone (expired, force-released or removed)")
        return ok

    def release(self) -> bool:
        """Give the resource back. False if this lease no longer held it.

        Redis is waited for at most ``DEADLINE_SLACK`` (1 s; on connections
        that keep deadlines, and every asyncio one): a release that could not
        finish by then (Redis unreachable or too slow) returns True and goes on
        in the background until Redis answers or the lease ends
        (:mod:`.releases`); ``released`` is set either way, and ``lost`` too
        if it was gone already."""
        channel = self._owner.channel
        return channel.run(release_lease_steps(self, ends=True, bounded=channel.sync_bounded)) != 0

    async def arelease(self) -> bool:
        """:meth:`release` on the event loop."""
        return await self._owner.channel.arun(release_lease_steps(self, ends=True)) != 0

    def start_auto_renew(self, on_lost: Callable[[Lease], object] | None = None) -> None:
        """Renew at about 2/3 of the lease duration until released: as a task
        of the running event loop when called on one, else from the renewal
        thread of its Redis server (one per server, so a Redis that hangs or
        refuses delays no renewal on another). If a renewal finds the lease
        gone, it is logged, ``lost`` is set and ``on_lost(lease)`` is called
        (a coroutine function is run as a task of the loop, or to completion
        off a loop). A lease without expiry needs nothing. The renewer holds
        only a weak reference: a lease dropped without being released stops
        being renewed, and simply expires."""
        if on_lost is not None:
            self.on_lost = on_lost
        if self.lease_timeout is None or self._renewing:
            return
        self._renewing = True
        delay = _next_renewal(self)
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            _schedule(self, delay)
        else:
            _keep(loop.create_task(_renew_on_loop(weakref.ref(self), delay)))

    def stop_auto_renew(self) -> None:
        """Stop background renewal (release does this too)."""
        self._renewing = False

    def _mark_lost(self, reason: str, *, call_on_lost: bool = True) -> None:
        self.lost = True
        self._owner.channel.counts.add(counts.LOST)
        logger.warning(
            "lease on %r of %s (holder %r, fence %s) was lost: %s",
            self.resource,
            self._owner.channel.label,
            self.holder,
            self.fence,
            reason,
        )
        callbacks = [*lost_listeners]
        if call_on_lost and self.on_lost is not None:
            callbacks.append(self.on_lost)
        for callback in callbacks:
            try:
                result = callback(self)
                if inspect.isawaitable(result):
                    _run_awaitable(result)
            except Exception:
                logger.exception("lease-lost callback %r of %r failed", callback, self)

    def __enter__(self) -> Lease:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()

    async def __aenter__(self) -> Lease:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.arelease()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Lease):
            return NotImplemented
        return (self.resource, self.token) == (other.resource, other.token)

    def __hash__(self) -> int:
        return hash((self.resource, self.token))

    def __repr__(self) -> str:
        return (
            f"<Lease {self.resource!r} of {self._owner.channel.label} holder={self.holder!r} "
            f"fence={self.fence} expires_at={self.expires_at}"
            + (f" permits={self.permits}>" if self.permits != 1 else ">")
        )


class LeaseOwner(Protocol):
    """What a lease needs of the lease engine that granted it."""

    #: The primitive's channel: its name, counts and client, and how to run.
    channel: Channel

    def renew_resource_steps(
        self, resource: str, token: str, lease_timeout: float | None, *, keep: bool = True
    ) -> Steps[float | bool | None]:
        """Extend the lease on ``resource`` held by ``token`` (None keeps its
        duration; with ``keep=False``: no expiry): its new expiry, or False if
        it is gone."""
        ...

    def release_steps(
        self, resource: str, token: str = "", request: str | None = None
    ) -> Steps[int]:
        """End the lease on ``resource`` held by ``token``; ``request`` makes a
        retry answer the same."""
        ...


def renew_steps(lease: Lease, lease_timeout: Seconds = DEFAULT) -> Steps[bool]:
    """Extend ``lease`` (DEFAULT keeps its duration; None: no expiry); False
    if it is gone. Its term is counted from when the renewal was sent."""
    sent = time.monotonic()
    if lease_timeout is DEFAULT:
        expires = yield from lease._owner.renew_resource_steps(lease.resource, lease.token, None)
    else:  # (0 ends it now: redis-allocator's update(0) frees)
        expires = yield from lease._owner.renew_resource_steps(
            lease.resource, lease.token, lease_timeout, keep=False
        )
    if expires is False:
        return False
    lease._term_from = sent
    lease.expires_at = expires  # type: ignore[assignment]
    if lease_timeout is not DEFAULT:
        lease.lease_timeout = lease_timeout
    return True


def release_lease_steps(
    lease: Lease,
    *,
    ends: bool = False,
    settles: bool = False,
    bounded: bool = True,
    counted: bool = True,
) -> Steps[int | None]:
    """End ``lease`` (by its token) as its owner's ``release_steps`` does,
    waiting at most ``DEADLINE_SLACK`` for Redis: 1 if it was ended, 2 if a
    reentrant lock's count went down, 0 if it was gone. Returns None when that
    was not enough (Redis unreachable, or too slow): the release then goes on
    in the background with the same request id (:mod:`.releases`), and the
    caller is not held for it.

    ``ends``: the lease is let go of, whatever the answer (:meth:`Lease.release`):
    its renewal stops first, a lease already known ended is not sent (0),
    one found gone is logged as lost, and ``released`` is set. ``settles``:
    the same, but only once the answer says the hold ended (a reentrant
    lock's count that went down leaves its hold, and its renewal, as they
    are). ``bounded``: arm the deadline (unbounded, the release waits as
    redis-py does).
    ``counted``: its hold time goes into the counts (not for a grant given
    back at once)."""
    if ends:
        lease._renewing = False
        if lease.lost or lease.released:
            return 0
    channel = lease._owner.channel
    request = new_token()
    # (the owner's release_steps, written out, and :func:`..wire.packing.release`
    # formatted in place: on every release)
    head = channel.packed_mode
    packed = (packing.RELEASE % (head, lease.token, request, "", 0, lease.resource)).encode()
    step = new_op(Op, ("release", (channel.key, packed), channel.streaks))
    try:
        if bounded:
            with deadline(DEADLINE_SLACK):
                reply: int | None = int((yield step))
        else:
            reply = int((yield step))
    except BackendUnavailable as exc:
        releases.continue_in_background(lease._owner, lease, request, exc, DEADLINE_SLACK)
        reply = None
    if settles and reply != 2:
        ends = True
        lease._renewing = False
    if reply == 0:
        # (a semaphore's hold gone before its lease ran out was ended by a
        # release of another request sharing its identity: not a loss)
        if ends and not lease.lost and not (channel.mode == Mode.SEM and lease.unexpired()):
            lease._mark_lost("it was already gone when released", call_on_lost=False)
    elif reply != 2 and counted and lease._granted is not None:
        channel.counts.released(time.monotonic() - lease._granted)
    if ends:
        lease.released = True
    return reply


#: How long a renewal thread waits with nothing to renew before it ends.
RENEWER_IDLE = 60.0


class _Renewer(threading.Thread):
    """The background renewals of the leases on one Redis server: one thread,
    a heap of due times, and only weak references to the leases it renews.

    One thread per server (:func:`_server_key`), not per process: a renewal
    that waits on a Redis that hangs or refuses delays the renewals of that
    Redis only, whose leases cannot be renewed anyway. It waits on a condition
    (woken when an earlier renewal is scheduled), never busy-loops, and ends
    once it has had nothing to renew for :data:`RENEWER_IDLE` seconds. A
    renewal that cannot reach Redis is retried at shorter intervals until the
    lease's own duration has passed since the first failure, after which the
    lease is reported lost. A forked child starts its own (empty: it renews
    nothing of its parent's).
    """

    def __init__(self, key: Hashable) -> None:
        super().__init__(name=f"drp-renewer-{next(_renewer_numbers)}", daemon=True)
        self.key = key
        self.retired = False  #: set (under ``_renewers_lock``) when it ends
        self._due: list[tuple[float, int, weakref.ref[Lease]]] = []
        self._order = itertools.count()
        self._changed = threading.Condition()

    def schedule(self, lease: Lease, delay: float) -> None:
        with self._changed:
            entry = (time.monotonic() + delay, next(self._order), weakref.ref(lease))
            heapq.heappush(self._due, entry)
            if self._due[0] is entry:
                self._changed.notify()

    def run(self) -> None:
        while (ref := self._next_due()) is not None:
            lease = ref()
            if lease is not None and lease._renewing:
                try:
                    delay = self._renew(lease)
                except Exception:  # e.g. a lease on an asyncio client, renewed off a loop
                    logger.exception("renewing %r failed; it is no longer renewed", lease)
                    delay = None
                if delay is not None:
                    self.schedule(lease, delay)
            del lease

    def _next_due(self) -> weakref.ref[Lease] | None:
        """The next lease to renew, once it is due; None once this thread has
        been idle for :data:`RENEWER_IDLE` seconds and has retired."""
        while True:
            with self._changed:
                while not self._due or self._due[0][0] > time.monotonic():
                    if self._due:
                        self._changed.wait(self._due[0][0] - time.monotonic())
                    elif not self._changed.wait(RENEWER_IDLE) and not self._due:
                        break
                else:
                    return heapq.heappop(self._due)[2]
            if _retire(self):
                return None

    @staticmethod
    def _renew(lease: Lease) -> float | None:
        return lease._owner.channel.run(_renewal(lease))


def _renewal(lease: Lease) -> Steps[float | None]:
    """Renew ``lease`` once; the delay until the next renewal (None: stop)."""
    assert lease.lease_timeout is not None
    interval = lease.lease_timeout * 2 / 3
    try:
        ok = yield from renew_steps(lease)
    except PoolError as exc:
        if not lease._renewing:  # released or stopped meanwhile: nothing to report
            return None
        now = time.monotonic()
        lease._failing_since = lease._failing_since or now
        if now - lease._failing_since >= lease.lease_timeout:
            lease._mark_lost(f"renewal kept failing: {exc}")
            return None
        logger.warning("renewing %r failed, retrying: %s", lease, exc)
        return min(interval, lease.lease_timeout / 10)
    except Exception:
        logger.exception("renewing %r failed; it is no longer renewed", lease)
        return None
    if not lease._renewing:  # released meanwhile: a renewal that found it gone says nothing
        return None
    if not ok:
        lease._mark_lost("renewal found it gone (expired, force-released or removed)")
        return None
    lease._failing_since = None
    return _next_renewal(lease)


def _next_renewal(lease: Lease) -> float:
    """Seconds until ``lease`` is due for renewal: 2/3 of its duration after its
    current term began (at the latest: see ``Lease._term_from``)."""
    assert lease.lease_timeout is not None
    interval = lease.lease_timeout * 2 / 3
    if lease._term_from is None:
        return interval
    return max(0.0, lease._term_from + interval - time.monotonic())


async def _renew_on_loop(ref: weakref.ref[Lease], delay: float | None) -> None:
    """A lease's auto-renewal as a task of the loop it was taken on."""
    while delay is not None:
        await asyncio.sleep(delay)
        lease = ref()
        if lease is None or not lease._renewing:
            return
        delay = await lease._owner.channel.arun(_renewal(lease))
        del lease


#: Tasks of this module still running (the loop keeps only weak references).
_tasks: set[asyncio.Future[Any]] = set()


def _keep(task: asyncio.Future[Any]) -> None:
    _tasks.add(task)
    task.add_done_callback(_tasks.discard)


def _run_awaitable(awaitable: Any) -> None:
    """Run what an ``on_lost`` coroutine function returned: as a task of the
    running loop, else to completion here (the renewal thread)."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:

        async def complete() -> None:
            await awaitable

        asyncio.run(complete())
    else:
        _keep(asyncio.ensure_future(awaitable, loop=loop))


#: The renewal threads, by :func:`_server_key`.
_renewers: dict[Hashable, _Renewer] = {}
_renewers_lock = threading.Lock()  # taken before a renewer's condition, never after
_renewer_numbers = itertools.count(1)


def _server_key(client: Any) -> Hashable:
    """Which Redis server ``client`` talks to, as far as its settings tell:
    the clients of one server share a renewal thread (a server that hangs
    holds up all of its renewals anyway). A client that names no one server (a
    Cluster, a Sentinel's master) has a thread of its own."""
    pool = getattr(client, "connection_pool", None)
    kwargs = getattr(pool, "connection_kwargs", None) or {}
    if type(pool) in (ConnectionPool, BlockingConnectionPool) and (
        kwargs.get("host") or kwargs.get("path")
    ):
        return (kwargs.get("host"), kwargs.get("port"), kwargs.get("path"))
    return id(client)


def _schedule(lease: Lease, delay: float) -> None:
    """Renew ``lease`` in ``delay`` seconds, on its server's renewal thread
    (started on first use, and again once the last one retired)."""
    key = _server_key(lease._owner.channel.client)
    with _renewers_lock:
        renewer = _renewers.get(key)
        if renewer is None or renewer.retired or not renewer.is_alive():
            renewer = _renewers[key] = _Renewer(key)
            renewer.start()
        renewer.schedule(lease, delay)


def _retire(renewer: _Renewer) -> bool:
    """End ``renewer`` unless something was scheduled on it meanwhile."""
    with _renewers_lock, renewer._changed:
        if renewer._due:
            return False
        renewer.retired = True
        if _renewers.get(renewer.key) is renewer:
            del _renewers[renewer.key]
        return True


def _forget_renewers() -> None:
    """In a forked child: no renewal thread (they were the parent's), and a
    lock that no thread of the parent may have held at the fork."""
    global _renewers_lock
    _renewers_lock = threading.Lock()
    _renewers.clear()


os.register_at_fork(after_in_child=_forget_renewers)
