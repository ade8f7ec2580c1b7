"""Semaphore: at most N permits held at once, by identities (with leases)."""

from __future__ import annotations

import uuid
from typing import Any

from ...exceptions import backend_errors
from ..clients.waits import checked
from ..validators import (
    DEFAULT,
    Seconds,
    check_count,
    check_holder,
    check_lease_timeout,
    check_permits,
    check_priority,
    renamed,
)
from ..wire.keys import to_ms
from ..wire.protocol import Mode
from .lease import Lease
from .primitive import DEFAULT_KEY_PREFIX, AsyncHold, Hold, LeasedPrimitive
from .records import default_holder

__all__ = ["Semaphore", "check_max_size"]


class Semaphore(LeasedPrimitive):
    """A counting semaphore with identities, shared through Redis.

    At most ``get_max_size()`` permits are held at once; each identity that
    holds takes the ``permits`` it asked for (1 by default: a slot). The max
    size is stored in Redis (``set_max_size``), so every process agrees on it;
    until it is set, ``acquire`` raises :class:`NotConfigured` (or, given
    ``default_max_size``, stores that size first). Each hold is a lease on
    the Redis clock (``lease_timeout``, None: no expiry) so a crashed holder's
    permits come back; an identity that asks again refreshes its hold and
    never takes more. Blocked callers are served by priority, then first
    come first served, and are woken by the release itself; a caller that
    needs more permits than are free holds up the callers behind it until
    they are (it is served at its turn), and while it waits a newcomer takes
    no permits ahead of it.

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
        self.lease_timeout = lease_timeout
        #: Stored by the first acquire that finds no max size in Redis (None: such
        #: an acquire raises NotConfigured). ``set_max_size`` always overrides it.
        self.default_max_size = default

    def __repr__(self) -> str:
        return f"<Semaphore {self.name!r} lease_timeout={self.lease_timeout}>"

    # -- size ------------------------------------------------------------------------

    def set_max_size(self, n: int) -> None:
        """Store the number of slots. Raising it serves waiting callers at once;
        lowering it never evicts a holder (new acquires wait until below it)."""
        self._channel.run(self._channel.op("sem_set_max", check_max_size(n), 0))

    def ensure_max_size(self, n: int) -> bool:
        """Store ``n`` as the number of slots unless one is already stored;
        True if it was stored. (How settings' ``MAX_SIZE`` is applied on first use.)"""
        return int(self._channel.run(self._channel.op("sem_set_max", check_max_size(n), 1))) == 1

    def get_max_size(self) -> int:
        """The number of slots (0 if it was never set)."""
        with backend_errors():
            value = self.client.get(f"{self._channel.base}:max")
        return int(value) if value is not None else 0

    def get_current_size(self) -> int:
        """How many identities hold now (expired holds not counted), whatever
        permits each takes (:meth:`get_held_permits` counts those)."""
        return self._counts()[1]

    def get_held_permits(self) -> int:
        """How many permits the live holds take together (expired holds not
        counted): at most the max size, unless it was lowered below them."""
        return self._counts()[4]

    # -- acquiring and releasing ----------------------------------------------------

    def acquire_lease(self, identity: str, **kwargs: Any) -> Lease | None:
        """Deprecated: :meth:`acquire` answers whether it was granted,
        :meth:`hold` yields the :class:`Lease` (``DeprecationWarning``)."""
        renamed("Semaphore.acquire_lease()", "Semaphore.hold() (or acquire())")
        return self._engine.acquire(**self._ask(identity, **_asked(kwargs)))

    async def aacquire_lease(self, identity: str, **kwargs: Any) -> Lease | None:
        """Deprecated: see :meth:`acquire_lease` (``DeprecationWarning``)."""
        renamed("Semaphore.aacquire_lease()", "Semaphore.ahold() (or aacquire())")
        return await self._engine.aacquire(**self._ask(identity, **_asked(kwargs)))

    def _take(
        self,
        identity: str,
        timeout: float | None,
        lease_timeout: Seconds,
        priority: int,
        permits: int,
    ) -> Lease | None:
        """The lease :meth:`acquire` would take, raising
        :class:`ResourceUnavailable` (``reason`` ``"full"``) when refused for
        ``max_waiting``: what :meth:`hold` enters."""
        ask = self._ask(identity, timeout, lease_timeout, priority, permits)
        return self._channel.run(
            self._engine.acquire_steps(**ask, bounded=self._channel.sync_bounded)
        )

    async def _atake(
        self,
        identity: str,
        timeout: float | None,
        lease_timeout: Seconds,
        priority: int,
        permits: int,
    ) -> Lease | None:
        """:meth:`_take` on the event loop."""
        ask = self._ask(identity, timeout, lease_timeout, priority, permits)
        return await self._channel.arun(self._engine.acquire_steps(**ask))

    def _ask(
        self,
        identity: str,
        timeout: float | None = 0,
        lease_timeout: Seconds = DEFAULT,
        priority: int = 0,
        permits: int = 1,
    ) -> dict[str, Any]:
        """The engine's acquire arguments, validated (a single permit, the
        common case, at once)."""
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
            "holder": check_holder(identity, "identity"),
            "priority": priority
            if type(priority) is int and priority == 0
            else check_priority(priority),
            "max_waiting": self.max_waiting,
            "permits": 1 if permits == 1 and type(permits) is int else check_permits(permits),
        }

    def acquire(
        self,
        identity: str,
        *,
        timeout: float | None = 0,
        lease_timeout: Seconds = DEFAULT,
        priority: int = 0,
        permits: int = 1,
    ) -> bool:
        """Take ``permits`` (an int >= 1; a slot by default) for ``identity``,
        all at once, waiting up to ``timeout`` seconds (0: do not wait, None:
        forever). True if granted; False if not (in time, or at once when
        ``max_waiting`` callers already wait): it never raises for a refusal
        (:meth:`hold` does, telling which, and yields the hold's
        :class:`Lease`). ``lease_timeout``: how long the hold lives unless
        renewed (DEFAULT: the semaphore's ``lease_timeout``; None: no expiry).

        While a caller waits, a newcomer (even with ``timeout=0``) takes no
        permits ahead of it, unless its priority is higher: the first waiter
        that needs more permits than are free holds up the waiters behind it
        until they are. A caller asking for more permits than the max size
        waits until the max grows (``timeout=0``: refused at once), holding up
        nobody meanwhile.

        An identity that already holds gets True again and its lease
        refreshed, keeping the permits it took whatever ``permits`` now asks
        (its lease's ``permits`` says how many). Raises :class:`NotConfigured`
        if the max size was never set.
        """
        ask = self._ask(identity, timeout, lease_timeout, priority, permits)
        return self._engine.acquire(**ask) is not None

    async def aacquire(
        self,
        identity: str,
        *,
        timeout: float | None = 0,
        lease_timeout: Seconds = DEFAULT,
        priority: int = 0,
        permits: int = 1,
    ) -> bool:
        """:meth:`acquire` on the event loop, waiting in the same fair queue as
        blocking callers. Cancelled while waiting, it leaves the queue (giving
        back permits that raced the cancellation) before ``CancelledError``
        propagates."""
        ask = self._ask(identity, timeout, lease_timeout, priority, permits)
        return await self._engine.aacquire(**ask) is not None

    def release(self, identity: str) -> bool:
        """Give back the hold of ``identity`` (all its permits); False if it
        held none (or its lease had expired)."""
        steps = self._engine.release_steps(check_holder(identity, "identity"))
        return self._channel.run(steps) != 0

    async def arelease(self, identity: str) -> bool:
        """:meth:`release` on the event loop."""
        steps = self._engine.release_steps(check_holder(identity, "identity"))
        return await self._channel.arun(steps) != 0

    def hold(
        self,
        identity: str | None = None,
        *,
        timeout: Seconds = DEFAULT,
        lease_timeout: Seconds = DEFAULT,
        priority: int = 0,
        auto_renew: bool = False,
        permits: int = 1,
    ) -> Hold:
        """Context manager: hold ``permits`` (a slot by default) for the
        ``with`` block (a :class:`Hold`, yielding the :class:`Lease`),
        released on exit.

        ``identity`` defaults to a unique id. Waits up to ``timeout`` seconds
        (DEFAULT or None: forever; 0: do not wait). Raises
        :class:`ResourceUnavailable` when nothing is granted in time, or at
        once when ``max_waiting`` callers already wait (its ``reason`` says
        which; its ``retry_after`` when a turn is expected:
        :meth:`turn_estimate`). ``lease_timeout`` as for :meth:`acquire`.
        ``auto_renew=True`` renews the lease in the background until the block exits.
        """
        identity = _unique_identity() if identity is None else identity
        wait = None if timeout is DEFAULT else timeout
        return Hold(
            self,
            lambda: self._take(identity, wait, lease_timeout, priority, permits),
            self._unavailable(wait),
            permits=permits,
            auto_renew=auto_renew,
        )

    def ahold(
        self,
        identity: str | None = None,
        *,
        timeout: Seconds = DEFAULT,
        lease_timeout: Seconds = DEFAULT,
        priority: int = 0,
        auto_renew: bool = False,
        permits: int = 1,
    ) -> AsyncHold:
        """:meth:`hold` as an async context manager (``async with``); its
        auto-renewal is a task of the loop."""
        identity = _unique_identity() if identity is None else identity
        wait = None if timeout is DEFAULT else timeout
        return AsyncHold(
            self,
            lambda: self._atake(identity, wait, lease_timeout, priority, permits),
            self._unavailable(wait),
            permits=permits,
            auto_renew=auto_renew,
        )

    def _unavailable(self, timeout: float | None) -> str:
        return f"no permit of semaphore {self.name!r} was granted within {timeout} s"

    # -- inspection -----------------------------------------------------------------

    def holders(self) -> list[Lease]:
        """The live holds; each lease's ``resource`` (and ``holder``) is the
        identity, its ``permits`` the permits it takes."""
        return self._live_leases()

    def is_holding(self, identity: str) -> bool:
        """True if ``identity`` holds now."""
        return self.lease_of(check_holder(identity, "identity")) is not None


def check_max_size(n: object, what: str = "max size") -> int:
    """A semaphore's number of permits: an int >= 0."""
    return check_count(n, what)


def _asked(kwargs: dict[str, Any]) -> dict[str, Any]:
    """A deprecated acquire's keyword arguments, as :meth:`Semaphore._ask` takes them."""
    unknown = set(kwargs) - {"timeout", "lease_timeout", "priority", "permits"}
    if unknown:
        raise TypeError(f"unexpected keyword arguments: {', '.join(sorted(unknown))}")
    return kwargs


def _unique_identity() -> str:
    """A new identity, unique across hosts, processes and calls."""
    return f"{default_holder()}:{uuid.uuid4().hex[:8]}"
