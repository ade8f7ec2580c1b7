"""The app's only model: an unmanaged placeholder that gives the admin dashboard
a place in the admin index and the app its own permissions.

No table is created. ``django_redis_pool.view_dashboard`` lets staff open the
dashboard; ``django_redis_pool.change_dashboard`` lets them act on the primitives.
"""

from __future__ import annotations

from django.db import models


class Dashboard(models.Model):
    """Stands for the Redis primitives configured in ``DJANGO_REDIS_POOL``."""

    class Meta:
        managed = False
        default_permissions = ("view", "change")
        verbose_name = "dashboard"
        verbose_name_plural = "dashboard"

    def __str__(self) -> str:
        return "Redis pools dashboard"
