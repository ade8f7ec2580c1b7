"""The adapter that points the Django Tasks suites at ``RedisBackend``.

The peers' suites were written for other backends: Django's for its
``ImmediateBackend`` (a task runs inside ``enqueue()``) and ``DummyBackend``
(nothing runs; ``results`` and ``clear()`` list and drop what was enqueued),
django-tasks-rq's for an RQ backend with its own worker. Here every one of
them is ``django_redis_pool.tasks.RedisBackend`` (the ``BACKEND`` paths and
class names are rewritten, :func:`backend_rewrites`), and:

* an alias in the test class's ``immediate_aliases`` behaves as the immediate
  backend: a ``task_enqueued`` receiver runs ``manage.py pool_worker --queue
  <queue> --burst`` (:func:`run_worker`) and reloads the returned result from
  Redis, so ``enqueue()`` returns the finished result, as there;
* ``results`` and ``clear()`` (the dummy backend's) are added to
  ``RedisBackend`` for the test (:func:`dummy_api`): the results of the tasks
  enqueued through it, read from Redis, and their deletion;
* the framework's names are translated when the suite was written for the
  other one (:func:`framework_rewrites`): Django 6's ``django.tasks`` on the
  ``django-tasks`` backport (Django 5.2), the backport's on Django 6.

The worker is the real one, in this process (``call_command``), on the
harness's Redis (``DJANGO_REDIS_POOL`` from :func:`pool_settings`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
from collections.abc import Iterator
from typing import Any

from django.core.management import call_command

from django_redis_pool import get_queue, tasks
from django_redis_pool.tasks import RedisBackend, _framework_task

from .peers import Rewrite

#: The framework our backend is built on: "django.tasks" (Django >= 6) or
#: "django_tasks" (the backport, Django 5.2).
FRAMEWORK = (
    "django.tasks" if tasks.BaseTaskBackend.__module__.startswith("django.") else ("django_tasks")
)
#: The path of the backend under test.
BACKEND = "django_redis_pool.tasks.RedisBackend"
#: The queues the suites use (each one a configured queue of ours).
QUEUES = ("default", "queue-1", "queue_1")


def framework() -> Any:
    """The framework's package (``django.tasks`` or ``django_tasks``)."""
    import importlib

    return importlib.import_module(FRAMEWORK)


def framework_rewrites(written_for: str) -> list[Rewrite]:
    """Rewrites that translate a suite written for ``written_for``
    ("django.tasks" or "django_tasks") to the framework our backend uses."""
    if written_for == FRAMEWORK:
        return []
    if written_for == "django.tasks":  # Django 6's suite on the backport
        return [
            Rewrite(r"\bdjango\.tasks\b", "django_tasks"),
            Rewrite(r"\bInvalidTaskBackend\b", "InvalidTaskBackendError"),
            Rewrite(r"\bInvalidTask\b", "InvalidTaskError"),
        ]
    return [  # the backport's suite on Django 6
        Rewrite(r"\bdjango_tasks\b", "django.tasks"),
        Rewrite(r"\bInvalidTaskBackendError\b", "InvalidTaskBackend"),
        Rewrite(r"\bInvalidTaskError\b", "InvalidTask"),
    ]


def backend_rewrites(*dotted_paths: str) -> list[Rewrite]:
    """Rewrites that make each backend ``module.Class`` of ``dotted_paths``
    our backend: the string (in ``TASKS``) and its import (the class keeps
    its name in the suite)."""
    rewrites = []
    for path in dotted_paths:
        module, _, name = path.rpartition(".")
        rewrites.append(Rewrite(rf"([\"']){path}\1", rf"\g<1>{BACKEND}\g<1>"))
        rewrites.append(
            Rewrite(
                rf"^from {module} import {name}$",
                f"from django_redis_pool.tasks import RedisBackend as {name}",
            )
        )
    return rewrites


def pool_settings(redis_url: str) -> dict[str, Any]:
    """``DJANGO_REDIS_POOL`` for the suites: the harness's Redis, every queue of :data:`QUEUES`."""
    return {"CONNECTION": {"URL": redis_url}, "QUEUES": {name: {} for name in QUEUES}}


def run_worker(*queues: str) -> str:
    """``manage.py pool_worker --queue Q ... --burst`` in this process; its output."""
    out = io.StringIO()
    args = [arg for queue in queues for arg in ("--queue", queue)]
    call_command("pool_worker", *args, "--burst", stdout=out)
    return out.getvalue()


def stored_result(backend: Any, result_id: str) -> Any:
    """The result ``result_id`` as stored in Redis now, read without
    ``get_result()`` (the adapter's own reads must not stand in the way of
    what the suites test through it)."""
    for queue_name in backend.served():
        stored = get_queue(queue_name).get_task(result_id)
        if stored is not None:
            return backend.result_of(stored, _framework_task(stored))
    return None


def reload(result: Any) -> None:
    """Copy the stored state of ``result`` into it (as ``refresh()`` does)."""
    backend = framework().task_backends[result.backend]
    stored = stored_result(backend, result.id)
    if stored is None:
        return
    for field in dataclasses.fields(result):
        if field.name not in ("task", "backend"):
            object.__setattr__(result, field.name, getattr(stored, field.name))


@contextlib.contextmanager
def immediate(aliases: set[str] | frozenset[str]) -> Iterator[None]:
    """While active, a task enqueued through one of ``aliases`` is run at once
    by the worker, and ``enqueue()`` returns its finished result."""
    signals = framework().signals

    def run_now(sender: Any, task_result: Any, **kwargs: Any) -> None:
        if task_result.backend in aliases:
            run_worker(task_result.task.queue_name)
            reload(task_result)

    signals.task_enqueued.connect(run_now, weak=False, dispatch_uid="conformance-immediate")
    try:
        yield
    finally:
        signals.task_enqueued.disconnect(dispatch_uid="conformance-immediate")


@contextlib.contextmanager
def dummy_api(monkeypatch: Any) -> Iterator[None]:
    """``RedisBackend.results`` (the stored results of the tasks enqueued
    through the backend, in order) and ``clear()`` (delete them) while active."""
    enqueued: dict[str, list[str]] = {}
    signals = framework().signals

    def record(sender: Any, task_result: Any, **kwargs: Any) -> None:
        enqueued.setdefault(task_result.backend, []).append(task_result.id)

    def results(backend: Any) -> list[Any]:
        found = (stored_result(backend, i) for i in enqueued.get(backend.alias, []))
        return [result for result in found if result is not None]

    def clear(backend: Any) -> None:
        for result_id in enqueued.pop(backend.alias, []):
            for queue_name in backend.served():
                get_queue(queue_name).delete(result_id)

    monkeypatch.setattr(RedisBackend, "results", property(results), raising=False)
    monkeypatch.setattr(RedisBackend, "clear", clear, raising=False)
    signals.task_enqueued.connect(record, weak=False, dispatch_uid="conformance-dummy")
    try:
        yield
    finally:
        signals.task_enqueued.disconnect(dispatch_uid="conformance-dummy")


class Adapted:
    """Mixed into the suites' test classes: ``subTest`` is a plain block, so a
    test has one outcome (pytest 9 reports each subtest on its own, and an
    expected failure cannot cover a test some of whose subtests pass); the
    first failing case fails the test. ``immediate_aliases``: the aliases
    that behave as the immediate backend (see the module's docs)."""

    immediate_aliases: frozenset[str] = frozenset()

    @contextlib.contextmanager
    def subTest(self, msg: Any = None, **params: Any) -> Iterator[None]:
        yield
