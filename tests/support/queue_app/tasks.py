"""``@task`` handlers of queue "jobs", found by the app config's autodiscovery."""

from __future__ import annotations

import os
import time
from typing import Any

from django_redis_pool import Task, task


@task("add", queue="jobs")
def add(job: Task) -> Any:
    return job.params["a"] + job.params["b"]


@task("slow", queue="jobs")
def slow(job: Task) -> Any:
    time.sleep(job.params["seconds"])
    return "slept"


@task("pid", queue="jobs")
def pid(job: Task) -> Any:
    time.sleep(0.2)  # (long enough that another process takes the next task)
    return os.getpid()


@task("users", queue="jobs")
def users(job: Task) -> Any:
    from django.contrib.auth.models import User

    return User.objects.count()


@task(queue="jobs")
def unnamed(job: Task) -> Any:
    return "named after its dotted path"
