"""An ObjectPool's ``global_limit``: the Semaphore that caps the live objects
of every process's pool together, found on first use, and the slot each live
object holds (a lease renewed in the background).

Nothing here imports Django: a limit given as the name of a semaphore
configured in Django is found by :data:`semaphore_by_name`, which the Django
layer sets.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Union

from ...exceptions import NotConfigured, ResourceUnavailable
from ..leased.lease import Lease

if TYPE_CHECKING:
    from ..leased.semaphore import Semaphore

__all__ = ["GlobalLimit", "Limit", "semaphore_by_name"]

#: What ``ObjectPool(global_limit=...)`` may be: a :class:`.semaphore.Semaphore`;
#: a function of no arguments that returns one (called when the first object is
#: made, so that building the pool does no I/O and imports nothing); the name
#: of a semaphore configured in Django (see :data:`semaphore_by_name`).
Limit = Union["Semaphore", Callable[[], "Semaphore"], str]

#: Finds the Semaphore of a limit given by name. The Django layer
#: (``django_redis_pool.registry``, which builds the configured object pools)
#: sets it to ``get_semaphore``; while it is None, a name cannot be used.
semaphore_by_name: Callable[[str], Semaphore] | None = None


class GlobalLimit:
    """The cap of one ObjectPool: a slot of ``limit`` per live object, each a
    lease of ``lease_timeout`` seconds renewed in the background."""

    def __init__(self, limit: Limit, lease_timeout: float | None) -> None:
        self._limit = limit
        self.lease_timeout = lease_timeout

    def semaphore(self) -> Semaphore:
        """The Semaphore of the limit, found on the first call: a name by
        :data:`semaphore_by_name`, a function by calling it (once, or once per
        call that races the first)."""
        limit = self._limit
        if isinstance(limit, str):
            if semaphore_by_name is None:
                raise NotConfigured(
                    f"global_limit {limit!r} names a semaphore configured in Django, but "
                    "the Django layer is not loaded (django_redis_pool in INSTALLED_APPS); "
                    "outside Django, give a Semaphore or a function that returns one"
                )
            limit = semaphore_by_name(limit)
        elif callable(limit) and not hasattr(limit, "set_max_size"):
            limit = limit()
        self._limit = limit
        return limit  # type: ignore[return-value]

    def slot(self, needed: Callable[[], bool]) -> Lease | None:
        """A slot for one new object, waiting for it fairly (like any other
        holder of the semaphore) while ``needed()``; None once it is not."""
        semaphore = self.semaphore()
        identity = f"{os.getpid()}:{uuid.uuid4().hex}"
        while True:
            # (the hold() of the slot, entered here and ended with the object)
            hold = semaphore.hold(identity, timeout=1.0, lease_timeout=self.lease_timeout)
            try:
                lease: Lease = hold.__enter__()
            except ResourceUnavailable:
                if not needed():
                    return None
                continue
            lease.start_auto_renew()
            return lease
