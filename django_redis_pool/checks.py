"""System checks of the ``DJANGO_REDIS_POOL`` setting (``manage.py check``).

They are registered under the tag ``django_redis_pool`` by the app config. They only
look at settings: they never connect to Redis and never raise (an unexpected
failure is itself reported, as E099). :mod:`.registry` runs the same checks before
building anything and raises ``ImproperlyConfigured`` with their message, so a
setting is validated in exactly one place.

====================  ==================================================================
ID                    Problem
====================  ==================================================================
``E001``              ``DJANGO_REDIS_POOL`` is not a dict.
``E002``              Unknown top-level key (close matches are suggested).
``E003``              ``CONNECTION`` is not a dict.
``E004``              ``CONNECTION`` has none of ``URL``, ``CACHE``, ``SENTINELS``.
``E005``              ``CONNECTION`` mixes forms (e.g. both ``URL`` and ``CACHE``, or
                      ``OPTIONS`` with ``CACHE``).
``E006``              ``CONNECTION["OPTIONS"]`` / ``["SENTINEL_OPTIONS"]`` is not a dict
                      with str keys.
``E007``              ``CONNECTION["URL"]`` is not a str with a redis://, rediss:// or
                      unix:// scheme (redis:// or rediss:// with ``CLUSTER``).
``E008``              ``CONNECTION["CACHE"]`` names an alias absent from ``CACHES``.
``E009``              ``CONNECTION["CACHE"]`` names a cache that is not a Redis cache
                      (django-redis or ``django.core.cache.backends.redis.RedisCache``).
``E010``              Unknown key in ``CONNECTION``.
``E011``              Bad ``CLUSTER``, ``SENTINELS`` or ``SERVICE_NAME`` value.
``E012``              ``KEY_PREFIX`` is not a valid name.
``E013``              A kind's mapping of entries is not a dict.
``E014``              An entry name is not a valid name (non-empty str, at most 200
                      characters, no braces or whitespace).
``E015``              An entry is not a dict of options.
``E016``              A name is used by more than one kind (names are unique across
                      kinds).
``E017``              Unknown option key in an entry (close matches are suggested).
``E018``              Bad option value (each kind's options are documented with the
                      kind).
``E019``              ``MIDDLEWARE`` is not a list.
``E020``              A ``MIDDLEWARE`` rule is invalid (not a dict, unknown or missing
                      key, bad regex, unconfigured ``RESOURCE`` or one a request cannot
                      hold, bad ``METHODS``, ``TIMEOUT``, ``LEASE_TIMEOUT``,
                      ``IDENTITY``, ``STATUS`` or ``RETRY_AFTER``).
``E021``              ``UNAVAILABLE_VIEW`` is not a callable or an importable dotted path.
``E022``              ``FAIL_OPEN`` is not True or False.
``E023``              A view decorated with ``@with_resource(name)`` (found through the
                      URLconf) names a primitive that is not configured, or one of a
                      kind a request cannot hold.
``E024``              An entry lacks an option its kind requires (e.g. ``FACTORY``).
``E025``              Bad ``MAX_CONNECTIONS`` (not an int >= 1, or with ``CLUSTER``) or
                      ``POOL_TIMEOUT`` (not seconds >= 0, or without ``MAX_CONNECTIONS``).
``E026``              ``REQUEST_LEASE`` is not a number of seconds >= 1.
``E027``              ``CONNECTION["OPTIONS"]`` / ``["SENTINEL_OPTIONS"]`` names an argument
                      redis-py's client does not take, or gives a common one a value of
                      the wrong type (checked without connecting).
``E030``              A task backend of ``TASKS`` (``tasks.RedisBackend``) names an entry
                      not configured in this setting (reported by the backend's own check).
``E031``              ``LONG_HOLD`` is not a number of seconds > 0 or None.
``E032``              A task backend of ``TASKS`` (``tasks.RedisBackend``) lists no
                      entry (meaning any configured one), but this setting configures
                      none of that kind (reported by the backend's own check).
``E033``              A task backend of ``TASKS`` (``tasks.RedisBackend``) is configured
                      while ``django_redis_pool`` is not in ``INSTALLED_APPS`` (its
                      worker, ``pool_worker``, is that app's command).
``E099``              The check itself failed unexpectedly (the error is reported).
``W001``              A kind is configured that this version does not support yet;
                      its entries cannot be used.
``W002``              ``MIDDLEWARE`` rules are set, but ``ResourceMiddleware`` is not in
                      ``settings.MIDDLEWARE``, so they do nothing.
``W006``              An entry has no members or no size (e.g. ``RESOURCES`` or ``KEYS``
                      empty or absent: every request for it gets a 503; ``MAX_SIZE``
                      unset: every request fails until a size is stored). Silence it
                      if they are only added at run time.
``W007``              ``ResourceMiddleware`` is in ``settings.MIDDLEWARE``, but
                      ``MIDDLEWARE`` has no rules, so it holds nothing.
``W008``              ``ResourceMiddleware`` comes before ``AuthenticationMiddleware``
                      in ``settings.MIDDLEWARE`` while a rule sets ``IDENTITY``: an
                      identity that reads ``request.user`` fails.
====================  ==================================================================

``manage.py check --deploy`` adds checks of the Redis server itself (they
connect to it) and of what production needs:

====================  ==================================================================
``E028``              Redis is older than 6.2.
``E029``              ``maxmemory-policy`` is an ``allkeys-*`` policy with a
                      ``maxmemory``: an evicted lease lets a second holder take a
                      resource its holder still uses (a double grant).
``W003``              Redis could not be reached to check it.
``W004``              Redis persists nothing (no AOF, no RDB snapshots): a restart
                      loses every hold, waiter and task.
``W005``              The connection shares a cache's Redis database: ``cache.clear()``
                      (a ``FLUSHDB``) wipes every hold.
====================  ==================================================================
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit

from django.core import checks

from . import conf, kinds, registry
from .primitives.validators import check_duration, check_lease_timeout, check_name

__all__ = ["TAG", "check_deploy", "check_settings", "check_view_resources", "validate"]

TAG = "django_redis_pool"
_PREFIX = "django_redis_pool"
MIDDLEWARE_PATH = "django_redis_pool.middleware.ResourceMiddleware"
AUTH_MIDDLEWARE_PATH = "django.contrib.auth.middleware.AuthenticationMiddleware"


class _Report:
    """Collects the check messages of one run."""

    def __init__(self) -> None:
        self.messages: list[checks.CheckMessage] = []

    def error(self, number: int, msg: str, hint: str) -> None:
        self.messages.append(checks.Error(msg, hint=hint, id=f"{_PREFIX}.E{number:03d}"))

    def warning(self, number: int, msg: str, hint: str) -> None:
        self.messages.append(checks.Warning(msg, hint=hint, id=f"{_PREFIX}.W{number:03d}"))


def _did_you_mean(key: object, candidates: Iterable[str]) -> str:
    matches = difflib.get_close_matches(str(key).upper(), list(candidates), n=1, cutoff=0.6)
    return f"Did you mean {matches[0]!r}? " if matches else ""


def _is_str_keyed_dict(value: object) -> bool:
    return isinstance(value, dict) and all(isinstance(k, str) for k in value)


def check_settings(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """The system check: validate ``settings.DJANGO_REDIS_POOL``. Never raises."""
    try:
        from django.conf import settings

        raw = conf.get_setting()
        messages = validate(raw, getattr(settings, "CACHES", {}))
        rules = raw.get("MIDDLEWARE") if isinstance(raw, dict) else None
        installed = MIDDLEWARE_PATH in getattr(settings, "MIDDLEWARE", ())
        if isinstance(rules, (list, tuple)) and rules and not installed:
            messages.append(
                checks.Warning(
                    f"{conf.setting_path('MIDDLEWARE')} has rules, but {MIDDLEWARE_PATH!r} is "
                    "not in settings.MIDDLEWARE, so they do nothing.",
                    hint=f"Add {MIDDLEWARE_PATH!r} to settings.MIDDLEWARE (after the session "
                    "and authentication middleware if a rule's IDENTITY uses request.user).",
                    id=f"{_PREFIX}.W002",
                )
            )
        order = list(getattr(settings, "MIDDLEWARE", ()))
        if (
            installed
            and AUTH_MIDDLEWARE_PATH in order
            and order.index(AUTH_MIDDLEWARE_PATH) > order.index(MIDDLEWARE_PATH)
            and isinstance(rules, (list, tuple))
            and any(isinstance(rule, dict) and rule.get("IDENTITY") for rule in rules)
        ):
            messages.append(
                checks.Warning(
                    f"{MIDDLEWARE_PATH!r} comes before {AUTH_MIDDLEWARE_PATH!r} in "
                    f"settings.MIDDLEWARE, and a rule of {conf.setting_path('MIDDLEWARE')} "
                    "sets IDENTITY: an IDENTITY that reads request.user fails (a 500), as "
                    "the user is not set yet when the rule is applied.",
                    hint=f"Move {MIDDLEWARE_PATH!r} after {AUTH_MIDDLEWARE_PATH!r}.",
                    id=f"{_PREFIX}.W008",
                )
            )
        if installed and isinstance(raw, dict) and rules in (None, [], ()):
            messages.append(
                checks.Warning(
                    f"{MIDDLEWARE_PATH!r} is in settings.MIDDLEWARE, but "
                    f"{conf.setting_path('MIDDLEWARE')} has no rules, so it holds nothing "
                    "for any request.",
                    hint=f'Add rules to {conf.setting_path("MIDDLEWARE")}, e.g. [{{"PATH": '
                    'r"^/print/", "RESOURCE": "<configured name>"}], or remove the middleware '
                    "from settings.MIDDLEWARE (@with_resource on a view works without it).",
                    id=f"{_PREFIX}.W007",
                )
            )
        return messages
    except Exception as exc:  # a check must report, never crash `manage.py check`
        return [
            checks.Error(
                f"Checking {conf.SETTING_NAME} failed unexpectedly: {exc!r}",
                hint=f"Make {conf.SETTING_NAME} a plain dict of plain values as documented.",
                id=f"{_PREFIX}.E099",
            )
        ]


def check_deploy(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """``manage.py check --deploy``: what production needs of the settings and of
    the Redis server (this one connects to Redis). Reports nothing while the
    setting itself is invalid (``check_settings`` does). Never raises."""
    from django.conf import settings

    try:
        raw = conf.get_setting()
        caches = getattr(settings, "CACHES", {})
        if any(m.is_serious() for m in validate(raw, caches)):
            return []
        report = _Report()
        config = registry.get_config()
        _check_shared_cache(config.connection, caches, report)
        try:
            client = registry.get_connection()
            infos = _server_infos(client)
            save = _config_value(client, "save")
        except Exception as exc:
            report.warning(
                3,
                f"Redis could not be reached to check it: {exc}",
                "Run manage.py check --deploy where the production Redis is reachable.",
            )
        else:
            for info in infos:
                _check_server(info, save, report)
        return report.messages
    except Exception as exc:  # a check must report, never crash `manage.py check`
        return [
            checks.Error(
                f"The deploy checks of {conf.SETTING_NAME} failed unexpectedly: {exc!r}",
                hint="Report it; the regular checks still apply.",
                id=f"{_PREFIX}.E099",
            )
        ]


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


def _check_server(info: Mapping[str, Any], save: str | None, report: _Report) -> None:
    version = str(info.get("redis_version", "0"))
    if tuple(int(p) for p in version.split(".")[:2] if p.isdigit()) < (6, 2):
        report.error(
            28,
            f"Redis {version} is older than 6.2, the oldest version this package supports.",
            "Upgrade Redis to 6.2 or later.",
        )
    policy, limit = str(info.get("maxmemory_policy", "noeviction")), info.get("maxmemory", 0)
    if policy.startswith("allkeys-") and limit:
        report.error(
            29,
            f"Redis evicts any key when full (maxmemory-policy {policy}, maxmemory "
            f"{limit}): an evicted lease lets a second holder take a resource that its "
            "holder still uses (a double grant; its fence stays higher, see the docs).",
            "Use maxmemory-policy noeviction (or volatile-*) on the Redis that holds the "
            "primitives, and keep caches on another Redis or database.",
        )
    if not info.get("aof_enabled") and save == "":
        report.warning(
            4,
            "Redis persists nothing (no AOF, no RDB snapshots): a restart loses every "
            "hold, waiter, queued task and result. Fences keep increasing and configured "
            "members come back by themselves, but a holder learns that its hold is gone "
            "only at its next renewal or release.",
            "Enable appendonly yes (appendfsync everysec) for the Redis that holds the "
            "primitives; see docs/operations.md.",
        )


def _check_shared_cache(connection: Mapping[str, Any], caches: Any, report: _Report) -> None:
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
        report.warning(
            5,
            f"The primitives share the Redis database of the cache {alias!r}: "
            "cache.clear() flushes that database, and every hold, waiter and task with it.",
            "Give the primitives a database (or a Redis) of their own in "
            f"{conf.setting_path('CONNECTION', 'URL')}, e.g. redis://host:6379/1.",
        )


def _locations(cache: Mapping[str, Any]) -> list[str]:
    location = cache.get("LOCATION", [])
    if isinstance(location, str):
        location = location.split(",") if "," in location else [location]
    return [str(item) for item in location if isinstance(item, str)]


def _database_of(url: str) -> tuple[str, int | None, str]:
    """(host, port, database) that a redis:// URL names."""
    parts = urlsplit(url.strip())
    database = parts.path.strip("/") or "0"
    try:
        port = parts.port or 6379
    except ValueError:
        port = None
    return (parts.hostname or "", port, database)


