"""The connections that keep deadlines, and what the primitives read off a client.

The connections of :data:`CONNECTION_CLASSES` (and :class:`DeadlineBackoff`
for redis-py's retries) give every connect, write and read only the time
left before the current :func:`.deadlines.deadline`; outside one they behave
exactly as redis-py's own. :func:`socket_timeout` and :func:`waits_client`
read what an operation needs of the client it runs on. Nothing here imports
Django.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from redis.backoff import ExponentialBackoff
from redis.connection import Connection, SSLConnection, UnixDomainSocketConnection
from redis.sentinel import SentinelManagedConnection, SentinelManagedSSLConnection

from .deadlines import current_deadline, expired, time_left

__all__ = [
    "CONNECTION_CLASSES",
    "MAX_CONNECTIONS",
    "DeadlineBackoff",
    "DeadlineConnection",
    "DeadlineSSLConnection",
    "DeadlineSentinelManagedConnection",
    "DeadlineSentinelManagedSSLConnection",
    "DeadlineUnixDomainSocketConnection",
    "keeps_deadlines",
    "socket_timeout",
    "waits_client",
]

#: Connections a client the library builds may open (per node of a Cluster):
#: as many as the server takes (its ``maxclients``), one per waiting caller.
#: redis-py 8 caps a pool at 100 by default, and then raises "Too many
#: connections" at the 101st waiter.
MAX_CONNECTIONS = 2**31 - 1


def waits_client(client: Any) -> Any:
    """The client for blocking reads (BLPOP, BLMOVE): ``client.drp_waits_client``
    when the Django registry gave its bounded client one (so that waiting
    callers never take the bounded pool's connections), else ``client``."""
    return getattr(client, "drp_waits_client", None) or client


def socket_timeout(client: Any) -> float | None:
    """The read timeout of ``client``'s connections (redis.Redis or RedisCluster)."""
    for owner in (getattr(client, "connection_pool", None), getattr(client, "nodes_manager", None)):
        kwargs = getattr(owner, "connection_kwargs", None)
        if isinstance(kwargs, dict):
            value = kwargs.get("socket_timeout")
            return float(value) if value else None
    return None


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
        current = current_deadline()
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
