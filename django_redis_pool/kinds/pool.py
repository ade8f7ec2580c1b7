"""Resource pools in Django: the ``POOLS`` setting, ``get_pool``, a request's
lease, and ``pool_sync`` of ``RESOURCES``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..primitives.leased.pool import ORDERS, ResourcePool
from ..primitives.validators import check_name
from .contract import MAX_WAITING, Ask, Grant, Option, Report
from .leased import LEASE_TIMEOUT, LeaseKind, Members

__all__ = ["KIND", "PoolKind"]


def _validate_resources(value: Any, path: str) -> tuple[str, ...]:
    if not isinstance(value, (list, tuple)):
        raise ValueError(f"{path} must be a list of resource ids, got {value!r}")
    ids: dict[str, None] = {}  # insertion-ordered set: linear for any length
    duplicates: dict[str, None] = {}
    for index, item in enumerate(value):
        resource = check_name(item, f"{path}[{index}]")
        if resource in ids:
            duplicates[resource] = None
        ids[resource] = None
    if duplicates:
        listed = ", ".join(repr(d) for d in duplicates)
        raise ValueError(f"{path} lists {listed} more than once")
    return tuple(ids)


def _validate_order(value: Any, path: str) -> str:
    if value not in ORDERS:
        raise ValueError(f"{path} must be one of {', '.join(map(repr, ORDERS))}, got {value!r}")
    return str(value)


class PoolKind(LeaseKind[ResourcePool]):
    """A :class:`ResourcePool` of the resource ids in ``RESOURCES``."""

    name = "pool"
    setting_key = "POOLS"
    primitive = ResourcePool
    options = {
        "RESOURCES": Option(
            _validate_resources,
            (),
            'Give a list of distinct resource ids, e.g. ["printer-1", "printer-2"]; '
            "an id is a non-empty str without braces or whitespace.",
        ),
        "LEASE_TIMEOUT": LEASE_TIMEOUT,
        "ORDER": Option(
            _validate_order,
            "fifo",
            'Use "fifo" (longest available first), "lifo" (most recently released '
            'first) or "random".',
        ),
        "MAX_WAITING": MAX_WAITING,
    }
    size_word = "resources"
    members = Members("RESOURCES", "resource ids", "associate()")

    def build(
        self, client: Any, name: str, key_prefix: str, options: Mapping[str, Any]
    ) -> ResourcePool:
        return ResourcePool(
            client,
            name,
            lease_timeout=options["LEASE_TIMEOUT"],
            order=options["ORDER"],
            resources=options["RESOURCES"],  # restored by an acquire that finds none
            key_prefix=key_prefix,
            max_waiting=options["MAX_WAITING"],
        )

    def grant(self, primitive: ResourcePool, ask: Ask) -> Grant | None:
        """A lease on one resource (refused at once past ``MAX_WAITING``)."""
        hold = primitive.hold(
            timeout=ask.timeout, lease_timeout=ask.lease_timeout, holder=ask.holder
        )
        return self.held(self.entered(hold))

    async def agrant(self, primitive: ResourcePool, ask: Ask) -> Grant | None:
        """:meth:`grant` on the event loop."""
        hold = primitive.ahold(
            timeout=ask.timeout, lease_timeout=ask.lease_timeout, holder=ask.holder
        )
        return self.held(await self.aentered(hold))

    def sync(
        self, primitive: ResourcePool, options: Mapping[str, Any], *, prune: bool, dry_run: bool
    ) -> Report:
        """Associate each configured id (ids already there, available or leased,
        are left alone); ``prune`` also removes the ids no longer configured,
        leased ones included (their holders' later release returns False)."""
        configured: tuple[str, ...] = options["RESOURCES"]
        in_redis = set(primitive.available()) | {lease.resource for lease in primitive.leases()}
        added, present, unconfigured = self.split_members(configured, in_redis)
        if not dry_run:
            primitive.associate_many(added)  # batched: one round trip per 1,000 ids
        removed: list[str] = []
        if prune:
            for resource in unconfigured:
                if dry_run or primitive.disassociate(resource):
                    removed.append(resource)
        return self.members_synced(
            primitive,
            added,
            present,
            removed,
            unconfigured=unconfigured,
            prune=prune,
            dry_run=dry_run,
        )


KIND = PoolKind()
