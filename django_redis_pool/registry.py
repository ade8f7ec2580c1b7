"""Configured primitives by name: ``get_pool("printers")``.

Everything is built lazily on first use from ``settings.DJANGO_REDIS_POOL`` and
cached per process: one Redis client (:func:`get_connection`) and one primitive per
name. The caches are cleared when the ``DJANGO_REDIS_POOL`` or ``CACHES`` setting
changes (Django's ``setting_changed`` signal, e.g. under ``override_settings``), or
by :func:`clear_caches`.

The setting is validated by the same code as the system checks
(:func:`.checks.check_settings`); an invalid setting raises ``ImproperlyConfigured``
with the checks' message.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from django.core.exceptions import ImproperlyConfigured

from . import conf
from .exceptions import BackendUnavailable, NotConfigured
from .primitives._common import backend_errors
from .primitives.lock import Lock
from .primitives.pool import ResourcePool
from .primitives.semaphore import Semaphore

__all__ = [
    "clear_caches",
    "get_config",
    "get_connection",
    "get_lock",
    "get_pool",
    "get_resource",
    "get_semaphore",
]

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


def get_config() -> conf.Config:
    """The parsed ``DJANGO_REDIS_POOL`` setting (validated like the system checks)."""
    global _config
    config = _config  # fast path, no lock: a global read is atomic
    if config is not None:
        return config
    with _lock:
        if _config is None:
            from .checks import check_settings

            errors = [m for m in check_settings() if m.is_serious()]
            if errors:
                raise ImproperlyConfigured(
                    "\n".join(f"({m.id}) {m.msg} HINT: {m.hint}" for m in errors)
                )
            _config = conf.parse(conf.get_setting())
        return _config


# ---------------------------------------------------------------- connection


def _with_default_timeouts(
    options: Mapping[str, Any], retries: int = conf.DEFAULT_RETRIES
) -> dict[str, Any]:
    """``options`` plus a short socket timeout and retry unless the user set either."""
    options = dict(options)
    if "socket_timeout" not in options and "retry" not in options:
        from redis.backoff import ExponentialBackoff
        from redis.retry import Retry

        options["socket_timeout"] = conf.DEFAULT_SOCKET_TIMEOUT
        options["retry"] = Retry(
            ExponentialBackoff(cap=conf.DEFAULT_RETRY_CAP, base=conf.DEFAULT_RETRY_BASE),
            retries,
        )
    return options


def _client_of_cache(alias: str) -> Any:
    from django.conf import settings
    from django.core.cache import caches

    flavour = conf.redis_cache_flavour(settings.CACHES[alias]["BACKEND"])
    if flavour == "django_redis":
        from django_redis import get_redis_connection

        return get_redis_connection(alias, write=True)
    return caches[alias]._cache.get_client(write=True)  # Django's builtin RedisCache


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
        return sentinel.master_for(connection["SERVICE_NAME"], **options)
    if connection.get("CLUSTER", False):
        from redis.cluster import RedisCluster
        from redis.exceptions import RedisClusterException

        try:  # RedisCluster talks to the cluster while it is constructed
            with backend_errors():
                return RedisCluster.from_url(connection["URL"], **options)
        except RedisClusterException as exc:
            raise BackendUnavailable(f"Redis Cluster could not be reached: {exc}") from exc
    import redis

    return redis.Redis.from_url(connection["URL"], **options)


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
            f"{configured}). Add it, e.g. to {conf.setting_path('POOLS')}."
        )
    if not entry.kind.supported:
        raise NotConfigured(
            f"{name!r} is configured in {conf.setting_path(entry.kind.setting_key)}, but "
            f"{entry.kind.label}s are not supported by this version yet."
        )
    return entry


def _build(entry: conf.Entry) -> Any:
    with _lock:
        resource = _resources.get(entry.name)
        if resource is None:
            assert entry.kind.factory is not None
            resource = entry.kind.factory(
                get_connection(), entry.name, get_config().key_prefix, entry.options
            )
            _resources[entry.name] = resource
        return resource


def _get(kind_name: str, name: str) -> Any:
    built = _resources.get(name)  # fast path, no lock: a dict read is atomic
    if built is not None and built.kind == kind_name:
        return built
    with _lock:  # one consistent configuration for the lookup and the build
        return _get_locked(conf.KINDS_BY_NAME[kind_name], name)


def _get_locked(kind: conf.Kind, name: str) -> Any:
    config = get_config()
    entry = config.entries.get(name) if isinstance(name, str) else None
    if entry is None or entry.kind is not kind:
        configured = ", ".join(map(repr, config.names(kind))) or "none"
        found = f" (it is a {entry.kind.label})" if entry is not None else ""
        raise NotConfigured(
            f"No {kind.label} named {name!r} in {conf.setting_path(kind.setting_key)}"
            f"{found}; configured {kind.label}s: {configured}. Add it there."
        )
    return _build(_entry(name))


def get_resource(name: str) -> Any:
    """The configured primitive called ``name``, whatever its kind.

    Raises :class:`NotConfigured` if no kind has that name (or its kind is not
    supported yet) and ``ImproperlyConfigured`` if the setting is invalid.
    """
    built = _resources.get(name) if isinstance(name, str) else None  # fast path, no lock
    if built is not None:
        return built
    with _lock:
        return _build(_entry(name))


def get_pool(name: str) -> ResourcePool:
    """The :class:`ResourcePool` configured in ``DJANGO_REDIS_POOL["POOLS"][name]``."""
    pool: ResourcePool = _get("pool", name)
    return pool


def get_semaphore(name: str) -> Semaphore:
    """The :class:`Semaphore` configured in ``DJANGO_REDIS_POOL["SEMAPHORES"][name]``.

    Its ``MAX_SIZE`` is stored in Redis by the first acquire that finds no max
    size there (``manage.py pool_sync`` overwrites it). Building it does no I/O.
    """
    semaphore: Semaphore = _get("semaphore", name)
    return semaphore


def get_lock(name: str) -> Lock:
    """The :class:`Lock` configured in ``DJANGO_REDIS_POOL["LOCKS"][name]``.

    One Lock object per process: its default holder is still unique per thread.
    """
    lock: Lock = _get("lock", name)
    return lock


# Accessors of the kinds reserved in ``conf.KINDS`` go here once their factory exists,
# one line each like get_pool (and into __all__ and the package's lazy exports):
# get_allocator ("allocator"), get_queue ("queue"), get_object_pool ("object_pool").
