"""The expected outcomes of the peers' tests that differ from their own run.

Three kinds, each with a one-line reason:

* ``NA``: not applicable to ours (the test checks the peer's internals or
  needs what ours has no counterpart for): skipped.
* ``DIFFERENCE``: a deliberate, documented difference of ours:
  ``xfail(strict=True)``.
* ``BUG``: a known bug of ours, being fixed: ``xfail(strict=True)`` with
  reason "bug: ...". When it is fixed, the test passes, strict xfail fails
  the run, and its entry is removed here.

:data:`EXPECTED` has one table per suite: ``django`` (Django 6.0's
tests/tasks, tests/conformance/test_django_tasks.py), ``django-tasks-rq``
and ``redis-allocator``; keys are ``"<Class>::<test>"`` (``"<test>"`` for a
function), and a key without ``[...]`` covers every parametrization, one
with it only that one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from .django_tasks_adapter import FRAMEWORK

NA, DIFFERENCE, BUG = "n/a", "difference", "bug"

#: The module of each suite, by file name.
SUITES = {
    "test_django_tasks.py": "django",
    "test_django_tasks_rq.py": "django-tasks-rq",
    "test_redis_allocator.py": "redis-allocator",
}


RAW_PROTOCOL = (
    "plays the peer's worker by hand on its Redis protocol (set_queue_listened, BLPOP of "
    "its per-name list); ours has its own worker (listen)"
)
POLLING = "patches the peer's polling loop (time.sleep/monotonic, get_task); ours blocks instead"
MOCKED_REMOTE = "mocks the peer's execute_task_remotely"


@dataclass(frozen=True)
class Expected:
    """One entry: its kind and reason (``when``: only on that framework,
    "django.tasks" or "django_tasks"; None: always)."""

    kind: str
    reason: str
    when: str | None = None

    def mark(self) -> Any:
        """The pytest mark: a skip (n/a) or a strict xfail, with the reason."""
        if self.kind == NA:
            return pytest.mark.skip(reason=f"n/a: {self.reason}")
        prefix = "bug: " if self.kind == BUG else "difference: "
        return pytest.mark.xfail(strict=True, reason=prefix + self.reason)


def na(reason: str, when: str | None = None) -> Expected:
    """Not applicable to ours (skipped)."""
    return Expected(NA, reason, when)


def difference(reason: str, when: str | None = None) -> Expected:
    """A deliberate difference of ours (expected to fail)."""
    return Expected(DIFFERENCE, reason, when)


def bug(reason: str, when: str | None = None) -> Expected:
    """A known bug of ours, being fixed (expected to fail until it is)."""
    return Expected(BUG, reason, when)


# The deliberate differences.
JSON_MESSAGE = (
    "a value that is not JSON fails with our TypeError ('... must be JSON-serialisable'), "
    "not Django's 'Unsupported type' message"
)
OBJECT_API = (
    "AllocatorObject has no open()/release()/refresh(), and its close() frees the key (the "
    "peer's closes the wrapped object and keeps the key)"
)

EXPECTED: dict[str, dict[str, Expected]] = {
    "django": {
        # -- Django 6.0's tests/tasks (test_django_tasks.py) ----------------------------
        "ImmediateBackendTestCase::test_throws_keyboard_interrupt": na(
            "a KeyboardInterrupt in a task is raised in the worker, not to the caller of enqueue()"
        ),
        "ImmediateBackendTestCase::test_complex_return_value": difference(JSON_MESSAGE),
        "ImmediateBackendTestCase::test_cannot_get_result": na(
            "ours supports get_result() (the immediate backend does not)"
        ),
        "ImmediateBackendTestCase::test_cannot_refresh_result": na(
            "ours supports refresh() (the immediate backend does not)"
        ),
        "ImmediateBackendTestCase::test_cannot_pass_run_after": na(
            "ours supports run_after (the immediate backend does not)"
        ),
        "DummyBackendTestCase::test_refresh_result": na(
            "changes the dummy backend's in-memory result and expects refresh() to see it"
        ),
        "DummyBackendTestCase::test_refresh_result_async": na(
            "changes the dummy backend's in-memory result and expects refresh() to see it"
        ),
        "DummyBackendTestCase::test_validate_disallowed_async_task": na(
            "the django-tasks backport's message says 'async tasks', Django 6's 'async Tasks'",
            when="django_tasks",
        ),
        "TaskTestCase::test_enqueue_with_invalid_argument": difference(JSON_MESSAGE),
        "TaskTestCase::test_aenqueue_with_invalid_argument": difference(JSON_MESSAGE),
    },
    # -- django-tasks-rq 0.12.0 (test_django_tasks_rq.py) -----------------------------
    "django-tasks-rq": {
        "RQBackendTestCase::test_complex_return_value": difference(
            "a non-JSON return value fails as TypeError (as Django's immediate backend), "
            "not as RQ's Exception"
        ),
        "RQBackendTestCase::test_exception_classes_pop_empty_list_bug": na(
            "edits an RQ job's meta (RQ's internals)"
        ),
        "RQBackendTestCase::test_uses_rq_queues_for_queue_names": difference(
            "QUEUES=[] keeps Django's meaning (any queue name); django-tasks-rq lists its RQ_QUEUES"
        ),
    },
    # -- redis-allocator 0.7.0 (test_redis_allocator.py) ------------------------------
    "redis-allocator": {
        "TestRedisThreadHealthCheckPool::test_thread_health_check": na(
            "the peer's RedisThreadHealthCheckPool has no counterpart"
        ),
        "TestRedisThreadHealthCheckPool::test_thread_recovery": na(
            "the peer's RedisThreadHealthCheckPool has no counterpart"
        ),
        "TestRedisAllocatorObject::test_initialization": difference(
            "an AllocatorObject built by hand does not call obj.set_config() (malloc() does)"
        ),
        "TestRedisAllocatorObject::test_update": na(
            "mocks the peer's allocator.update()/free() that its object calls"
        ),
        "TestRedisAllocatorObject::test_close": difference(OBJECT_API),
        "TestRedisAllocator::test_gc_functionality": na(
            "drives the peer's allocation policy and key updater (no counterpart)"
        ),
        "TestDocContracts::test_doc_cache_timeout_zero_creates_permanent_binding_by_design": (
            difference("a soft binding always expires: cache_timeout must be > 0 (ValueError)")
        ),
        "TestDocContracts::test_doc_assign_preserves_lock_of_evicted_key_by_design[False]": (
            difference("assign() removes the keys it drops with their locks (shrink: held or not)")
        ),
        "TestEdgeCases::test_doc_allocator_object_release_is_idempotent": (difference(OBJECT_API)),
        "TestEdgeCases::test_edge_key_containing_separator_pipes_is_rejected": (
            difference("'||' is not special in our layout: such a key is accepted")
        ),
        "TestEdgeCases::test_edge_key_named_allocated_sentinel_is_rejected": (
            difference("'#ALLOCATED' is not special in our layout: such a key is accepted")
        ),
        "TestRedisTaskQueue::test_remote_execution": na(RAW_PROTOCOL),
        "TestRedisTaskQueue::test_remote_execution_with_error": na(RAW_PROTOCOL),
        "TestRedisTaskQueue::test_remote_execution_timeout": na(POLLING),
        "TestRedisTaskQueue::test_remote_execution_sleep_is_bounded_by_timeout": na(POLLING),
        "TestRedisTaskQueue::test_query_with_remote_policy": na(RAW_PROTOCOL),
        "TestRedisTaskQueue::test_query_with_remote_policy_passes_timeout_and_once": (
            na(MOCKED_REMOTE)
        ),
        "TestRedisTaskQueue::test_query_with_local_first_policy_fallback": na(RAW_PROTOCOL),
        "TestRedisTaskQueue::test_query_with_remote_first_policy": na(RAW_PROTOCOL),
        "TestRedisTaskQueue::test_query_with_remote_first_policy_fallback": na(MOCKED_REMOTE),
        "TestRedisTaskQueue::test_query_with_auto_policy_with_listener": na(RAW_PROTOCOL),
        "TestRedisTaskQueue::test_task_update_progress_expired": difference(
            "a progress report of a task its run no longer holds returns False (no client-side "
            "expiry raising TimeoutError)"
        ),
        "TestRedisTaskQueue::test_listen_single_iteration": na(RAW_PROTOCOL),
        "TestRedisTaskQueue::test_listen_non_blocking": na(
            "mocks the peer's blpop, get_task and execute_task_locally inside its listen loop"
        ),
        "TestRedisTaskQueue::test_executor_context": na(
            "the peer's internal thread-pool helper (_executor_context)"
        ),
        "TestRedisTaskQueue::test_queue_name": na("the peer's key naming (_queue_key/_queue_name)"),
        "TestRedisTaskQueue::test_execute_task_remotely_with_task_error": na(
            "mocks the peer's get_task to return a pickled exception"
        ),
        "TestRedisTaskQueue::test_execute_task_remotely_timeout_logic": na(POLLING),
        "TestRedisTaskQueue::test_execute_task_remotely_direct_timeout": na(POLLING),
    },
}


def lookup(item: pytest.Item) -> Expected | None:
    """The entry for ``item``, or None."""
    suite = SUITES.get(item.path.name)
    if suite is None:
        return None
    name = item.nodeid.split("::", 1)[1]
    base = name.split("[", 1)[0]
    for key in (name, base):
        expected = EXPECTED[suite].get(key)
        if expected is not None and expected.when in (None, FRAMEWORK):
            return expected
    return None
