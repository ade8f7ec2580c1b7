"""TaskQueue: named tasks run by workers in any process, with JSON payloads,
reliable delivery and results (redis-allocator's RedisTaskQueue, made safe).

This module holds the queue's operations (enqueue, read, query, upkeep) and
its errors; the task itself and its encoding are :mod:`.task`'s, the
workers of :meth:`TaskQueue.listen` :mod:`.worker`'s. Every public name
of those is importable from here too."""

from __future__ import annotations

import contextlib
import enum
import logging
import math
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from typing import Any

from ...exceptions import BackendUnavailable, PoolError, ResourceUnavailable, backend_errors
from .. import counts
from ..validators import (
    check_client,
    check_duration,
    check_instant,
    check_name,
    check_timeout,
)
from ..wire.channel import MIN_BLOCK, Channel
from ..wire.keys import DEFAULT_KEY_PREFIX, to_ms
from ..wire.protocol import Mode, TaskStatus
from ..wire.steps import Call, Local, Steps
from . import TaskFailed, WorkerLost
from .task import (
    MAX_PAYLOAD,
    Task,
    check_payload_limit,
    dumps,
    error_message,
    task_from_fields,
    task_from_flat,
)
from .worker import run_workers

__all__ = ["Task", "TaskExecutePolicy", "TaskFailed", "TaskQueue", "WorkerLost"]

logger = logging.getLogger("django_redis_pool")


#: How the stored error of a task failed by the queue starts (``engine.lua``).
_WORKER_LOST = f"{WorkerLost.__module__}.{WorkerLost.__qualname__}:"


class TaskExecutePolicy(enum.Enum):
    """Where :meth:`TaskQueue.query` runs a task."""

    Local = "local"  #: in the calling thread
    Remote = "remote"  #: by a worker, always
    LocalFirst = "local_first"  #: here; by a worker when no local handler, or it fails
    RemoteFirst = "remote_first"  #: by a worker; here when none listens or takes it in time
    Auto = "auto"  #: by a worker while one listens for the name, else here


