"""Functions of Django's Tasks framework (``django.tasks`` on Django >= 6, the
``django-tasks`` backport on 5.2), run through ``RedisBackend``."""

from __future__ import annotations

import os
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
