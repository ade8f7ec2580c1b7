"""Deadlines that bound every Redis call made inside them, even to a hung Redis.

redis-py bounds one read by the connection's ``socket_timeout`` and then
retries, so a Redis that stops answering holds a caller for ``socket_timeout``
times the number of attempts (20 s with the defaults). Inside ``with
deadline(seconds):`` the connections of :data:`CONNECTION_CLASSES` give every
connect, write and read only the time left (never more than their own
timeouts), and :class:`DeadlineBackoff` never sleeps past it: once it has
passed, every attempt fails at once with redis-py's ``TimeoutError``. Outside a
deadline they behave exactly as redis-py's own.

A deadline bounds how long a caller *waits*: it counts the time its thread is
blocked (on Redis, in a sleep, or stopped), not the time the thread spends
running or waiting for a CPU (:class:`Stopwatch`). A busy or starved process
is not a hung Redis: an event loop busy with other tasks, or a machine whose
CPUs are taken, delays a reply that Redis gave in time, and that delay is not
held against Redis.

A deadline can still pass while Redis's reply waits unread: the thread was
blocked by something else (an event loop held up by a blocking call in one of
its tasks, a thread waiting for the GIL), which counts as waiting. When a
deadline is found passed with a reply already there (on the failure path only:
nothing is checked while calls succeed), its error says that this process was
too busy to read the reply in time (``answered`` is set on it), not that Redis
could not be reached. Nothing here imports Django.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import threading
import time
from collections.abc import Iterator
from typing import Any

from redis.backoff import ExponentialBackoff
from redis.connection import Connection, SSLConnection, UnixDomainSocketConnection
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.sentinel import SentinelManagedConnection, SentinelManagedSSLConnection

__all__ = [
    "CONNECTION_CLASSES",
    "DeadlineBackoff",
    "DeadlineConnection",
    "DeadlineSSLConnection",
    "DeadlineSentinelManagedConnection",
    "DeadlineSentinelManagedSSLConnection",
    "DeadlineUnixDomainSocketConnection",
    "Stopwatch",
    "busy_time",
    "deadline",
    "expired",
    "keeps_deadlines",
    "time_left",
]


# -------------------------------------------------------------- waiting time


class _Schedstat:
    """This thread's ``/proc/thread-self/schedstat`` (Linux), kept open: its
    first two fields are the nanoseconds the thread ran and waited for a CPU."""

    def __init__(self) -> None:
        self.fd = os.open("/proc/thread-self/schedstat", os.O_RDONLY)

    def read(self) -> float:
        running, runnable = os.pread(self.fd, 128, 0).split()[:2]
        return (int(running) + int(runnable)) / 1e9

    def __del__(self) -> None:  # (the thread ended, or a fork replaced it)
        with contextlib.suppress(OSError):
            os.close(self.fd)


_local = threading.local()
#: False once /proc/thread-self/schedstat proved unreadable (not Linux...).
_schedstat = True


def busy_time() -> float:
    """Seconds the calling thread has spent running or waiting for a CPU
    (runnable but not running: the machine's CPUs were taken). Where Linux's
    ``/proc/thread-self/schedstat`` is missing, only the thread's CPU time
    (``time.thread_time()``). Only differences between two readings on one
    thread mean something."""
    global _schedstat
    if _schedstat:
        try:
            reader = _local.__dict__.get("reader")
            if reader is None:
                reader = _local.reader = _Schedstat()
            return reader.read()
        except (OSError, ValueError):
            _schedstat = False
    return time.thread_time()


def _busy_of(mark: bytes | float) -> float:
    """The :func:`busy_time` of a :class:`Stopwatch`'s ``busy`` mark."""
    if type(mark) is bytes:
        running, runnable = mark.split()[:2]
        return (int(running) + int(runnable)) / 1e9
    return mark  # type: ignore[return-value]


def _new_thread_readers() -> None:
    global _local
    _local = threading.local()  # (a forked child's thread is not its parent's)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_new_thread_readers)


class Stopwatch:
    """Time elapsed since it was made, and the part of it its thread spent
    waiting: blocked on I/O (a Redis reply), sleeping or stopped, but neither
    running nor waiting for a CPU (:func:`busy_time`). Read on another thread,
    waiting time is the whole elapsed time."""

    __slots__ = ("busy", "started", "thread")

    def __init__(self) -> None:
        self.thread = threading.get_ident()
        # busy_time() as read, parsed only when needed (_busy_of): a stopwatch
        # is started on every acquire, and read back only when one was slow.
        try:
            self.busy: bytes | float = os.pread(_local.reader.fd, 128, 0)
        except (AttributeError, OSError):  # (no reader on this thread yet, or none can be)
            self.busy = busy_time()
        self.started = time.monotonic()

    def elapsed(self) -> float:
        """Seconds since it was made."""
        return time.monotonic() - self.started

    def waited(self) -> float:
        """Seconds since it was made, less those its thread spent running or
        waiting for a CPU."""
        elapsed = time.monotonic() - self.started
        if threading.get_ident() != self.thread:
            return elapsed
        return elapsed - max(0.0, busy_time() - _busy_of(self.busy))


# ------------------------------------------------------------------ deadlines


class deadline:  # (lower case: used as the function it was, ``with deadline(s):``)
    """Bound the Redis calls made inside (on this thread or task) to ``seconds``
    of waiting from now, or from the start of ``watch`` (None: no bound): time
    the thread spends running or waiting for a CPU is not counted
    (:class:`Stopwatch`). An enclosing deadline with less time left still
    applies. (A class, not a generator: it is entered on every release.)

    Without a ``watch``, the time is counted from the first time a call asks
    how much is left (:meth:`left`): what ran before is this thread's own work,
    which a deadline does not count anyway, and a deadline nobody asks about
    (a blocking client whose connections do not keep deadlines) reads no clock.
    ``answered``: once it had passed, a reply of Redis was found there unread."""

    __slots__ = ("answered", "seconds", "token", "watch")

    def __init__(self, seconds: float | None, watch: Stopwatch | None = None) -> None:
        self.seconds = seconds
        self.watch = watch
        self.answered = False
        self.token: contextvars.Token[deadline | None] | None = None

    def left(self) -> float:
        """Seconds of waiting left (negative: passed)."""
        watch = self.watch
        if watch is None:
            watch = self.watch = Stopwatch()
        return self.seconds - watch.waited()  # type: ignore[operator]

    def at_least(self) -> float:
        """Seconds of waiting left at least: the seconds not yet elapsed (time
        spent running counted as waiting), without reading the thread's busy
        time. A timer set for this long fires no later than :meth:`left`
        says; it reads :meth:`left` then, and is set again if time is left."""
        watch = self.watch
        if watch is None:
            watch = self.watch = Stopwatch()
        return self.seconds - (time.monotonic() - watch.started)  # type: ignore[operator]

    def __enter__(self) -> None:
        if self.seconds is None:
            return
        outer = _DEADLINE.get()
        if outer is not None and outer.left() <= self.seconds:
            return
        self.token = _DEADLINE.set(self)

    def __exit__(self, *exc_info: object) -> None:
        if self.token is not None:
            _DEADLINE.reset(self.token)
            self.token = None


_DEADLINE: contextvars.ContextVar[deadline | None] = contextvars.ContextVar(
    "django_redis_pool_deadline", default=None
)


def current_deadline() -> deadline | None:
    """The innermost deadline in force here (None: there is none)."""
    return _DEADLINE.get()


def time_left() -> float | None:
    """Seconds of waiting left before the current deadline (None: there is none)."""
    current = _DEADLINE.get()
    return None if current is None else current.left()


#: What the error of a deadline says when Redis's reply was there, unread.
TOO_BUSY = "this process was too busy to read Redis's reply in time (Redis answered)"


def expired(message: str, bound: deadline | None = None) -> RedisTimeoutError:
    """redis-py's ``TimeoutError`` for the deadline ``bound`` (default: the
    current one), which has passed: ``message``, or, if a reply of Redis was
    found there unread (``bound.answered``), :data:`TOO_BUSY`; that error's
    ``answered`` is True (``exceptions.backend_errors`` keeps the wording)."""
    bound = bound or _DEADLINE.get()
    if bound is None or not bound.answered:
        return RedisTimeoutError(message)
    error = RedisTimeoutError(
        f"{TOO_BUSY}; its deadline of {bound.seconds:.2f} s of waiting passed"
    )
    error.answered = True  # type: ignore[attr-defined]
    return error


def _bounded(timeout: float | None, left: float | None) -> float | None:
    """``timeout`` cut to ``left``, the time left; raises once the deadline has passed."""
    if left is None:
        return timeout
    if left <= 0:
        raise expired("the operation's deadline passed before Redis answered")
    return left if timeout is None else min(timeout, left)


class _DeadlineMixin:
    """Connects, writes and reads within the current deadline."""

    _sock: Any
    socket_timeout: float | None
    socket_connect_timeout: float | None

    def connect(self, *args: Any, **kwargs: Any) -> None:
        if time_left() is None or self._sock is not None:
            super().connect(*args, **kwargs)  # type: ignore[misc]
            return
        own = self.socket_connect_timeout
        self.socket_connect_timeout = _bounded(own, time_left())
        try:
            super().connect(*args, **kwargs)  # type: ignore[misc]
        finally:
            self.socket_connect_timeout = own
            if self._sock is not None:
                self._sock.settimeout(self.socket_timeout)

    def send_packed_command(self, *args: Any, **kwargs: Any) -> None:
        with self._within_deadline():
            super().send_packed_command(*args, **kwargs)  # type: ignore[misc]

    def read_response(self, *args: Any, **kwargs: Any) -> Any:
        with self._within_deadline(reading=True):
            return super().read_response(*args, **kwargs)  # type: ignore[misc]

    @contextlib.contextmanager
    def _within_deadline(self, reading: bool = False) -> Iterator[None]:
        current = _DEADLINE.get()
        if current is None:
            yield
            return
        if self._sock is None:
            self.connect()
        left = current.left()
        if left <= 0 and reading and not current.answered and self._reply_waiting():
            current.answered = True  # Redis answered; this thread came to read it too late
        self._sock.settimeout(_bounded(self.socket_timeout, left))
        try:
            yield
        finally:
            if self._sock is not None:
                self._sock.settimeout(self.socket_timeout)

    def _reply_waiting(self) -> bool:
        """Whether a reply is there to read now (only asked once the deadline
        has passed)."""
        try:
            return bool(self.can_read(timeout=0))  # type: ignore[attr-defined]
        except Exception:
            return False


class DeadlineConnection(_DeadlineMixin, Connection):
    """A TCP connection (``redis://``) that keeps the current deadline."""


class DeadlineSSLConnection(_DeadlineMixin, SSLConnection):
    """A TLS connection (``rediss://``) that keeps the current deadline."""


class DeadlineUnixDomainSocketConnection(_DeadlineMixin, UnixDomainSocketConnection):
    """A Unix-socket connection (``unix://``) that keeps the current deadline."""


class DeadlineSentinelManagedConnection(_DeadlineMixin, SentinelManagedConnection):
    """A connection to the master a Sentinel names that keeps the current deadline."""


class DeadlineSentinelManagedSSLConnection(_DeadlineMixin, SentinelManagedSSLConnection):
    """A TLS connection to the master a Sentinel names that keeps the current deadline."""


#: The connection class to use for each URL scheme.
CONNECTION_CLASSES = {
    "redis": DeadlineConnection,
    "rediss": DeadlineSSLConnection,
    "unix": DeadlineUnixDomainSocketConnection,
}


def keeps_deadlines(client: Any) -> bool:
    """Whether the calls of the blocking ``client`` read the current deadline:
    its connections keep it (:data:`CONNECTION_CLASSES`), or its retries back
    off within it (:class:`DeadlineBackoff`). True when that cannot be told
    (a Cluster client, another client type)."""
    pool = getattr(client, "connection_pool", None)
    kind = getattr(pool, "connection_class", None)
    if not isinstance(kind, type) or issubclass(kind, _DeadlineMixin):
        return True
    retry = getattr(pool, "connection_kwargs", {}).get("retry")
    return isinstance(getattr(retry, "_backoff", None), DeadlineBackoff)


class DeadlineBackoff(ExponentialBackoff):
    """redis-py's exponential backoff, never sleeping past the current deadline."""

    def compute(self, failures: int) -> float:
        pause = super().compute(failures)
        left = time_left()
        return pause if left is None else max(0.0, min(pause, left))
