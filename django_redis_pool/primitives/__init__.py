"""Redis primitives usable with a bare redis-py client (no Django needed).

By layer, then by family: the wire (:mod:`.wire`: steps, the runner, the
channel, the Lua's scripts and protocol, keys) and the clients
(:mod:`.clients`: connections, deadlines, the stopwatch, waits, asyncio
twins) under the families of primitives, each a package with its Lua beside
its Python: the leased primitives (:mod:`.leased`: the lease engine, pools,
semaphores, locks, allocators), the task queue (:mod:`.queue`), the rate
limiter (:mod:`.ratelimit`), the object pool (:mod:`.object_pool`), and what
each did (:mod:`.counts`). Every primitive is importable from here.
"""

from .leased.allocator import AllocatedKey, Allocator, AllocatorObject
from .leased.lease import Lease
from .leased.lock import Lock
from .leased.pool import ResourcePool
from .leased.records import Waiter
from .leased.releases import pending_releases
from .leased.semaphore import Semaphore
from .object_pool.pool import ObjectPool
from .queue.taskqueue import Task, TaskExecutePolicy, TaskFailed, TaskQueue, WorkerLost
from .ratelimit.limiter import Decision, KeyState, RateLimiter
from .validators import DEFAULT

__all__ = [
    "DEFAULT",
    "AllocatedKey",
    "Allocator",
    "AllocatorObject",
    "Decision",
    "KeyState",
    "Lease",
    "Lock",
    "ObjectPool",
    "RateLimiter",
    "ResourcePool",
    "Semaphore",
    "Task",
    "TaskExecutePolicy",
    "TaskFailed",
    "TaskQueue",
    "Waiter",
    "WorkerLost",
    "pending_releases",
]
