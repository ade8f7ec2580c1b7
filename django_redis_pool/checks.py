"""System checks of the ``DJANGO_REDIS_POOL`` setting (``manage.py check``).

The app config registers them under the tag ``django_redis_pool``. Each turns
findings into check messages and never raises (an unexpected failure is itself
reported, as E099); ``docs/checks.md`` lists every id, what triggers it and the
fix.

* :func:`check_settings`: the setting, read by the registry
  (:func:`.registry.settings_report`) and validated by :func:`.conf.setting_report`, as the
  registry builds from it. Never connects to Redis.
* :func:`check_deploy` (``--deploy``): the Redis server and production needs
  (:mod:`.deploy_checks`).
* :func:`check_view_resources` (tag ``urls``): the ``@with_resource`` names of
  the routed views (:mod:`.url_checks`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.core import checks

from . import conf, deploy_checks, registry, url_checks

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
    return messages(conf.setting_report(raw, registry.KINDS, caches=caches).findings)


def check_settings(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """The system check: validate ``settings.DJANGO_REDIS_POOL`` (an unexpected
    failure is the finding E099). Never raises."""
    return messages(registry.settings_report().findings)


def check_deploy(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """``manage.py check --deploy``: what production needs of the settings and of
    the Redis server (this one connects to Redis). Reports nothing while the
    setting itself is invalid (``check_settings`` does). Never raises."""
    from django.conf import settings

    try:
        config = registry.settings_report().config
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
    config = registry.settings_report().config
    return [] if config is None else messages(url_checks.findings(config))
