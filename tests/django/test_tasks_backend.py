"""``django_redis_pool.tasks.RedisBackend``: Django's Tasks framework on our task
queue (``django.tasks`` on Django >= 6.0, the ``django-tasks`` backport on 5.2).
Tasks are enqueued through the framework, run by ``pool_worker``, and read back
with ``get_result()`` / ``refresh()``."""

from __future__ import annotations

import copy
import io
import re
import sys
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from asgiref.local import Local
from django.core.exceptions import SuspiciousOperation
from django.core.management import call_command

from django_redis_pool import get_queue
from django_redis_pool.primitives.queue import WorkerLost
from django_redis_pool.tasks import TASK_NAME

try:
    from django import tasks as framework
    from django.tasks import signals
    from django.tasks.exceptions import InvalidTask
except ImportError:
    import django_tasks as framework
    from django_tasks import signals
    from django_tasks.exceptions import InvalidTaskError as InvalidTask

from tests.support.primitive_helpers import ops, redis_time
from tests.support.queue_app import framework_tasks as jobs
from tests.support.waiting import floor_of, wait_for

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


def work(*queues: str) -> str:
    """``pool_worker --burst`` on ``queues`` (default: "default"; "*": every queue)."""
    out = io.StringIO()
    names = [] if queues == ("*",) else [a for q in queues or ("default",) for a in ("--queue", q)]
    call_command("pool_worker", *names, "--burst", stdout=out)
    return out.getvalue()


def configure(settings: Any, redis_url: str, queues: dict[str, Any], **tasks: Any) -> None:
    """``DJANGO_REDIS_POOL["QUEUES"]`` = ``queues``; ``TASKS`` = ``tasks`` (alias
    -> its QUEUES), each a ``RedisBackend``."""
    settings.DJANGO_REDIS_POOL = {"CONNECTION": {"URL": redis_url}, "QUEUES": queues}
    settings.TASKS = {
        alias: {"BACKEND": "django_redis_pool.tasks.RedisBackend", "QUEUES": names}
        for alias, names in tasks.items()
    }
    reset_backends()


def die_mid_task(queue_name: str, worker: str = "ghost") -> float:
    """A worker ``worker`` takes the ready task of ``queue_name`` and dies at
    once (no heartbeat); returns the Redis time just after its take."""
    queue = get_queue(queue_name)
    taken = ops(queue).run("queue_take", worker, 200, TASK_NAME)
    assert isinstance(taken, list), "a task was ready"
    return redis_time(queue.client)


def past_its_deadline(queue_name: str, taken_at: float) -> None:
    """Wait until the dead worker's deadline (200 ms after ``taken_at``,
    Redis clock) has passed, then run the queue's upkeep."""
    queue = get_queue(queue_name)
    wait_for(lambda: redis_time(queue.client) > taken_at + 0.25, what="the deadline")
    queue.gc()


