"""The Celery recipe of ``docs/background-work.md`` on a real worker: tasks
holding a semaphore of 2 through ``holding()`` never run more than 2 at once
across the worker's processes, and the refused ones are retried after the
refusal's ``retry_after`` until all are done."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import celery
import redis

from tests.support.waiting import STARTUP, stop, wait_for

ROOT = Path(__file__).resolve().parents[2]
TASKS = 8


def test_tasks_share_a_semaphore_of_2_and_the_refused_ones_retry(
    redis_url: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    setting: dict[str, Any] = {
        "CONNECTION": {"URL": redis_url},
        "SEMAPHORES": {"printers": {"MAX_SIZE": 2}},
    }
    (tmp_path / "celery_settings.py").write_text(
        f"from tests.settings import *  # noqa: F403\nDJANGO_REDIS_POOL = {setting!r}\n"
    )
    broker = redis_url.rsplit("/", 1)[0] + "/1"  # the broker's own database
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "CELERY_"))}
    env["DJANGO_SETTINGS_MODULE"] = "celery_settings"
    env["DRP_CELERY_BROKER"] = broker
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), str(ROOT)])
    log = (tmp_path / "worker.log").open("wb")
    # 4 processes for 2 slots: the semaphore, not the pool, is what limits them
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "tests.support.celery_holding", "worker",
         "--concurrency", "4", "--pool", "prefork", "--queues", "holding", "--loglevel", "INFO",
         "--without-gossip", "--without-mingle", "--without-heartbeat"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    sender = celery.Celery(broker=broker)
    try:
        for number in range(TASKS):
            sender.send_task(
                "tests.support.celery_holding.print_job", args=[number], queue="holding"
            )
        wait_for(
            lambda: redis_client.llen("done") == TASKS,
            STARTUP + 30,
            f"the {TASKS} tasks to finish ({(tmp_path / 'worker.log').read_text()[-2000:]})",
            interval=0.1,
        )
    finally:
        stop(worker)
        sender.close()
    assert sorted(int(n) for n in redis_client.lrange("done", 0, -1)) == list(range(TASKS))
    assert int(redis_client.get("most") or 0) == 2, "never more than 2 at once, and 2 at times"
    assert int(redis_client.get("retries") or 0) > 0, "the refused ones were retried"
    assert int(redis_client.get("inside") or 0) == 0
