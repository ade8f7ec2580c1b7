"""The values every operation sends: key names, request tokens, milliseconds.

Nothing here imports Django.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable

__all__ = ["DEFAULT_KEY_PREFIX", "key_prefix", "new_token", "to_ms"]

#: First part of every key name: ``<prefix>:{<kind>:<name>}:...``.
DEFAULT_KEY_PREFIX = "drp"


def to_ms(seconds: float | None) -> int:
    """Seconds to whole milliseconds; None becomes -1 (meaning "no limit")."""
    if seconds is None:
        return -1
    ms = int(seconds * 1000 + 0.5)  # (rounded, without a call: it is on every operation)
    return ms if ms > 0 else 0


def key_prefix(prefix: str, kind: str, name: str) -> str:
    """Key prefix of one primitive: ``<prefix>:{<kind>:<name>}``.

    The braces make ``<kind>:<name>`` the Redis Cluster hash tag, so every key of
    a primitive lives in one slot and one Lua script may touch them all.
    """
    return f"{prefix}:{{{kind}:{name}}}"


#: The random per-process prefix of request tokens (a new one in a forked child).
_token_prefix = [os.urandom(8).hex()]


def _new_token_prefix() -> None:
    _token_prefix[0] = os.urandom(8).hex()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_new_token_prefix)

#: ``new_token()``: a request token unique across processes and hosts (the
#: per-process prefix, then a counter in hex). The ``__next__`` of a C iterator:
#: no Python frame, on every acquire and release.
new_token: Callable[[], str] = map(
    "{0[0]}{1:x}".format, itertools.repeat(_token_prefix), itertools.count()
).__next__
