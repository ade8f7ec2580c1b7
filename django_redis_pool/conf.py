"""The ``DJANGO_REDIS_POOL`` setting: its shape, its defaults and how to read it.

The setting is read lazily (:func:`get_setting`), never at import time, so this
module can be imported before Django's settings are configured.

Each kind of primitive is described by one :class:`Kind` in :data:`KINDS`: the
setting key holding its entries (``"POOLS"``), the options an entry accepts (with a
validator and a default each) and the factory that builds the primitive. A later
version adds a kind by adding one entry to that table; :mod:`.checks`,
:mod:`.registry` and the management commands pick it up from there. A kind whose
``factory`` is None is *reserved*: its key is accepted and its entry names are
validated, but it is not usable yet.

Validation lives in :mod:`.checks` (the system checks); :func:`parse` assumes a
setting that passed them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .primitives._common import check_lease_timeout, check_name, check_timeout
from .primitives.lock import Lock
from .primitives.pool import ORDERS, ResourcePool
from .primitives.semaphore import Semaphore, check_max_size

__all__ = [
    "CLUSTER_URL_SCHEMES",
    "CONNECTION_FORMS",
    "CONNECTION_KEYS",
    "DEFAULT_CONNECTION",
    "DEFAULT_KEY_PREFIX",
    "DEFAULT_RETRIES",
    "DEFAULT_RETRY_BASE",
    "DEFAULT_RETRY_CAP",
    "DEFAULT_SOCKET_TIMEOUT",
    "KINDS",
    "KINDS_BY_KEY",
    "KINDS_BY_NAME",
    "ORDERS",
    "RESERVED_KEYS",
    "SETTING_NAME",
    "TOP_LEVEL_KEYS",
    "URL_SCHEMES",
    "Config",
    "Entry",
    "Kind",
    "Option",
    "entry_options",
    "get_setting",
    "parse",
    "redis_cache_flavour",
    "setting_path",
]

SETTING_NAME = "DJANGO_REDIS_POOL"
DEFAULT_CONNECTION: Mapping[str, Any] = {"URL": "redis://127.0.0.1:6379/0"}
DEFAULT_KEY_PREFIX = "drp"

#: Used for connections built from a URL when OPTIONS set neither ``socket_timeout``
#: nor ``retry``: "Redis down" then surfaces in about a second, not minutes.
DEFAULT_SOCKET_TIMEOUT = 5.0
DEFAULT_RETRIES = 3
DEFAULT_RETRY_BASE = 0.05
DEFAULT_RETRY_CAP = 0.5

#: URL schemes ``redis.Redis.from_url`` understands (a cluster takes no ``unix``).
URL_SCHEMES = ("redis", "rediss", "unix")
CLUSTER_URL_SCHEMES = ("redis", "rediss")

#: The mutually exclusive ways to say where Redis is, and the keys each one takes.
CONNECTION_FORMS: Mapping[str, tuple[str, ...]] = {
    "URL": ("URL", "OPTIONS", "CLUSTER"),
    "CACHE": ("CACHE",),
    "SENTINELS": ("SENTINELS", "SERVICE_NAME", "OPTIONS", "SENTINEL_OPTIONS"),
}
CONNECTION_KEYS = (
    "URL",
    "CACHE",
    "SENTINELS",
    "OPTIONS",
    "CLUSTER",
    "SERVICE_NAME",
    "SENTINEL_OPTIONS",
)

# --------------------------------------------------------------------------- table

#: ``validate(value, setting_path) -> normalised value``; raises ``ValueError`` whose
#: message names ``setting_path``.
Validator = Callable[[Any, str], Any]

#: ``factory(client, name, key_prefix, options) -> primitive``; ``options`` holds every
#: option of the kind, defaults filled in.
Factory = Callable[[Any, str, str, Mapping[str, Any]], Any]


@dataclass(frozen=True)
class Option:
    """One per-entry option: how to validate it, its default, how to fix it."""

    validate: Validator
    default: Any
    hint: str


@dataclass(frozen=True)
class Kind:
    """One kind of primitive and its mapping in the setting."""

    name: str  #: "pool", "semaphore", ... (also what ``key_prefix`` calls the kind)
    setting_key: str  #: "POOLS", "SEMAPHORES", ...
    options: Mapping[str, Option] = field(default_factory=dict)
    factory: Factory | None = None  #: None: reserved for a later version

    @property
    def supported(self) -> bool:
        """Whether this version can build primitives of this kind."""
        return self.factory is not None

    @property
    def label(self) -> str:
        """Human name of the kind, e.g. "object pool"."""
        return self.name.replace("_", " ")


def _validate_resources(value: Any, path: str) -> tuple[str, ...]:
    if not isinstance(value, (list, tuple)):
        raise ValueError(f"{path} must be a list of resource ids, got {value!r}")
    ids: list[str] = []
    duplicates: list[str] = []
    for index, item in enumerate(value):
        resource = check_name(item, f"{path}[{index}]")
        if resource in ids and resource not in duplicates:
            duplicates.append(resource)
        ids.append(resource)
    if duplicates:
        listed = ", ".join(repr(d) for d in duplicates)
        raise ValueError(f"{path} lists {listed} more than once")
    return tuple(ids)


def _validate_order(value: Any, path: str) -> str:
    if value not in ORDERS:
        raise ValueError(f"{path} must be one of {', '.join(map(repr, ORDERS))}, got {value!r}")
    return str(value)


def _validate_bool(value: Any, path: str) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"{path} must be True or False, got {value!r}")
    return value


def _validate_max_size(value: Any, path: str) -> int | None:
    return None if value is None else check_max_size(value, path)


def _build_pool(client: Any, name: str, key_prefix: str, options: Mapping[str, Any]) -> Any:
    return ResourcePool(
        client,
        name,
        lease_timeout=options["LEASE_TIMEOUT"],
        order=options["ORDER"],
        key_prefix=key_prefix,
    )


def _build_semaphore(client: Any, name: str, key_prefix: str, options: Mapping[str, Any]) -> Any:
    return Semaphore(
        client,
        name,
        lease_timeout=options["LEASE_TIMEOUT"],
        default_max_size=options["MAX_SIZE"],  # stored on first acquire if Redis has none
        key_prefix=key_prefix,
    )


def _build_lock(client: Any, name: str, key_prefix: str, options: Mapping[str, Any]) -> Any:
    return Lock(
        client,
        name,
        lease_timeout=options["LEASE_TIMEOUT"],
        reentrant=options["REENTRANT"],
        auto_renew=options["AUTO_RENEW"],
        timeout=options["TIMEOUT"],
        key_prefix=key_prefix,
    )


_LEASE_HINT = "Use a number of seconds > 0 (e.g. 30), or None for leases that never expire."

KINDS: tuple[Kind, ...] = (
    Kind(
        "pool",
        "POOLS",
        {
            "RESOURCES": Option(
                _validate_resources,
                (),
                'Give a list of distinct resource ids, e.g. ["printer-1", "printer-2"]; '
                "an id is a non-empty str without braces or whitespace.",
            ),
            "LEASE_TIMEOUT": Option(check_lease_timeout, None, _LEASE_HINT),
            "ORDER": Option(
                _validate_order,
                "fifo",
                'Use "fifo" (longest available first), "lifo" (most recently released '
                'first) or "random".',
            ),
        },
        _build_pool,
    ),
    Kind(
        "semaphore",
        "SEMAPHORES",
        {
            "MAX_SIZE": Option(
                _validate_max_size,
                None,
                "Use the number of slots as an int >= 0, e.g. 3. It is stored in Redis on "
                "first use (if Redis has none) and by manage.py pool_sync.",
            ),
            "LEASE_TIMEOUT": Option(check_lease_timeout, None, _LEASE_HINT),
        },
        _build_semaphore,
    ),
    Kind(
        "lock",
        "LOCKS",
        {
            "LEASE_TIMEOUT": Option(check_lease_timeout, 30.0, _LEASE_HINT),
            "REENTRANT": Option(_validate_bool, False, "Use True or False."),
            "AUTO_RENEW": Option(_validate_bool, False, "Use True or False."),
            "TIMEOUT": Option(
                check_timeout,
                None,
                "Use how many seconds `with lock:` waits, as a number >= 0, or None to "
                "wait forever.",
            ),
        },
        _build_lock,
    ),
    # Reserved for later versions: add options and a factory to enable one.
    Kind("allocator", "ALLOCATORS"),
    Kind("queue", "QUEUES"),
    Kind("object_pool", "OBJECT_POOLS"),
)
KINDS_BY_KEY: Mapping[str, Kind] = {kind.setting_key: kind for kind in KINDS}
KINDS_BY_NAME: Mapping[str, Kind] = {kind.name: kind for kind in KINDS}

#: Top-level keys that are not a kind mapping and are reserved for later versions.
RESERVED_KEYS = ("MIDDLEWARE",)
TOP_LEVEL_KEYS = ("CONNECTION", "KEY_PREFIX", *KINDS_BY_KEY, *RESERVED_KEYS)

# ----------------------------------------------------------------------- reading


def get_setting() -> Any:
    """The raw ``DJANGO_REDIS_POOL`` setting (an empty dict when absent)."""
    from django.conf import settings

    return getattr(settings, SETTING_NAME, {})


def setting_path(*keys: object) -> str:
    """``DJANGO_REDIS_POOL["POOLS"]["printers"]`` for ``("POOLS", "printers")``."""
    parts = [SETTING_NAME]
    for key in keys:
        parts.append(f'["{key}"]' if isinstance(key, str) else f"[{key!r}]")
    return "".join(parts)


def redis_cache_flavour(backend: str) -> str | None:
    """Which Redis cache backend the dotted path ``backend`` names.

    ``"django"`` for Django's builtin ``RedisCache`` (or a subclass),
    ``"django_redis"`` for django-redis's ``RedisCache`` (or a subclass), None for
    any other backend. Imports the backend class (raising ``ImportError`` if it
    cannot), but never connects to anything.
    """
    from django.core.cache.backends.redis import RedisCache
    from django.utils.module_loading import import_string

    backend_class = import_string(backend)
    if not isinstance(backend_class, type):
        return None
    if issubclass(backend_class, RedisCache):
        return "django"
    try:
        from django_redis.cache import RedisCache as DjangoRedisCache
    except ImportError:
        return None
    if issubclass(backend_class, DjangoRedisCache):
        return "django_redis"
    return None


@dataclass(frozen=True)
class Entry:
    """One configured primitive: its kind, name and options (defaults filled in)."""

    kind: Kind
    name: str
    options: Mapping[str, Any]


@dataclass(frozen=True)
class Config:
    """A parsed, valid ``DJANGO_REDIS_POOL`` setting."""

    connection: Mapping[str, Any]
    key_prefix: str
    entries: Mapping[str, Entry]  #: by name, across all kinds

    def names(self, kind: Kind | None = None) -> list[str]:
        """Sorted names of the configured entries (of ``kind`` only, if given)."""
        return sorted(n for n, e in self.entries.items() if kind is None or e.kind is kind)


def entry_options(kind: Kind, name: str, entry: Mapping[str, Any]) -> dict[str, Any]:
    """Every option of ``kind`` for one entry, validated and with defaults filled in.

    Raises ``ValueError`` for an invalid value (unknown keys are left to the checks).
    """
    options = {}
    for key, option in kind.options.items():
        if key in entry:
            options[key] = option.validate(entry[key], setting_path(kind.setting_key, name, key))
        else:
            options[key] = option.default
    return options


def parse(raw: Mapping[str, Any]) -> Config:
    """Turn a setting that passed the system checks into a :class:`Config`."""
    entries: dict[str, Entry] = {}
    for kind in KINDS:
        for name, entry in raw.get(kind.setting_key, {}).items():
            entries[name] = Entry(kind, name, entry_options(kind, name, entry))
    return Config(
        connection=raw.get("CONNECTION", DEFAULT_CONNECTION),
        key_prefix=raw.get("KEY_PREFIX", DEFAULT_KEY_PREFIX),
        entries=entries,
    )
