"""Functions of Django's Tasks framework (``django.tasks`` on Django >= 6, the
``django-tasks`` backport on 5.2), run through ``RedisBackend``."""

from __future__ import annotations

import os
import sys
from typing import Any

try:
    from django.tasks import task
except ImportError:
    from django_tasks import task


@task()
def add(a: int, b: int) -> int:
    return a + b


@task(priority=10)
def urgent() -> str:
    return "urgent"


@task()
def nothing() -> None:
    return None


@task()
def fails(message: str) -> None:
    raise ValueError(message)


@task(takes_context=True)
def attempt(context: Any) -> int:
    return int(context.attempt)


@task()
async def double(value: int) -> int:
    return value * 2


@task()
def where() -> int:
    return os.getpid()


@task()
def exits(code: int) -> None:
    sys.exit(code)


@task()
def interrupted() -> None:
    raise KeyboardInterrupt("as if Ctrl-C were pressed inside the task")


@task()
def unencodable() -> Any:
    return {1, 2}


@task()
def pair() -> Any:
    return (1, 2)


@task(takes_context=True)
def context_info(context: Any) -> dict[str, Any]:
    """What the running task's context says of itself."""
    result = context.task_result
    return {
        "id": result.id,
        "attempt": context.attempt,
        "queue_name": result.task.queue_name,
        "priority": result.task.priority,
        "backend": result.task.backend,
    }


@task(takes_context=True)
def disagreements(context: Any) -> list[str]:
    """The fields of the running task's context result that differ from what
    ``get_result()`` reads for it now (none, if they agree)."""
    mine = context.task_result
    stored = mine.task.get_backend().get_result(mine.id)
    return [name for name in COMPARED if getattr(mine, name) != getattr(stored, name)]


#: Every field of a TaskResult that the framework's backend tests compare.
COMPARED = (
    "task",
    "id",
    "status",
    "enqueued_at",
    "started_at",
    "finished_at",
    "last_attempted_at",
    "args",
    "kwargs",
    "backend",
    "errors",
    "worker_ids",
    "_return_value",
)
