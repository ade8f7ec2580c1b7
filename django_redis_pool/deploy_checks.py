"""What ``manage.py check --deploy`` adds: checks of the Redis server itself
(they connect to it) and of what production needs of a valid setting.

:func:`findings` gives them as :class:`~.conf.Finding` objects (E028, E029,
E040, W003, W004, W005, W011); :func:`.checks.check_deploy` reports them.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from . import conf, registry
from .exceptions import docs_url
from .primitives.wire import permissions
from .primitives.wire.keys import key_prefix
from .primitives.wire.runner import run

__all__ = ["findings"]


def findings(config: conf.Config, caches: Any) -> list[conf.Finding]:
    """What production needs of ``config`` (a valid setting) and of its Redis,
    given the ``CACHES`` setting. Connects to Redis (a failure is W003)."""
    found = conf.Findings()
    _read_shared_cache(config.connection, caches, found)
    try:
        client = registry.get_connection()
        denied = run(client, permissions.denied_steps(key_prefix(config.key_prefix, "acl", "-")))
        infos = _refused_as_none(lambda: _server_infos(client))
        save = _config_value(client, "save")
    except Exception as exc:
        found.add(
            "W003",
            f"Redis could not be reached to check it: {exc}",
            "Run manage.py check --deploy where the production Redis is reachable.",
            conf.setting_path("CONNECTION"),
        )
    else:
        for info in infos or ():
            _read_server(info, save, found)
        _read_permissions(denied, config.key_prefix, found)
        _read_unchecked(infos is None, save is None, found)
    return found


def _refused_as_none(read: Any) -> Any:
    """``read()``, or None if this user may not run its command."""
    try:
        return read()
    except Exception as exc:
        if "permission" in str(exc).lower() or "NOPERM" in str(exc):
            return None
        raise


def _read_permissions(denied: list[str], prefix: str, found: conf.Findings) -> None:
    """E040: commands (or keys) the configured Redis user may not use."""
    if not denied:
        return
    refused = ", ".join(name for name in denied if name != "keys")
    keys = f"the keys {prefix}:*" if "keys" in denied else ""
    found.add(
        "E040",
        "The Redis user may not use "
        + " and ".join(part for part in (refused, keys) if part)
        + ": every operation that needs them fails (before writing anything).",
        f"Grant them: ACL SETUSER <user> {permissions.acl_rule(prefix, functions=False)} "
        "(and on Redis >= 7 +fcall +function|load): "
        + docs_url("operations", "a-redis-user-of-its-own"),
        conf.setting_path("CONNECTION"),
    )


def _read_unchecked(no_info: bool, no_config: bool, found: conf.Findings) -> None:
    """W011: INFO or CONFIG GET refused, so what they tell was not checked."""
    if not (no_info or no_config):
        return
    refused = " and ".join(c for c, no in (("INFO", no_info), ("CONFIG GET", no_config)) if no)
    unchecked = " and ".join(
        what
        for what, no in (
            ("its version and eviction policy", no_info),
            ("whether it persists anything (AOF or RDB)", no_config),
        )
        if no
    )
    found.add(
        "W011",
        f"Redis refused {refused} to this user (managed Redis and least-privilege users "
        f"often do), so {unchecked} were not checked.",
        "Check them on the server yourself (Redis >= 6.2, maxmemory-policy noeviction, "
        f"appendonly yes: {docs_url('operations', 'the-deploy-checks')}), or silence this with "
        'SILENCED_SYSTEM_CHECKS = ["django_redis_pool.W011"].',
        conf.setting_path("CONNECTION"),
    )


def _server_infos(client: Any) -> list[Mapping[str, Any]]:
    """``INFO`` of the server, or of every node of a cluster."""
    info = client.info()
    if info and all(isinstance(value, dict) for value in info.values()):
        return list(info.values())  # RedisCluster: node -> its INFO
    return [info]


def _config_value(client: Any, name: str) -> str | None:
    """``CONFIG GET name`` (None where CONFIG is refused, e.g. on managed Redis)."""
    try:
        value = client.config_get(name)
    except Exception:
        return None
    got = value.get(name, value.get(name.encode())) if isinstance(value, dict) else None
    return got.decode() if isinstance(got, bytes) else got


def _read_server(info: Mapping[str, Any], save: str | None, found: conf.Findings) -> None:
    """E028, E029, W004: one server's version, eviction and persistence."""
    path = conf.setting_path("CONNECTION")
    version = str(info.get("redis_version", "0"))
    if tuple(int(p) for p in version.split(".")[:2] if p.isdigit()) < (6, 2):
        found.add(
            "E028",
            f"Redis {version} is older than 6.2, the oldest version this package supports.",
            "Upgrade Redis to 6.2 or later.",
            path,
        )
    policy, limit = str(info.get("maxmemory_policy", "noeviction")), info.get("maxmemory", 0)
    if policy.startswith("allkeys-") and limit:
        found.add(
            "E029",
            f"Redis evicts any key when full (maxmemory-policy {policy}, maxmemory "
            f"{limit}): an evicted lease lets a second holder take a resource that its "
            "holder still uses (a double grant; its fence stays higher, see the docs).",
            "Use maxmemory-policy noeviction (or volatile-*) on the Redis that holds the "
            "primitives, and keep caches on another Redis or database.",
            path,
        )
    if not info.get("aof_enabled") and save == "":
        found.add(
            "W004",
            "Redis persists nothing (no AOF, no RDB snapshots): a restart loses every "
            "hold, waiter, queued task and result. Fences keep increasing and configured "
            "members come back by themselves, but a holder learns that its hold is gone "
            "only at its next renewal or release.",
            "Enable appendonly yes (appendfsync everysec) for the Redis that holds the "
            f"primitives: {docs_url('operations', 'persistence')}",
            path,
        )


