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

import math
import re
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
    "RULE_KEYS",
    "SETTING_NAME",
    "TOP_LEVEL_KEYS",
    "URL_SCHEMES",
    "Config",
    "Entry",
    "Kind",
    "Option",
    "Rule",
    "check_retry_after",
    "check_status",
    "entry_options",
    "get_setting",
    "import_callable",
    "parse",
    "parse_rule",
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
    primitive: type | None = None  #: the class ``factory`` builds (signals' sender)

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
    ids: dict[str, None] = {}  # insertion-ordered set: linear for any length
    duplicates: dict[str, None] = {}
    for index, item in enumerate(value):
        resource = check_name(item, f"{path}[{index}]")
        if resource in ids:
            duplicates[resource] = None
        ids[resource] = None
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
        ResourcePool,
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
        Semaphore,
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
        Lock,
    ),
    # Reserved for later versions: add options and a factory to enable one.
    Kind("allocator", "ALLOCATORS"),
    Kind("queue", "QUEUES"),
    Kind("object_pool", "OBJECT_POOLS"),
)
KINDS_BY_KEY: Mapping[str, Kind] = {kind.setting_key: kind for kind in KINDS}
KINDS_BY_NAME: Mapping[str, Kind] = {kind.name: kind for kind in KINDS}

TOP_LEVEL_KEYS = (
    "CONNECTION",
    "KEY_PREFIX",
    *KINDS_BY_KEY,
    "MIDDLEWARE",
    "UNAVAILABLE_VIEW",
    "FAIL_OPEN",
)

# ------------------------------------------------------- requests and middleware


def check_status(value: Any, what: str = "status") -> int:
    """An HTTP status for "nothing granted in time": an int from 400 to 599."""
    if isinstance(value, bool) or not isinstance(value, int) or not 400 <= value <= 599:
        raise ValueError(
            f"{what} must be an HTTP error status (an int from 400 to 599), got {value!r}"
        )
    return value


def check_retry_after(value: Any, what: str = "retry_after") -> int | None:
    """Seconds for the ``Retry-After`` header: a number >= 0 (rounded up), or None."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < math.inf:
        raise ValueError(f"{what} must be a number of seconds >= 0 or None, got {value!r}")
    return math.ceil(value)


def import_callable(value: Any, what: str) -> Callable[..., Any]:
    """The callable named by the dotted path ``value`` (or ``value`` itself)."""
    from django.utils.module_loading import import_string

    if isinstance(value, str):
        try:
            value = import_string(value)
        except ImportError as exc:
            raise ValueError(f"{what} = {value!r} cannot be imported: {exc}") from exc
    if not callable(value):
        raise ValueError(f"{what} must be a callable or its dotted path, got {value!r}")
    return value  # type: ignore[no-any-return]


#: Keys of one ``MIDDLEWARE`` rule: the first two are required.
RULE_KEYS = (
    "PATH",
    "RESOURCE",
    "METHODS",
    "TIMEOUT",
    "LEASE_TIMEOUT",
    "IDENTITY",
    "STATUS",
    "RETRY_AFTER",
)


@dataclass(frozen=True)
class Rule:
    """One ``MIDDLEWARE`` rule: requests whose path matches ``path`` (from its
    start, ``re.match``) and whose method is in ``methods`` (None: any) hold
    ``resource`` while they are served."""

    path: re.Pattern[str]
    methods: frozenset[str] | None
    resource: str
    #: keyword arguments of ``with_resource`` (timeout, lease_timeout, identity,
    #: status, retry_after)
    options: Mapping[str, Any]

    def matches(self, path: str, method: str | None) -> bool:
        """Whether a request for ``path`` with ``method`` falls under this rule."""
        if self.methods is not None and (method or "").upper() not in self.methods:
            return False
        return self.path.match(path) is not None


def parse_rule(raw: Any, index: int, names: Mapping[str, Any]) -> Rule:
    """Validate rule ``index`` of ``MIDDLEWARE``; ``names`` are the configured
    primitives that a rule may name. Raises ``ValueError`` naming the setting."""
    path = setting_path("MIDDLEWARE", index)
    if not isinstance(raw, dict):
        raise ValueError(f"{path} must be a dict with PATH and RESOURCE, got {raw!r}")
    unknown = [key for key in raw if key not in RULE_KEYS]
    if unknown:
        raise ValueError(f"{path} has unknown keys {unknown!r} (known: {', '.join(RULE_KEYS)})")
    for key in ("PATH", "RESOURCE"):
        if key not in raw:
            raise ValueError(f"{path} has no {key}")
    try:
        pattern = re.compile(raw["PATH"])
    except (re.error, TypeError) as exc:
        raise ValueError(
            f'{path}["PATH"] = {raw["PATH"]!r} is not a regular expression: {exc}'
        ) from exc
    resource = raw["RESOURCE"]
    if not isinstance(resource, str) or resource not in names:
        raise ValueError(
            f'{path}["RESOURCE"] = {resource!r} is not a configured name (configured: '
            f"{', '.join(map(repr, sorted(names))) or 'none'})"
        )
    methods = raw.get("METHODS")
    if methods is not None:
        if (
            isinstance(methods, str)
            or not isinstance(methods, (list, tuple))
            or not all(isinstance(m, str) and m.strip() for m in methods)
        ):
            raise ValueError(f'{path}["METHODS"] must be a list of HTTP methods, got {methods!r}')
        methods = frozenset(m.strip().upper() for m in methods)
    identity = raw.get("IDENTITY")
    if identity is not None:
        import_callable(identity, f'{path}["IDENTITY"]')
    options = {
        "timeout": check_timeout(raw.get("TIMEOUT"), f'{path}["TIMEOUT"]'),
        "lease_timeout": check_lease_timeout(raw.get("LEASE_TIMEOUT"), f'{path}["LEASE_TIMEOUT"]'),
        "identity": identity,
        "status": check_status(raw.get("STATUS", 503), f'{path}["STATUS"]'),
        "retry_after": check_retry_after(raw.get("RETRY_AFTER"), f'{path}["RETRY_AFTER"]'),
    }
    return Rule(pattern, methods, resource, options)


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
    middleware: tuple[Rule, ...] = ()
    unavailable_view: str | Callable[..., Any] | None = None
    fail_open: bool = False

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
    usable = {name: e for name, e in entries.items() if e.kind.supported}
    return Config(
        connection=raw.get("CONNECTION", DEFAULT_CONNECTION),
        key_prefix=raw.get("KEY_PREFIX", DEFAULT_KEY_PREFIX),
        entries=entries,
        middleware=tuple(
            parse_rule(rule, index, usable) for index, rule in enumerate(raw.get("MIDDLEWARE", ()))
        ),
        unavailable_view=raw.get("UNAVAILABLE_VIEW"),
        fail_open=raw.get("FAIL_OPEN", False),
    )
