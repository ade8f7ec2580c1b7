"""A backend for Django's Tasks framework on the task queue: ``RedisBackend``.

::

    TASKS = {"default": {"BACKEND": "django_redis_pool.tasks.RedisBackend",
                         "QUEUES": ["default"]}}
    DJANGO_REDIS_POOL = {"QUEUES": {"default": {}}, ...}

Works with ``django.tasks`` (Django >= 6.0) and with the ``django-tasks``
backport (Django 5.2). Each Tasks queue name is a configured queue of
``DJANGO_REDIS_POOL["QUEUES"]`` (a system check says so when one is not); an
empty ``QUEUES`` (the framework's "any queue") means any queue configured
there. ``manage.py pool_worker`` runs its tasks. A task is stored as a JSON
task of our queue named :data:`TASK_NAME` whose params say which function to
call with which arguments and its ``using()`` options (queue name, priority,
``run_after``, backend), so tasks get everything the queue gives: priority,
deferred ``run_after`` (woken on time, not polled), redelivery when a worker
dies, attempts, results for ``RESULT_TTL`` seconds.

A result id is the queue task's id: 32 random hex digits, a dot, and 8 hex
digits of a digest of the queue name (41 characters, whatever the queue name),
from which ``get_result()`` finds the queue in one read. Every
``TaskResult`` (the one ``enqueue()`` returns, the ones ``get_result()``
reads, a running task's context and the framework's signals) is built from the
task as Redis stores it, so they agree, times included (Redis's clock).

This module registers :func:`run_django_task` with the queue kind
(:func:`~django_redis_pool.kinds.queue.register_runner`) when it is imported
(the app config imports it with the apps' ``tasks`` modules): ``pool_worker``
runs it for :data:`TASK_NAME` on every queue a ``RedisBackend`` of the
framework's backends (``TASKS``) serves (:meth:`RedisBackend.served`). On a
Django without ``django.tasks`` and without the backport, ``RedisBackend``
refuses to start.
"""

from __future__ import annotations

import hashlib
import re
import sys
import uuid
from datetime import datetime, timezone
from typing import Any

from django.apps import apps
from django.core import checks
from django.core.exceptions import ImproperlyConfigured, SuspiciousOperation
from django.utils.module_loading import import_string

from . import registry
from .exceptions import NotConfigured
from .kinds.accessors import get_queue
from .kinds.queue import KIND as QUEUE_KIND
from .kinds.queue import register_runner
from .primitives.queue.task import dumps
from .primitives.queue.taskqueue import Task as QueueTask
from .primitives.queue.taskqueue import TaskFailed, TaskQueue
from .primitives.text import printable
from .primitives.wire.protocol import TaskStatus

__all__ = ["TASK_NAME", "RedisBackend", "run_django_task", "serves"]

#: The queue task name under which Django Tasks are stored and run.
TASK_NAME = "django.tasks"


try:  # Django >= 6.0
    from django.tasks import TaskContext, TaskResult, TaskResultStatus, task_backends
    from django.tasks.backends.base import BaseTaskBackend
    from django.tasks.base import Task as FrameworkTask
    from django.tasks.base import TaskError
    from django.tasks.exceptions import InvalidTask
    from django.tasks.exceptions import TaskResultDoesNotExist as ResultDoesNotExist
    from django.tasks.signals import task_enqueued, task_finished, task_started
except ImportError:  # Django 5.2 with the django-tasks backport
    try:
        from django_tasks import TaskContext, TaskResult, TaskResultStatus, task_backends
        from django_tasks.backends.base import BaseTaskBackend
        from django_tasks.base import Task as FrameworkTask
        from django_tasks.base import TaskError
        from django_tasks.exceptions import InvalidTaskError as InvalidTask
        from django_tasks.exceptions import TaskResultDoesNotExist as ResultDoesNotExist
        from django_tasks.signals import task_enqueued, task_finished, task_started
    except ImportError:  # neither: the backend cannot be used
        BaseTaskBackend = None

_STATUS = {
    TaskStatus.QUEUED: "READY",
    TaskStatus.RUNNING: "RUNNING",
    TaskStatus.DONE: "SUCCESSFUL",
    TaskStatus.FAILED: "FAILED",
}

#: A result id: the random part, then the digest of the queue name.
_RESULT_ID = re.compile(r"[0-9a-f]{32}\.([0-9a-f]{8})")
#: A dotted path of Python names (an exception class's, at the head of a stored error).
_DOTTED = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")


def _queue_tag(queue_name: str) -> str:
    """The 8 hex digits of a queue name that end the ids of its results."""
    return hashlib.blake2b(queue_name.encode(), digest_size=4).hexdigest()


