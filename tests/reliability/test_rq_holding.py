"""The RQ recipes of ``docs/background-work.md``, read from the page
(:mod:`tests.support.rq_export_retry`, :mod:`tests.support.rq_export_requeue`),
on real ``rq worker --with-scheduler`` processes: two exports at once on a
semaphore of 1 named "exports"; one holds it, the other is refused, then runs
again (by RQ's ``Retry``, or re-enqueued with ``enqueue_in``) once the first
is done, and never beside it."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from rq import Queue, Worker
from rq.job import Job

from tests.support import rq_export_requeue, rq_export_retry
from tests.support.recipes import run
from tests.support.waiting import STARTUP, stop, wait_for

ROOT = Path(__file__).resolve().parents[2]
WORKERS = 2


@pytest.fixture
def rq_redis(redis_url: str) -> Iterator[redis.Redis]:
    """A client of the harness's Redis, on RQ's own database (1)."""
    conn = redis.Redis.from_url(redis_url.rsplit("/", 1)[0] + "/1")
    try:
        yield conn
    finally:
        conn.close()


@pytest.fixture
def workers(redis_url: str, rq_redis: redis.Redis, tmp_path: Path) -> Iterator[Queue]:
    """Two ``rq worker --with-scheduler`` processes on the queue "exports" (RQ's
    database), with Django's settings holding the semaphore "exports" of 1 (the
    primitives' database); the queue they serve."""
    setting: dict[str, Any] = {
        "CONNECTION": {"URL": redis_url},
        "SEMAPHORES": {"exports": {"MAX_SIZE": 1}},
    }
    (tmp_path / "rq_settings.py").write_text(
        f"from tests.settings import *  # noqa: F403\nDJANGO_REDIS_POOL = {setting!r}\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "RQ_"))}
    env["DJANGO_SETTINGS_MODULE"] = "rq_settings"
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), str(ROOT)])
    url = rq_redis.connection_pool.connection_kwargs
    rq_url = f"redis://{url['host']}:{url['port']}/{url['db']}"
    log_path = tmp_path / "workers.log"
    log = log_path.open("wb")
    command = [sys.executable, "-m", "rq.cli", "worker", "--url", rq_url, "--with-scheduler"]
    processes = [
        subprocess.Popen(
            [*command, "--name", f"exports-{number}", "exports"],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        for number in range(WORKERS)
    ]
    queue = Queue("exports", connection=rq_redis)
    try:
        wait_for(
            lambda: Worker.count(queue=queue) == WORKERS,
            STARTUP,
            f"the {WORKERS} workers to start ({log_path.read_text()[-2000:]})",
            interval=0.05,
        )
        queue.log_path = log_path  # type: ignore[attr-defined]
        yield queue
    finally:
        stop(*processes)
        log.close()


def two_exports_at_once(
    queue: Queue, redis_client: redis.Redis, enqueue: Any
) -> tuple[list[Job], list[str]]:
    """Enqueue two exports (``enqueue()`` twice); once one was refused, let the
    holder finish; wait for both to be done. The jobs, and the ids of the jobs
    that ran ``build_export`` (in their order)."""
    jobs = [enqueue(), enqueue()]
    log = queue.log_path  # type: ignore[attr-defined]
    wait_for(
        lambda: int(redis_client.get("refused") or 0) >= 1,
        STARTUP,
        f"one export to be refused ({log.read_text()[-2000:]})",
        interval=0.05,
    )
    assert int(redis_client.get("inside") or 0) == 1, "the other one holds"
    assert redis_client.llen("done") == 0
    redis_client.set("go", 1)
    wait_for(
        lambda: redis_client.llen("done") == 2,
        STARTUP,
        f"both exports to be done ({log.read_text()[-2000:]})",
        interval=0.05,
    )
    assert int(redis_client.get("most") or 0) == 1, "never two exports at once"
    assert int(redis_client.get("inside") or 0) == 0
    return jobs, [job_id.decode() for job_id in redis_client.lrange("done", 0, -1)]


def all_finished(jobs: list[Job]) -> bool:
    """Whether RQ has marked every one of ``jobs`` finished."""
    return all(job.get_status(refresh=True) == "finished" for job in jobs)


def test_an_export_refused_by_the_semaphore_is_retried_by_rqs_retry_and_runs_after_the_holder(
    workers: Queue, redis_client: redis.Redis
) -> None:
    def enqueue() -> Job:
        (job,) = run(rq_export_retry.CALLS, {**vars(rq_export_retry), "queue": workers})
        return job

    jobs, done = two_exports_at_once(workers, redis_client, enqueue)
    assert sorted(done) == sorted(job.id for job in jobs), "each ran once; the refused one, retried"
    refused = next(job for job in jobs if job.id == done[1])
    refused.refresh()
    assert refused.retries_left == 4, "RQ retried it once"
    # (a job's body pushes to "done" before its worker marks it finished)
    wait_for(lambda: all_finished(jobs), STARTUP, "RQ to mark both jobs finished", interval=0.05)


def test_an_export_refused_by_the_semaphore_re_enqueues_itself_and_the_copy_runs_after_the_holder(
    workers: Queue, redis_client: redis.Redis
) -> None:
    def enqueue() -> Job:
        return workers.enqueue(rq_export_requeue.export_report, 42)

    jobs, done = two_exports_at_once(workers, redis_client, enqueue)
    ids = {job.id for job in jobs}
    assert done[0] in ids, "the holder ran first"
    assert done[1] not in ids, "the refused one ran again as a new job"
    copy = Job.fetch(done[1], connection=workers.connection)
    assert copy.func_name == "tests.support.rq_export_requeue.export_report"
    assert copy.args == (42,) and copy.origin == "exports"
    # (the refused job ended well: it re-enqueued itself)
    wait_for(lambda: all_finished(jobs), STARTUP, "RQ to mark both jobs finished", interval=0.05)
