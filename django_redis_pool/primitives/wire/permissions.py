"""What a Redis user (ACL) must be allowed, and whether it is: :data:`COMMANDS`,
:func:`denied_steps`.

The engine's scripts run the commands of :data:`COMMANDS` on the keys of
their primitive (``<prefix>:*``); the clients run ``EVAL``/``EVALSHA`` (and,
on Redis >= 7, ``FCALL``/``FUNCTION LOAD``, or else ``SCRIPT LOAD``), the
blocking reads ``BLPOP``/``BLMOVE``, and ``PING``. A user refused one of the
commands inside a script would stop that script halfway, after its first
writes, so each client probes them once, before its first operation: one
script that runs each command on throw-away keys of the primitive's slot
(expiring within a minute, deleted at once) and reports the ones refused.
Nothing here imports Django.
"""

from __future__ import annotations

from typing import Any

from ...exceptions import docs_url
from .steps import Call, Steps

__all__ = [
    "CLIENT_COMMANDS",
    "COMMANDS",
    "FUNCTION_COMMANDS",
    "PROBE_SUFFIX",
    "acl_rule",
    "denied_steps",
    "message",
]

#: The commands the scripts run (every family's ``*.lua``), each with the arguments its
#: probe runs it with: ``{k}`` is a throw-away key of the probe's own.
_PROBES: tuple[tuple[str, str], ...] = (
    ("SET", "{k}:s 1 PX 60000"),
    ("GET", "{k}:s"),
    ("INCR", "{k}:n"),
    ("PERSIST", "{k}:n"),
    ("PEXPIRE", "{k}:n 60000"),
    ("EXISTS", "{k}:s"),
    ("TYPE", "{k}:s"),
    ("HSET", "{k}:h f v"),
    ("HSETNX", "{k}:h g v"),
    ("HGET", "{k}:h f"),
    ("HMGET", "{k}:h f g"),
    ("HINCRBY", "{k}:h c 1"),
    ("HGETALL", "{k}:h"),
    ("HLEN", "{k}:h"),
    ("HEXISTS", "{k}:h f"),
    ("HSCAN", "{k}:h 0"),
    ("HDEL", "{k}:h g"),
    ("ZADD", "{k}:z 1 m"),
    ("ZSCORE", "{k}:z m"),
    ("ZCARD", "{k}:z"),
    ("ZRANGE", "{k}:z 0 0"),
    ("ZREVRANGE", "{k}:z 0 0"),
    ("ZRANGEBYSCORE", "{k}:z -inf +inf"),
    ("ZREVRANGEBYSCORE", "{k}:z +inf -inf"),
    ("ZCOUNT", "{k}:z -inf +inf"),
    ("ZRANDMEMBER", "{k}:z"),
    ("ZREMRANGEBYSCORE", "{k}:z 5 6"),
    ("ZREMRANGEBYRANK", "{k}:z 5 6"),
    ("ZREM", "{k}:z x"),
    ("ZPOPMIN", "{k}:z"),
    ("RPUSH", "{k}:l 1"),
    ("LTRIM", "{k}:l 0 -1"),
    ("LPOP", "{k}:l"),
    ("SADD", "{k}:t m"),
    ("SMEMBERS", "{k}:t"),
    ("RENAME", "{k}:s {k}:r"),
    ("TIME", ""),
    ("DEL", "{k}:s {k}:r {k}:n {k}:h {k}:z {k}:l {k}:t"),
)
#: Every command the scripts run.
COMMANDS = tuple(name for name, _ in _PROBES)
#: The commands the clients send themselves (beside the scripts').
CLIENT_COMMANDS = ("EVAL", "EVALSHA", "SCRIPT LOAD", "BLPOP", "BLMOVE", "PING")
#: On Redis >= 7 also (the function library; without them, EVALSHA serves).
FUNCTION_COMMANDS = ("FCALL", "FUNCTION LOAD")
#: The probe's keys are the primitive's base key plus this (its slot, its prefix).
PROBE_SUFFIX = ":acl-probe"


def _lua_args(template: str) -> str:
    parts = template.split()
    return "".join(
        f", k .. '{part[3:]}'" if part.startswith("{k}") else f", '{part}'" for part in parts
    )


#: One script that runs every command of :data:`COMMANDS` and returns those
#: refused ("name"), and "keys" if the key pattern itself is refused.
PROBE = (
    "local k, denied, r = KEYS[1], {}\n"
    + "".join(
        f"r = redis.pcall('{name}'{_lua_args(args)})\n"
        "if type(r) == 'table' and r.err then\n"
        '  if string.find(r.err, "can\'t run this command", 1, true) then\n'
        f"    denied[#denied + 1] = '{name}'\n"
        '  elseif string.find(r.err, "can\'t access", 1, true) then\n'
        "    denied[#denied + 1] = 'keys'\n"
        "  end\n"
        "end\n"
        for name, args in _PROBES
    )
    + "return denied\n"
)


def denied_steps(base: Any) -> Steps[list[str]]:
    """The commands of :data:`COMMANDS` that the client's user may not run on
    keys of ``base`` (a primitive's base key, str or bytes), and "keys" if it
    may not touch them at all: one ``EVAL`` (refused itself: ``["EVAL"]``)."""
    key = base + (PROBE_SUFFIX.encode() if isinstance(base, bytes) else PROBE_SUFFIX)
    try:
        denied = yield Call("eval", (PROBE, 1, key))
    except Exception as exc:
        text = str(exc)
        if "NOPERM" in text or "no permissions" in text:
            return ["keys"] if "key" in text else ["EVAL"]
        raise
    names = [d.decode() if isinstance(d, bytes) else str(d) for d in denied]
    return sorted(set(names))


def acl_rule(prefix: str, *, functions: bool = True) -> str:
    """The ``ACL SETUSER`` rule of a user of its own for key prefix ``prefix``
    (``functions``: Redis >= 7, with the function library's commands)."""
    names = (*COMMANDS, *CLIENT_COMMANDS, *(FUNCTION_COMMANDS if functions else ()))
    granted = " ".join(f"+{name.lower().replace(' ', '|')}" for name in names)
    return f"~{prefix}:* resetchannels -@all {granted}"


def message(denied: list[str], base: str) -> str:
    """What a user refused ``denied`` (from :func:`denied_steps`) is told."""
    keys = "keys" in denied
    commands = [name for name in denied if name != "keys"]
    parts = []
    if commands:
        parts.append("the commands " + ", ".join(commands))
    if keys:
        parts.append(f"the keys of {base.rpartition(':{')[0] or base}:*")
    return (
        "the Redis user may not run " + " and ".join(parts) + ", which the scripts need: "
        "nothing was written. Grant them: " + docs_url("operations", "a-redis-user-of-its-own")
    )
