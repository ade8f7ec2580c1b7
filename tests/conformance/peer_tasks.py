"""The task functions the django-tasks-rq suite imports as ``tests.tasks``
(its sdist does not ship that module): written here from what its tests
expect of them, on the framework our backend uses."""

from __future__ import annotations

from typing import Any

from .django_tasks_adapter import framework

task = framework().task


@task()
def noop_task(*args: Any, **kwargs: Any) -> None:
    return None


@task()
async def noop_task_async(*args: Any, **kwargs: Any) -> None:
    return None


@task()
def calculate_meaning_of_life() -> int:
    return 42


@task()
def failing_task_value_error() -> None:
    raise ValueError("This task failed due to ValueError")


@task()
def failing_task_system_exit() -> None:
    raise SystemExit("This task failed due to SystemExit")


@task()
def complex_exception() -> None:
    raise ValueError(ValueError("This task failed"))


@task()
def complex_return_value() -> Any:
    return lambda: True  # neither JSON nor picklable


@task(takes_context=True)
def get_task_id(context: Any) -> str:
    return str(context.task_result.id)


@task(takes_context=True)
def test_context(context: Any, attempt: int) -> None:
    assert isinstance(context, framework().TaskContext)
    assert context.attempt == attempt
