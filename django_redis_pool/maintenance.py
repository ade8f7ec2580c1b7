"""What operators do to the configured primitives: read their state and reclaim
expired holds. Shared by the management commands and the admin."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from . import registry, signals
from .exceptions import NotConfigured
from .holds import send_signal, sender_of
from .primitives.base import Collected

__all__ = ["collect", "configured"]

logger = logging.getLogger("django_redis_pool")


def configured(names: Iterable[str] | None = None) -> list[Any]:
    """The configured primitives (of the kinds this version supports), sorted by
    name; only ``names`` if given. Raises :class:`NotConfigured` naming every
    unknown name."""
    config = registry.get_config()
    usable = [name for name in config.names() if config.entries[name].kind.supported]
    if names is None:
        return [registry.get_resource(name) for name in usable]
    wanted = list(dict.fromkeys(names))
    unknown = [name for name in wanted if name not in usable]
    if unknown:
        raise NotConfigured(
            f"Not configured: {', '.join(map(repr, unknown))} (configured: "
            f"{', '.join(map(repr, usable)) or 'none'})."
        )
    return [registry.get_resource(name) for name in wanted]


def collect(primitive: Any, *, dry_run: bool = False) -> Collected:
    """Reclaim the expired holds and dead waiters of ``primitive`` now; sends
    ``lease_reclaimed`` for each hold. ``dry_run`` only reports what would be."""
    collected: Collected = primitive.collect(dry_run=dry_run)
    if not dry_run:
        for lease in collected.reclaimed:
            logger.info(
                "reclaimed the expired hold of %r on %s %r (fence %s, resource %r)",
                lease.holder,
                primitive.kind,
                primitive.name,
                lease.fence,
                lease.resource,
            )
            send_signal(signals.lease_reclaimed, sender_of(lease), name=primitive.name, lease=lease)
    return collected