def _read_shared_cache(connection: Mapping[str, Any], caches: Any, found: conf.Findings) -> None:
    """W005: the primitives live in a database that a cache also uses."""
    alias = connection.get("CACHE")
    if alias is None and isinstance(connection.get("URL"), str):
        ours = _database_of(connection["URL"])
        alias = next(
            (
                name
                for name, cache in caches.items()
                if isinstance(cache, dict)
                and ours in {_database_of(location) for location in _locations(cache)}
            ),
            None,
        )
    if alias is not None:
        found.add(
            "W005",
            f"The primitives share the Redis database of the cache {alias!r}: "
            "cache.clear() flushes that database, and every hold, waiter and queued task "
            "with it (a test suite that clears a django-redis cache does so too).",
            "Give the primitives a database (or a Redis) of their own in "
            f"{conf.setting_path('CONNECTION', 'URL')}, e.g. redis://host:6379/1.",
            conf.setting_path("CONNECTION"),
        )


def _locations(cache: Mapping[str, Any]) -> list[str]:
    location = cache.get("LOCATION", [])
    if isinstance(location, str):
        location = location.split(",") if "," in location else [location]
    return [str(item) for item in location if isinstance(item, str)]


def _database_of(url: str) -> tuple[str, int | None, str]:
    """(host, port, database) that a redis:// URL names; two names of one host
    (``localhost`` and ``127.0.0.1``) are the same host."""
    parts = urlsplit(url.strip())
    database = parts.path.strip("/") or "0"
    try:
        port = parts.port or 6379
    except ValueError:
        port = None
    return (_host_of(parts.hostname or ""), port, database)


def _host_of(name: str) -> str:
    """The address ``name`` stands for ("loopback" for any of this machine's
    loopback names), or ``name`` itself when it cannot be resolved."""
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        try:
            address = ipaddress.ip_address(socket.gethostbyname(name))
        except (OSError, ValueError, UnicodeError):
            return name.lower()
    return "loopback" if address.is_loopback else str(address)
