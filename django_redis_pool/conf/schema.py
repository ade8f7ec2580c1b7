"""The shape of the ``DJANGO_REDIS_POOL`` setting: its keys, its defaults, what a
valid one becomes (:class:`Config`), what an invalid one yields (:class:`Finding`),
and the validators of the request options that the request guard shares.

Nothing here reads the whole setting: :mod:`.reading` does, with these names.
Nothing here reads Django's settings either: the registry and the checks
read them and pass their values in.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..kinds.contract import Kind
from ..primitives.validators import check_seconds
from ..primitives.wire.keys import DEFAULT_KEY_PREFIX

__all__ = [
    "AUTH_MIDDLEWARE_PATH",
    "CHECK_PREFIX",
    "CLUSTER_URL_SCHEMES",
    "CONNECTION_FORMS",
    "CONNECTION_KEYS",
    "DEFAULT_CONNECTION",
    "DEFAULT_KEY_PREFIX",
    "DEFAULT_LONG_HOLD",
    "DEFAULT_METRICS_DEADLINE",
    "DEFAULT_POOL_TIMEOUT",
    "DEFAULT_REQUEST_LEASE",
    "DEFAULT_RETRIES",
    "DEFAULT_RETRY_BASE",
    "DEFAULT_RETRY_CAP",
    "DEFAULT_SOCKET_TIMEOUT",
    "MIDDLEWARE_PATH",
    "PROXY_SETTINGS",
    "RULE_KEYS",
    "SETTING_NAME",
    "URL_SCHEMES",
    "Config",
    "Entry",
    "Finding",
    "Findings",
    "Rule",
    "SettingReport",
    "accepts",
    "check_retry_after",
    "check_status",
    "did_you_mean",
    "holdable_names",
    "import_callable",
    "redis_cache_flavour",
    "setting_path",
    "top_level_keys",
]

SETTING_NAME = "DJANGO_REDIS_POOL"
#: What every check id starts with: ``django_redis_pool.E018``.
CHECK_PREFIX = "django_redis_pool"
DEFAULT_CONNECTION: Mapping[str, Any] = {"URL": "redis://127.0.0.1:6379/0"}

#: Used for connections built from a URL when OPTIONS set neither ``socket_timeout``
#: nor ``retry``: a refused connection then fails in about a second, and
#: a hung Redis fails an acquire within its timeout + about 1 s (see
#: :mod:`..primitives.clients.deadlines`), not after minutes of retrying.
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

#: The most seconds one scrape of the metrics spends reading Redis, all
#: primitives together (Prometheus gives up at 10 s by default): a primitive
#: not read by then reports ``django_redis_pool_up 0``.
DEFAULT_METRICS_DEADLINE = 5.0

#: A live hold older than this (s) is flagged by the dashboard's health,
#: ``pool_status`` and ``pool_gc``: a stuck holder that keeps renewing?
DEFAULT_LONG_HOLD = 3600.0

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
    "PERMITS",
)

#: The middleware that applies the ``MIDDLEWARE`` rules, and Django's that sets
#: ``request.user``, as ``settings.MIDDLEWARE`` names them.
MIDDLEWARE_PATH = "django_redis_pool.middleware.ResourceMiddleware"
AUTH_MIDDLEWARE_PATH = "django.contrib.auth.middleware.AuthenticationMiddleware"

#: Django's settings that, when set, say a proxy stands in front of Django
#: (a limit keyed by the client's address then warns, W009).
PROXY_SETTINGS = ("USE_X_FORWARDED_HOST", "USE_X_FORWARDED_PORT", "SECURE_PROXY_SSL_HEADER")


def top_level_keys(kinds: Iterable[Kind]) -> tuple[str, ...]:
    """Every key the setting accepts, given its ``kinds``: ``CONNECTION``,
    ``KEY_PREFIX``, one mapping per kind, then the request options."""
    return (
        "CONNECTION",
        "KEY_PREFIX",
        *(kind.setting_key for kind in kinds),
        "MIDDLEWARE",
        "UNAVAILABLE_VIEW",
        "FAIL_OPEN",
        "REQUEST_LEASE",
        "LONG_HOLD",
        "METRICS_DEADLINE",
    )


def setting_path(*keys: object) -> str:
    """``DJANGO_REDIS_POOL["CONNECTION"]["URL"]`` for ``("CONNECTION", "URL")``."""
    parts = [SETTING_NAME]
    for key in keys:
        parts.append(f'["{key}"]' if isinstance(key, str) else f"[{key!r}]")
    return "".join(parts)


def did_you_mean(key: object, candidates: Iterable[str]) -> str:
    """``"Did you mean 'CONNECTION'? "`` when ``key`` (upper-cased) is close to one of
    ``candidates``, else ``""``."""
    matches = difflib.get_close_matches(str(key).upper(), list(candidates), n=1, cutoff=0.6)
    return f"Did you mean {matches[0]!r}? " if matches else ""


# ----------------------------------------------------------------- findings


@dataclass(frozen=True)
class Finding:
    """One problem of the setting, as ``manage.py check`` shows it: its id,
    message and hint (docs/checks.md lists every id)."""

    code: str  #: "E018" or "W006": an E is an error, a W a warning
    message: str
    hint: str  #: how to fix it
    #: What it is about: a setting path (``DJANGO_REDIS_POOL["CONNECTION"]["URL"]``),
    #: ``settings.MIDDLEWARE``, or "" for the check itself.
    path: str = ""
    obj: Any = None  #: the object the check message names (a view's label), if any

    @property
    def id(self) -> str:
        """The check id: ``django_redis_pool.E018``."""
        return f"{CHECK_PREFIX}.{self.code}"

    @property
    def serious(self) -> bool:
        """Whether it is an error (the setting cannot be used), not a warning."""
        return self.code.startswith("E")

    def __str__(self) -> str:
        return f"({self.id}) {self.message} HINT: {self.hint}"


class Findings(list[Finding]):
    """The findings of one reading, in the order they are found."""

    def add(self, code: str, message: str, hint: str, path: str = "", obj: Any = None) -> None:
        """Record the finding ``code`` (``"E018"``)."""
        self.append(Finding(code, message, hint, path, obj))

    @property
    def serious(self) -> bool:
        """Whether any finding is an error."""
        return any(finding.serious for finding in self)


# ----------------------------------------------------------- requests and middleware


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
    if not accepts(check_seconds, value, what) or math.isinf(value):
        raise ValueError(f"{what} must be a number of seconds >= 0 or None, got {value!r}")
    return math.ceil(value)


def accepts(validator: Callable[..., Any], value: Any, *args: Any, **kwargs: Any) -> bool:
    """Whether ``validator`` (one of :mod:`..primitives.validators`) takes ``value``:
    for a setting whose message says more than the validator's (its unit, its use)."""
    try:
        validator(value, *args, **kwargs)
    except ValueError:
        return False
    return True


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


def holdable_names(names: Mapping[str, Kind]) -> list[str]:
    """The names among ``names`` (name -> its kind) that a request can hold, sorted."""
    return sorted(name for name, kind in names.items() if kind.holds_requests)


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


# ------------------------------------------------------------------ what it becomes


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
    metrics_deadline: float = DEFAULT_METRICS_DEADLINE

    def names(self, kind: Kind | None = None) -> list[str]:
        """Sorted names of the configured entries (of ``kind`` only, if given)."""
        return sorted(n for n, e in self.entries.items() if kind is None or e.kind is kind)


@dataclass(frozen=True)
class SettingReport:
    """The report on one reading of the setting (:func:`.reading.setting_report`):
    the :class:`Config` when it is valid, and every finding (the warnings of a
    valid setting, or its errors)."""

    config: Config | None  #: None when a finding is an error
    findings: tuple[Finding, ...]

    @property
    def errors(self) -> list[Finding]:
        """The findings that make the setting invalid."""
        return [finding for finding in self.findings if finding.serious]
