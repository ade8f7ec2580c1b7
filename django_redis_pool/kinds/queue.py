"""Task queues in Django: the ``QUEUES`` setting, ``get_queue``, handlers
registered with ``@task`` in apps' ``tasks.py`` (:func:`handlers_of`: with the
runners registered by :func:`register_runner`, such as Django Tasks' where a
``RedisBackend`` serves the queue), ``pool_gc``
(requeueing the tasks of dead workers) and ``pool_status`` counts.
``manage.py pool_worker`` runs the handlers (:mod:`django_redis_pool.worker`);
the admin's panels are in :mod:`django_redis_pool.dashboard.queue_panels`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from ..primitives.queue.task import MAX_PAYLOAD, check_payload_limit
from ..primitives.queue.taskqueue import Task, TaskQueue
from ..primitives.validators import check_duration, check_name
from .contract import Kind, Option, Report

__all__ = ["HANDLERS", "KIND", "QueueKind", "handlers_of", "register_runner", "task"]

Handler = TypeVar("Handler", bound=Callable[[Task], Any])

#: queue name -> task name -> handler, filled by @task (apps' tasks.py modules
#: are imported when Django starts).
HANDLERS: dict[str, dict[str, Callable[[Task], Any]]] = {}
_handlers_lock = threading.Lock()


def task(name: str | None = None, *, queue: str = "default") -> Callable[[Handler], Handler]:
    """Register the decorated ``handler(task) -> result`` for tasks ``name``
    (default: the function's dotted path) of the configured queue ``queue``.
    The handler gets the :class:`~django_redis_pool.primitives.queue.taskqueue.Task`
    (``params``, ``update(current, total)``) and returns a JSON result."""
    queue = check_name(queue, "queue")

    def register(handler: Handler) -> Handler:
        if not callable(handler):
            raise TypeError(f"@task decorates a function of a Task, got {handler!r}")
        task_name = check_name(name or f"{handler.__module__}.{handler.__qualname__}", "task name")
        with _handlers_lock:
            HANDLERS.setdefault(queue, {})[task_name] = handler
        return handler

    return register


#: task name -> (its handler, which queues it serves), filled by
#: :func:`register_runner`.
_RUNNERS: dict[str, tuple[Callable[[Task], Any], Callable[[str], bool]]] = {}


def register_runner(
    task_name: str, handler: Callable[[Task], Any], *, serves: Callable[[str], bool]
) -> None:
    """Run ``handler`` for the tasks named ``task_name`` of every queue for
    which ``serves(queue)`` is true when a worker asks (:func:`handlers_of`):
    how a framework on the queues (the Django Tasks backend,
    :mod:`django_redis_pool.tasks`) brings its runner. Registering a name
    again replaces it."""
    with _handlers_lock:
        _RUNNERS[check_name(task_name, "task name")] = (handler, serves)


def handlers_of(queue: str) -> dict[str, Callable[[Task], Any]]:
    """The handlers registered for ``queue``, by task name: its ``@task``
    ones, and the registered runners that serve it (:func:`register_runner`:
    Django Tasks' when a ``RedisBackend`` serves the queue)."""
    handlers = dict(HANDLERS.get(queue, {}))
    for task_name, (handler, serves) in list(_RUNNERS.items()):
        if serves(queue):
            handlers[task_name] = handler
    return handlers


def _dispatch(queue: str) -> Callable[[Task], Any]:
    def run(job: Task) -> Any:
        handler = HANDLERS.get(queue, {}).get(job.name) or handlers_of(queue).get(job.name)
        if handler is None:
            raise LookupError(f"no @task handler named {job.name!r} for queue {queue!r}")
        return handler(job)

    return run


def _validate_attempts(value: Any, path: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{path} must be an int >= 1, got {value!r}")
    return value


class QueueKind(Kind[TaskQueue]):
    """A :class:`TaskQueue` whose handlers are the ``@task`` functions of its name."""

    name = "queue"
    setting_key = "QUEUES"
    primitive = TaskQueue
    counted = ("tasks_completed", "tasks_failed")
    options = {
        "RESULT_TTL": Option(
            check_duration, 3600.0, "Use how many seconds a finished task is kept, e.g. 3600."
        ),
        "VISIBILITY_TIMEOUT": Option(
            check_duration,
            300.0,
            "Use how many seconds without a heartbeat make a running task's worker "
            "presumed dead (its task is then delivered again), e.g. 300.",
        ),
        "MAX_ATTEMPTS": Option(
            _validate_attempts, 3, "Use how many deliveries a task gets, an int >= 1, e.g. 3."
        ),
        "MAX_PAYLOAD": Option(
            check_payload_limit,
            MAX_PAYLOAD,
            "Use the most bytes of JSON a task's params or result may take, e.g. 16777216.",
        ),
    }

    def build(
        self, client: Any, name: str, key_prefix: str, options: Mapping[str, Any]
    ) -> TaskQueue:
        return TaskQueue(
            client,
            name,
            task_fn=_dispatch(name),
            result_ttl=options["RESULT_TTL"],
            visibility_timeout=options["VISIBILITY_TIMEOUT"],
            max_attempts=options["MAX_ATTEMPTS"],
            key_prefix=key_prefix,
            max_payload=options["MAX_PAYLOAD"],
        )

    def collect(self, primitive: TaskQueue, *, dry_run: bool) -> Report:
        """Deliver again the tasks whose worker died (deadline passed), fail
        those past their last attempt, and make due deferred tasks ready."""
        if dry_run:
            return Report(f"{primitive.name}: gc of a queue has no dry run; nothing changed")
        ready, requeued, failed = 0, [], []
        while True:
            made, again, dead = primitive.gc(1000)
            ready, requeued, failed = ready + made, requeued + again, failed + dead
            if made < 1000 and len(again) + len(dead) < 1000:
                break
        line = (
            f"{primitive.name}: {len(requeued)} tasks of dead workers requeued, "
            f"{len(failed)} failed after their last attempt, {ready} deferred made ready"
        )
        changed = bool(ready or requeued or failed)
        return Report(
            line if changed else f"{primitive.name}: nothing to reclaim",
            changed=changed,
            style="warning",
            details=(*(f"  requeued: {i}" for i in requeued), *(f"  failed: {i}" for i in failed)),
            data={
                "kind": self.name,
                "name": primitive.name,
                "requeued": requeued,
                "failed": failed,
                "ready": ready,
            },
            counts={"requeued": len(requeued), "failed": len(failed)},
        )

    def gauges(self, primitive: TaskQueue) -> dict[str, float | None]:
        """Tasks by state: ``tasks_<state>`` (pending, running, deferred, failed)."""
        counts = primitive.counts()
        return {
            "tasks_pending": counts["pending"],
            "tasks_running": counts["running"],
            "tasks_deferred": counts["scheduled"],
            "tasks_failed": counts["failed"],
        }

    def status(self, primitive: TaskQueue) -> Report:
        counts = primitive.counts()
        busy = counts["pending"] > 0 and counts["workers"] == 0
        return Report(
            primitive.name,
            changed=busy,
            details=(
                f"  {counts['scheduled']} deferred, {counts['failed']} failed, "
                f"{counts['workers']} live workers",
            ),
            data={
                "kind": self.name,
                "name": primitive.name,
                "held": counts["running"],
                "free": None,
                "waiting": counts["pending"],
                "size": None,
                **counts,
            },
        )


KIND = QueueKind()
