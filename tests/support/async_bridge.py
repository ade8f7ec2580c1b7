"""Running the primitives' behaviour tests on their asyncio twins.

:func:`async_path` reroutes each blocking method of the primitives
(``acquire``, ``release``, ``hold()``...) to its async twin (``aacquire``,
``arelease``, ``ahold()``...), run on an event loop in a thread of its own:
the same test then checks the same behaviour on the asyncio path, against the
same real Redis. Each test thread gets one task of that loop, which runs all
its calls in turn, so a thread of the test is one asyncio task to the
primitives (a lock's default holder is per task as it is per thread).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from django_redis_pool import Allocator, Lease, Lock, RateLimiter, ResourcePool, Semaphore
from django_redis_pool.primitives.leased.lock import _TaskScope
from django_redis_pool.primitives.queue.taskqueue import TaskQueue

__all__ = ["LoopThread", "async_path"]


class LoopThread:
    """An event loop running in a daemon thread; :meth:`call` runs a coroutine
    function there, in the calling thread's own task, and waits for it."""

    def __init__(self) -> None:
        self._start()

    def _start(self) -> None:
        self.pid = os.getpid()  # a forked child starts a loop of its own
        self.loop = asyncio.new_event_loop()
        self._workers: dict[threading.Thread, tuple[asyncio.Task[None], asyncio.Queue[Any]]] = {}
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self.loop.run_forever, name="test-loop", daemon=True)
        self._thread.start()

    def call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``await fn(*args, **kwargs)`` in this thread's task; its result or error."""
        queue = self._worker()[1]
        done: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self.loop.call_soon_threadsafe(queue.put_nowait, (fn, args, kwargs, done))
        return done.result()

    def task_of_this_thread(self) -> asyncio.Task[None] | None:
        """The task running this thread's calls (None on the loop's own thread)."""
        if threading.current_thread() is self._thread:
            return None
        return self._worker()[0]

    def _worker(self) -> tuple[asyncio.Task[None], asyncio.Queue[Any]]:
        if self.pid != os.getpid():
            self._start()
        thread = threading.current_thread()  # (not its id: ids are reused)
        with self._lock:
            worker = self._workers.get(thread)
            if worker is None:

                async def start() -> tuple[asyncio.Task[None], asyncio.Queue[Any]]:
                    queue: asyncio.Queue[Any] = asyncio.Queue()
                    return asyncio.ensure_future(_serve(queue)), queue

                future = asyncio.run_coroutine_threadsafe(start(), self.loop)
                worker = self._workers[thread] = future.result()
        return worker

    def close(self) -> None:
        """Stop the tasks, close the loop's asyncio clients (as ``asyncio.run`` does)."""

        async def finish() -> None:
            for task, queue in self._workers.values():
                queue.put_nowait(None)
                with contextlib.suppress(BaseException):
                    await task
            await self.loop.shutdown_asyncgens()

        asyncio.run_coroutine_threadsafe(finish(), self.loop).result(timeout=30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=30)
        self.loop.close()


async def _serve(queue: asyncio.Queue[Any]) -> None:
    while (item := await queue.get()) is not None:
        fn, args, kwargs, done = item
        try:
            done.set_result(await fn(*args, **kwargs))
        except BaseException as exc:  # (CancelledError included: the test sees it)
            done.set_exception(exc)


def _twin(bridge: LoopThread, name: str) -> Callable[..., Any]:
    def blocking(self: Any, *args: Any, **kwargs: Any) -> Any:
        return bridge.call(getattr(self, name), *args, **kwargs)

    return blocking


class _Bridged:
    """An async context manager entered and left from a test thread, as a
    blocking one (like ``hold()``'s, it may be entered alone: nothing is left
    to release it behind the test's back)."""

    def __init__(self, bridge: LoopThread, manager: Any) -> None:
        self.bridge, self.manager = bridge, manager

    def __enter__(self) -> Any:
        return self.bridge.call(self.manager.__aenter__)

    def __exit__(self, *exc_info: Any) -> Any:
        return self.bridge.call(self.manager.__aexit__, *exc_info)


def _twin_cm(bridge: LoopThread, name: str) -> Callable[..., Any]:
    def blocking(self: Any, *args: Any, **kwargs: Any) -> _Bridged:
        return _Bridged(bridge, getattr(self, name)(*args, **kwargs))

    return blocking


#: class -> {blocking method: its async twin}; "cm:" marks a context manager.
TWINS: dict[type, dict[str, str]] = {
    ResourcePool: {"acquire": "aacquire", "release": "arelease", "hold": "cm:ahold"},
    Semaphore: {"acquire": "aacquire", "release": "arelease", "hold": "cm:ahold"},
    Lock: {
        "acquire": "aacquire",
        "release": "arelease",
        "extend": "aextend",
        "hold": "cm:ahold",
        "__enter__": "__aenter__",
        "__exit__": "__aexit__",
    },
    Lease: {"release": "arelease", "renew": "arenew"},
    Allocator: {"malloc_key": "amalloc_key", "free_keys": "afree_keys", "hold": "cm:ahold"},
    TaskQueue: {"enqueue": "aenqueue", "query": "aquery", "submit": "asubmit"},
    RateLimiter: {
        "acquire": "aacquire",
        "decide": "adecide",
        "status": "astatus",
        "reset": "areset",
    },
}


@contextlib.contextmanager
def async_path(monkeypatch: pytest.MonkeyPatch) -> Iterator[LoopThread]:
    """Within: every method of :data:`TWINS` runs as its async twin."""
    bridge = LoopThread()
    for cls, twins in TWINS.items():
        for name, twin in twins.items():
            if twin.startswith("cm:"):
                monkeypatch.setattr(cls, name, _twin_cm(bridge, twin[3:]))
            else:
                monkeypatch.setattr(cls, name, _twin(bridge, twin))

    def thread_scope(self: Lock) -> Any:
        # A test thread reads (lock.fence) what its task wrote: its state
        # outside a loop (the lock's ``_local``) is its task's.
        task = bridge.task_of_this_thread()
        if task is None:
            return self.__dict__["_local"]
        return self._tasks.setdefault(task, _TaskScope())

    def set_thread_scope(self: Lock, value: Any) -> None:
        self.__dict__["_local"] = value

    monkeypatch.setattr(Lock, "_local", property(thread_scope, set_thread_scope), raising=False)
    try:
        yield bridge
    finally:
        bridge.close()
