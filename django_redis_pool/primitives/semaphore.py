"""Semaphore: at most N identities hold a slot at once (with leases)."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

from ..exceptions import backend_errors
from ._common import to_ms
from .base import DEFAULT_KEY_PREFIX, LeasedPrimitive, aholding, holding
from .lease import Lease
from .protocol import Mode
from .records import default_holder
from .validators import (
    check_count,
    check_holder,
    check_lease_timeout,
    check_priority,
    check_timeout,
)

__all__ = ["Semaphore", "check_max_size"]


class Semaphore(LeasedPrimitive):
    """A counting semaphore with identities, shared through Redis.

    At most ``get_max_size()`` identities hold a slot at once. The max size is
    stored in Redis (``set_max_size``), so every process agrees on it; until it
    is set, ``acquire`` raises :class:`NotConfigured` (or, given
    ``default_max_size``, stores that size first). Each hold is a lease on
    the Redis clock (``lease_timeout``, None: no expiry) so a crashed holder's
    slot comes back; an identity that asks again refreshes its hold and never
    takes a second slot. Blocked callers are served by priority, then first
    come first served, and are woken by the release itself.

    ``max_waiting`` (None: no limit) bounds how many callers wait at once,
    counted across every process and host: one more is refused at once, as a
    timeout refuses it (``acquire`` returns False, ``hold()`` raises
    :class:`ResourceUnavailable` with ``reason`` ``"full"``); 0: none ever waits.

    Building a semaphore does no I/O.
    """

    kind = "semaphore"

    def __init__(
        self,
        client: Any,
        name: str,
        *,
        lease_timeout: float | None = None,
        default_max_size: int | None = None,
        key_prefix: str = DEFAULT_KEY_PREFIX,
        max_waiting: int | None = None,
    ) -> None:
        default = None if default_max_size is None else check_max_size(default_max_size)
        super().__init__(
            client,
            name,
            key_prefix=key_prefix,
            mode=Mode.SEM,
            default_max=default,
            max_waiting=max_waiting,
        )
        self.lease_timeout = check_lease_timeout(lease_timeout)
        #: Stored by the first acquire that finds no max size in Redis (None: such
        #: an acquire raises NotConfigured). ``set_max_size`` always overrides it.
        self.default_max_size = default

    def __repr__(self) -> str:
        return f"<Semaphore {self.name!r} lease_timeout={self.lease_timeout}>"

    # -- size ------------------------------------------------------------------------

    def set_max_size(self, n: int) -> None:
        """Store the number of slots. Raising it serves waiting callers at once;
        lowering it never evicts a holder (new acquires wait until below it)."""
        self._engine.run("sem_set_max", check_max_size(n), 0)

    def ensure_max_size(self, n: int) -> bool:
        """Store ``n`` as the number of slots unless one is already stored;
        True if it was stored. (How settings' ``MAX_SIZE`` is applied on first use.)"""
        return int(self._engine.run("sem_set_max", check_max_size(n), 1)) == 1

    def get_max_size(self) -> int:
        """The number of slots (0 if it was never set)."""
        with backend_errors():
            value = self.client.get(f"{self._engine.base}:max")
        return int(value) if value is not None else 0

    def get_current_size(self) -> int:
        """How many identities hold a slot now (expired holds not counted)."""
        return self._counts()[1]

    # -- acquiring and releasing ----------------------------------------------------

    def acquire_lease(
        self,
        identity: str,
        *,
        timeout: float | None = 0,
        lease_timeout: float | None = None,
        priority: int = 0,
    ) -> Lease | None:
        """Like :meth:`acquire`, but returns the slot's :class:`Lease` (None if
        not granted): its ``fence``, ``expires_at``, ``renew()`` and ``release()``."""
        return self._engine.acquire(**self._ask(identity, timeout, lease_timeout, priority))

    async def aacquire_lease(
        self,
        identity: str,
        *,
        timeout: float | None = 0,
        lease_timeout: float | None = None,
        priority: int = 0,
    ) -> Lease | None:
        """:meth:`acquire_lease` on the event loop (see :meth:`aacquire`)."""
        return await self._engine.aacquire(**self._ask(identity, timeout, lease_timeout, priority))

    def _take(
        self,
        identity: str,
        timeout: float | None,
        lease_timeout: float | None = None,
        priority: int = 0,
    ) -> Lease | None:
        """:meth:`acquire_lease`, but raising :class:`ResourceUnavailable`
        (``reason`` ``"full"``) when refused for ``max_waiting`` (``hold()`` and
        a request's hold use it)."""
        ask = self._ask(identity, timeout, lease_timeout, priority)
        return self._engine.drive(
            self._engine.acquire_steps(**ask, bounded=self._engine.sync_bounded)
        )

    async def _atake(
        self,
        identity: str,
        timeout: float | None,
        lease_timeout: float | None = None,
        priority: int = 0,
    ) -> Lease | None:
        """:meth:`_take` on the event loop."""
        ask = self._ask(identity, timeout, lease_timeout, priority)
        return await self._engine.adrive(self._engine.acquire_steps(**ask))

    def _ask(
        self, identity: str, timeout: float | None, lease_timeout: float | None, priority: int
    ) -> dict[str, Any]:
        """The engine's acquire arguments, validated."""
        lease_timeout = check_lease_timeout(lease_timeout)
        return {
            "timeout": check_timeout(timeout),
            "lease_ms": to_ms(self.lease_timeout if lease_timeout is None else lease_timeout),
            "holder": check_holder(identity, "identity"),
            "priority": check_priority(priority),
            "max_waiting": self.max_waiting,
        }

    def acquire(
        self,
        identity: str,
        *,
        timeout: float | None = 0,
        lease_timeout: float | None = None,
        priority: int = 0,
    ) -> bool:
        """Take a slot for ``identity``, waiting up to ``timeout`` seconds (0: do
        not wait, None: forever). True if granted; False if not (in time, or at
        once when ``max_waiting`` callers already wait).

        An identity that already holds a slot gets True again and its lease
        refreshed, without taking a second slot. Raises :class:`NotConfigured`
        if the max size was never set.
        """
        ask = self._ask(identity, timeout, lease_timeout, priority)
        return self._engine.acquire(**ask) is not None

    async def aacquire(
        self,
        identity: str,
        *,
        timeout: float | None = 0,
        lease_timeout: float | None = None,
        priority: int = 0,
    ) -> bool:
        """:meth:`acquire` on the event loop, waiting in the same fair queue as
        blocking callers. Cancelled while waiting, it leaves the queue (giving
        back a slot that raced the cancellation) before ``CancelledError``
        propagates."""
        ask = self._ask(identity, timeout, lease_timeout, priority)
        return await self._engine.aacquire(**ask) is not None

    def release(self, identity: str) -> bool:
        """Give back the slot of ``identity``; False if it held none (or its
        lease had expired)."""
        return self._engine.release(check_holder(identity, "identity")) != 0

    async def arelease(self, identity: str) -> bool:
        """:meth:`release` on the event loop."""
        steps = self._engine.release_steps(check_holder(identity, "identity"))
        return await self._engine.adrive(steps) != 0

    @contextlib.contextmanager
    def hold(
        self,
        identity: str | None = None,
        *,
        timeout: float | None = None,
        lease_timeout: float | None = None,
        priority: int = 0,
        auto_renew: bool = False,
    ) -> Iterator[Lease]:
        """Context manager: hold a slot for the ``with`` block.

        ``identity`` defaults to a unique id. Raises :class:`ResourceUnavailable`
        when no slot is granted within ``timeout`` (None: wait forever), or at
        once when ``max_waiting`` callers already wait (its ``reason`` says which).
        ``auto_renew=True`` renews the lease in the background until the block exits.
        """
        identity = _unique_identity() if identity is None else identity
        lease = self._take(identity, timeout, lease_timeout, priority)
        with holding(lease, auto_renew, self._unavailable(timeout)) as held:
            yield held

    @contextlib.asynccontextmanager
    async def ahold(
        self,
        identity: str | None = None,
        *,
        timeout: float | None = None,
        lease_timeout: float | None = None,
        priority: int = 0,
        auto_renew: bool = False,
    ) -> AsyncIterator[Lease]:
        """:meth:`hold` as an async context manager (``async with``); its
        auto-renewal is a task of the loop."""
        identity = _unique_identity() if identity is None else identity
        lease = await self._atake(identity, timeout, lease_timeout, priority)
        async with aholding(lease, auto_renew, self._unavailable(timeout)) as held:
            yield held

    def _unavailable(self, timeout: float | None) -> str:
        return f"no slot of semaphore {self.name!r} became free within {timeout} s"

    # -- inspection -----------------------------------------------------------------

    def holders(self) -> list[Lease]:
        """The live holds; each lease's ``resource`` (and ``holder``) is the identity."""
        return self._live_leases()

    def is_holding(self, identity: str) -> bool:
        """True if ``identity`` holds a slot now."""
        return self.lease_of(check_holder(identity, "identity")) is not None


def check_max_size(n: object, what: str = "max size") -> int:
    """A semaphore's number of slots: an int >= 0."""
    return check_count(n, what)


def _unique_identity() -> str:
    """A new identity, unique across hosts, processes and calls."""
    return f"{default_holder()}:{uuid.uuid4().hex[:8]}"
