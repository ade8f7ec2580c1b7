"""The Django Tasks recipe of ``docs/background-work.md``, read from the page
(:mod:`tests.support.recipe_app.tasks`), on ``RedisBackend`` and a real
``manage.py pool_worker`` process: a ``send_report`` refused "smtp" (a
semaphore of 1, held by the test) enqueues itself again for after the
refusal's ``retry_after`` and says it did not send; the worker wakes for the
deferred copy, which sends once the test has let "smtp" go."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from asgiref.local import Local

from django_redis_pool import holding
from tests.support.recipe_app import tasks as recipe
from tests.support.waiting import STARTUP, stop, wait_for

try:
    from django import tasks as framework
except ImportError:
    import django_tasks as framework

ROOT = Path(__file__).resolve().parents[2]
Status = framework.TaskResultStatus
APP = "tests.support.recipe_app"  # the task's app
MAX_JOBS_2 = ["--max-jobs", "2"]  # the refused run and its deferred copy


def reset_backends() -> None:
    """Forget the framework's backends (built from an earlier TASKS)."""
    handler = framework.task_backends
    handler.__dict__.pop("settings", None)
    handler._connections = Local(handler.thread_critical)


@pytest.fixture
def configured(settings: Any, redis_url: str, tmp_path: Path) -> Iterator[dict[str, str]]:
    """The page's ``TASKS`` on a queue "default", "smtp" a semaphore of 1, and
    the recipe's app installed: in this process, and in a settings module for
    a worker (the environment it is given)."""
    setting: dict[str, Any] = {
        "CONNECTION": {"URL": redis_url},
        "QUEUES": {"default": {"VISIBILITY_TIMEOUT": 30}},
        "SEMAPHORES": {"smtp": {"MAX_SIZE": 1}},
    }
    tasks = {"default": {"BACKEND": "django_redis_pool.tasks.RedisBackend", "QUEUES": ["default"]}}
    settings.DJANGO_REDIS_POOL = setting
    settings.TASKS = tasks
    settings.INSTALLED_APPS = [*settings.INSTALLED_APPS, APP]
    (tmp_path / "tasks_settings.py").write_text(
        "from tests.settings import *  # noqa: F403\n"
        f"DJANGO_REDIS_POOL = {setting!r}\nTASKS = {tasks!r}\n"
        f"INSTALLED_APPS = [*INSTALLED_APPS, {APP!r}]  # noqa: F405\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("DJANGO_")}
    env["DJANGO_SETTINGS_MODULE"] = "tasks_settings"
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), str(ROOT)])
    reset_backends()
    yield env
    reset_backends()


def test_a_task_refused_smtp_enqueues_itself_for_later_and_the_woken_worker_sends_it_then(
    configured: dict[str, str], redis_client: redis.Redis, tmp_path: Path
) -> None:
    log_path = tmp_path / "worker.log"
    with log_path.open("wb") as log:
        # not --burst: the worker must wake by itself for the deferred copy; it
        # stops after the 2 runs (the refused one, and its copy)
        worker = subprocess.Popen(
            [sys.executable, "-m", "django", "pool_worker", "--queue", "default", *MAX_JOBS_2],
            cwd=ROOT,
            env=configured,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        with holding("smtp", timeout=0):
            first = recipe.send_report.enqueue(7)
            wait_for(
                lambda: first.refresh() or first.status in (Status.SUCCESSFUL, Status.FAILED),
                STARTUP + 10,
                f"the first run to be refused ({log_path.read_text()[-2000:]})",
                interval=0.05,
            )
            assert first.status == Status.SUCCESSFUL, first.errors
            assert first.return_value == {"sent": False, "retry_after": 5.0}
            assert redis_client.llen("delivered") == 0
            enqueued = [job_id.decode() for job_id in redis_client.lrange("enqueued", 0, -1)]
            assert len(enqueued) == 2 and enqueued[0] == first.id, (
                "the refused run enqueued its copy"
            )
            copy = recipe.send_report.get_result(enqueued[1])
            assert copy.status == Status.READY and copy.args == [7]
            assert copy.task.run_after >= first.finished_at, "deferred: for after retry_after"
        wait_for(
            lambda: copy.refresh() or copy.status in (Status.SUCCESSFUL, Status.FAILED),
            STARTUP,
            f"the deferred copy to run ({log_path.read_text()[-2000:]})",
            interval=0.05,
        )
        assert copy.status == Status.SUCCESSFUL, copy.errors
        assert copy.return_value == {"sent": True}
        assert [int(user) for user in redis_client.lrange("delivered", 0, -1)] == [7]
        assert copy.started_at >= copy.task.run_after, "not before it was due"
        assert worker.wait(timeout=STARTUP) == 0, log_path.read_text()[-2000:]
    finally:
        stop(worker)