def check_view_resources(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """The URL check: every ``@with_resource`` name on a routed view is configured.

    Reports nothing while the setting itself is invalid (``check_settings`` does)
    or the URLconf cannot be loaded (Django's URL checks do)."""
    from django.conf import settings
    from django.urls import get_resolver

    try:
        raw = conf.get_setting()
        if not getattr(settings, "ROOT_URLCONF", None) or any(
            m.is_serious() for m in validate(raw, getattr(settings, "CACHES", {}))
        ):
            return []
        config = conf.parse(raw)
        found = set(_routed_guards(get_resolver().url_patterns))
    except Exception:
        return []
    usable = {name: entry.kind for name, entry in config.entries.items() if entry.kind.supported}
    messages: list[checks.CheckMessage] = []
    for view, guard in sorted(found, key=lambda item: (item[0], item[1].name)):
        if guard.name not in usable:
            messages.append(
                checks.Error(
                    f"{view} is decorated with @with_resource({guard.name!r}), but "
                    f"{guard.name!r} is not configured in {conf.SETTING_NAME}.",
                    hint=f"Fix the name, or configure it, e.g. in "
                    f"{conf.setting_path(kinds.example_key())}. Configured: "
                    f"{', '.join(map(repr, sorted(usable))) or 'none'}.",
                    obj=view,
                    id=f"{_PREFIX}.E023",
                )
            )
        elif not usable[guard.name].holds_requests:
            kind = usable[guard.name]
            holdable = conf.holdable_names(usable)
            messages.append(
                checks.Error(
                    f"{view} is decorated with @with_resource({guard.name!r}), but "
                    f"{guard.name!r} is {kind.a_label}, which a request cannot hold "
                    "(every request would fail with NotConfigured).",
                    hint="Name a primitive a request can hold: "
                    f"{', '.join(map(repr, holdable)) or 'none is configured'}.",
                    obj=view,
                    id=f"{_PREFIX}.E023",
                )
            )
    return messages


def _routed_guards(patterns: Iterable[Any]) -> Iterable[tuple[str, Any]]:
    """(view label, guard) of every ``@with_resource`` on views in ``patterns``."""
    for pattern in patterns:
        if hasattr(pattern, "url_patterns"):  # an include()
            yield from _routed_guards(pattern.url_patterns)
            continue
        callback = getattr(pattern, "callback", None)
        view_class = getattr(callback, "view_class", None)
        targets = [callback]
        if view_class is not None:  # method_decorator on a class-based view's methods
            targets += [
                getattr(view_class, m, None) for m in ("dispatch", *view_class.http_method_names)
            ]
        label = getattr(callback, "__qualname__", repr(callback))
        if view_class is not None:
            label = view_class.__qualname__
        label = f"{getattr(callback, '__module__', '?')}.{label}"
        for target in targets:
            for guard in getattr(target, "resource_guards", ()):
                yield label, guard


def validate(raw: Any, caches: Any) -> list[checks.CheckMessage]:
    """All problems of the setting value ``raw``, given the ``CACHES`` setting."""
    report = _Report()
    if not isinstance(raw, dict):
        report.error(
            1,
            f"{conf.SETTING_NAME} must be a dict, got {type(raw).__name__}.",
            f'Set {conf.SETTING_NAME} = {{"CONNECTION": {{"URL": "redis://..."}}, '
            f'"{kinds.example_key()}": {{...}}}}.',
        )
        return report.messages
    for key in raw:
        if key not in conf.top_level_keys():
            report.error(
                2,
                f"{conf.setting_path(key)} is not a known key.",
                f"{_did_you_mean(key, conf.top_level_keys())}"
                f"Known keys: {', '.join(conf.top_level_keys())}.",
            )
    if "CONNECTION" in raw:
        _check_connection(raw["CONNECTION"], caches, report)
    if "KEY_PREFIX" in raw:
        try:
            check_name(raw["KEY_PREFIX"], conf.setting_path("KEY_PREFIX"))
        except ValueError as exc:
            report.error(
                12,
                f"{exc}.",
                f'Use a short str without braces or whitespace, e.g. "{conf.DEFAULT_KEY_PREFIX}" '
                "(the default), or remove the key.",
            )
    usable = _check_kinds(raw, report)
    _check_middleware(raw, usable, report)
    if raw.get("UNAVAILABLE_VIEW") is not None:
        try:
            conf.import_callable(raw["UNAVAILABLE_VIEW"], conf.setting_path("UNAVAILABLE_VIEW"))
        except ValueError as exc:
            report.error(
                21,
                f"{exc}.",
                "Use the dotted path of a view taking (request, exception), e.g. "
                '"myapp.views.busy", or remove the key.',
            )
    if "FAIL_OPEN" in raw and not isinstance(raw["FAIL_OPEN"], bool):
        report.error(
            22,
            f"{conf.setting_path('FAIL_OPEN')} must be True or False, got {raw['FAIL_OPEN']!r}.",
            "Use True to run views without a hold when Redis is down, False (the default) "
            "to answer them with the unavailable response.",
        )
    try:
        check_lease_timeout(raw.get("LONG_HOLD"), conf.setting_path("LONG_HOLD"))
    except ValueError as exc:
        report.error(
            31,
            f"{exc}.",
            "Use the age past which a live hold is flagged as possibly stuck, e.g. "
            f"{conf.DEFAULT_LONG_HOLD:g} (the default), or None to flag none.",
        )
    path = conf.setting_path("REQUEST_LEASE")
    try:
        if check_duration(raw.get("REQUEST_LEASE", conf.DEFAULT_REQUEST_LEASE), path) < 1:
            raise ValueError(f"{path} must be at least 1 second, got {raw['REQUEST_LEASE']!r}")
    except ValueError as exc:
        report.error(
            26,
            f"{exc}.",
            "Use how long a request's hold on a primitive without LEASE_TIMEOUT outlives "
            f"a killed worker, e.g. {conf.DEFAULT_REQUEST_LEASE:g} (the default); it is "
            "renewed while the request runs.",
        )
    return report.messages


# ---------------------------------------------------------------- CONNECTION


def _check_connection(connection: Any, caches: Any, report: _Report) -> None:
    path = conf.setting_path("CONNECTION")
    if not isinstance(connection, dict):
        report.error(
            3,
            f"{path} must be a dict, got {type(connection).__name__}.",
            'Use {"URL": "redis://host:6379/0"}, {"CACHE": "<alias in CACHES>"} or '
            '{"SENTINELS": [["host", 26379]], "SERVICE_NAME": "mymaster"}.',
        )
        return
    for key in connection:
        if key not in conf.CONNECTION_KEYS:
            report.error(
                10,
                f"{conf.setting_path('CONNECTION', key)} is not a known key.",
                f"{_did_you_mean(key, conf.CONNECTION_KEYS)}"
                f"Known keys: {', '.join(conf.CONNECTION_KEYS)}.",
            )
    forms = [form for form in conf.CONNECTION_FORMS if form in connection]
    if not forms:
        report.error(
            4,
            f"{path} has none of the keys URL, CACHE or SENTINELS, so it does not say "
            "where Redis is.",
            'Add "URL": "redis://host:6379/0", or "CACHE": "<alias in CACHES>" to reuse '
            'a Redis cache\'s connection, or "SENTINELS" with "SERVICE_NAME".',
        )
        return
    if len(forms) > 1:
        report.error(
            5,
            f"{path} sets both {forms[0]} and {forms[1]}; only one may say where Redis is.",
            f"Keep exactly one of {', '.join(conf.CONNECTION_FORMS)}.",
        )
        return
    form = forms[0]
    allowed = conf.CONNECTION_FORMS[form]
    for key in connection:
        if key in conf.CONNECTION_KEYS and key not in allowed:
            report.error(
                5,
                f"{conf.setting_path('CONNECTION', key)} cannot be combined with {form}.",
                f"With {form} the connection takes only {', '.join(allowed)}"
                + (" (the cache's own OPTIONS apply)." if form == "CACHE" else ".")
                + f" Remove {key}.",
            )
    for key in ("OPTIONS", "SENTINEL_OPTIONS"):
        if key not in connection or key not in allowed:
            continue
        if not _is_str_keyed_dict(connection[key]):
            report.error(
                6,
                f"{conf.setting_path('CONNECTION', key)} must be a dict of keyword "
                f"arguments, got {connection[key]!r}.",
                'Use e.g. {"socket_timeout": 5, "password": "..."}, or remove the key.',
            )
        else:
            _check_client_options(key, connection[key], report)
    if form == "URL":
        _check_url(connection, report)
    elif form == "CACHE":
        _check_cache(connection["CACHE"], caches, report)
    else:
        _check_sentinels(connection, report)


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


def _check_client_options(key: str, options: dict[str, Any], report: _Report) -> None:
    known = _client_arguments()
    for name, value in options.items():
        path = conf.setting_path("CONNECTION", key, name)
        if name not in known:
            close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.6)
            report.error(
                27,
                f"{path} is not an argument of redis-py's client (every connection would "
                "fail with a TypeError).",
                (f"Did you mean {close[0]!r}? " if close else "")
                + "Use the keyword arguments of redis.Redis, or remove it.",
            )
        elif name in _OPTION_TYPES and (
            not isinstance(value, _OPTION_TYPES[name])
            or (bool not in _OPTION_TYPES[name] and isinstance(value, bool))
        ):
            expected = " or ".join(
                "None" if t is type(None) else t.__name__ for t in _OPTION_TYPES[name]
            )
            got = f"a {type(value).__name__}" if _is_secret(name) else repr(value)
            report.error(
                27,
                f"{path} must be {expected}, got {got}.",
                f"Give {name} a value of that type (e.g. 5 for a number of seconds).",
            )


