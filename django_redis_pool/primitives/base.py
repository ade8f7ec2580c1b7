"""What every lease-engine primitive shares: its keys, reads, waiters and gc."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any, ClassVar

from ..exceptions import ResourceUnavailable
from ._common import check_client, check_name
from .engine import LeaseEngine, Waiter
from .lease import Lease

__all__ = ["LeasedPrimitive", "holding"]


@contextlib.contextmanager
def holding(lease: Lease | None, *, auto_renew: bool, unavailable: str) -> Iterator[Lease]:
    """Yield ``lease`` for a ``with`` block and release it on exit; raise
    :class:`ResourceUnavailable` with message ``unavailable`` if it is None.
    ``auto_renew=True`` renews it in the background until the block exits."""
    if lease is None:
        raise ResourceUnavailable(unavailable)
    if auto_renew:
        lease.start_auto_renew()
    try:
        yield lease
    finally:
        lease.release()


class LeasedPrimitive:
    """Base of :class:`ResourcePool`, :class:`Semaphore` and :class:`Lock`.

    Holds the validated ``client``, ``name`` and ``key_prefix`` and the
    :class:`LeaseEngine` that runs the primitive's scripts. Building one does no I/O.
    """

    #: The kind of primitive; with ``name`` it makes the Redis Cluster hash tag.
    kind: ClassVar[str]

    def __init__(self, client: Any, name: str, *, key_prefix: str, mode: str) -> None:
        self.client = check_client(client)
        self.name = check_name(name)
        self.key_prefix = check_name(key_prefix, "key_prefix")
        self._engine = LeaseEngine(
            client, kind=self.kind, name=self.name, mode=mode, prefix=self.key_prefix
        )

    def _read(self, what: str, resource: str = "") -> Any:
        return self._engine.run("read", what, resource)

    def _counts(self) -> tuple[int, int, int, int]:
        """(available, held by a live lease, waiting, size) on the Redis clock."""
        available, held, waiting, size = self._read("counts")
        return int(available), int(held), int(waiting), int(size)

    def _live_leases(self) -> list[Lease]:
        return [self._engine.lease_from_record(raw) for raw in self._read("leases") if raw]

    def _live_lease(self, resource: str) -> Lease | None:
        raw = self._read("record", resource)
        return self._engine.lease_from_record(raw) if raw else None

    def waiting_count(self) -> int:
        """How many callers are blocked in ``acquire``."""
        return self._counts()[2]

    def waiters(self) -> list[Waiter]:
        """The callers blocked in ``acquire``, in the order they will be served."""
        return self._engine.waiters(self._read("waiters"))

    def gc(self) -> int:
        """Reclaim every expired lease now (also done lazily by every acquire);
        returns how many were reclaimed. Also drops waiters that died."""
        return self._engine.gc()
