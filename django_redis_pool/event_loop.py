"""Where a request's hold crosses between the event loop and threads, for the
request guard (:mod:`.guard`): holding a kind that has no ``ahold`` from a
thread of an executor of its own (:func:`enter_in_thread`, at most
:data:`WAITING_THREADS` at once), giving a hold back from whichever thread
closes its response (:func:`release_soon`), and the tasks that must run to
their end on a loop (:func:`start_task`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import threading
from collections.abc import Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

from asgiref.sync import sync_to_async
from django.http import HttpRequest

from .kinds import Grant
from .outcomes import Refusal
from .primitives.clients.deadlines import DEADLINE_SLACK

__all__ = [
    "WAITING_THREADS",
    "Enterable",
    "enter_in_thread",
    "on_event_loop",
    "release_soon",
    "start_task",
]


class Enterable(Protocol):
    """What the event loop's side needs of a hold (a :class:`.guard.Guard`)."""

    def enter(
        self, request: HttpRequest | None, holder: str | None = None
    ) -> Grant | Refusal | None:
        """Take the hold, blocking."""
        ...

    def exit(self, request: HttpRequest | None, held: Grant) -> None:
        """Give it back, blocking."""
        ...

    async def aexit(self, request: HttpRequest | None, held: Grant) -> None:
        """Give it back on the loop."""
        ...

    async def aholder_of(self, request: HttpRequest | None) -> str:
        """The holder name of ``request``, read on the loop."""
        ...


#: Most async requests of one process that may wait for a hold at once; more
#: wait for a thread. Their own executor, so that waiting requests never starve the
#: event loop's default executor (used by sync_to_async everywhere else).
WAITING_THREADS = 512
_waiting: ThreadPoolExecutor | None = None
_waiting_lock = threading.Lock()

#: Tasks started by :func:`start_task`, until they end (an event loop keeps
#: only weak references to its tasks).
_running: set[asyncio.Task[Any]] = set()


def on_event_loop() -> bool:
    """Whether this thread runs an asyncio event loop now."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def start_task(
    loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, Any]
) -> asyncio.Task[Any]:
    """Run ``coro`` as a task of ``loop``, referenced until it ends (so that it
    is not garbage collected midway)."""
    task = loop.create_task(coro)
    _running.add(task)
    task.add_done_callback(_running.discard)
    return task


def waiting_threads() -> ThreadPoolExecutor:
    """The executor whose threads wait for the holds of async requests
    (:data:`WAITING_THREADS` threads, started on demand)."""
    global _waiting
    with _waiting_lock:
        if _waiting is None:  # threads are started on demand, up to the maximum
            _waiting = ThreadPoolExecutor(WAITING_THREADS, thread_name_prefix="drp-wait")
        return _waiting


async def enter_in_thread(guard: Enterable, request: HttpRequest | None) -> Grant | Refusal | None:
    """``guard.enter(request)`` in a thread of :func:`waiting_threads`, for a
    kind without :meth:`Kind.agrant <.kinds.Kind.agrant>`. Cancelled while the
    thread waits (the client went away, or the loop is shutting down), it
    leaves nothing held: whatever the thread still gets is given back at once,
    by the thread itself, or here if it got it just before we gave up."""
    holder = await guard.aholder_of(request)
    abandoned = threading.Event()
    enter = sync_to_async(
        _enter_unless_abandoned, thread_sensitive=False, executor=waiting_threads()
    )
    task = asyncio.ensure_future(enter(guard, request, abandoned, holder))
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        abandoned.set()
        task.add_done_callback(functools.partial(_give_back_late_grant, guard, request))
        raise


def _enter_unless_abandoned(
    guard: Enterable, request: HttpRequest | None, abandoned: threading.Event, holder: str | None
) -> Grant | Refusal | None:
    if abandoned.is_set():  # given up while queued for a thread
        return None
    outcome = guard.enter(request, holder)
    if isinstance(outcome, Grant) and abandoned.is_set():
        guard.exit(request, outcome)
        return None
    return outcome


def _give_back_late_grant(
    guard: Enterable, request: HttpRequest | None, task: asyncio.Future[Any]
) -> None:
    """Release what an abandoned :func:`enter_in_thread` got after all."""
    if task.cancelled() or task.exception() is not None:
        return
    held = task.result()
    if isinstance(held, Grant):
        asyncio.get_running_loop().run_in_executor(None, guard.exit, request, held)


def release_soon(
    guard: Enterable,
    request: HttpRequest | None,
    held: Grant,
    loop: asyncio.AbstractEventLoop | None,
) -> None:
    """Release ``held`` as its request's ``loop`` does (``guard.aexit``) while
    that loop runs: from another thread (Django closes an async response
    in a worker thread), waiting until it is done, so that the hold has
    ended when ``close()`` returns; on the loop's own thread, as a task.
    Else ``guard.exit``: in a thread of its own when called on an event
    loop's thread."""
    if loop is not None and held.arelease is not None and loop.is_running():
        if not on_event_loop():
            done = asyncio.run_coroutine_threadsafe(guard.aexit(request, held), loop)
            with contextlib.suppress(Exception):  # (aexit logs its own failures)
                done.result(timeout=DEADLINE_SLACK + 1)
            return
        if asyncio.get_running_loop() is loop:
            start_task(loop, guard.aexit(request, held))
            return
    if on_event_loop():
        threading.Thread(
            target=guard.exit, args=(request, held), name="drp-release", daemon=True
        ).start()
    else:
        guard.exit(request, held)
