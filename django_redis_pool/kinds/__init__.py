"""The kinds of primitive the Django layer knows, one module each.

Each kind module holds what one kind is to Django (its options, builder,
request hold, and what the management commands read and change) as a
:class:`~.contract.Kind` named ``KIND``. The registry
(:mod:`django_redis_pool.registry`) lists the built-in ones
(:data:`~django_redis_pool.registry.KINDS`), looks them up and holds their
typed accessors (``get_pool``); the settings reader validates the kinds it is
given. What the admin shows and does for a kind is the dashboard's
(:mod:`django_redis_pool.dashboard`), registered by the app config.
"""

from __future__ import annotations

from .contract import Ask, Configured, Grant, Kind, Option, Report

__all__ = ["Ask", "Configured", "Grant", "Kind", "Option", "Report"]
