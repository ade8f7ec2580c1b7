"""ObjectPool: a pool of live objects in one process (node-pool's design),
optionally capped across every process by a Semaphore, and fork-safe."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import os
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from ...exceptions import NotOwned, PoolError, ResourceUnavailable
from ..leased.lease import Lease
from ..validators import (
    DEFAULT,
    Seconds,
    check_count,
    check_lease_timeout,
    check_max_waiting,
    check_priority,
    check_timeout,
    renamed,
)
from ..wire.runner import CancelWatch
from .global_limit import GlobalLimit, Limit
from .waiters import Waiter, WaitLine

__all__ = ["ObjectPool"]

logger = logging.getLogger("django_redis_pool")

T = TypeVar("T")

#: Backoff between failed factory calls: doubled from the first, up to the cap.
FIRST_BACKOFF = 0.05
MAX_BACKOFF = 2.0
#: Consecutive factory failures after which the waiters are refused (with the
#: last error as the cause) instead of waiting for more retries.
MAX_FAILURES = 4


@dataclass(eq=False)
class _Item(Generic[T]):
    obj: T
    idle_since: float = 0.0
    slot: Lease | None = None  #: the global_limit slot this object holds


class ObjectPool(Generic[T]):
    """A pool of live objects (clients, connections, browsers) made by
    ``factory()`` and closed by ``destroy(obj)``, for the threads of one process.

    ``min`` objects are kept alive, at most ``max`` exist at once. A caller
    waits (``acquire_timeout``, None: forever) when all are on loan; waiters
    are served by ``priority`` (larger first), then in arrival order.
    ``fifo=True`` lends the idle object idle the longest. ``validate(obj)``
    (raising counts as False) is run on borrow and/or return when
    ``test_on_borrow``/``test_on_return``. Every ``eviction_interval`` seconds
    (0: never) up to ``num_tests_per_eviction_run`` idle objects are checked:
    idle ``idle_timeout`` seconds they are destroyed while ``size`` stays >=
    ``min``; idle ``soft_idle_timeout`` seconds, while at least ``min`` stay
    idle. ``global_limit`` (a :class:`Semaphore`, a function returning one, or
    the name of one configured in Django: see :mod:`.global_limit`) caps the
    live objects of every process together: each one holds a slot, a lease of
    ``global_lease_timeout`` seconds renewed in the background. Borrowing an
    idle object never talks to Redis. A pool used in a forked child starts
    empty there.
    """

    kind = "object_pool"

    def __init__(
        self,
        factory: Callable[[], T],
        *,
        destroy: Callable[[T], Any] | None = None,
        validate: Callable[[T], Any] | None = None,
        min: int = 0,
        max: int = 10,
        max_waiting: int | None = None,
        acquire_timeout: float | None = None,
        fifo: bool = True,
        test_on_borrow: bool = False,
        test_on_return: bool = False,
        idle_timeout: float | None = None,
        soft_idle_timeout: float | None = None,
        eviction_interval: float = 0,
        num_tests_per_eviction_run: int = 3,
        global_limit: Limit | None = None,
        global_lease_timeout: float = 30,
        autostart: bool = True,
        name: str = "objects",
    ) -> None:
        for fn, what in ((factory, "factory"), (destroy, "destroy"), (validate, "validate")):
            if fn is not None and not callable(fn):
                raise TypeError(f"{what} must be a callable, got {fn!r}")
        self.factory = factory
        self.destroy_fn = destroy
        self.validate_fn = validate
        self._min = check_count(min, "min")
        self._max = check_count(max, "max", minimum=1)
        if self._min > self._max:
            raise ValueError(f"min ({min}) must not exceed max ({max})")
        self.max_waiting = check_max_waiting(max_waiting)
        self.acquire_timeout = check_timeout(acquire_timeout, "acquire_timeout")
        self.fifo = bool(fifo)
        self.test_on_borrow = bool(test_on_borrow)
        self.test_on_return = bool(test_on_return)
        self.idle_timeout = check_timeout(idle_timeout, "idle_timeout")
        self.soft_idle_timeout = check_timeout(soft_idle_timeout, "soft_idle_timeout")
        self.eviction_interval = check_timeout(eviction_interval, "eviction_interval") or 0
        self.num_tests_per_eviction_run = check_count(
            num_tests_per_eviction_run, "num_tests_per_eviction_run", minimum=1
        )
        self.global_lease_timeout = check_lease_timeout(
            global_lease_timeout, "global_lease_timeout"
        )
        #: The cap across processes (None: not capped).
        self._global = (
            None if global_limit is None else GlobalLimit(global_limit, self.global_lease_timeout)
        )
        self.name = name
        self._reset()
        if autostart:
            self.start()

    # -- state (per process) ------------------------------------------------------

    def _reset(self) -> None:
        """Fresh, empty state for this process (also after a fork)."""
        self._pid = os.getpid()
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._idle: collections.deque[_Item[T]] = collections.deque()
        self._loaned: dict[int, _Item[T]] = {}
        self._creating = 0
        self._line = WaitLine()
        self._draining = False
        self._started = False
        self._failures = 0
        self._last_error: BaseException | None = None
        self._retry_at = 0.0
        self._evictor: threading.Thread | None = None

    def _own(self) -> None:
        """Start empty in a forked child: the parent's objects, slots and
        threads belong to the parent (redis-py's pid check)."""
        if os.getpid() != self._pid:
            started = self._started
            self._reset()
            if started:
                self.start()

    # -- read-only counters -------------------------------------------------------

    @property
    def size(self) -> int:
        """Idle + borrowed + being created."""
        self._own()
        return len(self._idle) + len(self._loaned) + self._creating

    @property
    def available(self) -> int:
        """Idle objects."""
        self._own()
        return len(self._idle)

    @property
    def borrowed(self) -> int:
        """Objects on loan."""
        self._own()
        return len(self._loaned)

    @property
    def pending(self) -> int:
        """Callers waiting."""
        self._own()
        return self._line.pending

    @property
    def spare_capacity(self) -> int:
        """How many more objects may be created."""
        return self._max - self.size

    @property
    def max(self) -> int:
        return self._max

    @property
    def min(self) -> int:
        return self._min

    @property
    def capped(self) -> bool:
        """Whether a ``global_limit`` caps this pool across processes (each
        object then holds one of its slots)."""
        return self._global is not None

    def __repr__(self) -> str:
        return (
            f"<ObjectPool {self.name!r} size={self.size} borrowed={self.borrowed} "
            f"min={self._min} max={self._max}>"
        )

    # -- lifecycle ----------------------------------------------------------------

    def start(self) -> None:
        """Create ``min`` objects in the background, and start the evictor."""
        self._own()
        with self._cond:
            self._started = True
            self._dispense()
        if self.eviction_interval and self._evictor is None:
            self._evictor = threading.Thread(
                target=self._evict_loop, name=f"drp-evict-{self.name}", daemon=True
            )
            self._evictor.start()

    def drain(self, timeout: float | None = None) -> bool:
        """Take no new acquires; serve the waiters queued before; return once
        every borrowed object is back (False if ``timeout`` passed first)."""
        self._own()
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            self._draining = True
            while self._loaned or self._line.pending:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._cond.wait(left)
        return True

    def clear(self) -> None:
        """Destroy every idle object (a destroyed object is never handed out)."""
        self._own()
        with self._cond:
            doomed = list(self._idle)
            self._idle.clear()
        for item in doomed:
            self._close(item)
        with self._cond:
            self._dispense()

    # -- borrowing ------------------------------------------------------------------

    def acquire(self, *, priority: int = 0, timeout: Seconds = DEFAULT) -> T:
        """An object on loan: idle, or newly created. Waits up to ``timeout``
        seconds (DEFAULT: ``acquire_timeout``; None: forever). Raises
        :class:`ResourceUnavailable` on timeout, when ``max_waiting`` callers
        already wait (at once), while draining, and when the factory keeps
        failing (its last error as ``__cause__``)."""
        if self._pid != os.getpid():
            self._own()
        priority = check_priority(priority) if priority else 0
        timeout = self.acquire_timeout if timeout is DEFAULT else check_timeout(timeout)
        while True:
            got = self._queue(priority)
            if isinstance(got, Waiter):
                left = None if timeout is None else max(0.0, got.since + timeout - time.monotonic())
                got = got.outcome() if got.ready.wait(left) else self._give_up(got, timeout)
            if not self.test_on_borrow or self._valid(got.obj):
                return got.obj
            self._take_back(got, destroy=True)

    async def aacquire(self, *, priority: int = 0, timeout: Seconds = DEFAULT) -> T:
        """:meth:`acquire` on the event loop: an idle object at once, else a wait
        that holds no thread (objects are still made by creation threads).
        Cancelled while waiting, it gives up its place (and an object lent to
        it just then goes back to the pool)."""
        if self._pid != os.getpid():
            self._own()
        priority = check_priority(priority) if priority else 0
        timeout = self.acquire_timeout if timeout is DEFAULT else check_timeout(timeout)
        loop = asyncio.get_running_loop()
        watch = CancelWatch()
        while True:
            served: asyncio.Future[None] = loop.create_future()
            got = self._queue(priority, lambda f=served: loop.call_soon_threadsafe(_done, f))
            if isinstance(got, Waiter):
                try:
                    await asyncio.wait_for(asyncio.shield(served), timeout)
                    watch.check()  # (wait_for may return as the cancellation lands)
                except (TimeoutError, asyncio.TimeoutError):
                    got = self._give_up(got, timeout)
                except asyncio.CancelledError:
                    with contextlib.suppress(ResourceUnavailable):
                        item = self._give_up(got, timeout)
                        self._take_back(item, destroy=False)
                    raise
                else:
                    got = got.outcome()
            if not self.test_on_borrow or self._valid(got.obj):
                return got.obj
            self._take_back(got, destroy=True)

    def _queue(self, priority: int, on_ready: Callable[[], object] | None = None) -> Any:
        """An idle object now (an :class:`_Item`), or a place among the waiters
        (a :class:`.waiters.Waiter`, served by :meth:`_dispense`)."""
        if not self.test_on_borrow:
            with self._lock:  # the common case: an idle object, nobody waiting, no Redis
                if self._idle and not self._line.pending and not self._draining:
                    return self._lend(self._idle.popleft() if self.fifo else self._idle.pop())
        with self._cond:
            if self._draining:
                raise ResourceUnavailable(f"{self!r} is draining")
            if self._idle and not self._line.pending:
                return self._lend(self._idle.popleft() if self.fifo else self._idle.pop())
            if self.max_waiting is not None and self._line.pending >= self.max_waiting:
                raise ResourceUnavailable(
                    f"{self!r}: {self.max_waiting} callers already wait (max_waiting)",
                    reason=ResourceUnavailable.FULL,
                )
            waiter = self._line.join(priority, on_ready)
            self._dispense()
        return waiter

    def _give_up(self, waiter: Waiter, timeout: float | None) -> _Item[T]:
        """The wait of ``waiter`` ended unserved (timeout, cancellation): leave
        the line and raise, unless it was served just then."""
        with self._cond:
            if self._line.leave(waiter):
                error = self._last_error
                raise ResourceUnavailable(
                    f"{self!r}: nothing was lent within {timeout} s"
                ) from error
        return waiter.outcome()  # type: ignore[no-any-return]  # (served just as it gave up)

    def _lend(self, item: _Item[T]) -> _Item[T]:
        self._loaned[id(item.obj)] = item
        return item

    def release(self, obj: T) -> None:
        """Give ``obj`` back. :class:`NotOwned` if it is not on loan from this
        pool (foreign, already released); nothing changes then."""
        if self._pid != os.getpid():
            self._own()
        if not self.test_on_return:
            with self._lock:
                item = self._loaned.pop(id(obj), None)
                if item is not None and item.obj is obj:
                    item.idle_since = time.monotonic()
                    self._idle.append(item)
                    if self._line.pending or self._draining:
                        self._dispense()
                        self._cond.notify_all()
                    return
                if item is not None:  # another object with a recycled id: put it back
                    self._loaned[id(obj)] = item
            raise NotOwned(f"{obj!r} is not on loan from {self!r} (foreign, or released already)")
        item = self._loaned_item(obj)
        self._take_back(item, destroy=not self._valid(obj))

    def destroy(self, obj: T) -> None:
        """Destroy ``obj`` (on loan from this pool) instead of giving it back."""
        self._take_back(self._loaned_item(obj), destroy=True)

    def use(self, fn: Callable[[T], Any], *, priority: int = 0, timeout: Seconds = DEFAULT) -> Any:
        """``fn(obj)`` with an object on loan: released after, destroyed if
        ``fn`` raises (it may be broken; the exception propagates)."""
        with self.hold(priority=priority, timeout=timeout) as obj:
            return fn(obj)

    @contextlib.contextmanager
    def hold(self, *, priority: int = 0, timeout: Seconds = DEFAULT) -> Iterator[T]:
        """Context manager: an object on loan (:meth:`acquire`'s) for the
        ``with`` block, released on exit, destroyed if the block raises (it may
        be broken; the exception propagates). Raises
        :class:`ResourceUnavailable` as :meth:`acquire` does."""
        obj = self.acquire(priority=priority, timeout=timeout)
        try:
            yield obj
        except BaseException:
            self.destroy(obj)
            raise
        self.release(obj)

    @contextlib.asynccontextmanager
    async def ahold(self, *, priority: int = 0, timeout: Seconds = DEFAULT) -> AsyncIterator[T]:
        """:meth:`hold` as an async context manager (``async with``): the wait
        (:meth:`aacquire`) holds no thread."""
        obj = await self.aacquire(priority=priority, timeout=timeout)
        try:
            yield obj
        except BaseException:
            self.destroy(obj)
            raise
        self.release(obj)

    def borrow(self, *, priority: int = 0, timeout: Seconds = DEFAULT) -> Any:
        """Deprecated name of :meth:`hold` (``DeprecationWarning``)."""
        renamed("ObjectPool.borrow()", "ObjectPool.hold()")
        return self.hold(priority=priority, timeout=timeout)

    def _loaned_item(self, obj: T) -> _Item[T]:
        self._own()
        with self._cond:
            item = self._loaned.get(id(obj))
        if item is None or item.obj is not obj:
            raise NotOwned(f"{obj!r} is not on loan from {self!r} (foreign, or released already)")
        return item

    def _take_back(self, item: _Item[T], *, destroy: bool) -> None:
        with self._cond:
            if self._loaned.pop(id(item.obj), None) is None:
                raise NotOwned(f"{item.obj!r} is not on loan from {self!r}")
            if not destroy:
                item.idle_since = time.monotonic()
                self._idle.append(item)
                self._dispense()
                self._cond.notify_all()
                return
        self._close(item)
        with self._cond:
            self._dispense()
            self._cond.notify_all()

    # -- creating, handing out, destroying -----------------------------------------

    def _dispense(self) -> None:
        """Hand idle objects to waiters, and start creations for the waiters
        left (and to keep ``min``) within ``max``. Called with the lock held."""
        line = self._line
        while self._idle and line.serve_next(self._lend_idle):
            pass
        wanted = max(line.pending, self._min - self.size) if self._started else line.pending
        wanted -= self._creating
        room = self._max - (len(self._idle) + len(self._loaned) + self._creating)
        for _ in range(min(wanted, room)):
            self._creating += 1
            threading.Thread(
                target=self._create, name=f"drp-create-{self.name}", daemon=True
            ).start()

    def _lend_idle(self) -> _Item[T]:
        return self._lend(self._idle.popleft() if self.fifo else self._idle.pop())

    def _create(self) -> None:
        """One creation (in a thread of its own): a global slot if capped, then
        ``factory()``; retries back off after failures, never spin."""
        pid = self._pid
        delay = self._retry_at - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        slot = None
        try:
            slot = self._global_slot()
            if slot is None:
                raise _Withdrawn
            obj = self.factory()
        except _Withdrawn:
            with self._cond:
                if pid == self._pid:
                    self._creating -= 1
            return
        except Exception as exc:
            if slot is not None and slot is not _NO_SLOT:
                with contextlib.suppress(PoolError):
                    slot.release()
            self._failed(pid, exc)
            return
        item = _Item(obj, idle_since=time.monotonic(), slot=slot)
        with self._cond:
            if pid != self._pid:  # forked meanwhile: this object is not ours
                return
            self._creating -= 1
            self._failures = 0
            self._idle.append(item)
            self._dispense()
            self._cond.notify_all()

    def _failed(self, pid: int, exc: BaseException) -> None:
        logger.warning("factory of %r failed: %r", self, exc)
        with self._cond:
            if pid != self._pid:
                return
            self._creating -= 1
            self._failures += 1
            self._last_error = exc
            backoff = min(MAX_BACKOFF, FIRST_BACKOFF * 2 ** (self._failures - 1))
            self._retry_at = time.monotonic() + backoff
            if self._failures >= MAX_FAILURES:  # refuse who waits now, then start over
                self._failures = 0

                def refusal() -> BaseException:
                    error = ResourceUnavailable(
                        f"{self!r}: the factory failed {MAX_FAILURES} times in a row; "
                        f"the last error: {exc!r}"
                    )
                    error.__cause__ = exc
                    return error

                self._line.refuse_all(refusal)
            self._dispense()

    def _global_slot(self) -> Lease | None:
        """A slot of ``global_limit`` (None when not capped: then a stand-in),
        waiting fairly while someone here still needs an object."""
        if self._global is None:
            return _NO_SLOT
        return self._global.slot(self._needs_objects)

    def _needs_objects(self) -> bool:
        """Whether someone here still needs an object made (a waiter, or ``min``)."""
        with self._cond:
            return self._line.pending > 0 or (self._started and self.size <= self._min)

    def _close(self, item: _Item[T]) -> None:
        """Destroy one object (never one of another process) and free its slot."""
        try:
            if self.destroy_fn is not None:
                self.destroy_fn(item.obj)
        except Exception:
            logger.exception("destroy of an object of %r failed", self)
        finally:
            if item.slot is not None and item.slot is not _NO_SLOT:
                with contextlib.suppress(PoolError):
                    item.slot.release()

    def _valid(self, obj: T) -> bool:
        if self.validate_fn is None:
            return True
        try:
            return bool(self.validate_fn(obj))
        except Exception as exc:
            logger.info("validate of %r raised %r: it counts as invalid", obj, exc)
            return False

    # -- eviction -------------------------------------------------------------------

    def evict(self) -> int:
        """One eviction run: check up to ``num_tests_per_eviction_run`` idle
        objects, longest idle first; returns how many were destroyed."""
        self._own()
        now = time.monotonic()
        doomed = []
        with self._cond:
            for item in list(self._idle)[: self.num_tests_per_eviction_run]:
                idle_for = now - item.idle_since
                size = len(self._idle) + len(self._loaned) + self._creating
                hard = self.idle_timeout is not None and idle_for >= self.idle_timeout
                soft = self.soft_idle_timeout is not None and idle_for >= self.soft_idle_timeout
                if (hard and size > self._min) or (soft and len(self._idle) > self._min):
                    self._idle.remove(item)
                    doomed.append(item)
        for item in doomed:
            self._close(item)
        if doomed:
            with self._cond:
                self._dispense()
        return len(doomed)

    def _evict_loop(self) -> None:
        pid = self._pid
        while pid == os.getpid() and self._evictor is threading.current_thread():
            time.sleep(self.eviction_interval)
            try:
                self.evict()
            except Exception:
                logger.exception("eviction run of %r failed", self)


class _Withdrawn(Exception):
    """Nobody needs the object a creation was waiting a global slot for."""


_NO_SLOT: Any = object()


def _done(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
