"""django-tasks-rq 0.12.0's test suite (``tests/tests.py`` of its sdist), the
closest peer to ours: a Django Tasks backend on Redis with a worker of its
own. Here it runs on ``RedisBackend``, with ``pool_worker --burst`` as its
worker (``run_worker``) and our queues for RQ's (``rq_shims.py``); its task
functions, which the sdist does not ship, are ``peer_tasks.py``.

Written for the ``django-tasks`` backport; on Django 6 its names are
translated to ``django.tasks``. Expected failures: ``expectations.py``.
"""

from __future__ import annotations

import pytest
from django.test import SimpleTestCase, override_settings

from . import django_tasks_adapter as adapter
from .peers import DJANGO_TASKS_RQ, PeerPackage, PeerUnavailable, Rewrite, fetch

pytestmark = pytest.mark.conformance

SHIMS = "tests.conformance.rq_shims"
REWRITES = [
    *adapter.backend_rewrites("django_tasks_rq.RQBackend"),
    Rewrite(r"^import django_rq$", f"from {SHIMS} import django_rq"),
    Rewrite(
        r"^from (fakeredis|rq\.defaults|rq\.timeouts|django_tasks_rq\.backend) import",
        f"from {SHIMS} import",
    ),
    Rewrite(r"^from django_tasks_rq import compat$", f"from {SHIMS} import compat"),
    Rewrite(
        r"^from tests import tasks as test_tasks$",
        "from tests.conformance import peer_tasks as test_tasks",
    ),
    # RQ's setting and app named in its checks' hints, as ours name them
    Rewrite(r"Add 'queue-2' to RQ_QUEUES", """DJANGO_REDIS_POOL[\\\\"QUEUES\\\\"]['queue-2']"""),
    Rewrite(r'assertIn\("django_rq", ', 'assertIn("django_redis_pool", '),
    *adapter.framework_rewrites("django_tasks"),
]

try:
    directory = fetch(DJANGO_TASKS_RQ)
except PeerUnavailable as unavailable:
    problem = str(unavailable)

    def test_the_peer_suite_was_fetched() -> None:
        """Stands for the suite when it could not be fetched: fails, saying why."""
        pytest.fail(problem, pytrace=False)

else:
    suite = PeerPackage("django_tasks_rq_tests", directory, REWRITES).install()
    rq = suite.import_module("tests")

    @override_settings(
        TASKS={"default": {"BACKEND": adapter.BACKEND, "QUEUES": ["default", "queue-1"]}}
    )
    class RQBackendTestCase(adapter.Adapted, rq.RQBackendTestCase):
        """The RQ backend's tests, on ours (its settings had queues "default"
        and "queue-1", which ours configure too)."""

        def setUp(self) -> None:
            # (the suite's setUp patches django_rq onto fakeredis: the harness's
            # Redis is flushed by the adapter's fixture instead)
            SimpleTestCase.setUp(self)

        def run_worker(self) -> None:
            adapter.run_worker(*sorted(self.default_backend().queues))

        @staticmethod
        def default_backend() -> object:
            return adapter.framework().default_task_backend
