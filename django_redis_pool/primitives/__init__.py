"""Redis primitives usable with a bare redis-py client (no Django needed)."""

from .lease import Lease
from .lock import Lock
from .pool import ResourcePool
from .records import Waiter
from .releases import pending_releases
from .semaphore import Semaphore

__all__ = ["Lease", "Lock", "ResourcePool", "Semaphore", "Waiter", "pending_releases"]
