"""A backend for Django's Tasks framework on the task queue: ``RedisBackend``.

::

    TASKS = {"default": {"BACKEND": "django_redis_pool.tasks.RedisBackend",
                         "QUEUES": ["default"]}}
    DJANGO_REDIS_POOL = {"QUEUES": {"default": {}}, ...}

Works with ``django.tasks`` (Django >= 6.0) and with the ``django-tasks``
backport (Django 5.2). Each Tasks queue name is a configured queue of
``DJANGO_REDIS_POOL["QUEUES"]`` (a system check says so when one is not);
``manage.py pool_worker`` runs its tasks. A task is stored as a JSON task of
our queue named :data:`TASK_NAME` whose params say which function to call with
which arguments, so tasks get everything the queue gives: priority, deferred
``run_after`` (woken on time, not polled), redelivery when a worker dies,
attempts, results for ``RESULT_TTL`` seconds. A result id is the queue task id
followed by ``.<queue name>``.

``pool_worker`` runs :func:`run_django_task` for :data:`TASK_NAME` on every
queue a ``RedisBackend`` in ``settings.TASKS`` lists. On a Django without
``django.tasks`` and without the backport, ``RedisBackend`` refuses to start.
"""

from __future__ import annotations

import traceback
import uuid
from datetime import datetime, timezone
from typing import Any

from django.core import checks
from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string

from . import registry
from .kinds.queue import DJANGO_TASKS, KIND
from .primitives.queue import Task as QueueTask
from .primitives.queue import TaskQueue

__all__ = ["TASK_NAME", "RedisBackend"]

#: The queue task name under which Django Tasks are stored and run.
TASK_NAME = DJANGO_TASKS

try:  # Django >= 6.0
    from django.tasks import TaskContext, TaskResult, TaskResultStatus
    from django.tasks.backends.base import BaseTaskBackend
    from django.tasks.base import TaskError
    from django.tasks.exceptions import TaskResultDoesNotExist as ResultDoesNotExist
    from django.tasks.signals import task_enqueued, task_finished, task_started
except ImportError:  # Django 5.2 with the django-tasks backport
    try:
        from django_tasks import TaskContext, TaskResult, TaskResultStatus
        from django_tasks.backends.base import BaseTaskBackend
        from django_tasks.base import TaskError
        from django_tasks.exceptions import TaskResultDoesNotExist as ResultDoesNotExist
        from django_tasks.signals import task_enqueued, task_finished, task_started
    except ImportError:  # neither: the backend cannot be used
        BaseTaskBackend = None

_STATUS = {
    "queued": "READY",
    "running": "RUNNING",
    "done": "SUCCESSFUL",
    "failed": "FAILED",
}


def _queue(name: str) -> TaskQueue:
    queue: TaskQueue = registry.get(KIND, name)
    return queue


def _when(seconds: float | None) -> datetime | None:
    return None if seconds is None else datetime.fromtimestamp(seconds, tz=timezone.utc)


def run_django_task(job: QueueTask) -> Any:
    """The handler of :data:`TASK_NAME`: call the task function with its
    arguments (and a ``TaskContext`` if it takes one); its return value is the
    task's result. Sends the framework's ``task_started`` and
    ``task_finished`` signals around it."""
    params = job.params
    framework_task = import_string(params["task"])
    backend = framework_task.get_backend()
    result = backend.result_of(job, framework_task)
    sender = type(backend)
    task_started.send(sender=sender, task_result=result)
    args, kwargs = params["args"], params["kwargs"]
    try:
        if framework_task.takes_context:
            value = framework_task.call(TaskContext(task_result=result), *args, **kwargs)
        else:
            value = framework_task.call(*args, **kwargs)
    except BaseException as exc:
        cls = type(exc)
        error = TaskError(
            exception_class_path=f"{cls.__module__}.{cls.__qualname__}",
            traceback="".join(traceback.format_exception(exc)),
        )
        _settle(result, "FAILED", errors=[error])
        task_finished.send(sender=sender, task_result=result)
        raise
    _settle(result, "SUCCESSFUL", value=value)
    task_finished.send(sender=sender, task_result=result)
    return value


def _settle(result: Any, status: str, *, value: Any = None, errors: Any = ()) -> None:
    """What the finished signal reports (the queue stores the same)."""
    object.__setattr__(result, "status", TaskResultStatus[status])
    object.__setattr__(result, "finished_at", datetime.now(timezone.utc))
    object.__setattr__(result, "_return_value", value)
    result.errors.extend(errors)


