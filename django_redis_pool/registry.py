"""Configured primitives by name: ``get_resource("printers")``, :func:`get`
for the typed accessors of the kinds (``get_pool``, in
:mod:`.kinds.accessors`), and the kinds themselves (:data:`KINDS`,
:func:`by_name`).

The registry is the one reader of Django's settings at run time
(:func:`settings_report`; the system checks are the other reader): it passes
``DJANGO_REDIS_POOL``, ``CACHES``, ``MIDDLEWARE`` and the proxy settings to
:func:`.conf.setting_report` with :data:`KINDS`, and tells each kind what it needs of
them (the entry's options when it builds a primitive, then
:class:`~.kinds.contract.Configured`). Everything is built lazily on first
use and cached per process: one Redis client (:func:`get_connection`) and one
primitive per name. The caches are cleared when the ``DJANGO_REDIS_POOL`` or
``CACHES`` setting changes (Django's ``setting_changed`` signal, e.g. under
``override_settings``), or by :func:`clear_caches`. An invalid setting raises
``ImproperlyConfigured`` with the checks' messages.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Mapping
from typing import Any, TypeVar

from django.core.exceptions import ImproperlyConfigured

from . import conf
from .exceptions import BackendUnavailable, NotConfigured, backend_errors
from .kinds.builtin import KINDS
from .kinds.contract import Configured, Kind, Primitive
from .primitives.clients.connections import (
    CONNECTION_CLASSES,
    MAX_CONNECTIONS,
    DeadlineBackoff,
    DeadlineConnection,
    DeadlineSentinelManagedConnection,
    DeadlineSentinelManagedSSLConnection,
    DeadlineSSLConnection,
    DeadlineUnixDomainSocketConnection,
)

__all__ = [
    "KINDS",
    "all_kinds",
    "by_name",
    "by_setting_key",
    "cached",
    "clear_caches",
    "example_key",
    "get",
    "get_config",
    "get_connection",
    "get_resource",
    "plurals",
    "settings_report",
]

#: The primitive a kind's accessor asks for (:func:`get`).
P = TypeVar("P", bound=Primitive)

_lock = threading.RLock()
_config: conf.Config | None = None
_client: Any = None
_resources: dict[str, Any] = {}


def clear_caches() -> None:
    """Forget the parsed setting, the Redis client and every built primitive."""
    global _config, _client
    with _lock:
        _config = None
        _client = None
        _resources.clear()


def on_setting_changed(*, setting: str, **kwargs: Any) -> None:
    """Receiver of Django's ``setting_changed`` signal (connected by the app config)."""
    if setting in (conf.SETTING_NAME, "CACHES"):
        clear_caches()


# --------------------------------------------------------------------- kinds


def all_kinds() -> tuple[Kind[Any], ...]:
    """Every kind (:data:`KINDS`), in the order settings and pages list them."""
    return KINDS


def by_name() -> Mapping[str, Kind[Any]]:
    """Every kind by its name (:attr:`Kind.name`): looked up on every request."""
    return _index(KINDS)[0]


def by_setting_key() -> Mapping[str, Kind[Any]]:
    """Every kind by the key of its mapping in the setting (:attr:`Kind.setting_key`)."""
    return _index(KINDS)[1]


@functools.lru_cache(maxsize=4)
def _index(
    loaded: tuple[Kind[Any], ...],
) -> tuple[Mapping[str, Kind[Any]], Mapping[str, Kind[Any]]]:
    return {k.name: k for k in loaded}, {k.setting_key: k for k in loaded}


def example_key() -> str:
    """The setting key of the first kind, for examples in messages."""
    return KINDS[0].setting_key


def plurals() -> str:
    """Every kind for messages: their plurals, the last after "or"."""
    names = [kind.plural for kind in KINDS]
    return ", ".join(names[:-1]) + f" or {names[-1]}" if len(names) > 1 else "".join(names)


# ------------------------------------------------------------------ settings


def settings_report() -> conf.SettingReport:
    """The report on Django's settings (:func:`.conf.setting_report`): ``DJANGO_REDIS_POOL`` with
    ``CACHES``, ``MIDDLEWARE`` and the proxy settings set
    (:data:`.conf.PROXY_SETTINGS`), with :data:`KINDS`. Never raises."""
    from django.conf import settings

    try:
        raw = getattr(settings, conf.SETTING_NAME, {})
        caches, middleware = getattr(settings, "CACHES", {}), getattr(settings, "MIDDLEWARE", ())
        proxied = [name for name in conf.PROXY_SETTINGS if getattr(settings, name, None)]
    except Exception as exc:  # e.g. a settings module that raises on access
        return conf.failed_report(exc)
    return conf.setting_report(raw, KINDS, caches=caches, middleware=middleware, proxied=proxied)


