"""Lock: a distributed lock with expiry, fencing and optional reentrancy."""

from __future__ import annotations

import asyncio
import threading
import uuid
import weakref
from collections.abc import Callable
from types import TracebackType
from typing import Any

from ...exceptions import HeldByCaller, NotOwned, ResourceUnavailable
from ..clients.waits import checked
from ..validators import (
    DEFAULT,
    Seconds,
    check_holder,
    check_lease_timeout,
    check_timeout,
    renamed,
)
from ..wire.protocol import Mode
from ..wire.steps import Steps
from . import records
from .lease import Lease, release_lease_steps
from .primitive import DEFAULT_KEY_PREFIX, AsyncHold, Hold, LeasedPrimitive

__all__ = ["Lock"]


class _TaskScope:
    """A lock's state in one asyncio task: the holder named by
    ``acquire(holder=...)``, the latest fence, the default holder (with the
    process generation it was made in). Every field has a default, so that
    reading one on each acquire and release raises nothing."""

    holder: str | None = None
    fence: int | None = None
    default: tuple[Any, str] = (None, "")


class _ThreadScope(threading.local, _TaskScope):
    """:class:`_TaskScope`, per thread."""


class Lock(LeasedPrimitive):
    """A lock shared through Redis, held by one holder at a time.

    Each acquisition gets a ``fence`` (strictly increasing across all holders
    ever) and a lease of ``lease_timeout`` seconds on the Redis clock (None: no
    expiry), so a crashed holder never keeps the lock. ``auto_renew=True``
    renews the lease in the background while held; if a renewal finds the lock
    gone, a warning is logged and ``on_lost(lease)`` is called. Blocked callers
    are served first come first served and are woken by the release itself.

    The holder is, by default, unique to this Lock object and the calling thread
    (or asyncio task: ``aacquire``, ``async with lock``). ``holder=`` names it
    explicitly: here (for the whole object), in ``acquire`` (after
    ``acquire(holder=h)`` the calling thread or task acts as ``h`` on this object
    until it releases), or in ``release``/``extend``/``owned``, so that another
    thread, process or asyncio task can extend or release the lock.
    With ``reentrant=True`` the same holder may acquire again; the lock is free
    only after as many releases.

    ``with lock:`` acquires (waiting up to ``timeout``, None: forever; raising
    :class:`ResourceUnavailable`, its ``retry_after`` when a turn is expected:
    :meth:`turn_estimate`) and releases on exit.

    ``max_waiting`` (None: no limit) bounds how many callers wait at once,
    counted across every process and host: one more is refused at once, as a
    timeout refuses it (``acquire`` returns False, ``with lock:`` raises
    :class:`ResourceUnavailable` with ``reason`` ``"full"``); 0: none ever
    waits. Building a lock does no I/O.
    """

    kind = "lock"

    def __init__(
        self,
        client: Any,
        name: str,
        *,
        lease_timeout: float | None = 30,
        reentrant: bool = False,
        auto_renew: bool = False,
        timeout: float | None = None,
        holder: str | None = None,
        on_lost: Callable[[Lease], None] | None = None,
        key_prefix: str = DEFAULT_KEY_PREFIX,
        max_waiting: int | None = None,
    ) -> None:
        super().__init__(
            client,
            name,
            key_prefix=key_prefix,
            mode=Mode.RLOCK if reentrant else Mode.LOCK,
            max_waiting=max_waiting,
        )
        self.lease_timeout = lease_timeout
        self.reentrant = bool(reentrant)
        self.auto_renew = bool(auto_renew)
        self.timeout = check_timeout(timeout)
        self.on_lost = on_lost
        self._fixed_holder = None if holder is None else check_holder(holder)
        # Per thread, and per asyncio task: the holder named by
        # acquire(holder=...), the latest fence, the default holder.
        self._local = _ThreadScope()
        self._tasks: weakref.WeakKeyDictionary[asyncio.Task[Any], Any] = weakref.WeakKeyDictionary()
        self._leases: dict[str, Lease] = {}  # holder -> its lease, for auto-renew
        self._mutex = threading.Lock()

    def __repr__(self) -> str:
        return (
            f"<Lock {self.name!r} lease_timeout={self.lease_timeout} "
            f"reentrant={self.reentrant} fence={self.fence}>"
        )

    @property
    def fence(self) -> int | None:
        """Fencing token of this thread's latest acquisition through this object
        (strictly increasing across all holders ever); None before the first.
        A lock with a fixed ``holder`` falls back to that holder's current lease,
        whichever thread acquired it."""
        fence = self._scope().fence
        if fence is None and self._fixed_holder is not None:
            lease = self._leases.get(self._fixed_holder)
            fence = None if lease is None else lease.fence
        return fence

    @property
    def lease(self) -> Lease | None:
        """Deprecated (``DeprecationWarning``): the :class:`Lease` of this
        thread's holder; :meth:`hold` yields it."""
        renamed("Lock.lease", "the Lease that Lock.hold() yields")
        return self._leases.get(self._holder())

    def for_holder(self, holder: str, *, lease_timeout: Seconds = DEFAULT) -> Lock:
        """A Lock on the same name with the same options, acting as ``holder``
        in every thread (e.g. one per web request). ``lease_timeout`` replaces
        this lock's own unless DEFAULT (None: no expiry). Of this lock's class.
        Does no I/O."""
        lock = type(self)(
            self.client,
            self.name,
            lease_timeout=self.lease_timeout if lease_timeout is DEFAULT else lease_timeout,
            reentrant=self.reentrant,
            auto_renew=self.auto_renew,
            timeout=self.timeout,
            holder=holder,
            on_lost=self.on_lost,
            key_prefix=self.key_prefix,
            max_waiting=self.max_waiting,
        )
        lock._channel, lock._engine = self._channel, self._engine  # same keys and mode
        lock._turns = self._turns  # (and the same estimates)
        return lock

    def _scope(self) -> Any:
        """Where this thread's state is kept: or, on an event loop, this task's."""
        if asyncio._get_running_loop() is None:  # (no loop here: nothing raised and caught)
            return self._local
        task = asyncio.current_task()
        if task is None:
            return self._local
        scope = self._tasks.get(task)
        if scope is None:
            scope = self._tasks[task] = _TaskScope()
        return scope

    def _holder(self, holder: str | None = None) -> str:
        """``holder`` checked, or the holder of this thread or task."""
        return self._scoped_holder(holder)[1]

    def _scoped_holder(self, holder: str | None) -> tuple[Any, str]:
        """(:meth:`_scope`, :meth:`_holder`) in one call: on every acquire and release."""
        # (no loop here, the common case: the thread's, without calling _scope)
        scope = self._local if asyncio._get_running_loop() is None else self._scope()
        if holder is not None:
            return scope, check_holder(holder)
        named = scope.holder
        if named or self._fixed_holder:
            return scope, named or self._fixed_holder
        # The default: unique per object and thread (or task): thread ids are
        # reused once a thread ends (and a forked child inherits its parent's),
        # so a random id is kept in the scope, tagged with the process's generation.
        generation, name = scope.default
        if generation is not records.generation:
            name = f"{records.default_holder()}:{uuid.uuid4().hex[:12]}"
            scope.default = (records.generation, name)
        return scope, name

    # -- acquiring and releasing ----------------------------------------------------

    def acquire(
        self, *, blocking: bool = True, timeout: float | None = None, holder: str | None = None
    ) -> bool:
        """Take the lock; True if granted.

        ``blocking=False`` tries once. Otherwise waits up to ``timeout`` seconds
        (None: forever), served in arrival order and woken by the release. A
        non-reentrant lock already held by the same holder is not granted again
        (``blocking=False`` returns False; waiting raises :class:`PoolError`,
        since it would wait for itself). False at once when ``max_waiting``
        callers already wait.
        """
        try:
            return self._channel.run(self._acquire(blocking, timeout, holder, sync=True))
        except ResourceUnavailable:  # (refused for max_waiting)
            return False

    async def aacquire(
        self, *, blocking: bool = True, timeout: float | None = None, holder: str | None = None
    ) -> bool:
        """:meth:`acquire` on the event loop, as this task's holder, in the same
        queue as blocking callers. Cancelled while waiting, it leaves the queue
        (giving back a grant that raced the cancellation) before
        ``CancelledError`` propagates."""
        try:
            return await self._channel.arun(self._acquire(blocking, timeout, holder))
        except ResourceUnavailable:  # (refused for max_waiting)
            return False

    def hold(self, *, timeout: Seconds = DEFAULT, holder: str | None = None) -> Hold:
        """Context manager: take the lock for the ``with`` block (a
        :class:`Hold`, yielding this holder's :class:`Lease`), released on exit.

        Waits up to ``timeout`` seconds (DEFAULT: the lock's ``timeout``; None:
        forever; 0: do not wait). Raises :class:`ResourceUnavailable` when not
        granted in time, or at once when ``max_waiting`` callers already wait
        (its ``reason`` says which; its ``retry_after`` when a turn is
        expected: :meth:`turn_estimate`). ``holder`` as for :meth:`acquire`.
        (``with lock:`` is the same hold, yielding the Lock.)"""
        wait = self.timeout if timeout is DEFAULT else timeout
        return Hold(
            self,
            lambda: self._take(wait, holder),
            self._unavailable(wait),
            release=lambda lease: self.release(holder=holder),
        )

    def ahold(self, *, timeout: Seconds = DEFAULT, holder: str | None = None) -> AsyncHold:
        """:meth:`hold` as an async context manager (``async with``), as this
        task's holder."""
        wait = self.timeout if timeout is DEFAULT else timeout

        async def release(lease: Lease) -> None:
            await self.arelease(holder=holder)

        return AsyncHold(
            self, lambda: self._atake(wait, holder), self._unavailable(wait), release=release
        )

    def _take(self, timeout: float | None, holder: str | None) -> Lease | None:
        """:meth:`acquire` (blocking), answering the holder's :class:`Lease` (None:
        not granted in time) and raising :class:`ResourceUnavailable` when
        refused for ``max_waiting``: what :meth:`hold` enters."""
        if not self._channel.run(self._acquire(True, timeout, holder, sync=True)):
            return None
        return self._leases.get(self._holder(holder))

    async def _atake(self, timeout: float | None, holder: str | None) -> Lease | None:
        """:meth:`_take` on the event loop."""
        if not await self._channel.arun(self._acquire(True, timeout, holder)):
            return None
        return self._leases.get(self._holder(holder))

    def _unavailable(self, timeout: float | None) -> str:
        return f"lock {self.name!r} was not acquired within {timeout} s"

    def _acquire(
        self, blocking: bool, timeout: float | None, holder: str | None, *, sync: bool = False
    ) -> Steps[bool]:
        """``sync``: driven on the blocking client (else on an event loop)."""
        if not blocking and timeout is not None:
            raise ValueError(
                f"timeout={timeout!r} cannot be combined with blocking=False; pass one or the other"
            )
        wait = 0 if not blocking else None if timeout is None else checked(timeout)
        scope, name = self._scoped_holder(holder)
        lease_ms = self._lease_ms
        bounded = not sync or self._channel.sync_bounded
        try:
            lease = yield from self._engine.acquire_steps(
                wait, lease_ms, name, 0, self.max_waiting, bounded=bounded
            )
        except HeldByCaller as exc:
            if name in self._leases:
                raise  # (it holds the lock and asks again: a mistake of the caller's)
            raise ResourceUnavailable(
                f"{self._channel.label} is held by {name!r}, but not through this Lock object: "
                "another process or Lock object holds it under the same holder name, or "
                "a release of it was lost (written to a master just before a failover); "
                "waiting would wait for itself. It ends when released or when its lease "
                "expires"
            ) from exc
        if lease is None:
            return False
        if holder is not None:
            scope.holder = name
        with self._mutex:
            known = self._leases.get(name)
            if known is not None and known.token == lease.token and not known.ended:
                known.expires_at = lease.expires_at  # reentrant: the same hold
            else:
                if known is not None:
                    known.stop_auto_renew()
                self._leases[name] = lease
                if self.auto_renew:
                    lease.start_auto_renew(on_lost=self.on_lost)
        scope.fence = lease.fence
        return True

    def release(self, *, holder: str | None = None) -> None:
        """Release the lock (a reentrant one: once). Raises :class:`NotOwned` if
        the holder does not hold it, e.g. because its lease expired."""
        self._channel.run(self._release(holder, sync=True))

    async def arelease(self, *, holder: str | None = None) -> None:
        """:meth:`release` on the event loop."""
        await self._channel.arun(self._release(holder))

    def _release(self, holder: str | None, *, sync: bool = False) -> Steps[None]:
        """``sync``: driven on the blocking client (else on an event loop)."""
        scope, name = self._scoped_holder(holder)
        known = self._leases.get(name)
        try:
            if known is not None and not known.ended:
                # (None: Redis did not answer in time; it goes on in the background)
                bounded = not sync or self._channel.sync_bounded
                result = yield from release_lease_steps(known, settles=True, bounded=bounded)
            else:
                result = yield from self._engine.release_steps(name, "")
        except BaseException:
            # Not known to be released (e.g. Redis refused it): stop renewing,
            # so that the lease expires rather than being kept alive forever.
            if known is not None:
                self._forget(name, known)
            raise
        if result is None:
            result = 1
        if result == 2:  # a reentrant hold with acquisitions left
            return
        # Forget the hold released (settled: its renewal stopped, ``released``
        # set, lost if it was gone), not one its holder took again meanwhile
        # (another thread acting as the same holder)
        if known is not None:
            with self._mutex:
                if self._leases.get(name) is known:
                    del self._leases[name]
        if scope.holder == name:
            scope.holder = None
        if result == 0:
            raise NotOwned(
                f"lock {self.name!r} is not held by {name!r} (never acquired, already "
                "released, or its lease expired and another holder may have it)"
            )

    def _forget(self, name: str, lease: Lease) -> None:
        """Stop renewing ``lease``, and drop it from this object if it is still
        the one of holder ``name`` (not one that holder took again since)."""
        with self._mutex:
            if self._leases.get(name) is lease:
                del self._leases[name]
        lease.stop_auto_renew()

    def extend(self, lease_timeout: Seconds = DEFAULT, *, holder: str | None = None) -> bool:
        """Restart the lease: ``lease_timeout`` seconds from now (DEFAULT: the
        lock's ``lease_timeout``; None: no expiry). True when extended; raises
        :class:`NotOwned` if the holder does not hold the lock (e.g. its lease
        expired)."""
        return self._channel.run(self._extend(lease_timeout, holder))

    async def aextend(self, lease_timeout: Seconds = DEFAULT, *, holder: str | None = None) -> bool:
        """:meth:`extend` on the event loop."""
        return await self._channel.arun(self._extend(lease_timeout, holder))

    def _extend(self, lease_timeout: Seconds, holder: str | None) -> Steps[bool]:
        if lease_timeout is DEFAULT:
            lease_timeout = self.lease_timeout
        lease_timeout = check_lease_timeout(lease_timeout)
        name = self._holder(holder)
        # None is the lock's own: no expiry, whatever an earlier extend set
        expires = yield from self._engine.renew_resource_steps(name, "", lease_timeout, keep=False)
        if expires is False:
            raise NotOwned(
                f"lock {self.name!r} is not held by {name!r}, so it cannot be extended "
                "(never acquired, released, or its lease expired)"
            )
        lease = self._leases.get(name)
        if lease is not None:
            lease.expires_at = expires
            lease.lease_timeout = lease_timeout
        return True

    # -- inspection -----------------------------------------------------------------

    def locked(self) -> bool:
        """True if anyone holds the lock now."""
        return self._counts()[1] > 0

    def owned(self, *, holder: str | None = None) -> bool:
        """True if this holder holds the lock now."""
        return self.lease_of(self._holder(holder)) is not None

    def holder(self) -> str | None:
        """Who holds the lock now (None: nobody)."""
        leases = self._live_leases()
        return leases[0].holder if leases else None

    def holders(self) -> list[Lease]:
        """The live hold as a one-element list (empty when the lock is free)."""
        return self._live_leases()

    # -- context manager ------------------------------------------------------------

    # (The four below drive the steps themselves: one call less per hold than
    # through hold(), a coroutine less on the event loop.)

    def __enter__(self) -> Lock:
        try:
            granted = self._channel.run(self._acquire(True, self.timeout, None, sync=True))
        except ResourceUnavailable as exc:  # refused at once (max_waiting), or held as ours
            exc.retry_after = self.turn_estimate()
            raise
        if not granted:
            raise ResourceUnavailable(
                f"lock {self.name!r} was not acquired within {self.timeout} s "
                f"(held by {self.holder()!r})",
                retry_after=self.turn_estimate(),
            )
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._channel.run(self._release(None, sync=True))

    async def __aenter__(self) -> Lock:
        try:
            granted = await self._channel.arun(self._acquire(True, self.timeout, None))
        except ResourceUnavailable as exc:
            exc.retry_after = await self.aturn_estimate()
            raise
        if not granted:
            raise ResourceUnavailable(
                f"lock {self.name!r} was not acquired within {self.timeout} s",
                retry_after=await self.aturn_estimate(),
            )
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._channel.arun(self._release(None))
