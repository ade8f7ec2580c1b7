"""The words the Python side and the Lua scripts (each family's ``*.lua``) exchange.

Every constant here has a twin of the same value among the local constants
at the top of ``engine.lua`` (beside this module), which every script carries: ``Mode.SEM``
is ``MODE_SEM`` there, ``Reply.SLOW`` is ``REPLY_SLOW``, ``Restore.HEAL`` is
``RESTORE_HEAL``, ``TaskStatus.DONE`` is ``TASK_DONE`` (``tests/primitives/test_engine.py``
checks that they agree). Both sides use the names,
never the bare strings. Nothing here imports Django.
"""

from __future__ import annotations

from typing import Final

__all__ = ["Mode", "Reply", "Restore", "TaskStatus"]


class Mode:
    """What a primitive's keys hold: the first argument of every operation
    (``MODE`` in the scripts)."""

    #: A pool of named resources, the one available longest handed out first.
    FIFO: Final = "fifo"
    #: A pool of named resources, the one released last handed out first.
    LIFO: Final = "lifo"
    #: A pool of named resources, one picked uniformly at random.
    RANDOM: Final = "random"
    #: Slots named after their holder's identity, as many as the stored max size.
    SEM: Final = "sem"
    #: One slot, named after its holder.
    LOCK: Final = "lock"
    #: One slot, named after its holder, who may acquire it again (counted).
    RLOCK: Final = "rlock"
    #: An allocator's keys, each leased to one holder.
    ALLOC: Final = "alloc"
    #: An allocator's keys, handed out in turn and never leased.
    SHARED: Final = "shared"
    #: A task queue (its own ``queue_*`` operations).
    QUEUE: Final = "queue"
    #: A rate limiter (its own ``ratelimit_*`` operations).
    RATELIMIT: Final = "ratelimit"

    #: A pool's orders (``ResourcePool(order=...)``).
    ORDERS: Final = (FIFO, LIFO, RANDOM)


class Reply:
    """What an operation answers instead of a grant or a number."""

    #: Nothing was granted, and the caller does not wait.
    NONE: Final = "none"
    #: A common-case script (``*_fast.lua``) cannot answer this call, having
    #: changed nothing: the caller runs the whole operation.
    SLOW: Final = "slow"
    #: A lock's holder asks again, and the lock is not reentrant.
    HELD: Final = "held"
    #: A semaphore has no max size (and the acquire had none to restore).
    UNCONFIGURED: Final = "unconfigured"
    #: The primitive holds nothing at all (Redis lost its keys) and its caller
    #: restores them (``HEAL``, or an allocator's malloc): nothing was changed,
    #: the caller restores them and asks again.
    EMPTY: Final = "empty"
    #: A waiter's place was dropped (its deadline passed, it was presumed
    #: dead, or its provisional grant lapsed).
    GONE: Final = "gone"
    #: A malloc did its bounded work without an answer: the caller calls again.
    MORE: Final = "more"
    #: An acquire that would wait finds its ``max_waiting`` callers queued
    #: already (dead ones dropped first): it is not queued.
    FULL: Final = "full"


class Restore:
    """The acquire operation's ``restore`` argument: what an acquire restores
    when Redis lost the primitive's keys. A semaphore's is its default max
    size, as text."""

    #: A pool whose caller restores its members (``LeaseEngine(heal=...)``).
    HEAL: Final = "heal"
    #: Nothing is restored.
    NOTHING: Final = ""


class TaskStatus:
    """Where a queued task is (``Task.status``, its hash's ``status`` field)."""

    QUEUED: Final = "queued"  #: ready, or deferred, for a worker
    RUNNING: Final = "running"  #: taken by a worker
    DONE: Final = "done"  #: its result is stored
    FAILED: Final = "failed"  #: its error is stored
