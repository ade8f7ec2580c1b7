"""Validation of the primitives' arguments, shared with the Django layer's
settings and checks: each ``check_*`` returns the value (normalised) or raises
``ValueError`` (``TypeError`` for a client) whose message names it and the fix.

Nothing here imports Django.
"""

from __future__ import annotations

import enum
import math
import re
import warnings
from typing import Any, Final, Literal

__all__ = [
    "DEFAULT",
    "MAX_NAME_LENGTH",
    "MAX_SECONDS",
    "Default",
    "Seconds",
    "check_client",
    "check_count",
    "check_duration",
    "check_holder",
    "check_instant",
    "check_lease_timeout",
    "check_max_waiting",
    "check_name",
    "check_permits",
    "check_priority",
    "check_seconds",
    "check_timeout",
    "renamed",
]

MAX_NAME_LENGTH = 200
#: The longest duration the library sends to Redis, in seconds: 10 years (of
#: 365 days). Every lease, wait, time-to-live, period and deferral is at most
#: this; a longer one raises ``ValueError`` before anything is written (Redis
#: counts them from its clock's now in milliseconds, a rate limiter in
#: microseconds, in Lua numbers exact up to 2**53: ten years from now in
#: microseconds is well inside, 1e20 seconds in milliseconds is not).
MAX_SECONDS = 10 * 365 * 24 * 3600


class Default(enum.Enum):
    """The type of :data:`DEFAULT` (its only value)."""

    DEFAULT = "DEFAULT"

    def __repr__(self) -> str:
        return "DEFAULT"

    __str__ = __repr__


#: "The primitive's default": what an omitted ``timeout`` or ``lease_timeout``
#: means (the primitive's own, e.g. a pool's ``lease_timeout``), as opposed to
#: ``None``, which always means "wait forever" / "no expiry".
DEFAULT: Final = Default.DEFAULT
#: A duration argument that may be left to the primitive: seconds, None, or DEFAULT.
Seconds = float | None | Literal[Default.DEFAULT]


def renamed(old: str, new: str, *, stacklevel: int = 3) -> None:
    """Warn (``DeprecationWarning``) that ``old`` is named ``new`` from 0.1.0 on."""
    warnings.warn(
        f"{old} is deprecated: use {new} (one verb, one meaning, from 0.1.0)",
        DeprecationWarning,
        stacklevel=stacklevel,
    )


_FORBIDDEN = re.compile(r"[{}\s]")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _decoded(value: object, what: str) -> object:
    """``bytes`` read as UTF-8 text; anything else as it is."""
    if isinstance(value, bytes):
        try:
            return value.decode()
        except UnicodeDecodeError:
            raise ValueError(f"{what} {value!r} is not UTF-8 text") from None
    return value


def check_name(value: object, what: str = "name") -> str:
    """Return ``value`` if it is a valid primitive name or resource id.

    A valid value is a non-empty ``str`` of at most 200 characters without
    ``{``, ``}``, whitespace or control characters (``bytes`` are read as
    UTF-8). Anything else raises ``ValueError`` naming it.
    """
    value = _decoded(value, what)
    if not isinstance(value, str):
        raise ValueError(f"{what} must be a non-empty str, got {value!r} ({type(value).__name__})")
    if not value:
        raise ValueError(f"{what} must be a non-empty str, got {value!r}")
    if len(value) > MAX_NAME_LENGTH:
        raise ValueError(
            f"{what} {value[:40]!r}... is {len(value)} characters long; "
            f"the limit is {MAX_NAME_LENGTH}"
        )
    if _FORBIDDEN.search(value):
        raise ValueError(
            f"{what} {value!r} contains '{{', '}}' or whitespace, which are not allowed "
            "(braces would break the Redis Cluster hash tag)"
        )
    if _CONTROL.search(value):
        raise ValueError(f"{what} {value!r} contains control characters, which are not allowed")
    return value


def check_client(client: object) -> Any:
    """Return ``client`` if it is a redis-py client, else raise ``TypeError``.

    valkey-py clients are refused here, not on their first call: they raise
    ``valkey.exceptions`` errors that this library cannot tell apart (a lost
    script, a lost connection). redis-py's own clients serve Valkey servers.
    """
    module = type(client).__module__ or ""
    if module.split(".", 1)[0] == "valkey":
        raise TypeError(
            f"client {client!r} is a valkey-py client, which is not supported: build a "
            "redis-py client instead (redis.Redis.from_url(...) connects to a Valkey server too)"
        )
    if not hasattr(client, "register_script") or not hasattr(client, "blpop"):
        raise TypeError(
            f"client must be a redis-py client (redis.Redis or "
            f"redis.cluster.RedisCluster), got {client!r}"
        )
    return client


