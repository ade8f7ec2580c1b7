"""What redis-allocator's test suite imports besides redis-allocator itself:
``fakeredis``, ``freezegun`` and ``pytest_mock``, mapped onto the harness.

* ``fakeredis``: every ``FakeRedis`` (and ``FakeServer``) is a real client to
  the harness's redis-server (:func:`use_server`, flushed per test by the
  harness), seen through :class:`~tests.conformance.allocator_adapter.ViewClient`.
* ``freeze_time``: our scripts read the Redis server's clock, which cannot be
  frozen. Inside the block Python's ``time.time()`` stands still (what the
  adapter stamps itself, as the peer's tests expect), and ``tick(seconds)``
  waits that long for real and moves it on: a test that ticks past
  :data:`MAX_TICK` seconds in all cannot be run on real time (the
  expectations list it as not applicable).
* ``MockFixture``: the type name the suite annotates with; ``mocker`` is a
  fixture of the suite's module (``unittest.mock`` underneath).
"""

from __future__ import annotations

import contextlib
import datetime
import time
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import redis

__all__ = ["MAX_TICK", "MockFixture", "fakeredis", "freeze_time", "use_server"]

#: The longest real wait ``tick()`` makes for one test, in seconds.
MAX_TICK = 12.0

_server_url: list[str] = []


def use_server(url: str) -> None:
    """Point the fake Redis classes at the harness's server ``url``."""
    _server_url[:] = [url]


def _client(decode_responses: bool = False, **kwargs: Any) -> Any:
    from .allocator_adapter import ViewClient

    if not _server_url:
        raise RuntimeError("no harness Redis: the suite's module calls use_server() per test")
    return ViewClient(redis.Redis.from_url(_server_url[0], decode_responses=decode_responses))


class FakeServer:
    """fakeredis's in-memory server: here the harness's redis-server."""


def _fake_redis(*args: Any, server: FakeServer | None = None, **kwargs: Any) -> Any:
    return _client(**kwargs)


#: The ``fakeredis`` module as the suite uses it.
fakeredis = SimpleNamespace(
    FakeServer=FakeServer, FakeRedis=_fake_redis, FakeStrictRedis=_fake_redis
)


class MockFixture:
    """pytest-mock's fixture type (an annotation in the suite)."""


class _FrozenClock:
    """``time.time()`` standing still at a moment, moved on by :meth:`tick`."""

    def __init__(self, start: float) -> None:
        self.now = start
        self.waited = 0.0

    def __call__(self) -> float:
        return self.now

    def tick(self, delta: float | datetime.timedelta = 1.0) -> None:
        seconds = delta.total_seconds() if isinstance(delta, datetime.timedelta) else float(delta)
        self.waited += seconds
        if self.waited > MAX_TICK:
            raise AssertionError(
                f"freeze_time: this test moves the clock {self.waited:g} s in all, more than "
                f"the {MAX_TICK:g} s the adapter waits for real (Redis's clock cannot be "
                "frozen): list it as not applicable in tests/conformance/expectations.py"
            )
        _real_sleep(seconds)
        self.now += seconds

    def move_to(self, moment: Any) -> None:
        self.now = _seconds(moment)


_real_sleep = time.sleep


def _seconds(moment: Any) -> float:
    if isinstance(moment, (int, float)):
        return float(moment)
    if isinstance(moment, str):
        moment = datetime.datetime.fromisoformat(moment)
    if isinstance(moment, datetime.date) and not isinstance(moment, datetime.datetime):
        moment = datetime.datetime(moment.year, moment.month, moment.day)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.timezone.utc)
    return float(moment.timestamp())


@contextlib.contextmanager
def freeze_time(moment: Any = None, **kwargs: Any) -> Iterator[_FrozenClock]:
    """freezegun's ``freeze_time`` on real time (see the module's docs)."""
    clock = _FrozenClock(time.time() if moment is None else _seconds(moment))
    real_time = time.time
    time.time = clock  # type: ignore[assignment]
    try:
        yield clock
    finally:
        time.time = real_time  # type: ignore[assignment]
