"""The lease engine: atomic grants, renewals and fair hand-off, in Lua.

One :class:`LeaseEngine` runs the lease protocol of one leased primitive (a
pool, a semaphore, a lock, an allocator) over that primitive's
:class:`.channel.Channel`. Every state change is one Lua operation
(``leased/<op>.lua`` on the helpers of ``wire/engine.lua`` and
``leased/engine_lease.lua``), run as a Redis 7 function or by EVALSHA (see
:mod:`..wire.scripts`). Time is the Redis server's ``TIME``.

Blocking acquires queue in Redis, ordered by priority then arrival. A release
hands the resource straight to the head waiter and pushes the grant onto that
waiter's own wake list, on which the waiter blocks with BLPOP: no polling. A
blocked waiter also wakes when the earliest lease is due to expire (to reclaim
it) and at least every ``wait_chunk`` seconds to prove it is alive; a waiter
that stops checking in is skipped by the next hand-off. An acquire may bound
the queue (``max_waiting``): past it, the script queues nobody and the caller
is refused at once.

Each operation is written once, as a generator of the Redis calls it makes
(:mod:`..wire.runner`): :meth:`LeaseEngine.acquire` runs it blocking on the
primitive's redis-py client, :meth:`LeaseEngine.aacquire` awaits it on the
``redis.asyncio`` twin of that client (:mod:`..clients.async_clients`), so blocking and
async callers share one queue and one code.

Every operation is safe to run twice (redis-py retries commands on connection
errors): an acquire carries a request token, so running it again returns the
same lease or queue place, never a second lease or a second fence; a release
carries a request id, so running it again answers the same and ends nothing else.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any, TypeVar

from ...exceptions import (
    BackendUnavailable,
    HeldByCaller,
    NotConfigured,
    ResourceUnavailable,
    backend_errors,
)
from .. import counts
from ..clients.waits import FOREVER, Wait
from ..text import text
from ..wire import packing
from ..wire.channel import MIN_BLOCK, Channel
from ..wire.keys import new_token, to_ms
from ..wire.protocol import Reply, Restore
from ..wire.steps import Call, Op, Steps, new_op
from . import records, releases
from .lease import Lease, release_lease_steps, renew_steps
from .records import Waiter

__all__ = ["LeaseEngine"]

logger = logging.getLogger("django_redis_pool")

T = TypeVar("T")


class LeaseEngine:
    """Runs the lease protocol of one leased primitive over its ``channel``.

    The channel's ``mode`` says what is leased: for a pool, the order in
    which named resources are picked (``fifo``, ``lifo`` or ``random``); else
    slots whose lease is named after the holder: ``sem`` (as many as the stored
    max size), ``lock`` (one) or ``rlock`` (one, reentrant).

    What an acquire restores when Redis lost the primitive's keys (a restart
    without persistence, an eviction, a ``FLUSHDB``), at most one of:
    ``default_max``, a semaphore's max size, stored by an acquire that finds
    none; ``heal``, a pool's operation that restores its members, run when an
    acquire finds it holding no resource at all (then the acquire asks again).

    It is the owner of the leases it grants (:class:`.lease.LeaseOwner`): they
    renew and release themselves through it.
    """

    def __init__(
        self,
        channel: Channel,
        *,
        default_max: int | None = None,
        heal: Callable[[], Steps[object]] | None = None,
    ) -> None:
        if default_max is not None and heal is not None:
            raise ValueError("an engine restores a max size or heals, not both")
        self.channel = channel
        self.label = channel.label
        self.mode = channel.mode
        self._heal = heal
        #: The acquire operation's ``restore`` argument (``acquire.lua``): the
        #: max size ``default_max`` as text, ``Restore.HEAL`` for ``heal``.
        self.restore = Restore.NOTHING if default_max is None else str(default_max)
        if heal is not None:
            self.restore = Restore.HEAL

    # -- acquiring -------------------------------------------------------------

    def acquire(
        self,
        *,
        timeout: float | Wait | None,
        lease_ms: int,
        holder: str,
        priority: int,
        max_waiting: int | None = None,
        permits: int = 1,
    ) -> Lease | None:
        """Grant a lease now, or wait up to ``timeout`` seconds (None: forever;
        0: do not wait; or a :class:`.Wait` made by the caller, whose deadline
        counts from when it was made) for one, fairly. Returns None if nothing
        was granted.
        ``permits``: a semaphore's permits it takes (any other mode takes 1).

        With ``max_waiting`` (None: no limit), a caller that would wait while
        that many callers are queued already (counted by Redis, across every
        process and host, in the step that would queue it) is refused at once:
        None here, :class:`ResourceUnavailable` (``reason`` ``FULL``) from
        :meth:`acquire_steps`.

        A grant that reaches us more than ``LATE_GRANT`` seconds after the
        timeout (a slow or paused Redis, this process stopped) is given back at
        once and None is returned: a caller never holds past its wait. Only
        waiting counts (:class:`.Stopwatch`): time this thread spent
        running or waiting for a CPU is not lateness.
        On connections that keep deadlines (:mod:`.deadlines`; the Django
        registry's, and every asyncio call), a Redis that stops answering fails
        the call within ``timeout + DEADLINE_SLACK`` seconds (BackendUnavailable)."""
        try:
            steps = self.acquire_steps(
                timeout,
                lease_ms,
                holder,
                priority,
                max_waiting,
                permits,
                bounded=self.channel.sync_bounded,
            )
            return self.channel.run(steps)
        except ResourceUnavailable:  # (refused for max_waiting)
            return None

    async def aacquire(
        self,
        *,
        timeout: float | Wait | None,
        lease_ms: int,
        holder: str,
        priority: int,
        max_waiting: int | None = None,
        permits: int = 1,
    ) -> Lease | None:
        """:meth:`acquire` on the event loop. Cancelled while waiting, it gives
        up its place (and a grant that raced the cancellation) before the
        ``CancelledError`` propagates."""
        steps = self.acquire_steps(timeout, lease_ms, holder, priority, max_waiting, permits)
        try:
            return await self.channel.arun(steps)
        except ResourceUnavailable:  # (refused for max_waiting)
            return None

    def acquire_steps(
        self,
        timeout: float | Wait | None,
        lease_ms: int,
        holder: str,
        priority: int,
        max_waiting: int | None = None,
        permits: int = 1,
        *,
        bounded: bool = True,
    ) -> Steps[Lease | None]:
        """The operation behind :meth:`acquire` and :meth:`aacquire`: None when
        nothing was granted in time; raises :class:`ResourceUnavailable`
        (``reason`` ``FULL``) when refused at once for ``max_waiting``.
        ``bounded``: arm the wait's deadline (:meth:`.Wait.bound`: ``timeout +
        DEADLINE_SLACK``), unless ``timeout`` is a Wait its caller armed --
        :attr:`sync_bounded` for the blocking client; always on an event loop.

        One generator for the common case (granted or refused by the first
        call); only a caller that queues goes on in :meth:`_wait`."""
        args = (lease_ms, priority, -1 if max_waiting is None else max_waiting, permits, holder)
        token = new_token()
        # (a number here is checked already: the primitive's verb checks it)
        if timeout is None or timeout is FOREVER:  # (nothing reads the thread's busy time)
            wait, started = FOREVER, time.monotonic()
        else:
            wait = timeout if type(timeout) is Wait else Wait(timeout)
            started = wait.started
        seconds = wait.seconds
        chunk, chunk_ms = self.channel.chunk or self.channel.read_chunk()
        lease = refusal = None
        # The wait's one deadline (:meth:`.Wait.bound`), armed by whoever made
        # the wait: here for a number, by the caller for a Wait handed down
        # (the request guard). Entered and left by hand, not by ``with``, so
        # that an unbounded wait makes no calls.
        bound = None
        if bounded and seconds is not None and wait is not timeout:
            bound = wait.bound()
            bound.__enter__()  # type: ignore[union-attr]
        try:
            try:
                channel = self.channel
                packed = packing.acquire(
                    channel.packed_mode,
                    token,
                    lease_ms,
                    priority,
                    wait,
                    args[2],
                    chunk_ms,
                    self.restore,
                    permits,
                    holder,
                )
                reply = yield new_op(Op, ("acquire", (channel.key, packed), channel.streaks))
                if reply == Reply.EMPTY and self._heal is not None:
                    reply = yield from self._healed(token, args, wait, chunk_ms)
                if type(reply) is int:
                    lease = yield from self._wait(token, args, wait, chunk, reply)
                elif "\n" in reply:  # (a grant: :meth:`_lease`'s, written out)
                    lease, provisional = records.lease_of(self, *reply.split("\n", 1), started)
                    if provisional and not (yield from renew_steps(lease)):
                        lease = None
                else:
                    refusal = reply  # (nothing of ours is queued or granted)
            except (BackendUnavailable, ResourceUnavailable, GeneratorExit):
                # Redis is unreachable: a queue place is dropped by the next
                # hand-off once our liveness window has passed; a grant
                # expires with its lease. (Refused for max_waiting: nothing
                # of ours is queued or granted.)
                raise
            except BaseException:
                # Interrupted or cancelled (even between the operation's run
                # and its reply): give up our place, and anything granted or
                # handed to us meanwhile.
                with contextlib.suppress(Exception):
                    yield self._op("withdraw", packing.withdraw(self.channel.packed_mode, token))
                raise
            if refusal is not None:
                self._refused(refusal, args, seconds != 0)
            if bound is not None:
                bound.__exit__()
                bound = None
            took = time.monotonic() - started
            if lease is not None and seconds is not None and took - seconds > LATE_GRANT:
                lease = yield from self._unless_late(lease, wait, bounded)
        except ResourceUnavailable:
            self.channel.counts.add(counts.REFUSED_FULL)
            raise
        finally:
            if bound is not None:
                bound.__exit__()
        if lease is None:
            self.channel.counts.add(counts.REFUSED_TIMEOUT)
        else:
            self.channel.counts.granted(took)
        return lease

    def _unless_late(self, lease: Lease, wait: Wait, bounded: bool) -> Steps[Lease | None]:
        """``lease``, or None having given it back if it came more than
        ``LATE_GRANT`` seconds after the ``timeout`` of waiting on Redis.
        (The time this thread spent running or waiting for a CPU is not
        Redis's lateness: a busy loop or a starved process delays a grant that
        Redis gave in time.) The give-back is a lease's release: one that
        Redis does not answer in time goes on in the background."""
        late = wait.waited() - wait.seconds  # type: ignore[operator]
        if late <= LATE_GRANT:
            return lease
        logger.warning(
            "%s: a grant came %.2f s after the %s s wait ended, waiting on Redis "
            "(slow or paused?); given back",
            self.label,
            late,
            wait.seconds,
        )
        with contextlib.suppress(Exception):  # (not a hold: not counted as one)
            yield from release_lease_steps(lease, bounded=bounded, counted=False)
        return None

    def _wait(
        self,
        token: str,
        args: AcquireArgs,
        wait: Wait,
        chunk: float,
        next_expiry_ms: int,
    ) -> Steps[Lease | None]:
        channel = self.channel
        wake_key = channel.wake_prefix + token
        alive_ms = to_ms(chunk)
        until = wait.until
        while True:
            block = chunk
            if until is not None:
                remaining = until - time.monotonic()
                if remaining <= 0:
                    yield self._op("withdraw", packing.withdraw(channel.packed_mode, token))
                    return None
                block = min(block, remaining)
            if next_expiry_ms >= 0:
                block = min(block, next_expiry_ms / 1000 + 0.001)
            sent = time.monotonic()
            with backend_errors():
                # Never below MIN_BLOCK: Redis < 7.0.8 reads a timeout under
                # about 1 ms as 0, which means "block forever".
                popped = yield Call(
                    "blpop", ([wake_key],), {"timeout": max(block, MIN_BLOCK)}, waits=True
                )
            reply: Any
            if popped:
                reply = text(popped[1])  # (the grant, as the operations answer it)
            else:
                reply = yield self._op("wait", packing.wait(channel.packed_mode, token, alive_ms))
            if type(reply) is str and "\n" in reply:
                lease = yield from self._lease(reply, sent)
                if lease is not None:
                    return lease
                reply = Reply.GONE
            if reply == Reply.GONE:
                # Our place was dropped: our deadline passed on the Redis clock
                # (a blocking read can return up to one server tick, 1/hz s,
                # late), we were presumed dead after a long pause, or a
                # provisional grant lapsed. Queue again only if time is left.
                if wait.passed():
                    return None
                sent = time.monotonic()
                reply = yield self._request(token, args, wait, alive_ms)
                if reply == Reply.EMPTY and self._heal is not None:
                    reply = yield from self._healed(token, args, wait, alive_ms)
                if type(reply) is str and "\n" in reply:
                    lease = yield from self._lease(reply, sent)
                    if lease is not None:
                        return lease
                    continue
                if type(reply) is not int:
                    self._refused(reply, args, True)
                    return None
            next_expiry_ms = reply

    def _request(
        self, token: str, args: AcquireArgs, wait: Wait, alive_ms: int, restore: bool = True
    ) -> Op:
        """The acquire operation for ``token`` (``args``: see :data:`AcquireArgs`)
        waiting for ``wait``; ``restore``: whether it restores lost keys (see
        ``LeaseEngine``)."""
        lease_ms, priority, max_waiting, permits, holder = args
        restores = self.restore if restore else Restore.NOTHING
        channel = self.channel
        packed = packing.acquire(
            channel.packed_mode,
            token,
            lease_ms,
            priority,
            wait,
            max_waiting,
            alive_ms,
            restores,
            permits,
            holder,
        )
        return new_op(Op, ("acquire", (channel.key, packed), channel.streaks))

    def _op(self, op: str, packed: bytes) -> Op:
        """Operation ``op`` with its ``packed`` argument (:mod:`..wire.packing`)."""
        channel = self.channel
        return new_op(Op, (op, (channel.key, packed), channel.streaks))

    def _healed(self, token: str, args: AcquireArgs, wait: Wait, alive_ms: int) -> Steps[Any]:
        """After the acquire found the pool holding nothing (Redis lost its
        keys; nothing was changed): restore its members, and ask again."""
        assert self._heal is not None
        yield from self._heal()
        return (yield self._request(token, args, wait, alive_ms, False))

    def _refused(self, reply: str, args: AcquireArgs, wait: bool) -> None:
        """Raise for the acquire replies that mean it cannot be served: a
        semaphore with no max size, a non-reentrant lock already held by its
        holder (just "not granted" when the caller does not ``wait``), a
        caller refused for ``max_waiting`` (ResourceUnavailable)."""
        holder = args[4]
        if reply == Reply.FULL:
            waiting = f"{args[2]} callers already wait" if args[2] else "no caller may wait"
            raise ResourceUnavailable(
                f"{self.label}: max_waiting={args[2]} reached ({waiting}), so this caller "
                "was refused at once",
                reason=ResourceUnavailable.FULL,
            )
        if reply == Reply.UNCONFIGURED:
            raise NotConfigured(
                f"{self.label} has no max size; call set_max_size(n) first "
                "(or set MAX_SIZE in its settings)"
            )
        if reply == Reply.HELD and wait:
            releases.raise_if_in_flight(self.channel, holder)
            raise HeldByCaller(
                f"{self.label} is already held by {holder!r} and is not reentrant: waiting "
                "for it would wait for ourselves. Release it first, or use reentrant=True."
            )

    def _lease(self, grant: str, sent: float) -> Steps[Lease | None]:
        """Lease granted to us (``grant``: "resource\nrecord", as the
        operations answer it and a hand-off pushes it) by the call sent at
        ``sent`` (monotonic); a provisional (unconfirmed) grant to a waiter is
        confirmed first. None if the grant was lost before it could be."""
        lease, provisional = records.lease_of(self, *grant.split("\n", 1), sent)
        if provisional and not (yield from renew_steps(lease)):
            return None
        return lease

    # -- holding ----------------------------------------------------------------

    def renew_resource_steps(
        self, resource: str, token: str, lease_timeout: float | None, *, keep: bool = True
    ) -> Steps[float | bool | None]:
        """Extend the lease on ``resource`` held by ``token`` ('' = whoever holds
        it); None keeps its duration (with ``keep=False``: no expiry). Returns
        the new expiry (unix seconds, None for none), or False if there is no
        such live lease."""
        lease_ms = -2 if lease_timeout is None and keep else to_ms(lease_timeout)
        packed = packing.renew(self.channel.packed_mode, token, lease_ms, resource)
        expires = int((yield self._op("renew", packed)))
        if expires == -2:
            return False
        return None if expires == -1 else expires / 1000

    def release_steps(
        self,
        resource: str,
        token: str = "",
        request: str | None = None,
        *,
        fence: int | None = None,
        force: bool = False,
    ) -> Steps[int]:
        """End the lease on ``resource`` held by ``token`` ('' = whoever holds it).

        Returns 1 if a live lease was ended, 2 if a reentrant lock's count went
        down but it is still held, 0 if there was no such live lease. ``request``
        identifies the call, so that a retried run answers the same. With a
        ``fence``, only a lease with that fence is ended; ``force`` (an
        operator's force-release) ends a reentrant lock's hold entirely.
        """
        request = request or new_token()
        fence_arg = "" if fence is None else fence
        # (not :meth:`_op`, nor :func:`..wire.packing.release`: on every release)
        channel = self.channel
        head = channel.packed_mode
        fields = (head, token, request, fence_arg, int(force), resource)
        packed = (packing.RELEASE % fields).encode()
        return int((yield new_op(Op, ("release", (channel.key, packed), channel.streaks))))

    def release(self, resource: str, token: str = "", *args: Any, **kwargs: Any) -> int:
        """:meth:`release_steps`, blocking."""
        return self.channel.run(self.release_steps(resource, token, *args, **kwargs))

    def gc(self, batch: int = 1000) -> tuple[list[Lease], list[Waiter]]:
        """Reclaim every expired lease and drop dead waiters; returns the
        reclaimed leases and the dropped waiters."""
        leases: list[Lease] = []
        waiters: list[Waiter] = []
        offset = 0
        while True:
            reclaimed, dropped, next_offset = self.channel.run(self.channel.op("gc", batch, offset))
            self.channel.counts.add(counts.RECLAIMED, len(reclaimed) // 2)
            leases += records.ended_leases(self, reclaimed)
            waiters += records.waiters(dropped)
            if len(reclaimed) < 2 * batch and int(next_offset) == -1:
                return leases, waiters
            offset = max(int(next_offset), 0)

    def expired(self) -> tuple[list[Lease], list[Waiter]]:
        """What :meth:`gc` would reclaim and drop now, changing nothing."""
        leases, waiters = self.channel.run(self.channel.op("read", "expired", ""))
        return records.ended_leases(self, leases), records.waiters(waiters)


#: What an acquire asks for: (lease ms, priority, max waiting (-1: none), permits, holder).
AcquireArgs = tuple[int, int, int, int, str]


#: How late after its timeout an acquire may still take a grant, in seconds;
#: a later one is given back (see ``LeaseEngine.acquire``).
LATE_GRANT = 0.25