#: Holders that passed :func:`check_holder` lately (a text is valid or not for
#: good): a holder or identity used again is taken at once. At most
#: ``_HOLDERS_KEPT``, forgotten all at once past that.
_HOLDERS_SEEN: dict[str, None] = {}
_HOLDERS_KEPT = 4096


def check_holder(value: object, what: str = "holder") -> str:
    """A holder label or identity: a non-empty ``str`` of at most 200 characters,
    without control characters (spaces and any other printable text are fine)."""
    if type(value) is str and value in _HOLDERS_SEEN:  # (the common case, at once)
        return value
    if type(value) is not str:
        value = _decoded(value, what)
    if not isinstance(value, str) or not value or len(value) > MAX_NAME_LENGTH:
        raise ValueError(
            f"{what} must be a non-empty str of at most {MAX_NAME_LENGTH} characters, got {value!r}"
        )
    if _CONTROL.search(value):
        raise ValueError(
            f"{what} {value!r} contains a control character (such as a newline or NUL); "
            "use printable text"
        )
    if len(_HOLDERS_SEEN) >= _HOLDERS_KEPT:
        _HOLDERS_SEEN.clear()
    _HOLDERS_SEEN[value] = None
    return value


#: The types of a number of seconds taken as is (not bool: it is an int, but no duration).
_NUMBERS = (int, float)


def check_timeout(value: object, what: str = "timeout") -> float | None:
    """A wait: seconds >= 0 (0: do not wait), or None / infinity for "forever"."""
    if value is None:
        return None
    if type(value) in _NUMBERS and 0 <= value <= MAX_SECONDS:  # (the common case, at once)
        return float(value)
    seconds = check_seconds(value, what)
    return None if seconds == math.inf else seconds


def check_seconds(value: object, what: str, *, allow_none: bool = True) -> float | None:
    """Validate a duration in seconds (``int``/``float`` >= 0, or None if allowed)."""
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(
            f"{what} must be a number of seconds{' or None' if allow_none else ''}, got {value!r}"
        )
    if math.isnan(value) or value < 0:
        raise ValueError(f"{what} must be >= 0 seconds, got {value!r}")
    if MAX_SECONDS < value < math.inf:
        raise ValueError(
            f"{what} must be at most {MAX_SECONDS} seconds (10 years), got {value!r}"
            + ("; use None for no limit" if allow_none else "")
        )
    return float(value)


def check_lease_timeout(value: object, what: str = "lease_timeout") -> float | None:
    """A lease duration: None (no expiry) or a number of seconds > 0."""
    if value is None:
        return None
    seconds = check_seconds(value, what)
    if seconds is not None and (seconds < 0.001 or math.isinf(seconds)):
        raise ValueError(
            f"{what} must be at least 0.001 seconds and finite (None means no expiry), "
            f"got {value!r}"
        )
    return seconds


def check_instant(value: object, what: str, now: float) -> float:
    """A point in time, in unix seconds (e.g. a task's ``run_at``): a finite
    number at most :data:`MAX_SECONDS` after ``now`` (this host's clock)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{what} must be a finite number of unix seconds, got {value!r}")
    if value > now + MAX_SECONDS:
        raise ValueError(
            f"{what} must be at most {MAX_SECONDS} seconds (10 years) from now, got {value!r}"
        )
    return float(value)


def check_duration(value: object, what: str) -> float:
    """A duration that must be set: seconds >= 0.001 and finite (not None)."""
    seconds = check_seconds(value, what, allow_none=False)
    assert seconds is not None
    if seconds < 0.001 or math.isinf(seconds):
        raise ValueError(
            f"{what} must be a number of seconds > 0 (at least 0.001) and finite, got {value!r}"
        )
    return seconds


def check_priority(value: object) -> int:
    """Waiter priority: an int; larger is served first."""
    if type(value) is int and -(2**52) <= value <= 2**52:  # (the common case, at once)
        return value
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"priority must be an int, got {value!r}")
    if abs(value) > 2**52:
        raise ValueError(f"priority must be between -2**52 and 2**52, got {value!r}")
    return value


def check_count(value: object, what: str, *, minimum: int = 0) -> int:
    """A count, offset or fence: an int from ``minimum`` to 2**52."""
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= 2**52:
        raise ValueError(f"{what} must be an int from {minimum} to 2**52, got {value!r}")
    return value


def check_permits(value: object, what: str = "permits") -> int:
    """How many of a semaphore's permits one hold takes: an int >= 1."""
    if type(value) is int and 1 <= value <= 2**52:  # (the common case, at once)
        return value
    return check_count(value, what, minimum=1)


def check_max_waiting(value: object, what: str = "max_waiting") -> int | None:
    """How many callers may wait at once: None (no limit) or an int >= 0 (0:
    none ever waits; a caller that would wait is refused at once)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 2**52:
        raise ValueError(
            f"{what} must be an int >= 0 (how many callers may wait at once; 0: none ever "
            f"waits) or None (no limit), got {value!r}"
        )
    return value