def _check_url(connection: dict[str, Any], report: _Report) -> None:
    cluster = connection.get("CLUSTER", False)
    if not isinstance(cluster, bool):
        report.error(
            11,
            f"{conf.setting_path('CONNECTION', 'CLUSTER')} must be True or False, got {cluster!r}.",
            "Set CLUSTER to True for a Redis Cluster, or remove it.",
        )
    _check_pool_size(connection, cluster is True, report)
    url = connection["URL"]
    schemes = conf.CLUSTER_URL_SCHEMES if cluster is True else conf.URL_SCHEMES
    scheme = urlsplit(url).scheme if isinstance(url, str) else None
    if scheme not in schemes:
        listed = ", ".join(f"{s}://" for s in schemes)
        report.error(
            7,
            f"{conf.setting_path('CONNECTION', 'URL')} must be a Redis URL starting with "
            f"{listed}; got {url!r}.",
            'Use e.g. "redis://127.0.0.1:6379/0" (or "rediss://" for TLS'
            + (")." if cluster is True else ', "unix:///path/to/redis.sock" for a socket).'),
        )


def _check_pool_size(connection: dict[str, Any], cluster: bool, report: _Report) -> None:
    """``MAX_CONNECTIONS`` (an int >= 1, not with ``CLUSTER``) and ``POOL_TIMEOUT``
    (seconds >= 0, only with ``MAX_CONNECTIONS``)."""
    size, wait = connection.get("MAX_CONNECTIONS"), connection.get("POOL_TIMEOUT")
    path = conf.setting_path("CONNECTION", "MAX_CONNECTIONS")
    if "MAX_CONNECTIONS" in connection:
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            report.error(
                25,
                f"{path} must be an int >= 1 (connections per process), got {size!r}.",
                "Use e.g. 50, or remove the key for no bound.",
            )
        elif cluster:
            report.error(
                25,
                f"{path} cannot be combined with CLUSTER.",
                "Remove MAX_CONNECTIONS (a cluster client keeps connections per node), or CLUSTER.",
            )
    if "POOL_TIMEOUT" in connection:
        path = conf.setting_path("CONNECTION", "POOL_TIMEOUT")
        if "MAX_CONNECTIONS" not in connection:
            report.error(
                25,
                f"{path} is set without MAX_CONNECTIONS: with no bound, nothing waits "
                "for a connection.",
                "Add MAX_CONNECTIONS, or remove POOL_TIMEOUT.",
            )
        elif (
            isinstance(wait, bool)
            or not isinstance(wait, (int, float))
            or not 0 <= wait < float("inf")
        ):
            report.error(
                25,
                f"{path} must be a number of seconds >= 0, got {wait!r}.",
                "Use how long a command waits for a free connection, e.g. 5.",
            )


