"""The task queue: :class:`.taskqueue.TaskQueue`'s operations (enqueue, take,
finish, redelivery, the dead letter), the :class:`.task.Task` and its JSON
record, and the workers of ``listen()`` (:mod:`.worker`). Its Lua is beside
them.

Its errors are here, :class:`TaskFailed` and :class:`WorkerLost`: the Lua
stores a task failed by the queue with the error
``django_redis_pool.primitives.queue.WorkerLost: ...``, a name that must
stay importable. This package imports no other module of the package's when
it loads (the scripts read its operations).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...exceptions import PoolError

if TYPE_CHECKING:
    from .task import Task

__all__ = ["FAST", "HELPERS", "OPERATIONS", "TaskFailed", "WorkerLost"]

#: The family's named operations, each ``<op>.lua`` beside this file.
OPERATIONS = (
    "queue_enqueue",
    "queue_take",
    "queue_beat",
    "queue_leave",
    "queue_halt",
    "queue_finish",
    "queue_progress",
    "queue_withdraw",
    "queue_collect",
    "queue_admin",
    "queue_gc",
    "queue_read",
)
#: On the EVALSHA path: operation -> the script of its common case: none.
FAST: dict[str, str] = {}
#: The family's helper file: the task queue's helpers.
HELPERS = ("engine_queue",)


class TaskFailed(PoolError):
    """A task's handler raised (or returned something that is not JSON, or its
    worker died on every attempt: :class:`WorkerLost`). The message is the
    handler's error; the traceback is stored with the task (``Task.traceback``)."""

    def __init__(self, message: str, task: Task | None = None) -> None:
        super().__init__(message)
        self.task = task


class WorkerLost(TaskFailed):
    """A task failed by the queue, not by its handler: its worker died or
    stalled (no heartbeat within the visibility timeout) on each of its
    ``max_attempts`` deliveries. Its stored error is
    ``"django_redis_pool.primitives.queue.WorkerLost: its worker died or stalled
    on each of its N attempt(s)"``, and :meth:`TaskQueue.query` raises it for
    such a task."""
