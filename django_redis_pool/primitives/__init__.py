"""Redis primitives usable with a bare redis-py client (no Django needed)."""

from .engine import Waiter
from .lease import Lease
from .pool import ResourcePool

__all__ = ["Lease", "ResourcePool", "Waiter"]
