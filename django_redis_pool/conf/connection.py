"""``DJANGO_REDIS_POOL["CONNECTION"]``: where Redis is, checked without connecting.

:func:`read_connection` records what is wrong with it (E003 to E011, E025, E027)
in the reading's findings.
"""

from __future__ import annotations

import difflib
import math
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from ..kinds.contract import validate_bool
from ..primitives.validators import check_seconds
from .masking import masked_text, masked_url
from .schema import (
    CLUSTER_URL_SCHEMES,
    CONNECTION_FORMS,
    CONNECTION_KEYS,
    DEFAULT_POOL_TIMEOUT,
    URL_SCHEMES,
    Findings,
    accepts,
    did_you_mean,
    redis_cache_flavour,
    setting_path,
)

__all__ = ["read_connection"]


def read_connection(connection: Any, caches: Any, found: Findings) -> None:
    """Record in ``found`` what is wrong with ``connection`` (the value of
    ``CONNECTION``), given the ``CACHES`` setting."""
    path = setting_path("CONNECTION")
    if not isinstance(connection, dict):
        found.add(
            "E003",
            f"{path} must be a dict, got {type(connection).__name__}.",
            'Use {"URL": "redis://host:6379/0"}, {"CACHE": "<alias in CACHES>"} or '
            '{"SENTINELS": [["host", 26379]], "SERVICE_NAME": "mymaster"}.',
            path,
        )
        return
    for key in connection:
        if key not in CONNECTION_KEYS:
            found.add(
                "E010",
                f"{setting_path('CONNECTION', key)} is not a known key.",
                f"{did_you_mean(key, CONNECTION_KEYS)}Known keys: {', '.join(CONNECTION_KEYS)}.",
                setting_path("CONNECTION", key),
            )
    forms = [form for form in CONNECTION_FORMS if form in connection]
    if not forms:
        found.add(
            "E004",
            f"{path} has none of the keys URL, CACHE or SENTINELS, so it does not say "
            "where Redis is.",
            'Add "URL": "redis://host:6379/0", or "CACHE": "<alias in CACHES>" to reuse '
            'a Redis cache\'s connection, or "SENTINELS" with "SERVICE_NAME".',
            path,
        )
        return
    if len(forms) > 1:
        found.add(
            "E005",
            f"{path} sets both {forms[0]} and {forms[1]}; only one may say where Redis is.",
            f"Keep exactly one of {', '.join(CONNECTION_FORMS)}.",
            path,
        )
        return
    form = forms[0]
    allowed = CONNECTION_FORMS[form]
    for key in connection:
        if key in CONNECTION_KEYS and key not in allowed:
            found.add(
                "E005",
                f"{setting_path('CONNECTION', key)} cannot be combined with {form}.",
                f"With {form} the connection takes only {', '.join(allowed)}"
                + (" (the cache's own OPTIONS apply)." if form == "CACHE" else ".")
                + f" Remove {key}.",
                setting_path("CONNECTION", key),
            )
    for key in ("OPTIONS", "SENTINEL_OPTIONS"):
        if key not in connection or key not in allowed:
            continue
        if not _is_str_keyed_dict(connection[key]):
            found.add(
                "E006",
                f"{setting_path('CONNECTION', key)} must be a dict of keyword "
                f"arguments, got {connection[key]!r}.",
                'Use e.g. {"socket_timeout": 5, "password": "..."}, or remove the key.',
                setting_path("CONNECTION", key),
            )
        else:
            _read_client_options(key, connection[key], found)
    if form == "URL":
        _read_url(connection, found)
    elif form == "CACHE":
        _read_cache(connection["CACHE"], caches, found)
    else:
        _read_sentinels(connection, found)


def _is_str_keyed_dict(value: object) -> bool:
    return isinstance(value, dict) and all(isinstance(k, str) for k in value)


# ------------------------------------------------------------ the client's options

#: Types of the client arguments most often set, checked without connecting
#: (None is accepted for each where redis-py accepts it).
_OPTION_TYPES: dict[str, tuple[type, ...]] = {
    "socket_timeout": (int, float, type(None)),
    "socket_connect_timeout": (int, float, type(None)),
    "health_check_interval": (int, float),
    "socket_keepalive": (bool, type(None)),
    "retry_on_timeout": (bool,),
    "decode_responses": (bool,),
    "ssl": (bool,),
    "db": (int,),
    "max_connections": (int, type(None)),
    "username": (str, type(None)),
    "password": (str, type(None)),
    "client_name": (str, type(None)),
}

#: Parts of an option's name that mark its value as a secret: a message about
#: such an option names the value's type, never the value (messages are shown by
#: ``manage.py check``, in logs and on the admin's invalid-setting page).
_SECRET_PARTS = ("password", "secret", "token", "credential")


def _is_secret(name: str) -> bool:
    """Whether the client option ``name`` holds a secret (``username`` counts:
    it is half of the credentials)."""
    lowered = name.lower()
    return lowered == "username" or any(part in lowered for part in _SECRET_PARTS)


