"""Django app configuration of django-redis-pool."""

from __future__ import annotations

from typing import Any

from django.apps import AppConfig


class DjangoRedisPoolConfig(AppConfig):
    """Registers the system checks, the settings-change receiver, the
    listener that turns lost leases into the ``lease_lost`` signal, and the
    kinds' admin dashboard panels; imports the apps' ``tasks`` modules (their
    ``@task`` handlers, and this app's Tasks backend, which registers its
    runner: ``register_runner``).

    ``ready()`` does no Redis I/O: connections are made on first use.
    """

    name = "django_redis_pool"
    verbose_name = "Redis pools"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.core import checks as django_checks
        from django.core.signals import setting_changed
        from django.utils.module_loading import autodiscover_modules

        from . import checks, registry
        from .dashboard.panels import register_panels
        from .kinds import accessors  # noqa: F401 (a GLOBAL_LIMIT found by name)
        from .primitives.leased import lease

        django_checks.register(checks.check_settings, checks.TAG)
        django_checks.register(checks.check_deploy, checks.TAG, deploy=True)
        django_checks.register(checks.check_view_resources, checks.TAG, django_checks.Tags.urls)
        register_panels(registry.all_kinds())
        autodiscover_modules("tasks")  # apps' @task handlers
        if on_lease_lost not in lease.lost_listeners:
            lease.lost_listeners.append(on_lease_lost)
        setting_changed.connect(
            registry.on_setting_changed, dispatch_uid="django_redis_pool.registry"
        )


def on_lease_lost(lease: Any) -> None:
    """Sends ``lease_lost`` (added to the primitives' lost-lease listeners by
    :meth:`DjangoRedisPoolConfig.ready`); the sender is the class of the
    primitive that lost it."""
    from . import registry, signals

    kind = registry.by_name().get(lease.primitive_kind)
    sender = kind.primitive if kind is not None and kind.primitive is not None else type(lease)
    signals.send(signals.lease_lost, sender, name=lease.primitive_name, lease=lease)