class TaskQueue:
    """A queue of named tasks shared by every process on the same Redis, ``name``
    and ``key_prefix``.

    ``task_fn(task)`` is the handler of this process: it runs a task (by
    ``task.name``) and returns its result. Workers (:meth:`listen`) take tasks
    atomically into an in-flight set with a deadline, ``visibility_timeout``
    seconds, which their heartbeat extends while the handler runs; a task whose
    worker died goes back to the queue when the deadline passes, up to
    ``max_attempts`` deliveries, then stays failed for inspection. Results are
    kept ``result_ttl`` seconds. Params and results are JSON only, each at
    most ``max_payload`` bytes of it (16 MiB by default): larger params raise
    ``ValueError`` before anything is written, a larger result fails its task.
    Building one does no I/O.
    """

    kind = "queue"

    def __init__(
        self,
        client: Any,
        name: str,
        *,
        task_fn: Callable[[Task], Any] | None = None,
        result_ttl: float = 3600,
        visibility_timeout: float = 300,
        max_attempts: int = 3,
        key_prefix: str = DEFAULT_KEY_PREFIX,
        max_payload: int = MAX_PAYLOAD,
    ) -> None:
        self.client = check_client(client)
        self.name = check_name(name)
        self.key_prefix = check_name(key_prefix, "key_prefix")
        if task_fn is not None and not callable(task_fn):
            raise TypeError(f"task_fn must be a function of a Task, got {task_fn!r}")
        self.task_fn = task_fn
        self.result_ttl = check_duration(result_ttl, "result_ttl")
        self.visibility_timeout = check_duration(visibility_timeout, "visibility_timeout")
        if isinstance(max_attempts, bool) or not isinstance(max_attempts, int) or max_attempts < 1:
            raise ValueError(f"max_attempts must be an int >= 1, got {max_attempts!r}")
        self.max_attempts = max_attempts
        #: The most bytes of JSON a task's params or result may take.
        self.max_payload = check_payload_limit(max_payload)
        #: How the queue runs its operations (its workers run theirs on it too).
        self.channel = Channel(
            client, kind=self.kind, name=self.name, mode=Mode.QUEUE, prefix=self.key_prefix
        )
        self.base = self.channel.base

    def __repr__(self) -> str:
        return f"<TaskQueue {self.name!r}>"

    # -- enqueueing and reading --------------------------------------------------

    def enqueue(
        self,
        name: str,
        params: Any = None,
        *,
        id: str | None = None,
        priority: int = 0,
        run_at: float | None = None,
    ) -> str:
        """Queue task ``name`` with JSON ``params``; returns its id (a new one
        unless given). ``priority``: -100..100, larger first. ``run_at``: unix
        seconds (Redis clock) before which no worker starts it. An id already
        in the queue is left as it is (a retried enqueue changes nothing twice)."""
        return self.channel.run(self._enqueue(name, params, id, priority, run_at)).id

    async def aenqueue(
        self,
        name: str,
        params: Any = None,
        *,
        id: str | None = None,
        priority: int = 0,
        run_at: float | None = None,
    ) -> str:
        """:meth:`enqueue` on the event loop."""
        return (await self.channel.arun(self._enqueue(name, params, id, priority, run_at))).id

    def submit(
        self,
        name: str,
        params: Any = None,
        *,
        id: str | None = None,
        priority: int = 0,
        run_at: float | None = None,
    ) -> Task:
        """:meth:`enqueue`, returning the task as stored: what :meth:`get_task`
        reads right after (``enqueued_at`` on the Redis clock), in the same
        round trip. An id already in the queue: that task, as it is."""
        return self.channel.run(self._enqueue(name, params, id, priority, run_at))

    async def asubmit(
        self,
        name: str,
        params: Any = None,
        *,
        id: str | None = None,
        priority: int = 0,
        run_at: float | None = None,
    ) -> Task:
        """:meth:`submit` on the event loop."""
        return await self.channel.arun(self._enqueue(name, params, id, priority, run_at))

    def _enqueue(
        self, name: str, params: Any, id: str | None, priority: int, run_at: float | None
    ) -> Steps[Task]:
        name = check_name(name, "task name")
        payload = dumps(params, f"params of task {name!r}", self.max_payload)
        task_id = uuid.uuid4().hex if id is None else check_name(id, "task id")
        if isinstance(priority, bool) or not isinstance(priority, int) or abs(priority) > 100:
            raise ValueError(f"priority must be an int from -100 to 100, got {priority!r}")
        at = -1
        if run_at is not None:
            at = math.floor(check_instant(run_at, "run_at", time.time()) * 1000)
        added, flat = yield self.channel.op(
            "queue_enqueue",
            task_id,
            name,
            payload,
            priority,
            at,
            self.max_attempts,
            to_ms(self.result_ttl),
        )
        fields = dict(zip(flat[0::2], flat[1::2], strict=True))
        if int(added):  # the stored params are ours: not sent back
            fields["params"] = payload
        return task_from_fields(task_id, fields)

    def get_task(self, id: str) -> Task | None:
        """The task ``id`` as stored now (None if there is none, or its result
        expired)."""
        return self.channel.run(self._get_task(check_name(id, "task id")))

    def _get_task(self, id: str) -> Steps[Task | None]:
        return task_from_flat(id, (yield self.channel.op("queue_read", "task", id)))

    def counts(self) -> dict[str, int]:
        """Tasks ``pending`` (ready), ``running``, ``scheduled`` (deferred),
        ``failed``, and the live ``workers``."""
        pending, running, scheduled, failed, workers, _ = self.channel.run(
            self.channel.op("queue_read", "counts")
        )
        return {
            "pending": int(pending),
            "running": int(running),
            "scheduled": int(scheduled),
            "failed": int(failed),
            "workers": int(workers),
        }

    def activity(self, minutes: int = 0) -> counts.Activity:
        """What every worker counted for this queue (tasks completed and
        failed: :mod:`.counts`): the totals and the last ``minutes`` minutes."""
        return counts.read(self.channel, minutes)

    def failed(self, *, offset: int = 0, limit: int = 50) -> tuple[int, list[Task]]:
        """(how many tasks failed, one page of them, the latest first)."""
        total, flat = self.channel.run(self.channel.op("queue_read", "failed", offset, limit))
        tasks = []
        for i in range(0, len(flat), 5):
            task_id, name, error, attempts, finished = flat[i : i + 5]
            task = Task(id=str(task_id), name=str(name), params=None, status=TaskStatus.FAILED)
            task.error, task.attempts = str(error), int(attempts)
            task.finished_at = int(finished) / 1000 or None
            tasks.append(task)
        return int(total), tasks

    def has_worker(self, name: str) -> bool:
        """Whether a live worker listens for task ``name`` now."""
        return self.channel.run(self._has_worker(check_name(name, "task name")))

    def _has_worker(self, name: str) -> Steps[bool]:
        return int((yield self.channel.op("queue_read", "live", name))) > 0

    def retry(self, id: str) -> bool:
        """Queue a failed task again (attempts start over). False if it is not failed."""
        return (
            int(
                self.channel.run(self.channel.op("queue_admin", "retry", check_name(id, "task id")))
            )
            == 1
        )

    def delete(self, id: str) -> bool:
        """Remove a task that is not running. False if there is none, or it runs."""
        return (
            int(
                self.channel.run(
                    self.channel.op("queue_admin", "delete", check_name(id, "task id"))
                )
            )
            == 1
        )

    def gc(self, count: int = 100) -> tuple[int, list[str], list[str]]:
        """Bounded upkeep, also done by every worker's take: at most ``count``
        deferred tasks made ready and ``count`` tasks of dead workers delivered
        again (or failed after their last attempt). Returns (made ready,
        requeued ids, failed ids)."""
        ready, requeued, failed = self.channel.run(self.channel.op("queue_gc", count))
        self.channel.counts.add(counts.FAILED, len(failed))
        return int(ready), [str(i) for i in requeued], [str(i) for i in failed]

    # -- query ----------------------------------------------------------------------

    def query(
        self,
        id: str,
        name: str,
        params: Any = None,
        *,
        timeout: float | None = None,
        policy: TaskExecutePolicy = TaskExecutePolicy.Auto,
        once: bool = False,
    ) -> Any:
        """Run task ``name`` as ``policy`` says and return its result (None and
        other falsy results too). Raises :class:`ResourceUnavailable` when no
        result comes within ``timeout`` seconds (a task no worker has started
        is withdrawn) and :class:`TaskFailed` when the task failed.
        ``once=True``: the stored task is deleted once its result is returned."""
        return self.channel.run(self._query(id, name, params, timeout, policy, once))

    async def aquery(
        self,
        id: str,
        name: str,
        params: Any = None,
        *,
        timeout: float | None = None,
        policy: TaskExecutePolicy = TaskExecutePolicy.Auto,
        once: bool = False,
    ) -> Any:
        """:meth:`query` on the event loop: the wait for a worker's result
        holds no thread (a handler run here runs in a thread, or is awaited if
        it is a coroutine function). Cancelled while waiting, a task no worker
        has started is withdrawn."""
        return await self.channel.arun(self._query(id, name, params, timeout, policy, once))

    def _query(
        self,
        id: str,
        name: str,
        params: Any,
        timeout: float | None,
        policy: TaskExecutePolicy,
        once: bool,
    ) -> Steps[Any]:
        id, name = check_name(id, "task id"), check_name(name, "task name")
        timeout = check_timeout(timeout)
        payload = dumps(params, f"params of task {name!r}", self.max_payload)
        if not isinstance(policy, TaskExecutePolicy):
            raise ValueError(f"policy must be a TaskExecutePolicy, got {policy!r}")
        local = self.task_fn is not None
        if policy is TaskExecutePolicy.Local:
            return (yield from self._run_here(id, name, params))
        if policy is TaskExecutePolicy.LocalFirst and local:
            try:
                return (yield from self._run_here(id, name, params))
            except TaskFailed:
                logger.info("task %r (%s) failed here; running it by a worker", name, id)
        if policy is TaskExecutePolicy.Auto and local and not (yield from self._has_worker(name)):
            return (yield from self._run_here(id, name, params))
        if policy is TaskExecutePolicy.RemoteFirst and local:
            if not (yield from self._has_worker(name)):
                return (yield from self._run_here(id, name, params))
            try:
                return (
                    yield from self._remote(
                        id, name, payload, timeout, once, give_up_unstarted=True
                    )
                )
            except _NotStarted:
                return (yield from self._run_here(id, name, params))
        return (yield from self._remote(id, name, payload, timeout, once))

    def _run_here(self, id: str, name: str, params: Any) -> Steps[Any]:
        if self.task_fn is None:
            raise PoolError(f"{self!r} has no task_fn to run task {name!r} in this process")
        task = Task(id=id, name=name, params=params, status=TaskStatus.RUNNING, attempts=1)
        try:
            result = yield Local(self.task_fn, (task,))
            dumps(result, f"the result of task {name!r}", self.max_payload)
        except Exception as exc:
            raise TaskFailed(error_message(exc), task) from exc
        return result

    def _remote(
        self,
        id: str,
        name: str,
        payload: str,
        timeout: float | None,
        once: bool,
        *,
        give_up_unstarted: bool = False,
    ) -> Steps[Any]:
        run = self.channel.op  # (a step: ``yield run(...)``)
        yield run(
            "queue_enqueue", id, name, payload, 0, -1, self.max_attempts, to_ms(self.result_ttl), 1
        )
        try:
            done = yield from self._wait_done(id, timeout)
        except (BackendUnavailable, GeneratorExit):
            raise
        except BaseException:  # interrupted or cancelled: a task nobody started is withdrawn
            with contextlib.suppress(Exception):
                yield run("queue_withdraw", id)
            raise
        if not done:
            if (yield run("queue_withdraw", id)) == 1 and give_up_unstarted:
                raise _NotStarted
            raise ResourceUnavailable(
                f"task {name!r} ({id}) of {self!r} had no result within {timeout} s"
            )
        task = task_from_flat(id, (yield run("queue_collect", id, int(once))))
        if task is None:
            raise ResourceUnavailable(
                f"the result of task {name!r} ({id}) expired before it was read"
            )
        if task.status == TaskStatus.FAILED:
            error = task.error or "the task failed"
            raise (WorkerLost if error.startswith(_WORKER_LOST) else TaskFailed)(error, task)
        return task.result

    def _wait_done(self, id: str, timeout: float | None) -> Steps[bool]:
        """Block until task ``id`` has ended, at most ``timeout`` seconds (None:
        for ever). Its ``:done`` list is pushed when it ends; BLMOVE onto itself
        reads it without taking it, so every waiter sees it, however late."""
        key = f"{self.base}:done:{id}"
        deadline = None if timeout is None else time.monotonic() + timeout
        chunk = self.channel.read_chunk()[0]
        while True:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return False
            block = chunk if left is None else max(MIN_BLOCK, min(chunk, left))
            with backend_errors():
                moved = yield Call("blmove", (key, key, block, "LEFT", "RIGHT"), waits=True)
            if moved is not None:
                return True

    # -- workers --------------------------------------------------------------------

    def listen(
        self,
        names: Iterable[str],
        *,
        workers: int = 1,
        event: threading.Event | None = None,
        burst: bool = False,
        max_jobs: int | None = None,
    ) -> int:
        """Run tasks of ``names`` with ``task_fn`` in ``workers`` threads until
        ``event`` is set (or, with ``burst``, until none is ready, or after
        ``max_jobs`` tasks). Idle workers block on wake lists, never poll.
        Returns how many tasks ran.

        Whatever a handler raises fails its task, ``SystemExit`` and
        ``KeyboardInterrupt`` included; the worker goes on. Signals are the
        calling thread's: a ``KeyboardInterrupt`` (SIGINT) there ends this
        call, as any exception would (``pool_worker`` instead sets ``event``
        on SIGTERM and SIGINT, so that running tasks finish)."""
        if self.task_fn is None:
            raise PoolError(f"{self!r} has no task_fn: give TaskQueue(..., task_fn=...) to listen")
        listened = [check_name(n, "task name") for n in names]
        if not listened:
            raise ValueError("names must list at least one task name")
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise ValueError(f"workers must be an int >= 1, got {workers!r}")
        return run_workers(self, listened, workers, event or threading.Event(), burst, max_jobs)


class _NotStarted(Exception):
    """RemoteFirst: no worker took the task in time (it was withdrawn)."""
