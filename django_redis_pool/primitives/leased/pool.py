"""ResourcePool: a shared set of named resources handed out one holder at a time."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import Any

from ..clients.waits import checked
from ..text import text
from ..validators import (
    DEFAULT,
    Seconds,
    check_holder,
    check_lease_timeout,
    check_name,
    check_priority,
    renamed,
)
from ..wire.keys import to_ms
from ..wire.protocol import Mode
from ..wire.steps import Steps
from .lease import Lease
from .primitive import DEFAULT_KEY_PREFIX, AsyncHold, Collected, Hold, LeasedPrimitive
from .records import default_holder

__all__ = ["ORDERS", "ResourcePool"]

logger = logging.getLogger("django_redis_pool")

#: How an available resource is chosen: available longest, most recently
#: released, or uniformly at random.
ORDERS = Mode.ORDERS


class ResourcePool(LeasedPrimitive):
    """A pool of named resources (connection ids, worker nodes, licences...)
    shared by every process that uses the same Redis, ``name`` and ``key_prefix``.

    Each resource is either available or leased to one holder. Leases expire
    after ``lease_timeout`` seconds (None: never) unless renewed, so a crashed
    holder never keeps a resource. Blocked callers are served by priority, then
    first come first served, and are woken by the release itself.

    ``resources`` (optional): the ids the pool is meant to hold. An acquire
    that finds the pool holding no resource at all (none available, none
    leased: Redis lost its keys, e.g. a restart without persistence, an
    eviction or a ``FLUSHDB``) associates them again first, and is served.

    ``max_waiting`` (None: no limit) bounds how many callers wait at once,
    counted across every process and host: one more is refused at once, as a
    timeout refuses it (``acquire`` returns None, ``hold()`` raises
    :class:`ResourceUnavailable` with ``reason`` ``"full"``); 0: none ever waits.

    Building a pool does no I/O.
    """

    kind = "pool"
    named_resources = True

    def __init__(
        self,
        client: Any,
        name: str,
        *,
        lease_timeout: float | None = None,
        order: str = Mode.FIFO,
        resources: Iterable[str] | None = None,
        key_prefix: str = DEFAULT_KEY_PREFIX,
        max_waiting: int | None = None,
    ) -> None:
        if order not in ORDERS:
            raise ValueError(f"order must be one of {', '.join(ORDERS)}; got {order!r}")
        if isinstance(resources, (str, bytes)):
            raise ValueError(f"resources must be a list of resource ids, not {resources!r}")
        ids = tuple(_distinct_ids(resources or (), "resources[]"))
        heal = self._heal if ids else None  # (run by an acquire, once built)
        super().__init__(
            client, name, key_prefix=key_prefix, mode=order, heal=heal, max_waiting=max_waiting
        )
        self.lease_timeout = lease_timeout
        self.order = order
        #: The ids an acquire restores when the pool holds none (empty: none).
        self.resources = ids

    def _heal(self) -> Steps[None]:
        added = yield from self._associate(self.resources)
        logger.warning(
            "pool %r held no resource at all (never synced, or Redis lost its keys): "
            "associated its %d configured resources (%d were missing)",
            self.name,
            len(self.resources),
            added,
        )

    def __repr__(self) -> str:
        return f"<ResourcePool {self.name!r} order={self.order} lease_timeout={self.lease_timeout}>"

    # -- membership ---------------------------------------------------------------

    def associate(self, resource: str) -> bool:
        """Add ``resource`` to the pool; False if it is already there (available
        or leased). A waiter blocked on the pool gets it at once."""
        return (
            int(
                self._channel.run(
                    self._channel.op("pool_associate", check_name(resource, "resource"))
                )
            )
            == 1
        )

    def associate_many(self, resources: Iterable[str]) -> int:
        """Add ``resources`` (one atomic step per 1,000); returns how many were
        new. Waiters blocked on the pool get them at once."""
        return self._channel.run(self._associate(_distinct_ids(resources, "resource")))

    def _associate(self, ids: Sequence[str]) -> Steps[int]:
        added = 0
        for start in range(0, len(ids), 1000):
            added += int((yield self._channel.op("pool_associate", *ids[start : start + 1000])))
        return added

    def disassociate(self, resource: str) -> bool:
        """Remove ``resource``, available or leased (its holder's later release
        returns False). False if it was not in the pool."""
        return (
            int(
                self._channel.run(
                    self._channel.op("pool_disassociate", check_name(resource, "resource"))
                )
            )
            == 1
        )

    # -- acquiring and releasing -------------------------------------------------

    def acquire(
        self,
        *,
        timeout: float | None = 0,
        lease_timeout: Seconds = DEFAULT,
        holder: str | None = None,
        priority: int = 0,
    ) -> Lease | None:
        """Lease an available resource, waiting up to ``timeout`` seconds
        (0: do not wait, None: forever). Returns None if nothing was granted
        (in time, or at once when ``max_waiting`` callers already wait); never
        raises for a refusal (:meth:`hold` does, telling which).

        ``lease_timeout`` is how long the lease lives unless renewed (DEFAULT:
        the pool's ``lease_timeout``; None: no expiry); ``holder`` labels the
        holder (default ``host:pid:thread``); a larger ``priority`` is served
        first among blocked callers.
        """
        return self._engine.acquire(**self._ask(timeout, lease_timeout, holder, priority))

    async def aacquire(
        self,
        *,
        timeout: float | None = 0,
        lease_timeout: Seconds = DEFAULT,
        holder: str | None = None,
        priority: int = 0,
    ) -> Lease | None:
        """:meth:`acquire` on the event loop, waiting in the same fair queue as
        blocking callers. Cancelled while waiting, it leaves the queue (giving
        back a grant that raced the cancellation) before ``CancelledError``
        propagates."""
        return await self._engine.aacquire(**self._ask(timeout, lease_timeout, holder, priority))

    def _take(
        self, timeout: float | None, lease_timeout: Seconds, holder: str | None, priority: int
    ) -> Lease | None:
        """:meth:`acquire`, raising :class:`ResourceUnavailable` (``reason``
        ``"full"``) when refused for ``max_waiting``: what :meth:`hold` enters."""
        ask = self._ask(timeout, lease_timeout, holder, priority)
        return self._channel.run(
            self._engine.acquire_steps(**ask, bounded=self._channel.sync_bounded)
        )

    async def _atake(
        self, timeout: float | None, lease_timeout: Seconds, holder: str | None, priority: int
    ) -> Lease | None:
        """:meth:`_take` on the event loop."""
        ask = self._ask(timeout, lease_timeout, holder, priority)
        return await self._channel.arun(self._engine.acquire_steps(**ask))

    def _ask(
        self, timeout: float | None, lease_timeout: Seconds, holder: str | None, priority: int
    ) -> dict[str, Any]:
        """The engine's acquire arguments, validated."""
        if lease_timeout is DEFAULT:
            lease_ms = self._lease_ms
        else:
            lease_ms = to_ms(check_lease_timeout(lease_timeout))
        return {
            # (the defaults, 0 and None, taken at once: no call on the common path)
            "timeout": timeout
            if timeout is None or (type(timeout) is int and timeout == 0)
            else checked(timeout),
            "lease_ms": lease_ms,
            "holder": default_holder() if holder is None else check_holder(holder),
            "priority": priority
            if type(priority) is int and priority == 0
            else check_priority(priority),
            "max_waiting": self.max_waiting,
        }

    def release(self, lease_or_resource: Lease | str) -> bool:
        """Give a resource back.

        With a :class:`Lease`: only if that lease still holds it (a release
        Redis does not answer in time goes on in the background: see
        :meth:`Lease.release`). With a plain resource id: whoever holds it (an
        operator's force-release). False if it was not leased (or the lease had
        expired and was reclaimed).
        """
        if isinstance(lease_or_resource, Lease):
            return lease_or_resource.release()
        return self._engine.release(check_name(lease_or_resource, "resource")) != 0

    async def arelease(self, lease_or_resource: Lease | str) -> bool:
        """:meth:`release` on the event loop."""
        if isinstance(lease_or_resource, Lease):
            return await lease_or_resource.arelease()
        steps = self._engine.release_steps(check_name(lease_or_resource, "resource"))
        return await self._channel.arun(steps) != 0

    def hold(
        self,
        *,
        timeout: Seconds = DEFAULT,
        lease_timeout: Seconds = DEFAULT,
        holder: str | None = None,
        priority: int = 0,
        auto_renew: bool = False,
    ) -> Hold:
        """Context manager: lease a resource for the ``with`` block (a
        :class:`Hold`, yielding the :class:`Lease`), released on exit.

        Waits up to ``timeout`` seconds (DEFAULT or None: forever; 0: do not
        wait). Raises :class:`ResourceUnavailable` when nothing is granted in
        time, or at once when ``max_waiting`` callers already wait (its
        ``reason`` says which; its ``retry_after`` when a turn is expected:
        :meth:`turn_estimate`). ``lease_timeout`` as for :meth:`acquire`.
        ``auto_renew=True`` renews the lease in the background at about 2/3 of
        its duration until the block exits; a failed renewal is logged and
        marks the lease ``lost``.
        """
        wait = None if timeout is DEFAULT else timeout
        return Hold(
            self,
            lambda: self._take(wait, lease_timeout, holder, priority),
            self._unavailable(wait),
            auto_renew=auto_renew,
        )

    def ahold(
        self,
        *,
        timeout: Seconds = DEFAULT,
        lease_timeout: Seconds = DEFAULT,
        holder: str | None = None,
        priority: int = 0,
        auto_renew: bool = False,
    ) -> AsyncHold:
        """:meth:`hold` as an async context manager (``async with``); its
        auto-renewal is a task of the loop."""
        wait = None if timeout is DEFAULT else timeout
        return AsyncHold(
            self,
            lambda: self._atake(wait, lease_timeout, holder, priority),
            self._unavailable(wait),
            auto_renew=auto_renew,
        )

    def lease(self, **kwargs: Any) -> Hold:
        """Deprecated name of :meth:`hold` (``DeprecationWarning``)."""
        renamed("ResourcePool.lease()", "ResourcePool.hold()")
        return self.hold(**kwargs)

    def alease(self, **kwargs: Any) -> AsyncHold:
        """Deprecated name of :meth:`ahold` (``DeprecationWarning``)."""
        renamed("ResourcePool.alease()", "ResourcePool.ahold()")
        return self.ahold(**kwargs)

    def _unavailable(self, timeout: float | None) -> str:
        return f"no resource of pool {self.name!r} became available within {timeout} s"

    def collect(self, *, dry_run: bool = False) -> Collected:
        """What :meth:`LeasedPrimitive.collect` does; also associates the
        configured ``resources`` again if the pool holds none at all."""
        collected = super().collect(dry_run=dry_run)
        if self.resources and not dry_run and self.total_count() == 0:
            self._channel.run(self._heal())
        return collected

    # -- inspection ---------------------------------------------------------------

    def available_count(self) -> int:
        """How many resources are available (expired leases count as available)."""
        return self._counts()[0]

    def occupied_count(self) -> int:
        """How many resources are leased by a live lease."""
        return self._counts()[1]

    def total_count(self) -> int:
        """How many resources the pool has, available or leased."""
        return self._counts()[3]

    def _state(self, resource: str) -> int:
        return int(self._read("state", check_name(resource, "resource")))

    def is_available(self, resource: str) -> bool:
        """True if ``resource`` is in the pool and not leased."""
        return self._state(resource) == 1

    def is_occupied(self, resource: str) -> bool:
        """True if ``resource`` is leased by a live lease."""
        return self._state(resource) == 2

    def has(self, resource: str) -> bool:
        """True if ``resource`` is in the pool, available or leased."""
        return self._state(resource) != 0

    def available(self) -> list[str]:
        """The available resources, in the order ``fifo`` would hand them out."""
        return [str(r) for r in text(self._read("available"))]

    def leases(self) -> list[Lease]:
        """The current live leases."""
        return self._live_leases()


def _distinct_ids(resources: Iterable[str], what: str) -> list[str]:
    """The valid resource ids of ``resources``, each once, in order."""
    return list(dict.fromkeys(check_name(r, what) for r in resources))