def _check_cache(alias: Any, caches: Any, report: _Report) -> None:
    path = conf.setting_path("CONNECTION", "CACHE")
    aliases = list(caches) if isinstance(caches, dict) else []
    if not isinstance(alias, str) or alias not in aliases:
        report.error(
            8,
            f"{path} is {alias!r}, which is not an alias in CACHES.",
            f"Use one of the aliases in CACHES ({', '.join(map(repr, aliases)) or 'none'}) "
            "or add a Redis cache under that alias.",
        )
        return
    cache = caches[alias]
    backend = cache.get("BACKEND") if isinstance(cache, dict) else None
    problem = ""
    try:
        flavour = conf.redis_cache_flavour(backend) if isinstance(backend, str) else None
    except ImportError as exc:
        flavour, problem = None, f" (it cannot be imported: {exc})"
    if flavour is None:
        report.error(
            9,
            f'{path} is {alias!r}, but CACHES["{alias}"] uses {backend!r}{problem}, which '
            "is not a Redis cache backend.",
            f'Point CACHES["{alias}"]["BACKEND"] at "django_redis.cache.RedisCache" or '
            '"django.core.cache.backends.redis.RedisCache", or use "URL" instead of '
            '"CACHE".',
        )


def _check_sentinels(connection: dict[str, Any], report: _Report) -> None:
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
        report.error(
            11,
            f"{conf.setting_path('CONNECTION', 'SENTINELS')} must be a non-empty list of "
            f"[host, port] pairs, got {sentinels!r}.",
            'Use e.g. [["sentinel-1", 26379], ["sentinel-2", 26379]].',
        )
    service = connection.get("SERVICE_NAME")
    if not isinstance(service, str) or not service:
        report.error(
            11,
            f"{conf.setting_path('CONNECTION', 'SERVICE_NAME')} must be the name of the "
            f"monitored master (a non-empty str), got {service!r}.",
            'Add "SERVICE_NAME": "mymaster" (the name the sentinels monitor).',
        )


