"""Django 6.0's own tests of its Tasks framework (``tests/tasks/`` of Django's
sdist: the immediate and dummy backends' tests and ``test_tasks``), run on
``RedisBackend`` with ``pool_worker --burst`` as the worker.

On Django 6 they run as written, on ``django.tasks``; on Django 5.2 on the
``django-tasks`` backport, whose names they are translated to. The
immediate backend's tests run with the worker started inside ``enqueue()``;
the dummy backend's with nothing run (``tests/conformance/django_tasks_adapter.py``).
``test_custom_backend`` is not run: it tests the framework's base class with
a backend of its own. Expected failures: ``tests/conformance/expectations.py``.
"""

from __future__ import annotations

import pytest

from . import django_tasks_adapter as adapter
from .peers import DJANGO, PeerPackage, PeerUnavailable, fetch

pytestmark = pytest.mark.conformance

IMMEDIATE = "django.tasks.backends.immediate.ImmediateBackend"
DUMMY = "django.tasks.backends.dummy.DummyBackend"

try:
    directory = fetch(DJANGO)
except PeerUnavailable as unavailable:
    problem = str(unavailable)

    def test_the_peer_suite_was_fetched() -> None:
        """Stands for the suite when it could not be fetched: fails, saying why."""
        pytest.fail(problem, pytrace=False)

else:
    # (Django's runtests imports the folder as package "tasks": test_module_path
    # expects "tasks.tasks.noop_task")
    package = PeerPackage(
        "tasks",
        directory,
        [*adapter.backend_rewrites(IMMEDIATE, DUMMY), *adapter.framework_rewrites("django.tasks")],
    ).install()
    immediate = package.import_module("test_immediate_backend")
    dummy = package.import_module("test_dummy_backend")
    tasks = package.import_module("test_tasks")

    class ImmediateBackendTestCase(adapter.Adapted, immediate.ImmediateBackendTestCase):
        """The immediate backend's tests: ``enqueue()`` runs the worker."""

        immediate_aliases = frozenset({"default"})

    class ImmediateBackendTransactionTestCase(
        adapter.Adapted, immediate.ImmediateBackendTransactionTestCase
    ):
        """The immediate backend's transaction test (with our app available:
        ``pool_worker`` is its command)."""

        immediate_aliases = frozenset({"default"})
        available_apps = ["django_redis_pool"]

    class DummyBackendTestCase(adapter.Adapted, dummy.DummyBackendTestCase):
        """The dummy backend's tests: nothing runs."""

    class DummyBackendTransactionTestCase(adapter.Adapted, dummy.DummyBackendTransactionTestCase):
        """The dummy backend's transaction test (with our app available)."""

        available_apps = ["django_redis_pool"]

    class TaskTestCase(adapter.Adapted, tasks.TaskTestCase):
        """The framework's tests of tasks: alias "default" as the dummy backend,
        "immediate" as the immediate one."""

        immediate_aliases = frozenset({"immediate"})
