"""Task queues in Django: the ``QUEUES`` setting, ``@task`` handlers found in
apps' ``tasks.py``, ``manage.py pool_worker`` (burst, max jobs, processes, the
SIGTERM drain), ``pool_status``, ``pool_gc``, and the admin's failed tasks."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client

from django_redis_pool import TaskQueue, get_queue
from django_redis_pool.checks import check_settings
from django_redis_pool.kinds.queue import handlers_of
from django_redis_pool.management.commands.pool_worker import handled
from tests.support.admin_fixtures import action_url, detail_url, login, operator  # noqa: F401
from tests.support.primitive_helpers import ops, redis_time
from tests.support.stoppable_servers import closed_port
from tests.support.waiting import STARTUP, wait_blocked, wait_for

ROOT = Path(__file__).resolve().parents[2]


def setting(url: str, **options: Any) -> dict[str, Any]:
    return {
        "CONNECTION": {"URL": url},
        "QUEUES": {"jobs": {"VISIBILITY_TIMEOUT": 30, **options}, "idle": {}},
    }


@pytest.fixture
def configured(settings: Any, redis_url: str) -> None:
    settings.DJANGO_REDIS_POOL = setting(redis_url)


def run(command: str, *args: str) -> str:
    out = io.StringIO()
    call_command(command, *args, stdout=out, no_color=True)
    return out.getvalue()


def test_the_setting_builds_a_queue_running_the_registered_handlers(configured: None) -> None:
    jobs = get_queue("jobs")
    assert isinstance(jobs, TaskQueue) and jobs.visibility_timeout == 30
    assert jobs.max_attempts == 3 and jobs.result_ttl == 3600
    names = set(handlers_of("jobs"))
    assert {"add", "slow", "pid", "users", "tests.support.queue_app.tasks.unnamed"} <= names
    assert jobs.query("q1", "add", {"a": 2, "b": 2}) == 4, "Auto, no worker: run here"


@pytest.mark.parametrize(
    ("option", "value"),
    [("RESULT_TTL", 0), ("VISIBILITY_TIMEOUT", "5"), ("MAX_ATTEMPTS", 0), ("MAX_ATTEMPTS", 1.5)],
)
def test_bad_options_are_reported_by_the_checks(
    settings: Any, redis_url: str, option: str, value: Any
) -> None:
    settings.DJANGO_REDIS_POOL = setting(redis_url, **{option: value})
    messages = [m for m in check_settings() if m.is_serious()]
    assert [m.id for m in messages] == ["django_redis_pool.E018"]
    assert f'["QUEUES"]["jobs"]["{option}"]' in messages[0].msg


# -- pool_worker ----------------------------------------------------------------------


@pytest.mark.django_db
def test_burst_runs_what_is_ready_and_stops(configured: None) -> None:
    jobs = get_queue("jobs")
    ids = [jobs.enqueue("add", {"a": i, "b": 1}) for i in range(3)]
    users = jobs.enqueue("users")
    output = run("pool_worker", "--queue", "jobs", "--burst")
    assert "Stopped after 4 tasks." in output
    assert [jobs.get_task(i).result for i in ids] == [1, 2, 3]
    assert jobs.get_task(users).result == 0, "the ORM works inside a task"


def test_the_worker_says_which_handlers_each_queue_runs_in_english(configured: None) -> None:
    """One line a queue: "queue jobs: 5 handlers: add, pid, ..." (a count, then
    the names; "1 handler: count" for one, "no handler" for none)."""
    lines = run("pool_worker", "--burst").splitlines()
    names = sorted(handlers_of("jobs"))
    assert f"queue jobs: {len(names)} handlers: {', '.join(names)}" in lines, lines
    assert "queue idle: no handler" in lines, lines
    assert handled(["count"]) == "1 handler: count"


def test_a_worker_run_by_call_command_puts_the_signal_handlers_back(configured: None) -> None:
    """Its SIGTERM/SIGINT handlers (finish the running tasks, then stop) are
    the command's own: after it, Ctrl-C interrupts the caller again."""
    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    get_queue("jobs").enqueue("add", {"a": 1, "b": 1})
    assert "Stopped after 1 task." in run("pool_worker", "--queue", "jobs", "--burst")
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before


def test_max_jobs_stops_after_that_many(configured: None) -> None:
    jobs = get_queue("jobs")
    for i in range(4):
        jobs.enqueue("add", {"a": i, "b": 0})
    assert "Stopped after 2 tasks." in run("pool_worker", "--queue", "jobs", "--max-jobs", "2")
    assert jobs.counts()["pending"] == 2


def test_a_worker_without_any_configured_queue_says_how_to_add_one(
    settings: Any, redis_url: str
) -> None:
    settings.DJANGO_REDIS_POOL = {"CONNECTION": {"URL": redis_url}}
    with pytest.raises(
        CommandError, match=r'No queues are configured.*DJANGO_REDIS_POOL\["QUEUES"\]'
    ):
        run("pool_worker", "--burst")


def test_a_queue_without_handlers_or_configuration_is_refused(configured: None) -> None:
    with pytest.raises(CommandError, match="No @task handler is registered for 'idle'"):
        run("pool_worker", "--queue", "idle", "--burst")
    with pytest.raises(CommandError, match="Not a configured queue: 'nope'"):
        run("pool_worker", "--queue", "nope")
    with pytest.raises(CommandError, match="--workers must be an int >= 1"):
        run("pool_worker", "--workers", "0")