def get_config() -> conf.Config:
    """The parsed ``DJANGO_REDIS_POOL`` setting (validated as the system checks
    report it). Raises ``ImproperlyConfigured`` with their errors when it is invalid."""
    global _config
    config = _config  # fast path, unsynchronised: a global read is atomic
    if config is not None:
        return config
    with _lock:
        if _config is None:
            report = settings_report()
            if report.config is None:
                raise ImproperlyConfigured("\n".join(map(str, report.errors)))
            _config = report.config
        return _config


# ---------------------------------------------------------------- connection


def _with_default_timeouts(
    options: Mapping[str, Any], retries: int = conf.DEFAULT_RETRIES
) -> dict[str, Any]:
    """``options`` plus a short socket timeout and retry unless the user set
    either, and no cap on connections unless the user set one (redis-py 8
    caps a client at 100 connections: the 101st waiting caller would fail)."""
    options = {"max_connections": MAX_CONNECTIONS, **options}
    if "socket_timeout" not in options and "retry" not in options:
        from redis.retry import Retry

        options["socket_timeout"] = conf.DEFAULT_SOCKET_TIMEOUT
        options["retry"] = Retry(
            DeadlineBackoff(cap=conf.DEFAULT_RETRY_CAP, base=conf.DEFAULT_RETRY_BASE), retries
        )
    return options


def _keeping_deadlines(url: str, options: dict[str, Any]) -> dict[str, Any]:
    """``options`` with the connection class that keeps deadlines (see
    :mod:`.primitives.clients.deadlines`) for ``url``'s scheme, unless one is set."""
    scheme = url.split("://", 1)[0].lower()
    if "connection_class" in options or scheme not in CONNECTION_CLASSES:
        return options
    return {**options, "connection_class": CONNECTION_CLASSES[scheme]}


def _client_of_cache(alias: str) -> Any:
    from django.conf import settings
    from django.core.cache import caches

    flavour = conf.redis_cache_flavour(settings.CACHES[alias]["BACKEND"])
    if flavour == "django_redis":
        from django_redis import get_redis_connection

        return _own_client_like(get_redis_connection(alias, write=True))
    return _own_client_like(caches[alias]._cache.get_client(write=True))  # Django's own


def _own_client_like(shared: Any) -> Any:
    """A client of the server the cache's client ``shared`` talks to, with
    connections of its own built from the same settings: the primitives never
    take the cache's connections (waiting callers least of all), and theirs
    keep deadlines. Its commands use at most as many connections as the
    cache's may (waiting up to ``POOL_TIMEOUT`` for one); each waiting caller
    blocks on a connection of a second set. Connections of another kind
    (Sentinel's, a custom class) are used as they are."""
    import redis

    theirs = getattr(shared, "connection_pool", None)
    ours = _DEADLINE_CLASSES.get(getattr(theirs, "connection_class", None))
    if type(theirs) not in (redis.ConnectionPool, redis.BlockingConnectionPool) or ours is None:
        return shared
    kwargs = {"socket_timeout": conf.DEFAULT_SOCKET_TIMEOUT, **theirs.connection_kwargs}
    kwargs["socket_timeout"] = kwargs["socket_timeout"] or conf.DEFAULT_SOCKET_TIMEOUT
    cap = theirs.max_connections
    if cap is not None and cap <= CAPPED:  # (a blocking one keeps a slot per connection)
        commands: Any = redis.BlockingConnectionPool(
            connection_class=ours, max_connections=cap, timeout=conf.DEFAULT_POOL_TIMEOUT, **kwargs
        )
    else:  # (redis-py 5's default: 2**31, no cap)
        commands = redis.ConnectionPool(
            connection_class=ours, max_connections=MAX_CONNECTIONS, **kwargs
        )
    client = redis.Redis(connection_pool=commands)
    waits = redis.ConnectionPool(connection_class=ours, max_connections=MAX_CONNECTIONS, **kwargs)
    client.drp_waits_client = redis.Redis(connection_pool=waits)
    return client


def _deadline_classes() -> dict[Any, Any]:
    from redis.connection import Connection, SSLConnection, UnixDomainSocketConnection

    return {
        Connection: DeadlineConnection,
        SSLConnection: DeadlineSSLConnection,
        UnixDomainSocketConnection: DeadlineUnixDomainSocketConnection,
    }


#: A cache's cap on its connections that the primitives' own keep (a larger
#: one is no cap: redis-py 5's default is 2**31).
CAPPED = 10_000

#: redis-py's connection classes -> the ones that keep deadlines.
_DEADLINE_CLASSES = _deadline_classes()


