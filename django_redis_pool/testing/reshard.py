"""Moving one slot of a running Redis Cluster the way ``redis-cli --cluster
reshard`` does: :class:`SlotMigration`.

The steps are ``redis-cli``'s: ``CLUSTER SETSLOT <slot> IMPORTING`` on the
target, ``MIGRATING`` on the source, ``MIGRATE`` of the slot's keys in batches
(``CLUSTER GETKEYSINSLOT``), then ``SETSLOT <slot> NODE <target>`` on the
target, the source and every other master. Between the steps the slot's keys
sit on both nodes, as they do while an operator reshards a live cluster; a
batch that meets a key present on both nodes fails with ``BUSYKEY``, leaving
the slot half-moved, as ``redis-cli`` leaves it (see :meth:`SlotMigration.fix`).
Never imports Django.
"""

from __future__ import annotations

import contextlib
from typing import Any

import redis

__all__ = ["SlotMigration"]


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class SlotMigration:
    """Moves ``slot`` from the master serving it to the master on ``target``
    (a port; default: the next master), step by step.

    ``nodes`` are the cluster's nodes (:attr:`.EmbeddedRedisCluster.nodes`).
    Use :meth:`begin`, :meth:`move` and :meth:`finish`, or :meth:`run` for the
    whole move; :meth:`fix` completes a move that a ``BUSYKEY`` stopped, as
    ``redis-cli --cluster fix`` does (the source's copy replaces the target's).
    """

    def __init__(self, nodes: Any, slot: int, target: int | None = None) -> None:
        self.slot = slot
        self._conns = {node.port: node.client() for node in nodes}
        self._ids = {
            port: _text(conn.execute_command("CLUSTER MYID")) for port, conn in self._conns.items()
        }
        masters = [port for port, conn in self._conns.items() if self._is_master(conn)]
        self.source = self.owner_of(slot)
        if target is None:
            target = masters[(masters.index(self.source) + 1) % len(masters)]
        if target == self.source or target not in masters:
            raise ValueError(f"target {target} is not another master than {self.source}")
        self.target = target
        self.masters = masters
        self.moved = 0

    @staticmethod
    def _is_master(conn: Any) -> bool:
        return _text(conn.execute_command("ROLE")[0]) == "master"

    def owner_of(self, slot: int) -> int:
        """The port of the master that serves ``slot`` (as the nodes see it)."""
        conn = next(iter(self._conns.values()))
        for start, end, master, *_ in conn.execute_command("CLUSTER SLOTS"):
            if int(start) <= slot <= int(end):
                return int(master[1])
        raise LookupError(f"no master serves slot {slot}")

    def keys_on(self, port: int, count: int = 1000) -> list[str]:
        """The keys of the slot that the node on ``port`` holds."""
        keys = self._conns[port].execute_command("CLUSTER GETKEYSINSLOT", self.slot, count)
        return [_text(key) for key in keys]

    def begin(self) -> None:
        """Open the slot: IMPORTING on the target, then MIGRATING on the source."""
        source_id, target_id = self._ids[self.source], self._ids[self.target]
        self._conns[self.target].execute_command(
            "CLUSTER SETSLOT", self.slot, "IMPORTING", source_id
        )
        self._conns[self.source].execute_command(
            "CLUSTER SETSLOT", self.slot, "MIGRATING", target_id
        )

    def move(self, batch: int = 1, *, replace: bool = False, keys: list[str] | None = None) -> int:
        """MIGRATE up to ``batch`` of the slot's keys still on the source (or
        the given ``keys``); returns how many (0: none left). ``BUSYKEY`` (a
        key on both nodes) raises ``redis.ResponseError`` unless ``replace``."""
        if keys is None:
            keys = self.keys_on(self.source, batch)
        if not keys:
            return 0
        target = self._conns[self.target].connection_pool.connection_kwargs
        args: list[Any] = [target["host"], target["port"], "", 0, 5000]
        if replace:
            args.append("REPLACE")
        self._conns[self.source].execute_command("MIGRATE", *args, "KEYS", *keys)
        self.moved += len(keys)
        return len(keys)

    def finish(self) -> None:
        """Close the slot: it belongs to the target, told to the target, the
        source and every other master (``redis-cli``'s order)."""
        target_id = self._ids[self.target]
        order = [self.target, self.source] + [
            port for port in self.masters if port not in (self.target, self.source)
        ]
        for port in order:
            self._conns[port].execute_command("CLUSTER SETSLOT", self.slot, "NODE", target_id)

    def run(self, batch: int = 1, pause: Any = None) -> None:
        """The whole move: :meth:`begin`, :meth:`move` until no key is left
        (calling ``pause()`` between batches, if given), :meth:`finish`."""
        self.begin()
        while self.move(batch):
            if pause is not None:
                pause()
        self.finish()

    def fix(self) -> None:
        """Complete a move that a ``BUSYKEY`` stopped: the remaining keys go
        over with ``REPLACE`` (the source's copy wins), then :meth:`finish`."""
        while self.move(100, replace=True):
            pass
        self.finish()

    def close(self) -> None:
        """Close the connections to the nodes."""
        for conn in self._conns.values():
            with contextlib.suppress(redis.RedisError):
                conn.close()
