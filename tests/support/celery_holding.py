"""The Celery app of ``tests/reliability/test_celery_holding.py``: the recipe of
``docs/background-work.md`` run by a real worker (``celery -A
tests.support.celery_holding worker``). Its broker is ``DRP_CELERY_BROKER``;
Django's settings module is ``DJANGO_SETTINGS_MODULE`` (the test writes one
pointing ``DJANGO_REDIS_POOL`` at the harness's Redis)."""

from __future__ import annotations

import os
import time

import django
from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
django.setup()

from django_redis_pool import ResourceUnavailable, holding  # noqa: E402
from tests.support.recipes import ENTER, witness  # noqa: E402

app = Celery("celery_holding", broker=os.environ.get("DRP_CELERY_BROKER", "memory://"))
app.conf.task_default_queue = "holding"
app.conf.worker_prefetch_multiplier = 1


@app.task(bind=True, max_retries=None)
def print_job(self, number: int) -> int:  # type: ignore[no-untyped-def]
    """The docs' recipe: hold a slot of "printers" (a semaphore of 2), retried
    when refused, after the ``retry_after`` the refusal tells."""
    r = witness()
    try:
        with holding("printers", timeout=0.2):
            r.eval(ENTER, 2, "inside", "most")
            time.sleep(0.3)
            r.decr("inside")
    except ResourceUnavailable as exc:
        r.incr("retries")
        raise self.retry(countdown=exc.retry_after or 0.2) from exc
    r.rpush("done", number)
    return number
