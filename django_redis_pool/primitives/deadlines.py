"""Deadlines that bound every Redis call made inside them, even to a hung Redis.

redis-py bounds one read by the connection's ``socket_timeout`` and then
retries, so a Redis that stops answering holds a caller for ``socket_timeout``
times the number of attempts (20 s with the defaults). Inside ``with
deadline(seconds):`` the connections of :data:`CONNECTION_CLASSES` give every
connect, write and read only the time left (never more than their own
timeouts), and :class:`DeadlineBackoff` never sleeps past it: once it has
passed, every attempt fails at once with redis-py's ``TimeoutError``. Outside a
deadline they behave exactly as redis-py's own. Nothing here imports Django.
"""

from __future__ import annotations

import contextlib
import contextvars
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
    "deadline",
    "time_left",
]

_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "django_redis_pool_deadline", default=None
)


@contextlib.contextmanager
def deadline(seconds: float | None) -> Iterator[None]:
    """Bound the Redis calls made inside (on this thread or task) to ``seconds``
    from now (None: no bound). An enclosing, earlier deadline still applies."""
    if seconds is None:
        yield
        return
    ends = time.monotonic() + seconds
    outer = _DEADLINE.get()
    token = _DEADLINE.set(ends if outer is None else min(outer, ends))
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def time_left() -> float | None:
    """Seconds left before the current deadline (None: there is none)."""
    ends = _DEADLINE.get()
    return None if ends is None else ends - time.monotonic()


def _bounded(timeout: float | None) -> float | None:
    """``timeout`` cut to the time left; raises once the deadline has passed."""
    left = time_left()
    if left is None:
        return timeout
    if left <= 0:
        raise RedisTimeoutError("the operation's deadline passed before Redis answered")
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
        self.socket_connect_timeout = _bounded(own)
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
        with self._within_deadline():
            return super().read_response(*args, **kwargs)  # type: ignore[misc]

    @contextlib.contextmanager
    def _within_deadline(self) -> Iterator[None]:
        if time_left() is None:
            yield
            return
        if self._sock is None:
            self.connect()
        self._sock.settimeout(_bounded(self.socket_timeout))
        try:
            yield
        finally:
            if self._sock is not None:
                self._sock.settimeout(self.socket_timeout)


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


class DeadlineBackoff(ExponentialBackoff):
    """redis-py's exponential backoff, never sleeping past the current deadline."""

    def compute(self, failures: int) -> float:
        pause = super().compute(failures)
        left = time_left()
        return pause if left is None else max(0.0, min(pause, left))