def _connect(connection: Mapping[str, Any]) -> Any:
    if "CACHE" in connection:
        return _client_of_cache(connection["CACHE"])
    options = _with_default_timeouts(connection.get("OPTIONS", {}))
    if "SENTINELS" in connection:
        from redis.sentinel import Sentinel

        # No retries per sentinel: discovery already tries the next sentinel, and the
        # master connection's retry repeats the whole discovery.
        sentinel_options = _with_default_timeouts(connection.get("SENTINEL_OPTIONS", {}), 0)
        sentinel = Sentinel(
            [tuple(address) for address in connection["SENTINELS"]],
            sentinel_kwargs=sentinel_options,
        )
        if "connection_class" not in options:  # (what redis-py picks, keeping deadlines)
            tls = options.pop("ssl", False)
            options["connection_class"] = (
                DeadlineSentinelManagedSSLConnection if tls else DeadlineSentinelManagedConnection
            )
        return sentinel.master_for(connection["SERVICE_NAME"], **options)
    options = _keeping_deadlines(connection["URL"], options)
    if connection.get("CLUSTER", False):
        from redis.cluster import RedisCluster
        from redis.exceptions import RedisClusterException

        try:  # RedisCluster talks to the cluster while it is constructed
            with backend_errors():
                return RedisCluster.from_url(connection["URL"], **options)
        except RedisClusterException as exc:
            raise BackendUnavailable(f"Redis Cluster could not be reached: {exc}") from exc
    import redis

    if "MAX_CONNECTIONS" not in connection:
        return redis.Redis.from_url(connection["URL"], **options)
    # At most MAX_CONNECTIONS: a command waits up to POOL_TIMEOUT s for a free
    # connection (redis-py's BlockingConnectionPool). Blocking reads (waiting
    # callers, idle workers) get connections of their own, so that they never
    # starve the commands (a release, a renewal) that would end their wait.
    bounded = redis.BlockingConnectionPool.from_url(
        connection["URL"],
        **{**options, "max_connections": connection["MAX_CONNECTIONS"]},
        timeout=connection.get("POOL_TIMEOUT", conf.DEFAULT_POOL_TIMEOUT),
    )
    client = redis.Redis(connection_pool=bounded)
    client.drp_waits_client = redis.Redis.from_url(connection["URL"], **options)
    return client


def get_connection() -> Any:
    """The redis-py client described by ``DJANGO_REDIS_POOL["CONNECTION"]``.

    Built on first use and cached per process. Building it does no I/O, except for a
    Redis Cluster (which raises :class:`BackendUnavailable` when unreachable).
    """
    global _client
    with _lock:
        if _client is None:
            _client = _connect(get_config().connection)
        return _client


# ---------------------------------------------------------------- primitives


def _entry(name: str) -> conf.Entry:
    config = get_config()
    entry = config.entries.get(name) if isinstance(name, str) else None
    if entry is None:
        configured = ", ".join(map(repr, config.names())) or "none"
        raise NotConfigured(
            f"{name!r} is not configured in {conf.SETTING_NAME} (configured names: "
            f"{configured}). Add it, e.g. to {conf.setting_path(example_key())}."
        )
    return entry


def _build(entry: conf.Entry) -> Any:
    with _lock:
        resource = _resources.get(entry.name)
        if resource is None:
            config = get_config()
            resource = entry.kind.build(
                get_connection(), entry.name, config.key_prefix, entry.options
            )
            entry.kind.configure(resource, Configured(entry.options, config.long_hold))
            _resources[entry.name] = resource
        return resource


def get(kind: Kind[P], name: str) -> P:
    """The configured primitive ``name``, which must be of ``kind``: what each
    kind's accessor (``get_pool``) returns. Raises :class:`NotConfigured`
    listing the names of that kind."""
    built = _resources.get(name)  # fast path, unsynchronised: a dict read is atomic
    if built is not None and built.kind == kind.name:
        return built  # type: ignore[no-any-return]
    with _lock:  # one consistent configuration for the lookup and the build
        config = get_config()
        entry = config.entries.get(name) if isinstance(name, str) else None
        if entry is None or entry.kind is not kind:
            configured = ", ".join(map(repr, config.names(kind))) or "none"
            found = f" (it is {entry.kind.a_label})" if entry is not None else ""
            raise NotConfigured(
                f"No {kind.label} named {name!r} in {conf.setting_path(kind.setting_key)}"
                f"{found}; configured {kind.plural}: {configured}. Add it there."
            )
        return _build(entry)  # type: ignore[no-any-return]


def cached(name: str) -> Any:
    """The primitive ``name`` if this process has built it already, else None
    (no I/O, no validation: for the request path's fast lookup)."""
    return _resources.get(name) if isinstance(name, str) else None


def get_resource(name: str) -> Any:
    """The configured primitive called ``name``, whatever its kind.

    Raises :class:`NotConfigured` if no entry has that name and
    ``ImproperlyConfigured`` if the setting is invalid.
    """
    built = _resources.get(name) if isinstance(name, str) else None  # fast path, unsynchronised
    if built is not None:
        return built
    with _lock:
        return _build(_entry(name))
