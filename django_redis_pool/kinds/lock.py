"""Locks in Django: the ``LOCKS`` setting, ``get_lock``, and a request's own
:class:`Lock` (a lock keeps no configured state in Redis)."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from ..exceptions import NotOwned
from ..primitives.leased.lease import Lease
from ..primitives.leased.lock import Lock
from ..primitives.validators import check_timeout
from .contract import MAX_WAITING, Ask, Grant, Option, validate_bool
from .leased import LeaseKind, lease_timeout_option

__all__ = ["KIND", "LockKind"]


class LockKind(LeaseKind[Lock]):
    """A :class:`Lock`: one holder at a time (reentrant if ``REENTRANT``)."""

    name = "lock"
    setting_key = "LOCKS"
    primitive = Lock
    options = {
        "LEASE_TIMEOUT": lease_timeout_option(30.0),
        "REENTRANT": Option(validate_bool, False, "Use True or False."),
        "AUTO_RENEW": Option(validate_bool, False, "Use True or False."),
        "TIMEOUT": Option(
            check_timeout,
            None,
            "Use how many seconds `with lock:` waits, as a number >= 0, or None to wait forever.",
        ),
        "MAX_WAITING": MAX_WAITING,
    }

    def build(self, client: Any, name: str, key_prefix: str, options: Mapping[str, Any]) -> Lock:
        return Lock(
            client,
            name,
            lease_timeout=options["LEASE_TIMEOUT"],
            reentrant=options["REENTRANT"],
            auto_renew=options["AUTO_RENEW"],
            timeout=options["TIMEOUT"],
            key_prefix=key_prefix,
            max_waiting=options["MAX_WAITING"],
        )

    def grant(self, primitive: Lock, ask: Ask) -> Grant | None:
        """A :class:`Lock` of the request's own, usable from any thread (refused
        at once past ``MAX_WAITING``)."""
        lock = self._lock_for(primitive, ask)
        lease = self.entered(lock.hold(timeout=ask.timeout))
        return None if lease is None else _held(lock, lease)

    async def agrant(self, primitive: Lock, ask: Ask) -> Grant | None:
        """:meth:`grant` on the event loop."""
        lock = self._lock_for(primitive, ask)
        lease = await self.aentered(lock.ahold(timeout=ask.timeout))
        return None if lease is None else _held(lock, lease)

    @staticmethod
    def _lock_for(primitive: Lock, ask: Ask) -> Lock:
        holder = ask.holder
        if not primitive.reentrant and ask.identity is not None:
            # Requests sharing an identity take turns on a plain lock, rather than
            # one of them failing as if it waited for itself. (A request's own
            # holder name is unique already, and is kept whole for pool_status.)
            holder = f"{holder[:187]}:{uuid.uuid4().hex[:12]}"
        return primitive.for_holder(holder, lease_timeout=ask.lease_timeout)


def _held(lock: Lock, lease: Lease) -> Grant:
    """The request's hold of ``lock`` (acquired: its ``lease``)."""

    def stop_renewing() -> None:
        # A reentrant hold shared with another request stays held (and renewed
        # by that request), but this request renews it no more.
        if lease is not None:
            lease.stop_auto_renew()

    def release() -> bool:
        try:
            lock.release()
        except NotOwned:
            return False
        finally:
            stop_renewing()
        return True

    async def arelease() -> bool:
        try:
            await lock.arelease()
        except NotOwned:
            return False
        finally:
            stop_renewing()
        return True

    return Grant(lock, lease, release, arelease)


KIND = LockKind()
