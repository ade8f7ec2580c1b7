"""The Django Tasks recipe of ``docs/background-work.md``, read from the page
(``tests/django/test_tasks_holding.py`` runs it on a real ``pool_worker``):
``send_report`` as the page defines it, with the double ``deliver_report``
(which records its ``user_id`` in Redis, "delivered"), and a receiver of
``task_enqueued`` recording the id of every ``send_report`` enqueued, in
whichever process ("enqueued"): the copy that a refused run enqueues is found
so."""

from __future__ import annotations

from typing import Any

import redis
from django.conf import settings

try:
    from django.tasks.signals import task_enqueued
except ImportError:
    from django_tasks.signals import task_enqueued

from tests.support.recipes import define


def witness() -> redis.Redis:
    return redis.Redis.from_url(settings.DJANGO_REDIS_POOL["CONNECTION"]["URL"])


def deliver_report(user_id: int) -> None:
    witness().rpush("delivered", user_id)


define("Django Tasks (this project's backend)", 0, globals())


def record_enqueued(sender: Any, task_result: Any, **kwargs: Any) -> None:
    if task_result.task.module_path == send_report.module_path:  # noqa: F821 (the recipe's)
        witness().rpush("enqueued", task_result.id)


task_enqueued.connect(record_enqueued, weak=False, dispatch_uid="recipe-app-enqueued")
