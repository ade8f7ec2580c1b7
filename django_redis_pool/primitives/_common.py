"""Helpers shared by every Redis primitive: milliseconds, key naming, Lua
script loading, request tokens and a client's socket timeout (argument
validation is in :mod:`.validators`, reading and showing text from Redis in
:mod:`.text`, translation of redis-py errors in :mod:`..exceptions`).

Nothing here imports Django.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

_LUA_DIR = Path(__file__).with_name("lua")
_lua_cache: dict[str, str] = {}


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


def load_lua(*names: str) -> str:
    """Source of the Lua files ``names`` (without ``.lua``), concatenated."""
    parts = []
    for name in names:
        if name not in _lua_cache:
            _lua_cache[name] = (_LUA_DIR / f"{name}.lua").read_text()
        parts.append(_lua_cache[name])
    return "\n".join(parts)


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


def socket_timeout(client: Any) -> float | None:
    """The read timeout of ``client``'s connections (redis.Redis or RedisCluster)."""
    for owner in (getattr(client, "connection_pool", None), getattr(client, "nodes_manager", None)):
        kwargs = getattr(owner, "connection_kwargs", None)
        if isinstance(kwargs, dict):
            value = kwargs.get("socket_timeout")
            return float(value) if value else None
    return None
