"""Redis's own view, for tests that check what Redis holds or ran: every key of
the harness's (private, flushed) Redis with its contents, the commands Redis
ran while some work ran (those of Lua scripts included), and its scripts and
functions unloaded."""

from __future__ import annotations

from typing import Any

import redis


def redis_state(client: redis.Redis) -> dict[bytes, Any]:
    """Every key of the (private, flushed) Redis with its contents."""
    state: dict[bytes, Any] = {}
    for key in sorted(client.scan_iter()):
        kind = client.type(key)
        if kind == b"string":
            value: Any = client.get(key)
        elif kind == b"hash":
            value = client.hgetall(key)
        elif kind == b"zset":
            value = client.zrange(key, 0, -1, withscores=True)
        elif kind == b"list":
            value = client.lrange(key, 0, -1)
        elif kind == b"set":
            value = sorted(client.smembers(key))
        else:
            value = kind
        state[key] = value
    return state


def command_calls(client: redis.Redis) -> dict[str, int]:
    """Calls per command that Redis ran without an error since it started
    (``INFO commandstats``). A call that failed is not counted: an EVALSHA
    refused with NOSCRIPT (the script is then loaded and run by a second
    EVALSHA, which is), or an FCALL before the function library was loaded."""
    return {
        name.removeprefix("cmdstat_"): int(stats["calls"]) - int(stats.get("failed_calls", 0))
        for name, stats in client.info("commandstats").items()
    }


def commands_run_by(client: redis.Redis, work: Any) -> dict[str, int]:
    """The commands Redis ran while ``work()`` ran, by name (those called from
    Lua scripts included; failed ones not: see :func:`command_calls`), without
    the INFO calls that measure them."""
    before = command_calls(client)
    work()
    after = command_calls(client)
    ran = {name: calls - before.get(name, 0) for name, calls in after.items()}
    ran.pop("info", None)
    return {name: calls for name, calls in ran.items() if calls}


def unload_scripts(client: redis.Redis) -> None:
    """Drop the scripts and functions Redis holds (FLUSHALL keeps them): the
    next call of each is refused once, then loads it."""
    client.script_flush()
    if int(str(client.info("server")["redis_version"]).split(".")[0]) >= 7:
        client.function_flush()


def script_calls(commands: dict[str, int]) -> int:
    """Lease-engine operations among ``commands`` (counts by command name):
    FCALL on Redis >= 7, EVALSHA where the function library is not used."""
    return commands.get("evalsha", 0) + commands.get("fcall", 0)


__all__ = [
    "command_calls",
    "commands_run_by",
    "redis_state",
    "script_calls",
    "unload_scripts",
]
