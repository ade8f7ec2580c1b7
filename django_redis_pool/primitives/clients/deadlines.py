"""Deadlines that bound every Redis call made inside them, even to a hung Redis.

redis-py bounds one read by the connection's ``socket_timeout`` and then
retries, so a Redis that stops answering holds a caller for ``socket_timeout``
times the number of attempts (20 s with the defaults). Inside ``with
deadline(seconds):`` the connections of :mod:`.connections` give every
connect, write and read only the time left (never more than their own
timeouts), and their backoff never sleeps past it: once it has
passed, every attempt fails at once with redis-py's ``TimeoutError``. Outside a
deadline they behave exactly as redis-py's own.

A deadline bounds how long a caller *waits*: it counts the time its thread is
blocked (on Redis, in a sleep, or stopped), not the time the thread spends
running or waiting for a CPU (:class:`.stopwatch.Stopwatch`). A busy or starved process
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

import contextvars
import time

from redis.exceptions import TimeoutError as RedisTimeoutError

from .stopwatch import Stopwatch

__all__ = ["DEADLINE_SLACK", "TOO_BUSY", "current_deadline", "deadline", "expired", "time_left"]

#: How long past its own wait an operation waits for Redis on connections
#: that keep deadlines, in seconds: an acquire fails within its timeout plus
#: this when Redis does not answer, and a release waits this long at most.
DEADLINE_SLACK = 1.0


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