class Signals:
    """Records the task results that the framework's signals carry."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, Any]] = []
        self.sent = {
            "enqueued": signals.task_enqueued,
            "started": signals.task_started,
            "finished": signals.task_finished,
        }

    def __enter__(self) -> Signals:
        for name, signal in self.sent.items():
            signal.connect(self._receiver(name), weak=False, dispatch_uid=f"test-{name}")
        return self

    def __exit__(self, *exc: Any) -> None:
        for name, signal in self.sent.items():
            signal.disconnect(dispatch_uid=f"test-{name}")

    def _receiver(self, name: str) -> Any:
        def receive(sender: Any, task_result: Any, **kwargs: Any) -> None:
            self.seen.append((name, copy.copy(task_result)))

        return receive

    def of(self, name: str) -> list[Any]:
        return [result for signal, result in self.seen if signal == name]


def test_the_backend_is_ours_and_says_what_it_supports() -> None:
    backend = framework.task_backends["default"]
    assert type(backend).__module__ == "django_redis_pool.tasks"
    assert backend.supports_defer and backend.supports_async_task
    assert backend.supports_get_result and backend.supports_priority


def test_an_enqueued_task_is_run_by_pool_worker_and_read_back() -> None:
    result = jobs.add.enqueue(2, 3)
    assert result.status == Status.READY and result.args == [2, 3]
    assert get_queue("default").get_task(result.id).name == TASK_NAME
    assert "Stopped after 1 task." in work()
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
    client = get_queue("default").client
    # The floor: a burst of pool_worker with nothing to run. The task is due many
    # of them after its enqueue (Redis clock), so that the burst below comes first.
    floor = floor_of(work)
    due = redis_time(client) + max(0.6, 20 * floor)
    result = jobs.add.using(run_after=datetime.fromtimestamp(due, timezone.utc)).enqueue(1, 2)
    out = work()
    if redis_time(client) < due:  # the whole burst ran before the task was due
        assert "Stopped after 0 tasks." in out, "not ready yet"
    if "Stopped after 0 tasks." in out:
        wait_for(lambda: redis_time(client) >= due, what="the task to be due")
        assert "Stopped after 1 task." in work()
    result.refresh()
    assert result.return_value == 3
    assert result.started_at is not None
    assert result.started_at.timestamp() >= due - 0.001, "started before it was due"


def test_an_unknown_result_id_does_not_exist() -> None:
    backend = framework.task_backends["default"]
    real = jobs.nothing.enqueue().id
    missing = "0" * 32 + real[32:]  # of queue "default", but no such task
    for result_id in ("nope", "0" * 32 + ".default", real[:32] + ".0000000g", missing, 42):
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


# -- the framework's own backend tests, against RedisBackend ------------------------


def fields_of(result: Any) -> dict[str, Any]:
    return {name: getattr(result, name) for name in jobs.COMPARED}


def test_the_enqueued_result_is_what_get_result_reads() -> None:
    backend = framework.task_backends["default"]
    result = jobs.add.enqueue((1,), b={1: (2, 3)})  # (never run: only stored)
    stored = backend.get_result(result.id)
    assert fields_of(result) == fields_of(stored)
    assert (result.args, result.kwargs) == ([[1]], {"b": {"1": [2, 3]}}), "as JSON stores them"
    assert result == stored
    enqueued_at = result.enqueued_at
    result.refresh()
    assert result.enqueued_at == enqueued_at, "refresh() changes nothing of a queued task"


def test_every_stage_of_a_task_reports_what_is_stored() -> None:
    backend = framework.task_backends["default"]
    with Signals() as seen:
        checked = jobs.disagreements.enqueue()
        done = jobs.pair.enqueue()
        failed = jobs.fails.enqueue("stored")
        work()
    assert backend.get_result(checked.id).return_value == [], "the context agrees while running"
    for result in (checked, done, failed):
        enqueued = next(r for r in seen.of("enqueued") if r.id == result.id)
        started = next(r for r in seen.of("started") if r.id == result.id)
        finished = next(r for r in seen.of("finished") if r.id == result.id)
        stored = backend.get_result(result.id)
        assert fields_of(enqueued) == fields_of(result)
        assert started.status == Status.RUNNING and started.worker_ids == stored.worker_ids
        assert started.started_at == stored.started_at
        assert fields_of(finished) == fields_of(stored), result.task.name
    assert backend.get_result(done.id).return_value == [1, 2], "what JSON stored: a list"


def test_a_task_that_exits_or_is_interrupted_fails_and_the_worker_goes_on() -> None:
    exited = jobs.exits.enqueue(3)
    interrupted = jobs.interrupted.enqueue()
    after = jobs.add.enqueue(2, 2)
    with Signals() as seen:
        output = work()
    assert "Stopped after 3 tasks." in output, "one worker thread ran all three"
    after.refresh()
    assert after.status == Status.SUCCESSFUL and after.return_value == 4
    for result, cls, line in (
        (exited, SystemExit, "sys.exit(code)"),
        (interrupted, KeyboardInterrupt, "raise KeyboardInterrupt"),
    ):
        result.refresh()
        assert result.status == Status.FAILED and result.attempts == 1
        assert result.errors[0].exception_class is cls
        assert line in result.errors[0].traceback
    finished = {r.id: r.status for r in seen.of("finished")}
    assert finished[exited.id] == finished[interrupted.id] == Status.FAILED


def test_a_return_value_that_is_not_json_fails_the_task_and_its_signal_says_so() -> None:
    with Signals() as seen:
        result = jobs.unencodable.enqueue()
        work()
    result.refresh()
    assert result.status == Status.FAILED
    error = result.errors[0]
    assert error.exception_class is TypeError and "JSON" in error.traceback
    (finished,) = seen.of("finished")
    assert finished.status == Status.FAILED and finished.errors == result.errors


def test_empty_queues_means_any_configured_queue(settings: Any, redis_url: str) -> None:
    configure(settings, redis_url, {"default": {}, "other": {}}, default=[])
    backend = framework.task_backends["default"]
    here = jobs.add.enqueue(1, 1)
    there = jobs.add.using(queue_name="other").enqueue(2, 2)
    assert backend.get_result(there.id).status == Status.READY
    assert "Stopped after 2 tasks." in work("*")
    assert backend.get_result(here.id).return_value == 2
    assert backend.get_result(there.id).return_value == 4
    with pytest.raises(InvalidTask, match=r"'nowhere'.*DJANGO_REDIS_POOL\[\"QUEUES\"\]"):
        jobs.add.using(queue_name="nowhere").enqueue(1, 1)
    assert list(backend.check()) == []


def test_empty_queues_without_any_configured_queue_is_a_check_error(
    settings: Any, redis_url: str
) -> None:
    configure(settings, redis_url, {}, default=[])
    messages = framework.task_backends["default"].check()
    assert [m.id for m in messages] == ["django_redis_pool.E032"]
    assert 'DJANGO_REDIS_POOL["QUEUES"]' in messages[0].msg


def test_the_backend_check_names_the_missing_app(settings: Any) -> None:
    settings.INSTALLED_APPS = [a for a in settings.INSTALLED_APPS if a != "django_redis_pool"]
    messages = framework.task_backends["default"].check()
    assert [m.id for m in messages] == ["django_redis_pool.E033"]
    assert "pool_worker" in messages[0].msg and "django_redis_pool" in messages[0].hint


def test_a_stored_path_that_is_not_a_task_is_suspicious_and_never_run() -> None:
    """What someone with write access to Redis could store: get_result()
    refuses it (as the framework's other backends do), the worker fails it
    without calling it."""
    queue = get_queue("default")
    task_id = jobs.add.enqueue(1, 1).id
    queue.delete(task_id)
    params = {"task": "subprocess.check_output", "args": [["true"]], "kwargs": {}}
    queue.enqueue(TASK_NAME, params, id=task_id)
    backend = framework.task_backends["default"]
    with pytest.raises(SuspiciousOperation, match=rf"Task {task_id} does not point to a Task"):
        backend.get_result(task_id)
    work()
    stored = queue.get_task(task_id)
    assert stored.status == "failed" and "SuspiciousOperation" in stored.error


@pytest.mark.parametrize("path", ["this.s", "antigravity.fly", "not a path", 42])
def test_a_stored_path_outside_the_installed_apps_is_never_imported(path: Any) -> None:
    """A module neither loaded nor in an installed app is not imported to see
    what it holds (importing ``this`` would print the Zen of Python)."""
    assert "this" not in sys.modules and "antigravity" not in sys.modules
    queue = get_queue("default")
    task_id = jobs.add.enqueue(1, 1).id
    queue.delete(task_id)
    queue.enqueue(TASK_NAME, {"task": path, "args": [], "kwargs": {}}, id=task_id)
    with pytest.raises(SuspiciousOperation, match="nothing was imported"):
        framework.task_backends["default"].get_result(task_id)
    work()
    stored = queue.get_task(task_id)
    assert stored.status == "failed" and "nothing was imported" in stored.error
    assert "this" not in sys.modules and "antigravity" not in sys.modules


@pytest.mark.parametrize("length", [31, 64, 200])
def test_a_result_id_fits_in_64_characters_whatever_the_queue_name(
    settings: Any, redis_url: str, length: int
) -> None:
    name = "q" * length
    configure(settings, redis_url, {name: {}, "default": {}}, default=[name, "default"])
    result = jobs.add.using(queue_name=name).enqueue(3, 4)
    assert len(result.id) <= 64
    assert "Stopped after 1 task." in work(name)
    assert framework.task_backends["default"].get_result(result.id).return_value == 7


def test_result_ids_are_random_and_end_with_a_tag_of_their_queue(
    settings: Any, redis_url: str
) -> None:
    configure(settings, redis_url, {"default": {}, "other": {}}, default=["default", "other"])
    here = [jobs.nothing.enqueue().id for _ in range(20)]
    there = [jobs.nothing.using(queue_name="other").enqueue().id for _ in range(20)]
    assert len(set(here + there)) == 40
    assert all(re.fullmatch(r"[0-9a-f]{32}\.[0-9a-f]{8}", i) for i in here + there)
    assert {i[33:] for i in here} != {i[33:] for i in there}
    assert len({i[33:] for i in here}) == len({i[33:] for i in there}) == 1


def test_a_task_failed_after_its_workers_died_has_an_importable_error(
    settings: Any, redis_url: str
) -> None:
    configure(settings, redis_url, {"fragile": {"MAX_ATTEMPTS": 1}}, default=["fragile"])
    result = jobs.add.using(queue_name="fragile").enqueue(1, 1)
    past_its_deadline("fragile", die_mid_task("fragile"))
    result.refresh()
    assert result.status == Status.FAILED
    error = result.errors[0]
    assert error.exception_class is WorkerLost
    assert "its worker died or stalled on each of its 1 attempt(s)" in error.traceback


def test_using_is_stored_and_rebuilt(settings: Any, redis_url: str) -> None:
    configure(
        settings,
        redis_url,
        {"default": {}, "other": {}},
        default=["default", "other"],
        second=["other"],
    )
    soon = datetime.now(timezone.utc) - timedelta(seconds=1)  # due already
    task = jobs.context_info.using(queue_name="other", priority=7, run_after=soon, backend="second")
    result = task.enqueue()
    assert result.backend == "second"
    stored = framework.task_backends["default"].get_result(result.id)
    assert stored.task == task and stored.backend == "second"
    assert jobs.context_info.get_result(result.id).task.priority == 7
    work("other")
    result.refresh()
    assert result.return_value == {
        "id": result.id,
        "attempt": 1,
        "queue_name": "other",
        "priority": 7,
        "backend": "second",
    }


def test_started_at_is_the_first_attempts_and_both_times_stay_between_attempts(
    settings: Any, redis_url: str
) -> None:
    configure(settings, redis_url, {"fragile": {"VISIBILITY_TIMEOUT": 30}}, default=["fragile"])
    result = jobs.add.using(queue_name="fragile").enqueue(1, 2)
    taken_at = die_mid_task("fragile")
    result.refresh()
    first = result.started_at
    assert result.status == Status.RUNNING and first is not None
    assert first.timestamp() <= taken_at and result.last_attempted_at == first
    past_its_deadline("fragile", taken_at)
    result.refresh()
    assert result.status == Status.READY, "delivered again"
    assert (result.started_at, result.last_attempted_at) == (first, first)
    work("fragile")
    result.refresh()
    assert result.status == Status.SUCCESSFUL and result.attempts == 2
    assert result.started_at == first and result.last_attempted_at > first
