"""Waiting in tests for something another thread or process does."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

#: How long a test waits for a Python process it started (``manage.py`` or
#: ``python -m django``) to show it is running: only a failure detector (a
#: passing test waits as long as the start takes), long enough for Django to
#: import on a machine whose CPUs are busy, which takes several times as long
#: as on an idle one. (pytest-timeout bounds the whole test at 120 s.)
STARTUP = 60.0

#: What a bound on a duration scaled from a floor (:func:`floor_of`) adds for
#: one stall of a busy machine (a thread not scheduled for a while, a garbage
#: collection) that the floor, taken a moment earlier, did not include.
STALL = 1.0


def floor_of(call: Callable[[], object]) -> float:
    """How long ``call()`` takes now, in seconds: the floor of a test that
    bounds how long a comparable call takes (the same call refused at once, or
    the same work on a Redis that answers), taken in the same test just before,
    so that the bound grows with the machine's load, e.g. ``elapsed < timeout
    + 10 * floor + STALL``. (``call``'s value is not checked: a ``call``
    that checks it asserts it itself.)"""
    started = time.monotonic()
    call()
    return time.monotonic() - started


def wait_for(
    predicate: Callable[[], object],
    timeout: float = 10.0,
    what: str = "it",
    *,
    interval: float = 0.01,
) -> None:
    """Return once ``predicate()`` is true (asked every ``interval`` s); fail
    the test after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(interval)


def stop(*processes: subprocess.Popen[Any], timeout: float = 30.0) -> None:
    """SIGTERM every one of ``processes``, then wait for each to exit (SIGKILL
    past ``timeout`` s): a worker stopped as its supervisor would."""
    for process in processes:
        if process.poll() is None:
            process.terminate()
    for process in processes:
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


async def await_for(
    predicate: Callable[[], object], timeout: float = 10.0, what: str = "it"
) -> None:
    """:func:`wait_for` in a coroutine: the loop runs on while it waits."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


def blocked_readers(client: Any) -> int:
    """How many connections are blocked in a blocking read (BLPOP, BLMOVE) on
    ``client``'s server, or on every master of a Cluster (``INFO clients``)."""
    if hasattr(client, "get_primaries"):  # a RedisCluster
        nodes = [client.get_redis_connection(node) for node in client.get_primaries()]
    else:
        nodes = [client]
    return sum(int(node.info("clients")["blocked_clients"]) for node in nodes)


def wait_blocked(
    client: Any, count: int = 1, what: str = "a waiter to block", timeout: float = 10.0
) -> None:
    """Return once at least ``count`` connections are blocked in a read on
    ``client``'s server(s): a waiter inside its blocking read, from which only a
    push (or the end of its chunk) can return it. (Every blocked connection to
    the server counts: one left blocked by an earlier test could end the wait
    early, which makes the test weaker that time, not wrong.)"""
    wait_for(lambda: blocked_readers(client) >= count, timeout, what)


def answers_ping(client: Any) -> bool:
    """Whether the Redis server ``client`` talks to answers (not: is not listening yet)."""
    import redis

    try:
        return bool(client.ping())
    except redis.exceptions.RedisError:
        return False


async def cancel(task: asyncio.Future[Any]) -> None:
    """Cancel ``task`` as an ASGI server does when its client disconnects.

    Python 3.10 loses a cancellation that lands just as a command's send
    completes (docs/async.md), a window that a busy machine widens: there the
    task is cancelled again until it ends."""
    task.cancel()
    if sys.version_info < (3, 11):
        while not (await asyncio.wait({task}, timeout=0.5))[0]:
            task.cancel()
