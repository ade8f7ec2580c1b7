"""The ``DJANGO_REDIS_POOL`` setting: its shape, its defaults and how to read it.

The setting is read lazily (:func:`get_setting`), never at import time, so this
module can be imported before Django's settings are configured.

Each kind of primitive brings the key of its mapping in the setting and the options an
entry accepts (with a validator and a default each) in its module of
:mod:`.kinds`; this module, :mod:`.checks` and :mod:`.registry` read them from
there.

Validation lives in :mod:`.checks` (the system checks); :func:`parse` assumes a
setting that passed them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from . import kinds
from .kinds import Kind
from .primitives.base import DEFAULT_KEY_PREFIX
from .primitives.validators import check_lease_timeout, check_timeout

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
    "RULE_KEYS",
    "SETTING_NAME",
    "URL_SCHEMES",
    "Config",
    "Entry",
    "Rule",
    "check_retry_after",
    "check_status",
    "entry_options",
    "get_setting",
    "holdable_names",
    "import_callable",
    "parse",
    "parse_rule",
    "redis_cache_flavour",
    "setting_path",
    "top_level_keys",
]

SETTING_NAME = "DJANGO_REDIS_POOL"
DEFAULT_CONNECTION: Mapping[str, Any] = {"URL": "redis://127.0.0.1:6379/0"}

#: Used for connections built from a URL when OPTIONS set neither ``socket_timeout``
#: nor ``retry``: a refused connection then fails in about a second, and
#: a hung Redis fails an acquire within its timeout + about 1 s (see
#: :mod:`.primitives.deadlines`), not after minutes of retrying.
DEFAULT_SOCKET_TIMEOUT = 5.0
DEFAULT_RETRIES = 3
DEFAULT_RETRY_BASE = 0.05
DEFAULT_RETRY_CAP = 0.5

#: URL schemes ``redis.Redis.from_url`` understands (a cluster takes no ``unix``).
URL_SCHEMES = ("redis", "rediss", "unix")
CLUSTER_URL_SCHEMES = ("redis", "rediss")

#: The mutually exclusive ways to say where Redis is, and the keys each one takes.
CONNECTION_FORMS: Mapping[str, tuple[str, ...]] = {
    "URL": ("URL", "OPTIONS", "CLUSTER", "MAX_CONNECTIONS", "POOL_TIMEOUT"),
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
    "MAX_CONNECTIONS",
    "POOL_TIMEOUT",
)

#: How long a command waits for a free connection when MAX_CONNECTIONS bounds them (s).
DEFAULT_POOL_TIMEOUT = 5.0

#: The lease of a request's hold on a primitive whose leases never expire (s):
#: renewed while the request runs, so a killed worker's hold ends within it.
DEFAULT_REQUEST_LEASE = 30.0

#: A live hold older than this (s) is flagged by the dashboard's health,
#: ``pool_status`` and ``pool_gc``: a stuck holder that keeps renewing?
DEFAULT_LONG_HOLD = 3600.0


def top_level_keys() -> tuple[str, ...]:
    """Every key the setting accepts: ``CONNECTION``, ``KEY_PREFIX``, one mapping
    per kind, then the request options."""
    return (
        "CONNECTION",
        "KEY_PREFIX",
        *kinds.by_setting_key(),
        "MIDDLEWARE",
        "UNAVAILABLE_VIEW",
        "FAIL_OPEN",
        "REQUEST_LEASE",
        "LONG_HOLD",
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
        except (ImportError, TypeError) as exc:  # TypeError: a relative path (".views.busy")
            raise ValueError(
                f"{what} = {value!r} cannot be imported ({exc}): give the callable's full "
                "dotted path, e.g. 'myapp.views.busy'"
            ) from exc
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


def holdable_names(names: Mapping[str, Kind]) -> list[str]:
    """The names among ``names`` (name -> its kind) that a request can hold, sorted."""
    return sorted(name for name, kind in names.items() if kind.holds_requests)


def parse_rule(raw: Any, index: int, names: Mapping[str, Kind]) -> Rule:
    """Validate rule ``index`` of ``MIDDLEWARE``; ``names`` maps each configured
    primitive that a rule may name to its kind. Raises ``ValueError`` naming the
    setting."""
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
    kind = names[resource]
    if not kind.holds_requests:
        holdable = holdable_names(names)
        raise ValueError(
            f'{path}["RESOURCE"] = {resource!r} is {kind.a_label}, which a request cannot '
            f"hold (names a request can hold: {', '.join(map(repr, holdable)) or 'none'})"
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
    """``DJANGO_REDIS_POOL["CONNECTION"]["URL"]`` for ``("CONNECTION", "URL")``."""
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
    request_lease: float = DEFAULT_REQUEST_LEASE
    long_hold: float | None = DEFAULT_LONG_HOLD  #: None: never flagged

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
    for kind in kinds.all_kinds():
        for name, entry in raw.get(kind.setting_key, {}).items():
            entries[name] = Entry(kind, name, entry_options(kind, name, entry))
    usable = {name: e.kind for name, e in entries.items() if e.kind.supported}
    return Config(
        connection=raw.get("CONNECTION", DEFAULT_CONNECTION),
        key_prefix=raw.get("KEY_PREFIX", DEFAULT_KEY_PREFIX),
        entries=entries,
        middleware=tuple(
            parse_rule(rule, index, usable) for index, rule in enumerate(raw.get("MIDDLEWARE", ()))
        ),
        unavailable_view=raw.get("UNAVAILABLE_VIEW"),
        fail_open=raw.get("FAIL_OPEN", False),
        request_lease=raw.get("REQUEST_LEASE", DEFAULT_REQUEST_LEASE),
        long_hold=raw.get("LONG_HOLD", DEFAULT_LONG_HOLD),
    )