# --------------------------------------------------------------- kinds, entries


def _check_kinds(raw: dict[str, Any], report: _Report) -> dict[str, kinds.Kind]:
    """Check every kind mapping; returns the usable names (supported kinds)."""
    kinds_of_name: dict[str, list[kinds.Kind]] = {}
    for kind in kinds.all_kinds():
        if kind.setting_key not in raw:
            continue
        path = conf.setting_path(kind.setting_key)
        entries = raw[kind.setting_key]
        if not isinstance(entries, dict):
            report.error(
                13,
                f"{path} must be a dict of name -> options, got {type(entries).__name__}.",
                f'Use e.g. {path} = {{"my-{kind.name.replace("_", "-")}": {{...}}}}, '
                "or remove the key.",
            )
            continue
        if entries and not kind.supported:
            report.warning(
                1,
                f"{path} ({kind.plural}) is not supported by this version yet; its entries "
                f"({', '.join(map(repr, entries))}) cannot be used.",
                f"Remove {path}, or upgrade django-redis-pool to a version with {kind.plural}.",
            )
        for name, entry in entries.items():
            try:
                check_name(name, f"{path} entry name")
            except ValueError as exc:
                report.error(
                    14,
                    f"{exc}.",
                    "Rename the entry: a name is a non-empty str of at most 200 characters "
                    "without braces or whitespace.",
                )
                continue
            kinds_of_name.setdefault(name, []).append(kind)
            if not isinstance(entry, dict):
                report.error(
                    15,
                    f"{conf.setting_path(kind.setting_key, name)} must be a dict of options, "
                    f"got {entry!r}.",
                    "Use a dict such as {} (all defaults)"
                    + (f" with the keys {', '.join(kind.options)}." if kind.options else "."),
                )
                continue
            if kind.supported:
                _check_options(kind, name, entry, report)
    for name, owners in kinds_of_name.items():
        if len(owners) > 1:
            paths = " and ".join(conf.setting_path(k.setting_key, name) for k in owners)
            report.error(
                16,
                f"The name {name!r} is used by {paths}; a name must be unique across all kinds.",
                "Rename all but one of them.",
            )
    return {name: owners[0] for name, owners in kinds_of_name.items() if owners[0].supported}


