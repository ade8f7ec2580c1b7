"""redis-allocator 0.7.0's ``RedisTaskQueue`` API on our ``TaskQueue``.

``RedisTaskQueue(redis, prefix, suffix, timeout, interval, task_fn)`` is our
queue named ``prefix.suffix`` with ``visibility_timeout=timeout``; its
``task_fn`` gets a :class:`RedisTask` (the peer's task: ``id``, ``name``,
``params``, ``result``, ``error``, progress) made from ours, and is looked up
at each call (the suite patches it). ``query`` and the policies are ours;
``set_task`` queues the task (ours has no "store without queueing"),
``get_task`` reads it back, ``execute_task_locally`` and
``execute_task_remotely`` are ``query`` with the ``Local`` and ``Remote``
policies. ``RedisTask.update(current, total)`` reports progress through our
``Task.update``. The peer's raw Redis protocol (``_queue_key`` lists popped
by hand, ``set_queue_listened``) has no counterpart: its tests are listed as
not applicable.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django_redis_pool.primitives.queue.taskqueue import (
    Task,
    TaskExecutePolicy,
    TaskFailed,
    TaskQueue,
)

__all__ = ["RedisTask", "RedisTaskQueue", "TaskExecutePolicy"]


@dataclass
class RedisTask:
    """The peer's task (``_save`` persists it; ``update`` reports progress)."""

    id: str
    name: str
    params: Any
    expiry: float
    result: Any = None
    error: Any = None
    update_progress_time: float = 0.0
    current_progress: float = 0.0
    total_progress: float = 100.0
    _save: Callable[[], Any] | None = None
    _ours: Task | None = None

    def save(self) -> None:
        if self._save is not None:
            self._save()

    def update(self, current_progress: float, total_progress: float) -> None:
        """Report progress: through our task's ``update`` (a task built here
        gets one of ours to report through)."""
        ours = self._ours or Task(id=self.id, name=self.name, params=self.params)
        if ours.update(current_progress, total_progress) is False:  # type: ignore[arg-type]
            raise TimeoutError(f"Task {self.id} in {self.name} has expired")
        self.current_progress, self.total_progress = current_progress, total_progress
        self.update_progress_time = time.time()


class RedisTaskQueue:
    """The peer's task queue on ours (see the module's docs)."""

    def __init__(
        self,
        redis: Any,
        prefix: str,
        suffix: str = "task-queue",
        timeout: float = 300,
        interval: float = 5,
        task_fn: Callable[[RedisTask], Any] | None = None,
    ) -> None:
        self.redis, self.prefix, self.suffix = redis, prefix, suffix
        self.timeout, self.interval, self.task_fn = timeout, interval, task_fn
        self.ours = TaskQueue(
            getattr(redis, "real", redis),
            f"{prefix}.{suffix}",
            task_fn=self._run,
            visibility_timeout=timeout,
        )

    def _run(self, task: Task) -> Any:
        if self.task_fn is None:
            raise RuntimeError("no task_fn")
        return self.task_fn(self._peer_task(task))

    def _peer_task(self, task: Task) -> RedisTask:
        peer = RedisTask(
            id=task.id,
            name=task.name,
            params=task.params,
            expiry=time.time() + self.timeout,
            _ours=task,
        )
        peer.result = task.result
        if task.status == "failed":
            peer.error = Exception(task.error)
        peer._save = lambda: self.set_task(peer)
        return peer

    def build_task(self, id: str, name: str, params: Any) -> RedisTask:
        task = RedisTask(id=id, name=name, params=params, expiry=time.time() + self.timeout)
        task._save = lambda: self.set_task(task)
        return task

    def set_task(self, task: RedisTask) -> str:
        return self.ours.enqueue(task.name, task.params, id=task.id)

    def get_task(self, task_id: str, once: bool = False) -> RedisTask | None:
        task = self.ours.get_task(task_id)
        if task is None:
            return None
        if once:
            self.ours.delete(task_id)
        return self._peer_task(task)

    def has_task(self, task_id: str) -> bool:
        return self.ours.get_task(task_id) is not None

    def execute_task_locally(self, task: RedisTask, timeout: float | None = None) -> Any:
        return self._query(task, TaskExecutePolicy.Local, timeout, False)

    def execute_task_remotely(
        self, task: RedisTask, timeout: float | None = None, once: bool = False
    ) -> Any:
        return self._query(task, TaskExecutePolicy.Remote, timeout, once)

    def _query(
        self, task: RedisTask, policy: TaskExecutePolicy, timeout: float | None, once: bool
    ) -> Any:
        try:
            task.result = self.ours.query(
                task.id, task.name, task.params, policy=policy, timeout=timeout, once=once
            )
        except TaskFailed as failed:
            task.error = failed.__cause__ or failed
            raise task.error from None
        return task.result

    def query(
        self,
        id: str,
        name: str,
        params: Any,
        timeout: float | None = None,
        policy: TaskExecutePolicy = TaskExecutePolicy.Auto,
        once: bool = False,
    ) -> Any:
        return self._query(self.build_task(id, name, params), policy, timeout, once)

    def listen(self, names: list[str], workers: int = 128, event: Any = None) -> None:
        self.ours.listen(names, workers=min(workers, 8), event=event)

    def set_queue_listened(self, name: str) -> None:
        raise NotImplementedError("the peer's listener key has no counterpart (our workers beat)")

    def _queue_key(self, name: str) -> str:
        raise NotImplementedError("the peer's per-name list has no counterpart")

    def _result_key(self, task_id: str) -> str:
        """Where our queue keeps task ``task_id`` (docs/queue.md)."""
        return f"{self.ours.base}:t:{task_id}"
