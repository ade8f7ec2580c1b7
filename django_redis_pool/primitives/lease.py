"""The :class:`Lease`: one granted hold on a resource, shared by every primitive."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING

from ..exceptions import PoolError

if TYPE_CHECKING:
    from .engine import LeaseEngine

__all__ = ["Lease", "lost_listeners"]

logger = logging.getLogger("django_redis_pool")

#: Called with every lease found lost (by a renewal, or by a release that found it
#: already gone), after the warning is logged. The Django layer adds one that sends
#: the ``lease_lost`` signal.
lost_listeners: list[Callable[[Lease], None]] = []


class Lease:
    """A granted hold on ``resource``, valid until ``expires_at`` (Redis clock).

    ``fence`` is a fencing token: strictly increasing per primitive across all
    holders ever, so a storage system can reject writes from a holder whose
    lease was reclaimed. ``lost`` becomes True once the lease is known to be gone
    (released, reclaimed, or a background renewal failed).
    """

    __slots__ = (
        "_engine",
        "_renewer",
        "acquired_at",
        "expires_at",
        "fence",
        "holder",
        "lease_timeout",
        "lost",
        "on_lost",
        "resource",
        "token",
    )

    def __init__(
        self,
        engine: LeaseEngine,
        *,
        resource: str,
        holder: str,
        fence: int,
        expires_at: float | None,
        lease_timeout: float | None,
        token: str,
        acquired_at: float | None = None,
    ) -> None:
        self._engine = engine
        self._renewer: _AutoRenewer | None = None
        self.resource = resource
        self.holder = holder
        self.fence = fence
        self.expires_at = expires_at
        self.lease_timeout = lease_timeout
        self.token = token
        #: When the hold began (unix seconds, Redis clock; None if unknown).
        self.acquired_at = acquired_at
        self.lost = False
        self.on_lost: Callable[[Lease], None] | None = None

    @property
    def primitive_kind(self) -> str:
        """Kind of the primitive that granted the lease ("pool", "semaphore", "lock")."""
        return self._engine.kind

    @property
    def primitive_name(self) -> str:
        """Name of the primitive that granted the lease."""
        return self._engine.name

    def renew(self, lease_timeout: float | None = None) -> bool:
        """Extend the lease by ``lease_timeout`` seconds from now (None keeps its
        current duration). Returns False once the lease is lost."""
        if self.lost:
            return False
        ok = self._engine.renew(self, lease_timeout)
        if not ok:
            self._mark_lost("renewal found it gone (expired, force-released or removed)")
        return ok

    def release(self) -> bool:
        """Give the resource back. False if this lease no longer held it."""
        self.stop_auto_renew()
        if self.lost:
            return False
        ok = self._engine.release(self.resource, self.token) != 0
        if not ok:
            self._mark_lost("it was already gone when released", call_on_lost=False)
        self.lost = True
        return ok

    def start_auto_renew(self, on_lost: Callable[[Lease], None] | None = None) -> None:
        """Renew in a background thread at about 2/3 of the lease duration until
        released. If a renewal finds the lease gone, it is logged, ``lost`` is set
        and ``on_lost(lease)`` is called. A lease without expiry needs nothing."""
        if on_lost is not None:
            self.on_lost = on_lost
        if self.lease_timeout is None or self._renewer is not None:
            return
        self._renewer = _AutoRenewer(self)
        self._renewer.start()

    def stop_auto_renew(self) -> None:
        """Stop background renewal (release does this too)."""
        renewer, self._renewer = self._renewer, None
        if renewer is not None:
            renewer.stop()

    def _mark_lost(self, reason: str, *, call_on_lost: bool = True) -> None:
        self.lost = True
        logger.warning(
            "lease on %r of %s (holder %r, fence %s) was lost: %s",
            self.resource,
            self._engine.label,
            self.holder,
            self.fence,
            reason,
        )
        callbacks = [*lost_listeners]
        if call_on_lost and self.on_lost is not None:
            callbacks.append(self.on_lost)
        for callback in callbacks:
            try:
                callback(self)
            except Exception:
                logger.exception("lease-lost callback %r of %r failed", callback, self)

    def __enter__(self) -> Lease:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Lease):
            return NotImplemented
        return (self.resource, self.token) == (other.resource, other.token)

    def __hash__(self) -> int:
        return hash((self.resource, self.token))

    def __repr__(self) -> str:
        return (
            f"<Lease {self.resource!r} of {self._engine.label} holder={self.holder!r} "
            f"fence={self.fence} expires_at={self.expires_at}>"
        )


class _AutoRenewer(threading.Thread):
    """Background renewal of one lease at ~2/3 of its duration.

    Waits on an Event (woken at once by ``stop``), never busy-loops. A renewal
    that cannot reach Redis is retried at shorter intervals until the lease's
    own expiry has passed, after which the lease is reported lost.
    """

    def __init__(self, lease: Lease) -> None:
        super().__init__(name=f"drp-renew-{lease.resource}", daemon=True)
        self.lease = lease
        self._stop_event = threading.Event()

    def stop(self) -> None:
        self._stop_event.set()
        if threading.current_thread() is not self:
            self.join(timeout=5)

    def run(self) -> None:
        lease = self.lease
        assert lease.lease_timeout is not None
        interval = lease.lease_timeout * 2 / 3
        failures_since: float | None = None
        wait = interval
        while not self._stop_event.wait(wait):
            try:
                ok = lease._engine.renew(lease, None)
            except PoolError as exc:
                now = time.monotonic()
                failures_since = failures_since or now
                if now - failures_since >= lease.lease_timeout:
                    lease._mark_lost(f"renewal kept failing: {exc}")
                    return
                logger.warning("renewing %r failed, retrying: %s", lease, exc)
                wait = min(interval, lease.lease_timeout / 10)
                continue
            if self._stop_event.is_set():
                return
            if not ok:
                lease._mark_lost("renewal found it gone (expired, force-released or removed)")
                return
            failures_since = None
            wait = interval