def _check_options(kind: kinds.Kind, name: str, entry: Mapping[Any, Any], report: _Report) -> None:
    path = conf.setting_path(kind.setting_key, name)
    before = len(report.messages)
    for key, value in entry.items():
        option = kind.options.get(key)
        if option is None:
            report.error(
                17,
                f"{conf.setting_path(kind.setting_key, name, key)} is not a known option of a "
                f"{kind.label}.",
                f"{_did_you_mean(key, kind.options)}Known options: {', '.join(kind.options)}.",
            )
            continue
        try:
            option.validate(value, conf.setting_path(kind.setting_key, name, key))
        except ValueError as exc:
            report.error(18, f"{exc}.", option.hint)
    for key in kind.required:
        if key not in entry:
            report.error(
                24,
                f"{path} has no {key}, which {kind.a_label} needs.",
                f"Add {key}: {kind.options[key].hint}",
            )
    if len(report.messages) == before:  # every option valid: how they go together
        options = conf.entry_options(kind, name, entry)
        try:
            kind.check_entry(options, path)
        except ValueError as exc:
            report.error(18, f"{exc}.", "Make the options agree.")
            return
        for msg, hint in kind.entry_warnings(name, options):
            report.warning(6, msg, hint)


def _check_middleware(
    raw: dict[str, Any], usable: Mapping[str, kinds.Kind], report: _Report
) -> None:
    if "MIDDLEWARE" not in raw:
        return
    rules = raw["MIDDLEWARE"]
    path = conf.setting_path("MIDDLEWARE")
    if not isinstance(rules, (list, tuple)):
        report.error(
            19,
            f"{path} must be a list of rules, got {type(rules).__name__}.",
            f'Use {path} = [{{"PATH": r"^/print/", "RESOURCE": "printers"}}] or remove the key.',
        )
        return
    for index, rule in enumerate(rules):
        try:
            conf.parse_rule(rule, index, usable)
        except ValueError as exc:
            report.error(
                20,
                f"{exc}.",
                'A rule is {"PATH": r"^/print/", "RESOURCE": "<configured name>"} plus '
                'optional "METHODS": ["POST"], "TIMEOUT": 5, "LEASE_TIMEOUT", "IDENTITY" '
                '(dotted path of a function of the request), "STATUS", "RETRY_AFTER".',
            )
