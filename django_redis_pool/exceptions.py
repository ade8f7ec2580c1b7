"""Errors raised by django-redis-pool.

Every error derives from :class:`PoolError`, and each one also derives from the
builtin exception a caller would naturally catch (``TimeoutError``,
``TypeError``, ``ConnectionError``), so code that does not know this library
still handles them sensibly.
"""

from __future__ import annotations

from typing import Any, ClassVar

import redis.exceptions

__all__ = [
    "BackendUnavailable",
    "CorruptRecord",
    "NotConfigured",
    "NotOwned",
    "PoolError",
    "ResourceUnavailable",
    "backend_errors",
    "docs_url",
    "translated",
]

#: Where the documentation is published: the messages and check hints that
#: point at a page name it there, never a path of the repository (an installed
#: user has no ``docs/`` folder).
DOCS_URL = "https://django-redis-pool.github.io/django-redis-pool/"


def docs_url(page: str, section: str = "") -> str:
    """The address of a documentation page (``"operations"``), at the heading
    whose anchor is ``section`` (``"a-redis-user-of-its-own"``) if given."""
    return f"{DOCS_URL}{page}/" + (f"#{section}" if section else "")


class PoolError(Exception):
    """Base class of every error raised by django-redis-pool."""


class ResourceUnavailable(PoolError, TimeoutError):
    """Nothing could be granted within the requested ``timeout``, or the caller
    was refused at once because ``max_waiting`` callers already wait, or a
    request's quota was spent.

    ``reason`` says which (for logs and metrics): :attr:`TIMEOUT`, :attr:`FULL`
    or :attr:`LIMITED`. ``retry_after`` is the seconds until a turn is expected,
    when the one refusing knows (a rate limit's next turn; a pool's,
    semaphore's, lock's or allocator's estimate from its recent hold times and
    its queue, ``turn_estimate()``; ``holding()``'s, see
    ``docs/background-work.md``), else None. (A refusal a request guard
    answered for carries the ``Retry-After`` it sent, whole seconds.)
    """

    #: ``reason``: nothing was granted in time (or the wait ended otherwise).
    TIMEOUT: ClassVar[str] = "timeout"
    #: ``reason``: ``max_waiting`` callers already waited, so this one was
    #: refused at once, without waiting.
    FULL: ClassVar[str] = "full"
    #: ``reason``: a request's quota was spent (a rate limit refused it).
    LIMITED: ClassVar[str] = "limited"

    def __init__(
        self, *args: object, reason: str = TIMEOUT, retry_after: float | None = None
    ) -> None:
        super().__init__(*args)
        self.reason = reason
        #: Seconds until a turn is expected (None: not known).
        self.retry_after: float | int | None = retry_after


class NotOwned(PoolError):
    """The caller released or renewed something it does not hold (any more)."""


class CorruptRecord(PoolError, ValueError):
    """A record read from Redis cannot be decoded (not UTF-8 text, not JSON, a
    field missing or malformed): someone else wrote it, or it was damaged.
    Only that record fails: a task's worker stores the task as failed, with
    this error, and goes on."""


class HeldByCaller(PoolError):
    """A waiting acquire of a non-reentrant lock found it held by the caller's
    own holder: waiting would wait for itself. (The lock raises it when it
    holds the lock itself; a hold it released but Redis still has is
    :class:`BackendUnavailable`.)"""


class NotConfigured(PoolError, TypeError):
    """A primitive is used before it was configured (e.g. a semaphore without a
    max size) or a name is absent from the ``DJANGO_REDIS_POOL`` setting."""


class BackendUnavailable(PoolError, ConnectionError):
    """Redis could not be reached, or did not answer within the call's
    deadline. The redis-py error is the ``__cause__``.

    ``answered`` is True when Redis did answer in time, but this process was
    too busy to read the reply before the deadline passed (an event loop held
    up by a blocking call, a thread waiting for the GIL): the error then says
    so, and not that Redis could not be reached."""

    answered: bool = False
    #: True when Redis refused the operation before running any of it, because
    #: a Redis Cluster was moving its slot between nodes or had no master for
    #: it (ASK, MOVED, TRYAGAIN, CLUSTERDOWN until redis-py's redirections ran
    #: out): sending it again is safe, and the library does so within the
    #: caller's deadline before it raises this error.
    in_transit: bool = False


class backend_errors:  # (lower case: used as the function it was, ``with backend_errors():``)
    """Translate redis-py errors into this library's errors.

    Connection problems become :class:`BackendUnavailable` (with the redis-py
    error as ``__cause__``); any other Redis error becomes :class:`PoolError`.
    (A class, not a generator: it is entered on every Redis call.)
    """

    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: Any, exc: Any, traceback: Any) -> bool:
        if exc is None or not isinstance(exc, _TRANSLATED):
            return False
        raise translated(exc) from exc


def translated(exc: BaseException) -> BaseException:
    """What :class:`backend_errors` raises for ``exc`` (``exc`` itself if it
    is not a Redis error); the caller raises it ``from exc``."""
    if not isinstance(exc, _TRANSLATED):
        return exc
    name = type(exc).__name__
    if name in _IN_TRANSIT_NAMES:
        error = BackendUnavailable(
            "Redis Cluster did not run the operation: its slot is moving between nodes "
            f"or has no master right now ({exc}); it is safe to try again"
        )
        error.in_transit = True
        return error
    if name == "ResponseError" and any(part in str(exc) for part in _CLUSTER_WORDS):
        return BackendUnavailable(f"Redis Cluster refused a command of the operation: {exc}")
    if isinstance(exc, _UNREACHABLE):
        if getattr(exc, "answered", False):  # (see primitives.clients.deadlines.expired)
            error = BackendUnavailable(str(exc))
            error.answered = True
            return error
        return BackendUnavailable(f"Redis could not be reached: {exc}")
    if name in _UNAVAILABLE_NAMES:
        return BackendUnavailable(f"Redis could not be reached: {exc}")
    return PoolError(f"Redis rejected the operation: {exc}")


#: What is translated: every Redis error, and no Cluster node reachable (not a RedisError).
_TRANSLATED = (redis.exceptions.RedisError, redis.exceptions.RedisClusterException)
_UNREACHABLE = (
    redis.exceptions.ConnectionError,
    redis.exceptions.TimeoutError,
    redis.exceptions.RedisClusterException,
)
#: Redis errors that mean "not now" rather than "not this".
_UNAVAILABLE_NAMES = frozenset(
    {
        "BusyLoadingError",
        "MasterDownError",
        "ReadOnlyError",  # a failover left us on a replica
    }
)
#: Redis Cluster errors that say the command did not run at all: a slot in
#: migration (ASK, TRYAGAIN, and redis-py's "TTL exhausted" once its own
#: redirections ran out), moved, or without a master.
_IN_TRANSIT_NAMES = frozenset(
    {
        "AskError",
        "ClusterDownError",
        "ClusterError",
        "MovedError",
        "SlotNotCoveredError",
        "TryAgainError",
    }
)
#: A script's error when the Cluster refused a command inside it (which may
#: have run after others of the script: not safe to send again blindly).
_CLUSTER_WORDS = ("TRYAGAIN", "CLUSTERDOWN", "non local key", "cluster is down")