if BaseTaskBackend is None:

    class RedisBackend:  # type: ignore[no-redef]
        """Stands in when neither ``django.tasks`` nor ``django-tasks`` is installed."""

        def __init__(self, alias: str, params: dict[str, Any]) -> None:
            raise ImproperlyConfigured(
                "django_redis_pool.tasks.RedisBackend needs Django's Tasks framework: "
                "Django >= 6.0, or `pip install django-tasks` on Django 5.2."
            )

else:

    class RedisBackend(BaseTaskBackend):  # type: ignore[no-redef]
        """Django Tasks on django-redis-pool's task queue (see the module's docs)."""

        supports_defer = True
        supports_async_task = True
        supports_get_result = True
        supports_priority = True

        def enqueue(self, task: Any, args: Any, kwargs: Any) -> Any:
            self.validate_task(task)
            queue = _queue(task.queue_name)
            task_id = uuid.uuid4().hex
            run_at = None if task.run_after is None else task.run_after.timestamp()
            params = {"task": task.module_path, "args": list(args), "kwargs": dict(kwargs)}
            queue.enqueue(TASK_NAME, params, id=task_id, priority=task.priority, run_at=run_at)
            result_id = f"{task_id}.{task.queue_name}"
            result = self._result(task, result_id, None, params)  # no read back: just queued
            task_enqueued.send(sender=type(self), task_result=result)
            return result

        def get_result(self, result_id: str) -> Any:
            task_id, _, queue_name = str(result_id).partition(".")
            if len(task_id) != 32 or not queue_name or queue_name not in self.queues:
                raise ResultDoesNotExist(result_id)
            stored = _queue(queue_name).get_task(task_id)
            if stored is None or stored.name != TASK_NAME:
                raise ResultDoesNotExist(result_id)
            return self._result(import_string(stored.params["task"]), result_id, stored)

        def result_of(self, job: QueueTask, framework_task: Any) -> Any:
            """The TaskResult of the queue task ``job`` (running now)."""
            queue_name = framework_task.queue_name
            stored = _queue(queue_name).get_task(job.id) or job  # its workers so far
            return self._result(framework_task, f"{job.id}.{queue_name}", stored)

        def _result(
            self,
            framework_task: Any,
            result_id: str,
            stored: QueueTask | None,
            params: dict[str, Any] | None = None,
        ) -> Any:
            """The TaskResult of the stored task (None: just enqueued with
            ``params``)."""
            status = "queued" if stored is None else stored.status
            params = stored.params if stored is not None else params or {}
            workers = [] if stored is None else list(stored.workers)
            errors = []
            if stored is not None and stored.status == "failed":
                errors.append(
                    TaskError(
                        exception_class_path=_exception_path(stored.error),
                        traceback=stored.traceback or stored.error or "",
                    )
                )
            result = TaskResult(
                task=framework_task,
                id=result_id,
                status=TaskResultStatus[_STATUS[status]],
                enqueued_at=_when(stored.enqueued_at) if stored else datetime.now(timezone.utc),
                started_at=_when(stored.started_at if stored else None),
                finished_at=_when(stored.finished_at if stored else None),
                last_attempted_at=_when(stored.started_at if stored else None),
                args=list(params.get("args", [])),
                kwargs=dict(params.get("kwargs", {})),
                backend=self.alias,
                errors=errors,
                worker_ids=workers,
            )
            if stored is not None and stored.status == "done":
                object.__setattr__(result, "_return_value", stored.result)
            return result

        def check(self, **kwargs: Any) -> list[checks.CheckMessage]:
            messages: list[checks.CheckMessage] = list(super().check(**kwargs))
            try:
                configured = set(registry.get_config().names(KIND))
            except ImproperlyConfigured:
                return messages  # the app's own checks report the setting
            for name in sorted(self.queues - configured):
                messages.append(
                    checks.Error(
                        f'TASKS["{self.alias}"] lists queue {name!r}, which is not configured '
                        'in DJANGO_REDIS_POOL["QUEUES"].',
                        hint=f'Add DJANGO_REDIS_POOL["QUEUES"][{name!r}] = {{}} (or remove it '
                        f'from TASKS["{self.alias}"]["QUEUES"]).',
                        id="django_redis_pool.E030",
                    )
                )
            return messages


def _exception_path(error: str | None) -> str:
    """``module.Class`` from a stored error (``"module.Class: message"``)."""
    head = (error or "").partition(":")[0]
    return head if "." in head else f"builtins.{head or 'Exception'}"