def _new_result_id(queue_name: str) -> str:
    """A new result id of a task of ``queue_name`` (uuid4's randomness)."""
    return f"{uuid.uuid4().hex}.{_queue_tag(queue_name)}"


def _when(seconds: float | None) -> datetime | None:
    return None if seconds is None else datetime.fromtimestamp(seconds, tz=timezone.utc)


def _framework_task(stored: QueueTask) -> Any:
    """The framework's task that ``stored`` (a queue task's params) describes:
    the module-level task, with the ``using()`` options it was enqueued with.
    The path comes from Redis, where anyone with write access may have put
    it: a module is imported only if it is loaded already or lies in an
    installed app's package (:func:`_importable`); nothing else is imported,
    and what is not a framework task is never called."""
    params = stored.params
    path = params.get("task") if isinstance(params, dict) else None
    if not isinstance(path, str) or not _importable(path):
        raise SuspiciousOperation(
            f"Task {stored.id} names {printable(str(path))}, which is not a task of an "
            "installed app's module: nothing was imported and it is never run."
        )
    task = import_string(path)
    if not isinstance(task, FrameworkTask):  # someone else wrote it: never called
        raise SuspiciousOperation(
            f"Task {stored.id} does not point to a Task ({path}): {path!r} is not a task "
            "of Django's Tasks framework (a function decorated with @task), so it is never run."
        )
    run_after = params.get("run_after")
    return task.using(
        priority=params.get("priority"),
        queue_name=params.get("queue_name"),
        run_after=None if run_after is None else datetime.fromisoformat(run_after),
        backend=params.get("backend"),
    )


def _importable(path: str) -> bool:
    """Whether the dotted ``path`` of a task may be imported: its module is
    loaded already, or it lies in the package of an installed app."""
    module = path.rpartition(".")[0]
    if not module or not all(part.isidentifier() for part in path.split(".")):
        return False
    if module in sys.modules:
        return True
    return any(
        module == config.name or module.startswith(config.name + ".")
        for config in apps.get_app_configs()
    )


