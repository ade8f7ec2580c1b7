"""System checks of the ``DJANGO_REDIS_POOL`` setting (``manage.py check``).

The app config registers them under the tag ``django_redis_pool``. Each turns
findings into check messages and never raises (an unexpected failure is itself
reported, as E099); ``docs/checks.md`` lists every id, what triggers it and the
fix.

* :func:`check_settings`: the setting, read by :func:`.conf.read_settings` (the
  one place it is validated, which the registry uses too). Never connects to
  Redis.
* :func:`check_deploy` (``--deploy``): the Redis server and production needs
  (:mod:`.deploy_checks`).
* :func:`check_view_resources` (tag ``urls``): the ``@with_resource`` names of
  the routed views (:mod:`.url_checks`).

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

from collections.abc import Iterable
from typing import Any

from django.core import checks

from . import conf, deploy_checks, url_checks

__all__ = ["TAG", "check_deploy", "check_settings", "check_view_resources", "messages", "validate"]

TAG = "django_redis_pool"


def messages(findings: Iterable[conf.Finding]) -> list[checks.CheckMessage]:
    """Each finding as the check message ``manage.py check`` shows: an ``Error``
    or a ``Warning`` with its message, hint, object and id."""
    return [
        (checks.Error if finding.serious else checks.Warning)(
            finding.message, hint=finding.hint, obj=finding.obj, id=finding.id
        )
        for finding in findings
    ]


def validate(raw: Any, caches: Any) -> list[checks.CheckMessage]:
    """All problems of the setting value ``raw``, given the ``CACHES`` setting
    (without comparing it to ``settings.MIDDLEWARE``). Never raises."""
    return messages(conf.read(raw, caches).findings)


def check_settings(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """The system check: validate ``settings.DJANGO_REDIS_POOL`` (an unexpected
    failure is the finding E099). Never raises."""
    return messages(conf.read_settings().findings)


def check_deploy(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """``manage.py check --deploy``: what production needs of the settings and of
    the Redis server (this one connects to Redis). Reports nothing while the
    setting itself is invalid (``check_settings`` does). Never raises."""
    from django.conf import settings

    try:
        config = conf.read_settings().config
        if config is None:
            return []
        return messages(deploy_checks.findings(config, getattr(settings, "CACHES", {})))
    except Exception as exc:  # a check must report, never crash `manage.py check`
        return [
            checks.Error(
                f"The deploy checks of {conf.SETTING_NAME} failed unexpectedly: {exc!r}",
                hint="Report it; the regular checks still apply.",
                id=f"{conf.CHECK_PREFIX}.E099",
            )
        ]


def check_view_resources(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """The URL check: every ``@with_resource`` name on a routed view is configured.

    Reports nothing while the setting itself is invalid (``check_settings`` does)
    or the URLconf cannot be loaded (Django's URL checks do)."""
    from django.conf import settings

    if not getattr(settings, "ROOT_URLCONF", None):
        return []
    config = conf.read_settings().config
    return [] if config is None else messages(url_checks.findings(config))