def _client_arguments() -> set[str]:
    """Every keyword argument redis-py's clients and connections take."""
    import inspect

    import redis
    from redis import connection
    from redis.cluster import RedisCluster

    takers = (
        redis.Redis,
        RedisCluster,
        connection.AbstractConnection,
        connection.Connection,
        connection.SSLConnection,
        connection.UnixDomainSocketConnection,
    )
    return {
        name
        for taker in takers
        for name, parameter in inspect.signature(taker.__init__).parameters.items()
        if parameter.kind is parameter.KEYWORD_ONLY
        or parameter.kind is parameter.POSITIONAL_OR_KEYWORD
    } - {"self", "host", "port", "path", "connection_pool", "startup_nodes"}


def _unknown_argument(name: str, what: str, path: str, known: set[str], found: Findings) -> None:
    """E027: ``name`` (``what`` says where) is no argument of redis-py's client."""
    close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.6)
    found.add(
        "E027",
        f"{what} is not an argument of redis-py's client (every connection would fail "
        "with a TypeError).",
        (f"Did you mean {close[0]!r}? " if close else "")
        + "Use the keyword arguments of redis.Redis, or remove it.",
        path,
    )


def _read_client_options(key: str, options: dict[str, Any], found: Findings) -> None:
    known = _client_arguments()
    for name, value in options.items():
        path = setting_path("CONNECTION", key, name)
        if name not in known:
            _unknown_argument(name, path, path, known, found)
        elif name in _OPTION_TYPES and (
            not isinstance(value, _OPTION_TYPES[name])
            or (bool not in _OPTION_TYPES[name] and isinstance(value, bool))
        ):
            expected = " or ".join(
                "None" if t is type(None) else t.__name__ for t in _OPTION_TYPES[name]
            )
            got = f"a {type(value).__name__}" if _is_secret(name) else repr(value)
            found.add(
                "E027",
                f"{path} must be {expected}, got {got}.",
                f"Give {name} a value of that type (e.g. 5 for a number of seconds).",
                path,
            )


# ------------------------------------------------------------------ the three forms


def _read_url(connection: dict[str, Any], found: Findings) -> None:
    cluster = connection.get("CLUSTER", False)
    try:
        validate_bool(cluster, setting_path("CONNECTION", "CLUSTER"))
    except ValueError as exc:
        found.add(
            "E011",
            f"{exc}.",
            "Set CLUSTER to True for a Redis Cluster, or remove it.",
            setting_path("CONNECTION", "CLUSTER"),
        )
    _read_pool_size(connection, cluster is True, found)
    url = connection["URL"]
    schemes = CLUSTER_URL_SCHEMES if cluster is True else URL_SCHEMES
    scheme = urlsplit(url).scheme if isinstance(url, str) else None
    if scheme not in schemes:
        listed = ", ".join(f"{s}://" for s in schemes)
        shown = repr(masked_url(url)) if isinstance(url, str) else repr(url)
        found.add(
            "E007",
            f"{setting_path('CONNECTION', 'URL')} must be a Redis URL starting with "
            f"{listed}; got {shown}.",
            'Use e.g. "redis://127.0.0.1:6379/0" (or "rediss://" for TLS'
            + (")." if cluster is True else ', "unix:///path/to/redis.sock" for a socket).'),
            setting_path("CONNECTION", "URL"),
        )
        return
    _read_url_parts(url, found)


def _read_url_parts(url: str, found: Findings) -> None:
    """The URL's port, database and query options, read as redis-py will read
    them (E007 for the port or database, E027 for a query option), without
    connecting: a part redis-py cannot take would make every request a 500."""
    path = setting_path("CONNECTION", "URL")
    shown = masked_url(url)
    try:
        urlsplit(url).port  # noqa: B018 (a port that is not a number raises here)
    except ValueError:
        found.add(
            "E007",
            f"{path} has a port that is not a number from 0 to 65535: {shown!r}.",
            'Use e.g. "redis://127.0.0.1:6379/0".',
            path,
        )
        return
    from redis.connection import parse_url

    try:
        parse_url(url)
    except ValueError as exc:
        found.add(
            "E027",
            f"{path}: {masked_text(str(exc))} ({shown!r}).",
            "Give each query option of the URL a value of its type (e.g. socket_timeout=5), "
            "or move it to CONNECTION['OPTIONS'].",
            path,
        )
        return
    known = _client_arguments()
    for name, _ in parse_qsl(urlsplit(url).query):
        if name not in known:
            _unknown_argument(name, f"{path}: the query option {name!r}", path, known, found)


