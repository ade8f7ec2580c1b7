"""A kind defined outside the package, in one module, the way docs/adding-a-kind.md
says: a "gate" is a lock by another name, configured under ``GATES``, with an
admin action of its own."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django_redis_pool import registry
from django_redis_pool.dashboard import action, lease_panels
from django_redis_pool.dashboard.panels import PANELS
from django_redis_pool.kinds.lock import LockKind
from django_redis_pool.primitives.leased.lock import Lock


class Gate(Lock):
    """A lock whose keys and leases say "gate"."""

    kind = "gate"


class GateKind(LockKind):
    name = "gate"
    setting_key = "GATES"
    primitive = Gate

    def build(self, client: Any, name: str, key_prefix: str, options: Mapping[str, Any]) -> Gate:
        return Gate(client, name, lease_timeout=options["LEASE_TIMEOUT"], key_prefix=key_prefix)


KIND = GateKind()


def get_gate(name: str) -> Gate:
    gate: Gate = registry.get(KIND, name)
    return gate


def open_wide(gate: Any, data: dict[str, Any]) -> str:
    return f"gate {gate.name!r} stays as it is"


def gate_actions(kind: GateKind) -> None:
    action(kind.name, "open-wide", label="Open wide")(open_wide)


# Its admin panels: a lock's, with its own action between force-release and gc.
PANELS[GateKind] = lambda kind: lease_panels.register_lock(kind, [gate_actions])
