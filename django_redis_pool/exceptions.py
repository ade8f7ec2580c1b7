"""Errors raised by django-redis-pool.

Every error derives from :class:`PoolError`, and each one also derives from the
builtin exception a caller would naturally catch (``TimeoutError``,
``TypeError``, ``ConnectionError``), so code that does not know this library
still handles them sensibly.
"""

from __future__ import annotations

__all__ = [
    "BackendUnavailable",
    "NotConfigured",
    "NotOwned",
    "PoolError",
    "ResourceUnavailable",
]


class PoolError(Exception):
    """Base class of every error raised by django-redis-pool."""


class ResourceUnavailable(PoolError, TimeoutError):
    """Nothing could be granted within the requested ``timeout``."""


class NotOwned(PoolError):
    """The caller released or renewed something it does not hold (any more)."""


class NotConfigured(PoolError, TypeError):
    """A primitive is used before it was configured (e.g. a semaphore without a
    max size) or a name is absent from the ``DJANGO_REDIS_POOL`` setting."""


class BackendUnavailable(PoolError, ConnectionError):
    """Redis could not be reached. The redis-py error is the ``__cause__``."""
