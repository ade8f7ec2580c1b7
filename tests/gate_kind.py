"""A kind defined outside the package, in one module, the way docs/adding-a-kind.md
says: a "gate" is a lock by another name, configured under ``GATES``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django_redis_pool import registry
from django_redis_pool.dashboard import action
from django_redis_pool.kinds.lock import LockKind
from django_redis_pool.primitives.lock import Lock


class Gate(Lock):
    """A lock whose keys and leases say "gate"."""

    kind = "gate"


def open_wide(gate: Any, data: dict[str, Any]) -> str:
    return f"gate {gate.name!r} stays as it is"


class GateKind(LockKind):
    name = "gate"
    setting_key = "GATES"
    primitive = Gate

    def build(self, client: Any, name: str, key_prefix: str, options: Mapping[str, Any]) -> Gate:
        return Gate(client, name, lease_timeout=options["LEASE_TIMEOUT"], key_prefix=key_prefix)

    def register_actions(self) -> None:
        action(self.name, "open-wide", label="Open wide")(open_wide)


KIND = GateKind()


def get_gate(name: str) -> Gate:
    gate: Gate = registry.get(KIND, name)
    return gate
