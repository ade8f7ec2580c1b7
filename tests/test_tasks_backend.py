"""``django_redis_pool.tasks.RedisBackend``: Django's Tasks framework on our task
queue (``django.tasks`` on Django >= 6.0, the ``django-tasks`` backport on 5.2).
Tasks are enqueued through the framework, run by ``pool_worker``, and read back
with ``get_result()`` / ``refresh()``."""

from __future__ import annotations

import io
import time
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from asgiref.local import Local
from django.core.management import call_command

from django_redis_pool import get_queue
from django_redis_pool.tasks import TASK_NAME

try:
    from django import tasks as framework
    from django.tasks import signals
except ImportError:
    import django_tasks as framework
    from django_tasks import signals

from .queue_app import framework_tasks as jobs

Status = framework.TaskResultStatus


def reset_backends() -> None:
    """Forget the framework's backends (built from an earlier TASKS)."""
    handler = framework.task_backends
    handler.__dict__.pop("settings", None)
    handler._connections = Local(handler.thread_critical)


@pytest.fixture(autouse=True)
def backend(settings: Any, redis_url: str) -> Iterator[None]:
    settings.DJANGO_REDIS_POOL = {
        "CONNECTION": {"URL": redis_url},
        "QUEUES": {"default": {"VISIBILITY_TIMEOUT": 30}},
    }
    settings.TASKS = {
        "default": {"BACKEND": "django_redis_pool.tasks.RedisBackend", "QUEUES": ["default"]}
    }
    reset_backends()
    yield
    reset_backends()


def work() -> str:
    out = io.StringIO()
    call_command("pool_worker", "--queue", "default", "--burst", stdout=out)
    return out.getvalue()


def test_the_backend_is_ours_and_says_what_it_supports() -> None:
    backend = framework.task_backends["default"]
    assert type(backend).__module__ == "django_redis_pool.tasks"
    assert backend.supports_defer and backend.supports_async_task
    assert backend.supports_get_result and backend.supports_priority


def test_an_enqueued_task_is_run_by_pool_worker_and_read_back() -> None:
    result = jobs.add.enqueue(2, 3)
    assert result.status == Status.READY and result.args == [2, 3]
    assert get_queue("default").get_task(result.id.partition(".")[0]).name == TASK_NAME
    assert "Stopped after 1 task(s)." in work()
    result.refresh()
    assert result.status == Status.SUCCESSFUL and result.return_value == 5
    assert result.attempts == 1 and len(result.worker_ids) == 1
    assert result.started_at and result.finished_at and result.enqueued_at
    again = jobs.add.get_result(result.id)
    assert again.return_value == 5 and again.status == Status.SUCCESSFUL


def test_none_is_a_result_and_failures_carry_the_error() -> None:
    ok = jobs.nothing.enqueue()
    bad = jobs.fails.enqueue("no good")
    work()
    ok.refresh()
    assert ok.status == Status.SUCCESSFUL and ok.return_value is None
    bad.refresh()
    assert bad.status == Status.FAILED
    error = bad.errors[0]
    assert error.exception_class is ValueError and "no good" in error.traceback
    with pytest.raises(ValueError, match="failed"):
        bad.return_value  # noqa: B018


def test_priority_runs_urgent_tasks_first() -> None:
    plain = jobs.add.enqueue(1, 1)
    urgent = jobs.urgent.enqueue()
    call_command("pool_worker", "--queue", "default", "--max-jobs", "1", stdout=io.StringIO())
    urgent.refresh()
    plain.refresh()
    assert urgent.status == Status.SUCCESSFUL and plain.status == Status.READY


def test_context_and_async_functions() -> None:
    attempt = jobs.attempt.enqueue()
    doubled = jobs.double.enqueue(21)
    work()
    attempt.refresh()
    doubled.refresh()
    assert attempt.return_value == 1
    assert doubled.return_value == 42


def test_run_after_defers_a_task_until_then() -> None:
    later = jobs.add.using(run_after=datetime.now(timezone.utc) + timedelta(seconds=0.6))
    result = later.enqueue(1, 2)
    assert "Stopped after 0 task(s)." in work(), "not ready yet"
    time.sleep(0.7)
    assert "Stopped after 1 task(s)." in work()
    result.refresh()
    assert result.return_value == 3


def test_an_unknown_result_id_does_not_exist() -> None:
    backend = framework.task_backends["default"]
    for result_id in ("nope", "0" * 32 + ".default", "0" * 32 + ".elsewhere"):
        with pytest.raises(Exception) as raised:
            backend.get_result(result_id)
        assert type(raised.value).__name__ in ("ResultDoesNotExist", "TaskResultDoesNotExist")


def test_a_queue_that_is_not_configured_is_a_check_error(settings: Any) -> None:
    settings.TASKS = {
        "default": {
            "BACKEND": "django_redis_pool.tasks.RedisBackend",
            "QUEUES": ["default", "reports"],
        }
    }
    reset_backends()
    messages = framework.task_backends["default"].check()
    assert [m.id for m in messages] == ["django_redis_pool.E030"]
    assert "'reports'" in messages[0].msg


def test_the_framework_signals_are_sent() -> None:
    seen: list[tuple[str, str, str]] = []

    def receiver(signal: Any, sender: Any, task_result: Any, **kwargs: Any) -> None:
        name = {
            id(signals.task_enqueued): "enqueued",
            id(signals.task_started): "started",
            id(signals.task_finished): "finished",
        }[id(signal)]
        seen.append((name, task_result.task.name, str(task_result.status)))

    sent = (signals.task_enqueued, signals.task_started, signals.task_finished)
    for signal in sent:
        signal.connect(receiver)
    try:
        jobs.add.enqueue(1, 1)
        jobs.fails.enqueue("signalled")
        work()
    finally:
        for signal in sent:
            signal.disconnect(receiver)
    assert seen == [
        ("enqueued", "add", "READY"),
        ("enqueued", "fails", "READY"),
        ("started", "add", "RUNNING"),
        ("finished", "add", "SUCCESSFUL"),
        ("started", "fails", "RUNNING"),
        ("finished", "fails", "FAILED"),
    ]
