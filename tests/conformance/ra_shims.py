"""What redis-allocator's test suite imports besides redis-allocator itself:
``fakeredis``, ``freezegun`` and ``pytest_mock``, mapped onto the harness.

* ``fakeredis``: every ``FakeRedis`` (and ``FakeServer``) is a real client to
  a real redis-server (:func:`use_server`: one whose clock the tests move,
  :mod:`tests.support.clockshift`, flushed per test), seen through
  :class:`~tests.conformance.allocator_adapter.ViewClient`.
* ``freeze_time``: our scripts read the Redis server's clock, which runs on.
  Inside the block Python's ``time.time()`` stands still (what the adapter
  stamps itself, as the peer's tests expect), and ``tick(seconds)`` moves it
  and the server's clock on by that much at once.
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

from tests.support.clockshift import ShiftedClockRedis

__all__ = ["MockFixture", "fakeredis", "freeze_time", "use_server"]

_server: list[ShiftedClockRedis] = []


def use_server(server: ShiftedClockRedis) -> None:
    """Point the fake Redis classes (and ``tick``) at ``server``."""
    _server[:] = [server]


def _current() -> ShiftedClockRedis:
    if not _server:
        raise RuntimeError("no Redis: the suite's module calls use_server() per test")
    return _server[0]


def _client(decode_responses: bool = False, **kwargs: Any) -> Any:
    from .allocator_adapter import ViewClient

    url = _current().server.url
    return ViewClient(redis.Redis.from_url(url, decode_responses=decode_responses))


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

    def __call__(self) -> float:
        return self.now

    def tick(self, delta: float | datetime.timedelta = 1.0) -> None:
        seconds = delta.total_seconds() if isinstance(delta, datetime.timedelta) else float(delta)
        server = _current()
        server.place(server.now_us() + round(seconds * 1_000_000))
        self.now += seconds

    def move_to(self, moment: Any) -> None:
        self.now = _seconds(moment)


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
