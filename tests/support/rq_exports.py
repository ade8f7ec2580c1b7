"""The doubles of the RQ recipes of ``docs/background-work.md`` (run by a real
``rq worker`` in ``tests/reliability/test_rq_holding.py``): ``build_export``,
which counts the exports running at once in Redis and holds on until the test
says ``go``; and a receiver of ``resource_unavailable`` counting the refusals.
The recipes themselves are :mod:`tests.support.rq_export_retry` and
:mod:`tests.support.rq_export_requeue`. Django's settings module is
``DJANGO_SETTINGS_MODULE`` (the test writes one pointing ``DJANGO_REDIS_POOL``
at the harness's Redis)."""

from __future__ import annotations

import os
from typing import Any

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
django.setup()

from rq import get_current_job  # noqa: E402

from django_redis_pool.signals import resource_unavailable  # noqa: E402
from tests.support.recipes import ENTER, witness  # noqa: E402
from tests.support.waiting import STARTUP, wait_for  # noqa: E402


def build_export(report_id: int) -> None:
    """The recipe's work: inside ("inside", "most"), until the key "go" is set;
    then records its job's id in "done"."""
    r = witness()
    r.eval(ENTER, 2, "inside", "most")
    try:
        wait_for(lambda: r.exists("go"), STARTUP, "the test to let it finish", interval=0.02)
    finally:
        r.decr("inside")
    r.rpush("done", get_current_job().id)


def count_refusal(sender: Any, name: str, **kwargs: Any) -> None:
    if name == "exports":
        witness().incr("refused")


resource_unavailable.connect(count_refusal, weak=False, dispatch_uid="rq-exports-refusals")