def _read_pool_size(connection: dict[str, Any], cluster: bool, found: Findings) -> None:
    """``MAX_CONNECTIONS`` (an int >= 1, not with ``CLUSTER``) and ``POOL_TIMEOUT``
    (seconds >= 0, only with ``MAX_CONNECTIONS``)."""
    size, wait = connection.get("MAX_CONNECTIONS"), connection.get("POOL_TIMEOUT")
    path = setting_path("CONNECTION", "MAX_CONNECTIONS")
    if "MAX_CONNECTIONS" in connection:
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            found.add(
                "E025",
                f"{path} must be an int >= 1 (connections per process), got {size!r}.",
                "Use e.g. 50, or remove the key for no bound.",
                path,
            )
        elif cluster:
            found.add(
                "E025",
                f"{path} cannot be combined with CLUSTER.",
                "Remove MAX_CONNECTIONS (a cluster client keeps connections per node), or CLUSTER.",
                path,
            )
    if "POOL_TIMEOUT" in connection:
        path = setting_path("CONNECTION", "POOL_TIMEOUT")
        if "MAX_CONNECTIONS" not in connection:
            found.add(
                "E025",
                f"{path} is set without MAX_CONNECTIONS: with no bound, nothing waits "
                "for a connection.",
                "Add MAX_CONNECTIONS, or remove POOL_TIMEOUT.",
                path,
            )
        elif not accepts(check_seconds, wait, path, allow_none=False) or math.isinf(wait):
            found.add(
                "E025",
                f"{path} must be a number of seconds >= 0, got {wait!r}.",
                "Use how long a command waits for a free connection, e.g. 5.",
                path,
            )


def _read_cache(alias: Any, caches: Any, found: Findings) -> None:
    path = setting_path("CONNECTION", "CACHE")
    aliases = list(caches) if isinstance(caches, dict) else []
    if not isinstance(alias, str) or alias not in aliases:
        found.add(
            "E008",
            f"{path} is {alias!r}, which is not an alias in CACHES.",
            f"Use one of the aliases in CACHES ({', '.join(map(repr, aliases)) or 'none'}) "
            "or add a Redis cache under that alias.",
            path,
        )
        return
    cache = caches[alias]
    backend = cache.get("BACKEND") if isinstance(cache, dict) else None
    problem = ""
    try:
        flavour = redis_cache_flavour(backend) if isinstance(backend, str) else None
    except ImportError as exc:
        flavour, problem = None, f" (it cannot be imported: {exc})"
    if flavour is None:
        found.add(
            "E009",
            f'{path} is {alias!r}, but CACHES["{alias}"] uses {backend!r}{problem}, which '
            "is not a Redis cache backend.",
            f'Point CACHES["{alias}"]["BACKEND"] at "django_redis.cache.RedisCache" or '
            '"django.core.cache.backends.redis.RedisCache", or use "URL" instead of '
            '"CACHE".',
            path,
        )
        return
    options = cache.get("OPTIONS") or {}
    client_class = str(options.get("CLIENT_CLASS", "")) if isinstance(options, dict) else ""
    if client_class.rpartition(".")[2] == "ShardClient":
        found.add(
            "E042",
            f"{path} is {alias!r}, whose CLIENT_CLASS is django-redis's ShardClient: it "
            "spreads keys over several servers by itself, and has no client of one server "
            "for the primitives (every hold would fail with NotImplementedError).",
            'Give the primitives one Redis (or a Redis Cluster) with "URL" instead of '
            '"CACHE", e.g. {"URL": "redis://host:6379/1"}.',
            path,
        )
        return
    kwargs = options.get("CONNECTION_POOL_KWARGS", options) if isinstance(options, dict) else {}
    cap = kwargs.get("max_connections") if isinstance(kwargs, dict) else None
    if isinstance(cap, int) and not isinstance(cap, bool):
        found.add(
            "W012",
            f"{path} is {alias!r}, which holds at most {cap} connections: the "
            f"primitives keep connections of their own built from its settings, also at most "
            f"{cap} (a command waits up to {DEFAULT_POOL_TIMEOUT:g} s for one), and each "
            "waiting caller blocks on a connection of its own beside it, so they never "
            "take the cache's connections.",
            "Nothing to change if that is what you want; else give the primitives "
            '"URL" and "MAX_CONNECTIONS" of their own, or silence this with '
            'SILENCED_SYSTEM_CHECKS = ["django_redis_pool.W012"].',
            path,
        )


def _read_sentinels(connection: dict[str, Any], found: Findings) -> None:
    sentinels = connection["SENTINELS"]
    ok = isinstance(sentinels, (list, tuple)) and len(sentinels) > 0
    if ok:
        for address in sentinels:
            if not (
                isinstance(address, (list, tuple))
                and len(address) == 2
                and isinstance(address[0], str)
                and isinstance(address[1], int)
                and not isinstance(address[1], bool)
            ):
                ok = False
    if not ok:
        found.add(
            "E011",
            f"{setting_path('CONNECTION', 'SENTINELS')} must be a non-empty list of "
            f"[host, port] pairs, got {sentinels!r}.",
            'Use e.g. [["sentinel-1", 26379], ["sentinel-2", 26379]].',
            setting_path("CONNECTION", "SENTINELS"),
        )
    service = connection.get("SERVICE_NAME")
    if not isinstance(service, str) or not service:
        found.add(
            "E011",
            f"{setting_path('CONNECTION', 'SERVICE_NAME')} must be the name of the "
            f"monitored master (a non-empty str), got {service!r}.",
            'Add "SERVICE_NAME": "mymaster" (the name the sentinels monitor).',
            setting_path("CONNECTION", "SERVICE_NAME"),
        )