def worker_process(tmp_path: Path, url: str, *args: str) -> subprocess.Popen[bytes]:
    (tmp_path / "worker_settings.py").write_text(
        f"from tests.settings import *  # noqa: F403\nDJANGO_REDIS_POOL = {setting(url)!r}\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("DJANGO_")}
    env["DJANGO_SETTINGS_MODULE"] = "worker_settings"
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tmp_path), str(ROOT)]))
    out = (tmp_path / "worker.log").open("wb")
    return subprocess.Popen(
        [sys.executable, "-m", "django", "pool_worker", "--queue", "jobs", *args],
        cwd=ROOT,
        env=env,
        stdout=out,
        stderr=subprocess.STDOUT,
    )


def test_sigterm_lets_the_running_task_finish_and_takes_no_new_one(
    configured: None, redis_url: str, tmp_path: Path
) -> None:
    jobs = get_queue("jobs")
    proc = worker_process(tmp_path, redis_url)
    try:
        wait_for(lambda: jobs.has_worker("slow"), STARTUP, "the worker to listen")
        running = jobs.enqueue("slow", {"seconds": 1.0})
        wait_for(lambda: jobs.get_task(running).status == "running", what="the task to start")
        waiting = jobs.enqueue("add", {"a": 1, "b": 1})
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 0, (tmp_path / "worker.log").read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
    assert jobs.get_task(running).status == "done", "the running task finished"
    assert jobs.get_task(waiting).status == "queued", "no new task was taken"
    assert not jobs.has_worker("slow"), "it stopped listening"


def test_workers_n_runs_n_processes(configured: None, redis_url: str, tmp_path: Path) -> None:
    jobs = get_queue("jobs")
    proc = worker_process(tmp_path, redis_url, "--workers", "2")
    try:
        # each process idle on its wake list: neither can take all six first
        wait_blocked(jobs.client, 2, "the 2 processes to listen", STARTUP)
        ids = [jobs.enqueue("pid") for _ in range(6)]
        wait_for(
            lambda: all(jobs.get_task(i).status == "done" for i in ids), what="the tasks to run"
        )
        pids = {jobs.get_task(i).result for i in ids}
        assert len(pids) == 2 and proc.pid not in pids
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 0, (tmp_path / "worker.log").read_text()
    finally:
        if proc.poll() is None:
            proc.kill()


def test_a_burst_worker_that_cannot_reach_redis_fails_with_one_message(
    settings: Any, tmp_path: Path
) -> None:
    url = f"redis://127.0.0.1:{closed_port()}/0"
    proc = worker_process(tmp_path, url, "--burst")
    try:
        code = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    log = (tmp_path / "worker.log").read_text()
    assert code != 0, log
    assert "CommandError" in log or "could not be reached" in log, log
    assert "Stopped after" not in log


def test_a_worker_that_cannot_reach_redis_keeps_trying_and_says_so(
    settings: Any, tmp_path: Path
) -> None:
    url = f"redis://127.0.0.1:{closed_port()}/0"
    proc = worker_process(tmp_path, url)
    log = tmp_path / "worker.log"
    try:
        wait_for(
            lambda: log.read_text().count("cannot reach Redis") >= 2,
            STARTUP + 10,
            "the worker to try twice",
        )
        assert proc.poll() is None, "still running"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 0, log.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
    assert "Traceback" not in log.read_text()


# -- status, gc, admin ------------------------------------------------------------------


def test_pool_status_and_pool_gc_know_the_queue(configured: None, redis_client: Any) -> None:
    jobs = get_queue("jobs")
    jobs.enqueue("add", {"a": 1, "b": 1})
    data = {p["name"]: p for p in json.loads(run("pool_status", "--json"))["primitives"]}
    assert data["jobs"]["kind"] == "queue"
    assert (data["jobs"]["pending"], data["jobs"]["running"], data["jobs"]["workers"]) == (1, 0, 0)
    assert "0 failed" in run("pool_status")
    # a worker that took it and vanished: its deadline passes, gc requeues it
    dead = TaskQueue(redis_client, "jobs", visibility_timeout=0.1)
    assert isinstance(ops(dead).run("queue_take", "ghost", 100, "add"), list)
    start = redis_time(redis_client)
    wait_for(lambda: redis_time(redis_client) > start + 0.15)
    assert "jobs: 1 tasks of dead workers requeued" in run("pool_gc", "--name", "jobs")
    assert jobs.counts()["pending"] == 1


@pytest.mark.django_db
def test_the_admin_lists_failed_tasks_and_retries_them(
    configured: None,
    operator: Client,  # noqa: F811
) -> None:
    jobs = get_queue("jobs")
    failed = jobs.enqueue("add", {"a": 1})  # KeyError: "b"
    run("pool_worker", "--queue", "jobs", "--burst")
    assert jobs.get_task(failed).status == "failed"
    page = operator.get(detail_url("jobs")).content.decode()
    assert f'data-task="{failed}"' in page and "KeyError" in page
    assert "1 failed" in page
    assert operator.post(action_url("jobs", "retry"), {"task_id": failed}).status_code == 302
    assert jobs.get_task(failed).status == "queued"
    assert operator.post(action_url("jobs", "delete"), {"task_id": failed}).status_code == 302
    assert jobs.get_task(failed) is None
    overview = operator.get("/admin/django_redis_pool/dashboard/").content.decode()
    assert 'data-name="jobs"' in overview