def run_django_task(job: QueueTask) -> Any:
    """The handler of :data:`TASK_NAME`: call the task function with its
    arguments (and a ``TaskContext`` if it takes one); its return value, which
    must be JSON, is the task's result. Sends the framework's ``task_started``
    signal before, and ``task_finished`` once the worker has stored the
    outcome, with the result as stored (from the ``except`` block of the
    worker when the task raised, so that Django's log of it has the
    traceback)."""
    params = job.params
    framework_task = _framework_task(job)
    backend = framework_task.get_backend()
    sender = type(backend)
    result = backend.result_of(job, framework_task)

    def ended(stored: QueueTask) -> None:
        task_finished.send(sender=sender, task_result=backend.result_of(stored, framework_task))

    job.on_end = ended
    task_started.send(sender=sender, task_result=result)
    args, kwargs = params["args"], params["kwargs"]
    if framework_task.takes_context:
        value = framework_task.call(TaskContext(task_result=result), *args, **kwargs)
    else:
        value = framework_task.call(*args, **kwargs)
    # here, to name the task (the worker's own check names the queue task only)
    dumps(value, f"the return value of task {framework_task.module_path!r}")
    return value


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
            queue = self._queue_of(task)
            run_at = None if task.run_after is None else task.run_after.timestamp()
            params = {
                "task": task.module_path,
                "args": list(args),
                "kwargs": dict(kwargs),
                "queue_name": task.queue_name,
                "priority": task.priority,
                "run_after": None if task.run_after is None else task.run_after.isoformat(),
                "backend": task.backend,
            }
            stored = queue.submit(
                TASK_NAME,
                params,
                id=_new_result_id(task.queue_name),
                priority=task.priority,
                run_at=run_at,
            )
            result = self._result(task, stored)
            task_enqueued.send(sender=type(self), task_result=result)
            return result

        def _queue_of(self, task: Any) -> TaskQueue:
            """The configured queue of ``task``; ``InvalidTask`` naming the fix
            when there is none."""
            try:
                queue = get_queue(task.queue_name)
            except NotConfigured as exc:
                raise InvalidTask(
                    f"Task {task.module_path!r} is for queue {task.queue_name!r}, which is "
                    f'not configured in DJANGO_REDIS_POOL["QUEUES"]: add '
                    f'DJANGO_REDIS_POOL["QUEUES"][{task.queue_name!r}] = {{}}, or enqueue it '
                    f"on a configured queue with .using(queue_name=...). ({exc})"
                ) from None
            return queue

        def served(self) -> list[str]:
            """The names of the queues whose Django Tasks this backend runs and
            reads: its ``QUEUES``, or, when that is empty (the framework's
            "any queue"), every queue configured in ``DJANGO_REDIS_POOL``."""
            if self.queues:
                return sorted(self.queues)
            try:
                return list(registry.get_config().names(QUEUE_KIND))
            except ImproperlyConfigured:
                return []

        def get_result(self, result_id: str) -> Any:
            match = _RESULT_ID.fullmatch(result_id) if isinstance(result_id, str) else None
            if match is not None:
                for name in self.served():
                    if _queue_tag(name) != match[1]:
                        continue
                    try:
                        queue = get_queue(name)
                    except NotConfigured:  # (reported by the check, E030)
                        continue
                    stored = queue.get_task(result_id)
                    if stored is not None and stored.name == TASK_NAME:
                        return self._result(_framework_task(stored), stored)
            raise ResultDoesNotExist(result_id)

        def result_of(self, stored: QueueTask, framework_task: Any) -> Any:
            """The TaskResult of ``framework_task`` stored as the queue task
            ``stored`` (a running task's, as its worker took it)."""
            return self._result(framework_task, stored)

        def _result(self, framework_task: Any, stored: QueueTask) -> Any:
            """The TaskResult of the stored task: what ``get_result()`` reads."""
            params = stored.params
            errors = []
            if stored.status == TaskStatus.FAILED:
                errors.append(
                    TaskError(
                        exception_class_path=_exception_path(stored.error),
                        traceback=stored.traceback or stored.error or "",
                    )
                )
            first = stored.first_started_at
            result = TaskResult(
                task=framework_task,
                id=stored.id,
                status=TaskResultStatus[_STATUS[stored.status]],
                enqueued_at=_when(stored.enqueued_at),
                started_at=_when(first if first is not None else stored.started_at),
                finished_at=_when(stored.finished_at),
                last_attempted_at=_when(stored.started_at),
                args=list(params.get("args", [])),
                kwargs=dict(params.get("kwargs", {})),
                backend=params.get("backend", self.alias),
                errors=errors,
                worker_ids=list(stored.workers),
            )
            if stored.status == TaskStatus.DONE:
                object.__setattr__(result, "_return_value", stored.result)
            return result

        def check(self, **kwargs: Any) -> list[checks.CheckMessage]:
            messages: list[checks.CheckMessage] = list(super().check(**kwargs))
            if not apps.is_installed("django_redis_pool"):
                messages.append(
                    checks.Error(
                        f'TASKS["{self.alias}"] uses django_redis_pool.tasks.RedisBackend, whose '
                        "tasks only run under manage.py pool_worker, a command of the "
                        "django_redis_pool app, which is not installed.",
                        hint='Add "django_redis_pool" to INSTALLED_APPS.',
                        id="django_redis_pool.E033",
                    )
                )
            try:
                configured = set(registry.get_config().names(QUEUE_KIND))
            except ImproperlyConfigured:
                return messages  # the app's own checks report the setting
            if not self.queues and not configured:
                messages.append(
                    checks.Error(
                        f'TASKS["{self.alias}"]["QUEUES"] is empty, which lets its tasks use '
                        'any queue configured in DJANGO_REDIS_POOL["QUEUES"], but none is '
                        "configured: no task can be enqueued.",
                        hint='Configure one, e.g. DJANGO_REDIS_POOL["QUEUES"] = {"default": {}} '
                        "(the framework's default queue name).",
                        id="django_redis_pool.E032",
                    )
                )
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


def serves(queue: str) -> bool:
    """Whether a ``RedisBackend`` among the framework's backends (``TASKS``)
    runs the Django Tasks of ``queue`` (:meth:`RedisBackend.served`). A
    backend that cannot be built serves nothing (the framework's own check
    reports it)."""
    if BaseTaskBackend is None:
        return False
    for alias in task_backends:
        try:
            backend = task_backends[alias]
        except Exception:  # (the framework's own check reports it)
            continue
        if isinstance(backend, RedisBackend) and queue in backend.served():
            return True
    return False


# The queue kind runs Django Tasks by this runner (the backend brings it; the
# kind knows nothing of the framework).
register_runner(TASK_NAME, run_django_task, serves=serves)


def _exception_path(error: str | None) -> str:
    """``module.Class`` from a stored error (``"module.Class: message"``, or
    ``"Class: message"`` for a builtin); ``TaskFailed``'s path for an error of
    another form."""
    head = (error or "").partition(":")[0]
    if not _DOTTED.fullmatch(head):
        return f"{TaskFailed.__module__}.{TaskFailed.__qualname__}"
    return head if "." in head else f"builtins.{head}"
