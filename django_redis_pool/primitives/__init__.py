"""Redis primitives usable with a bare redis-py client (no Django needed)."""

from .lease import Lease
from .lock import Lock
from .pool import ResourcePool
from .ratelimit import Decision, KeyState, RateLimiter
from .records import Waiter
from .releases import pending_releases
from .semaphore import Semaphore
from .validators import DEFAULT

__all__ = [
    "DEFAULT",
    "Decision",
    "KeyState",
    "Lease",
    "Lock",
    "RateLimiter",
    "ResourcePool",
    "Semaphore",
    "Waiter",
    "pending_releases",
]
