"""Allocators in Django: the ``ALLOCATORS`` setting, ``get_allocator``, a key
per request (bound to the request's identity), ``pool_sync`` of ``KEYS``, and
the ``HEALTH_CHECK`` run by ``pool_gc``."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from .. import conf
from ..primitives.leased.allocator import MAX_KEY_PRIORITY, AllocatedKey, Allocator
from ..primitives.validators import check_duration, check_name
from .contract import Ask, Grant, Option, Report, validate_bool
from .leased import LeaseKind, Members, lease_timeout_option

__all__ = ["KIND", "AllocatorKind"]

logger = logging.getLogger("django_redis_pool")

#: Longest a ``pool_gc`` pass spends in one allocator's ``HEALTH_CHECK``; the
#: next pass goes on with the keys it did not reach.
HEALTH_BUDGET = 5.0


def _validate_keys(value: Any, path: str) -> tuple[tuple[str, int], ...]:
    """A list of keys (priority 0), or a dict of key -> priority."""
    if isinstance(value, dict):
        pairs = list(value.items())
    elif isinstance(value, (list, tuple)):
        pairs = [(key, 0) for key in value]
    else:
        raise ValueError(
            f"{path} must be a list of keys or a dict of key -> priority, got {value!r}"
        )
    seen: dict[str, int] = {}
    for index, (key, priority) in enumerate(pairs):
        where = f"{path}[{key!r}]" if isinstance(value, dict) else f"{path}[{index}]"
        key = check_name(key, where)
        if isinstance(priority, bool) or not isinstance(priority, int):
            raise ValueError(f"{where} must be an int priority, got {priority!r}")
        if abs(priority) > MAX_KEY_PRIORITY:
            raise ValueError(f"{where} = {priority} is beyond +-{MAX_KEY_PRIORITY}")
        if key in seen:
            raise ValueError(f"{path} lists {key!r} more than once")
        seen[key] = priority
    return tuple(seen.items())


def _validate_check(value: Any, path: str) -> Any:
    if value is not None:
        conf.import_callable(value, path)
    return value


class AllocatorKind(LeaseKind[Allocator]):
    """An :class:`Allocator` of the keys in ``KEYS``."""

    name = "allocator"
    setting_key = "ALLOCATORS"
    primitive = Allocator
    options = {
        "KEYS": Option(
            _validate_keys,
            (),
            'Give a list of distinct keys, e.g. ["proxy-1", "proxy-2"], or a dict of key '
            '-> priority (an int, larger first), e.g. {"fast-proxy": 10, "proxy-2": 0}.',
        ),
        "SHARED": Option(
            validate_bool, False, "Use False (a key is locked to one holder) or True."
        ),
        "LEASE_TIMEOUT": lease_timeout_option(120.0),
        "SOFT_BIND_TIMEOUT": Option(
            check_duration, 3600.0, "Use how long a name stays bound to its key, e.g. 3600."
        ),
        "HEALTH_CHECK": Option(
            _validate_check,
            None,
            "Use the dotted path of a function taking a key and returning False (or "
            'raising) when the key is unhealthy, e.g. "myapp.proxies.probe", or None.',
        ),
        "HEALTH_COOLDOWN": Option(
            check_duration,
            60.0,
            "Use how many seconds a key that failed HEALTH_CHECK stays out of rotation.",
        ),
    }
    size_word = "keys"
    members = Members("KEYS", "keys", "extend()")

    def __init__(self) -> None:
        self._next_probe: dict[str, int] = {}  # allocator name -> first key of the next pass

    def build(
        self, client: Any, name: str, key_prefix: str, options: Mapping[str, Any]
    ) -> Allocator:
        return Allocator(
            client,
            name,
            shared=options["SHARED"],
            lease_timeout=options["LEASE_TIMEOUT"],
            soft_bind_timeout=options["SOFT_BIND_TIMEOUT"],
            keys=dict(options["KEYS"]),  # restored by a malloc that finds none
            key_prefix=key_prefix,
        )

    def grant(self, primitive: Allocator, ask: Ask) -> Grant | None:
        """A key at once (an allocator never waits), bound to the request's
        identity if the view names one: the same user keeps the same key while
        it is free."""
        key = primitive.malloc_key(
            lease_timeout=ask.lease_timeout, name=ask.identity, holder=ask.holder
        )
        return _held(primitive, key)

    async def agrant(self, primitive: Allocator, ask: Ask) -> Grant | None:
        """:meth:`grant` on the event loop."""
        key = await primitive.amalloc_key(
            lease_timeout=ask.lease_timeout, name=ask.identity, holder=ask.holder
        )
        return _held(primitive, key)

    def sync(
        self, primitive: Allocator, options: Mapping[str, Any], *, prune: bool, dry_run: bool
    ) -> Report:
        """Add the configured keys with their priorities (one round trip per
        1,000 keys); ``prune`` removes the keys no longer configured, held ones
        included."""
        configured = dict(options["KEYS"])
        in_redis = set(primitive.keys())
        added, present, unconfigured = self.split_members(list(configured), in_redis)
        removed = unconfigured if prune else []
        if not dry_run:
            primitive.extend_many(configured)
            primitive.shrink(removed)
        return self.members_synced(
            primitive,
            added,
            present,
            removed,
            unconfigured=unconfigured,
            prune=prune,
            dry_run=dry_run,
        )

    def collect(self, primitive: Allocator, *, dry_run: bool) -> Report:
        """Reclaim expired locks and keys, then probe keys with ``HEALTH_CHECK``
        (for at most ``HEALTH_BUDGET`` seconds; the next pass goes on from there)."""
        reclaimed = super().collect(primitive, dry_run=dry_run)
        configured = self.configured(primitive)
        options = {} if configured is None else configured.options
        check = options.get("HEALTH_CHECK")
        if check is None:
            return reclaimed
        probed, failed = self._probe(
            primitive,
            conf.import_callable(check, "HEALTH_CHECK"),
            options["HEALTH_COOLDOWN"],
            dry_run,
        )
        note = f"health check: {len(failed)} of {probed} keys failed"
        if dry_run:
            note += " (dry run, nothing changed)"
        return Report(
            f"{reclaimed.line}; {note}",
            changed=reclaimed.changed or bool(failed),
            style="warning",
            details=(*reclaimed.details, *(f"  unhealthy: {key}" for key in failed)),
            data={**reclaimed.data, "unhealthy": failed},
            counts={**reclaimed.counts, "unhealthy": len(failed)},
        )

    def _probe(
        self,
        allocator: Allocator,
        check: Callable[[str], Any],
        cooldown: float,
        dry_run: bool,
    ) -> tuple[int, list[str]]:
        """Run ``check`` on keys in turn until the budget is spent; an
        unhealthy one sits out ``cooldown`` seconds (its ``HEALTH_COOLDOWN``)."""
        keys = allocator.keys()
        if not keys:
            return 0, []
        start = self._next_probe.get(allocator.name, 0) % len(keys)
        deadline = time.monotonic() + HEALTH_BUDGET
        probed, failed = 0, []
        while probed < len(keys) and time.monotonic() < deadline:
            key = keys[(start + probed) % len(keys)]
            probed += 1
            try:
                healthy = bool(check(key))
            except Exception as exc:
                logger.warning("HEALTH_CHECK of %r in %r failed: %s", key, allocator.name, exc)
                healthy = False
            if not healthy:
                failed.append(key)
                if not dry_run:
                    allocator.report_unhealthy(key, cooldown=cooldown)
        self._next_probe[allocator.name] = start + probed
        return probed, failed


KIND = AllocatorKind()


def _held(allocator: Allocator, key: AllocatedKey | None) -> Grant | None:
    """A request's hold of ``key`` (None: none was free)."""
    if key is None:
        return None
    if key.lease is None:  # shared: nothing to give back

        async def nothing() -> bool:
            return True

        return Grant(key, None, lambda: True, nothing)

    async def arelease() -> bool:
        return await allocator.afree_keys(key) == 1

    return Grant(key, key.lease, lambda: allocator.free_keys(key) == 1, arelease)
