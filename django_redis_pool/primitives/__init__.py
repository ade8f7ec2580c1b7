"""Redis primitives usable with a bare redis-py client (no Django needed)."""

from .engine import Waiter
from .lease import Lease
from .lock import Lock
from .pool import ResourcePool
from .releases import pending_releases
from .semaphore import Semaphore

__all__ = ["Lease", "Lock", "ResourcePool", "Semaphore", "Waiter", "pending_releases"]
