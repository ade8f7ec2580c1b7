"""The names the django-tasks-rq suite imports from ``rq``, ``django_rq``,
``fakeredis`` and ``django_tasks_rq``, mapped onto ours.

``RQBackend`` is our ``RedisBackend``; ``django_rq.get_queue(name)`` is our
queue ``name``, where ``enqueue_call(path, args)`` stores a Django task whose
path is ``path`` (as RQ stores a job of any callable) and ``job_ids`` lists
the result ids of the tasks waiting in it. The fake Redis classes and RQ's
job and death-penalty classes are only named by the suite's own setUp and
worker, which the adapter replaces: using one fails, saying so.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from django_redis_pool import get_queue as _our_queue
from django_redis_pool.tasks import TASK_NAME, _new_result_id
from django_redis_pool.tasks import RedisBackend as RQBackend

from .django_tasks_adapter import framework

__all__ = [
    "UNSERIALIZABLE_RETURN_VALUE_PAYLOAD",
    "FakeRedis",
    "FakeStrictRedis",
    "Job",
    "RQBackend",
    "TimerDeathPenalty",
    "compat",
    "django_rq",
]

#: What the traceback of a task with a non-JSON return value says (RQ's own
#: marker text there; our worker's message here).
UNSERIALIZABLE_RETURN_VALUE_PAYLOAD = "must be JSON-serialisable"


class _NotUsed:
    """A class of RQ's or fakeredis's that the adapted suite never uses."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise NotImplementedError(
            f"{type(self).__name__} belongs to RQ's or fakeredis's machinery, which the "
            "conformance adapter replaces (tests/conformance/rq_shims.py)"
        )


class FakeRedis(_NotUsed):
    """fakeredis's client (the suite's setUp, replaced)."""


class FakeStrictRedis(_NotUsed):
    """fakeredis's strict client (the suite's setUp, replaced)."""


class TimerDeathPenalty(_NotUsed):
    """RQ's timeout mechanism (the suite's worker, replaced)."""


class Job(_NotUsed):
    """RQ's job class (the suite's worker, replaced)."""


class _Queue:
    """``django_rq.get_queue(name)``: our queue ``name``."""

    def __init__(self, name: str) -> None:
        self.name = name

    def enqueue_call(self, func: str, args: Any = (), kwargs: Any = None) -> Any:
        """Store a Django task of path ``func`` (as RQ stores a job of any callable)."""
        task_id = _new_result_id(self.name)  # (a result id is its queue task's id)
        params = {"task": func, "args": list(args), "kwargs": dict(kwargs or {})}
        _our_queue(self.name).enqueue(TASK_NAME, params, id=task_id)
        return SimpleNamespace(id=task_id)

    @property
    def job_ids(self) -> list[str]:
        """The result ids of the Django tasks waiting in the queue, in order."""
        queue = _our_queue(self.name)
        waiting = queue.client.zrange(f"{queue.base}:pending:{TASK_NAME}", 0, -1)
        return [_text(task_id) for task_id in waiting]


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _get_connection(*args: Any, **kwargs: Any) -> Any:
    raise NotImplementedError("django_rq.get_connection: RQ's Redis is not used here")


django_rq = SimpleNamespace(get_queue=lambda name="default", **kwargs: _Queue(name))
django_rq.get_connection = _get_connection

#: django_tasks_rq.compat: the Task classes it accepts.
compat = SimpleNamespace(TASK_CLASSES=(framework().base.Task,))
