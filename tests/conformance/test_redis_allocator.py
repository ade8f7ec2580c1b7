"""redis-allocator 0.7.0's test suite (``tests/`` of its sdist) against our
``Allocator`` and ``TaskQueue``, on the harness's real redis-server.

The peer's tests use fakeredis and freezegun; here ``FakeRedis`` is a client
of a real redis-server whose clock ``freeze_time``'s ``tick`` moves
(``ra_shims.py``, :mod:`tests.support.clockshift`), the peer's API is mapped onto ours
(``allocator_adapter.py``, ``task_queue_adapter.py``), and its reads of its
own data in Redis see a projection of ours. Run: ``test_allocator``,
``test_allocator_bughunt``, ``test_allocator_fuzz``,
``test_allocator_concurrency``, ``test_allocator_forensics`` and
``test_task_queue``. Not run: ``test_lock`` (the peer's ``RedisLock`` API,
which ``Lock`` does not copy), ``test_allocator_benchmark`` (timing
assertions) and ``test_diagnostics_*`` (the peer's diagnostics tool).
Expected failures: ``expectations.py``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any
from unittest import mock

import pytest
import redis

from tests.support.clockshift import ShiftedClockRedis
from tests.support.clockshift import shifted_redis as shifted_redis  # (the fixture)

from . import allocator_adapter, ra_shims
from .peers import REDIS_ALLOCATOR, PeerPackage, PeerUnavailable, Rewrite, fetch

pytestmark = pytest.mark.conformance

PACKAGE = "redis_allocator_tests"
HERE = "tests.conformance"
REWRITES = [
    Rewrite(r"\bfrom tests\.", f"from {PACKAGE}."),  # (first: the lines below name tests.)
    Rewrite(
        r"^from redis_allocator\.(allocator|lock) import", f"from {HERE}.allocator_adapter import"
    ),
    Rewrite(r"^from redis_allocator\.task_queue import", f"from {HERE}.task_queue_adapter import"),
    Rewrite(r"^import fakeredis$", f"from {HERE}.ra_shims import fakeredis"),
    Rewrite(r"^from (freezegun|pytest_mock) import", f"from {HERE}.ra_shims import"),
    # (the peer's own markers, which --strict-markers would refuse)
    Rewrite(r"^@pytest\.mark\.(fuzz|concurrency)\n", ""),
    # (the concurrent stress tests hammer the allocator for a fixed window, 15 s
    # and 10 s, on fakeredis in-process: on a real server 4 s each)
    Rewrite(r"^(    deadline = time\.time\(\) \+ )(15|10)$", r"\g<1>4"),
]
#: The peer's test modules that run here (see the module's docs).
MODULES = (
    "test_allocator",
    "test_allocator_bughunt",
    "test_allocator_fuzz",
    "test_allocator_concurrency",
    "test_allocator_forensics",
    "test_task_queue",
)


@pytest.fixture
def redis_client(shifted_redis: ShiftedClockRedis) -> Iterator[Any]:
    """The peer's client (``decode_responses=True``) to a server whose clock
    ``freeze_time``'s ``tick`` moves, flushed, seen through the adapter."""
    ra_shims.use_server(shifted_redis)
    client = redis.Redis.from_url(shifted_redis.server.url, decode_responses=True)
    client.flushall()
    try:
        yield allocator_adapter.ViewClient(client)
    finally:
        client.close()


@pytest.fixture
def mocker() -> Iterator[Any]:
    """pytest-mock's fixture, as far as the suite's applicable tests use it
    (``mocker.patch.object``)."""
    with contextlib.ExitStack() as patches:

        def patch_object(target: Any, attribute: str, *args: Any, **kwargs: Any) -> Any:
            return patches.enter_context(mock.patch.object(target, attribute, *args, **kwargs))

        yield SimpleNamespace(patch=SimpleNamespace(object=patch_object))


try:
    directory = fetch(REDIS_ALLOCATOR)
except PeerUnavailable as unavailable:
    problem = str(unavailable)

    def test_the_peer_suite_was_fetched() -> None:
        """Stands for the suite when it could not be fetched: fails, saying why."""
        pytest.fail(problem, pytrace=False)

else:
    suite = PeerPackage(PACKAGE, directory, REWRITES).install()
    helpers = suite.import_module("_bughunt_helpers")
    # (its checks read the peer's hash: they read a projection of ours instead;
    # the test modules import it after this)
    helpers.snapshot = allocator_adapter.snapshot(helpers)
    conftest = suite.import_module("conftest")
    test_object = conftest.test_object
    redis_allocator = conftest.redis_allocator
    allocator_with_policy = conftest.allocator_with_policy
    test_updater = conftest.test_updater
    for _module in map(suite.import_module, MODULES):
        for _name, _value in vars(_module).items():
            collected = _name.startswith(("Test", "test_")) or _name == "task_queue"
            if collected and getattr(_value, "__module__", "") == _module.__name__:
                globals()[_name] = _value
