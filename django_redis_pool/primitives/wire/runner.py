"""One code for the blocking and the asyncio API: operations as generators of Redis calls.

An operation that talks to Redis is written once, as a generator that yields
each step it needs (a :class:`.steps.Call`, an engine :class:`.steps.Op`, run
by :mod:`.scripts`, or a :class:`.steps.Local` function) and is sent back its
reply. :func:`run` runs it on a redis-py client, blocking; :func:`arun` runs
the same generator on a ``redis.asyncio`` client, awaiting. A call's error is
raised inside the generator at its ``yield``, so the operation's own
``try``/``except``/``finally`` (e.g. "withdraw if interrupted") runs on both
paths alike.

On the asyncio path, a call made after the task was cancelled (the cleanup of
the cancelled operation) is shielded: cancelled again, it still completes in
the background. Every call is bounded by the current :func:`.deadlines.deadline`;
past it, redis-py's ``TimeoutError`` is raised (saying that this process was
too busy to read the reply in time when it was there already: see
:func:`.deadlines.expired`). Nothing here imports Django.
"""

from __future__ import annotations

import asyncio
import inspect
import sys
import time
from collections.abc import Iterator
from typing import Any, TypeVar

from ...exceptions import translated
from ..clients.connections import waits_client
from ..clients.deadlines import current_deadline, expired
from ..text import text
from .scripts import MISS, runner_for
from .steps import Call, Local, Op, Steps, single

__all__ = ["CancelWatch", "arun", "is_async_client", "run"]

T = TypeVar("T")


def is_async_client(client: object) -> bool:
    """Whether ``client`` is a ``redis.asyncio`` client."""
    return (type(client).__module__ or "").startswith("redis.asyncio")


def run(client: Any, steps: Steps[T] | Op) -> T:
    """Run the operation ``steps`` (a generator of steps, or a single engine
    :class:`.steps.Op`) on the blocking redis-py ``client``.

    An engine :class:`.steps.Op` is run by the client's script runner
    (:meth:`.scripts.ScriptRunner.call`, or its steps when a script must be
    loaded first); its reply is decoded (:func:`.text.text`) and a Redis
    error of it translated (:func:`..exceptions.translated`). One loop, no
    call per step beyond the Redis call itself: this is every operation's hot
    path.
    """
    if type(steps) is Op:
        steps = single(steps)
    reply: Any = None
    error: BaseException | None = None
    while True:
        try:
            step = steps.send(reply) if error is None else steps.throw(error)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        kind = type(step)
        try:
            if kind is Op:
                try:
                    runner = client._drp_script_runner  # (runner_for's, without a call)
                except AttributeError:
                    runner = runner_for(client)
                reply = runner.call(client, step)
                if reply is MISS:  # (something to load first: the runner's own steps)
                    reply = run(client, runner.steps(*step))
                if type(reply) is bytes:
                    reply = reply.decode("utf-8", "surrogateescape")
                elif type(reply) is list:
                    reply = text(reply)
            elif kind is Call:
                target = waits_client(client) if step.waits else client
                reply = getattr(target, step.method)(*step.args, **step.kwargs)
            elif kind is Local:
                reply = step.fn(*step.args)
            else:
                raise TypeError(f"an operation yielded {step!r}, not a step ({_NOT_A_STEP})")
            error = None
        except BaseException as exc:
            reply, error = None, _raised(kind, exc)
            if getattr(error, "in_transit", False):
                reply, error = _again(client, step, error)


def _transit_pauses() -> Iterator[float]:
    """The pauses before an operation that a Redis Cluster did not run (its
    slot in migration, no master for it) is sent again: growing from
    :data:`TRANSIT_FIRST_PAUSE` to :data:`TRANSIT_MAX_PAUSE`, for as long as
    the current deadline leaves room for the pause, else for at most
    :data:`TRANSIT_PATIENCE` seconds."""
    bound = current_deadline()
    ends = None if bound is not None else time.monotonic() + TRANSIT_PATIENCE
    pause = TRANSIT_FIRST_PAUSE
    while True:
        left = bound.left() if bound is not None else ends - time.monotonic()  # type: ignore[operator]
        if left <= pause:
            return
        yield pause
        pause = min(pause * 2, TRANSIT_MAX_PAUSE)


def _again(client: Any, step: Any, error: BaseException) -> tuple[Any, BaseException | None]:
    """Send ``step`` (an engine operation the Cluster refused unrun: ``error``)
    again after each pause of :func:`_transit_pauses`: (its reply, None), or
    (None, the last error)."""
    runner = runner_for(client)
    for pause in _transit_pauses():
        time.sleep(pause)
        try:
            reply = runner.call(client, step)
            if reply is MISS:
                reply = run(client, runner.steps(*step))
            return text(reply), None
        except BaseException as exc:
            error = _raised(Op, exc)
            if not getattr(error, "in_transit", False):
                return None, error
    return None, error


async def _aagain(client: Any, step: Any, error: BaseException) -> tuple[Any, BaseException | None]:
    """:func:`_again` on the asyncio path."""
    for pause in _transit_pauses():
        await asyncio.sleep(pause)
        try:
            return await _bounded(step, client), None
        except asyncio.CancelledError:
            raise
        except BaseException as exc:
            error = _raised(Op, exc)
            if not getattr(error, "in_transit", False):
                return None, error
    return None, error


#: An operation a Redis Cluster refused unrun is sent again after pauses from
#: this many seconds, doubling up to TRANSIT_MAX_PAUSE, within the caller's
#: deadline (or, without one, for TRANSIT_PATIENCE seconds); redis-py's own
#: redirections (about 0.2 s) come before each.
TRANSIT_FIRST_PAUSE = 0.02
TRANSIT_MAX_PAUSE = 0.2
TRANSIT_PATIENCE = 5.0


#: The likely cause of a step that is none.
_NOT_A_STEP = "``yield from channel.op(...)`` iterates the step: write ``yield channel.op(...)``"


def _raised(kind: type, exc: BaseException) -> BaseException:
    """What an operation is raised into for ``exc`` of its step of type
    ``kind``: an engine operation's Redis error translated (as
    :class:`..exceptions.backend_errors` does), any other error as is."""
    if kind is not Op:
        return exc
    error = translated(exc)
    if error is not exc:
        error.__cause__ = exc
    return error


def _advance(steps: Steps[Any], reply: Any, error: BaseException | None) -> tuple[bool, Any]:
    """Send ``steps`` the reply (or raise the error) of its last call:
    (False, its next call), or (True, its result)."""
    try:
        return False, steps.send(reply) if error is None else steps.throw(error)
    except StopIteration as stop:
        return True, stop.value


async def arun(client: Any, steps: Steps[T] | Op) -> T:
    """Run the operation ``steps`` (as :func:`run` takes it) on the
    ``redis.asyncio`` ``client``. A
    cancellation that a call swallowed (:class:`CancelWatch`) cancels the
    operation there, as if the call's reply had been lost."""
    if type(steps) is Op:
        steps = single(steps)
    reply: Any = None
    error: BaseException | None = None
    cancelled = False
    watch = CancelWatch()
    while True:
        done, step = _advance(steps, reply, error)
        if done:
            return step  # type: ignore[no-any-return]
        try:
            if cancelled:  # the cleanup of a cancelled operation
                reply = await _shielded(_acall(client, step))
            elif type(step) is Op:
                reply = await _bounded(step, client)
                watch.check()
            else:
                reply = await _bounded(_acall(client, step))
                watch.check()
            error = None
        except asyncio.CancelledError as exc:
            reply, error, cancelled = None, exc, True
        except BaseException as exc:
            reply, error = None, _raised(type(step), exc)
            if getattr(error, "in_transit", False) and not cancelled:
                try:
                    reply, error = await _aagain(client, step, error)
                except asyncio.CancelledError as exc:
                    reply, error, cancelled = None, exc, True


class CancelWatch:
    """Sees a cancellation of the current task that an awaited call swallowed:
    Python 3.11's ``asyncio.wait_for`` (which redis-py uses to send a command)
    returns its result when a cancellation races its completion (bpo-42130),
    but the task's ``cancelling()`` count still went up. Python 3.10 has no
    such count, so nothing is seen there."""

    def __init__(self) -> None:
        self._count = getattr(asyncio.current_task(), "cancelling", None)
        self._before = self._count() if self._count is not None else 0

    def check(self) -> None:
        """Raise ``CancelledError`` if the task was cancelled since (and the
        cancellation was not delivered)."""
        if self._count is not None and self._count() > self._before:
            raise asyncio.CancelledError("cancelled while an awaited call completed")


async def _acall(client: Any, step: Any) -> Any:
    if type(step) is Call:
        return await getattr(client, step.method)(*step.args, **step.kwargs)
    if type(step) is Op:
        return text(await _aop(client, step))
    if inspect.iscoroutinefunction(step.fn):
        return await step.fn(*step.args)
    return await asyncio.to_thread(step.fn, *step.args)


async def _aop(client: Any, op: Op) -> Any:
    """Run ``op`` on the ``redis.asyncio`` ``client`` by its script runner
    (:meth:`.scripts.ScriptRunner.acall`; its steps, inline, when something
    must be loaded first): the enclosing :func:`_bounded` call bounds them
    all, and a cancellation cancels the operation as a whole."""
    runner = runner_for(client)
    reply = await runner.acall(client, op)
    if reply is MISS:
        reply = await _asteps(client, runner.steps(*op))
    return reply


async def _asteps(client: Any, steps: Steps[Any]) -> Any:
    """Run a script runner's ``steps`` (its calls, nothing else) on ``client``."""
    reply: Any = None
    error: Exception | None = None
    while True:
        try:
            call = steps.send(reply) if error is None else steps.throw(error)
        except StopIteration as stop:
            return stop.value
        try:
            reply, error = await getattr(client, call.method)(*call.args), None
        except Exception as exc:  # (raised into the runner's steps: NOSCRIPT, no library...)
            reply, error = None, exc


async def _bounded(call: Any, client: Any = None) -> Any:
    """Await ``call`` within the current deadline (if any): past it, the call
    is cancelled and redis-py's ``TimeoutError`` raised. With ``client``,
    ``call`` is an engine :class:`.steps.Op`, run here by the client's script
    runner (every operation's hot path: one coroutine for all its awaits)."""
    bound = current_deadline()
    timer = left = None
    if bound is not None:
        left = bound.at_least()  # (the timer reads what is really left when it fires)
        if left <= 0 and (left := bound.left()) <= 0:
            if client is None:
                call.close()
            raise expired("the deadline passed before the call was sent", bound)
        timer = _DeadlineTimer(bound, left)
    try:
        if client is None:
            return await call
        runner = runner_for(client)
        reply = await runner.acall(client, call)
        if reply is MISS:
            reply = await _asteps(client, runner.steps(*call))
        return text(reply)
    except asyncio.CancelledError as exc:
        if timer is not None and timer.expire():
            raise expired(f"no reply within the deadline ({left:.2f} s)", bound) from exc
        raise
    finally:
        if timer is not None:
            timer.expire()


class _DeadlineTimer:
    """Cancels the current task when ``bound`` has passed (as ``asyncio.timeout``
    does). A deadline counts only time the loop's thread waited (see
    :class:`.stopwatch.Stopwatch`): when the timer fires while the loop was
    busy with other tasks or waiting for a CPU, the reply may be there
    already, so the timer is set again for the time still left. When it has
    passed (the loop's thread was held up by something that counts as
    waiting: a blocking call in another task) and what the task awaits is done
    already (the loop has read the reply, the task has not run since), the
    deadline is marked ``answered``: Redis answered, this process read it too late."""

    def __init__(self, bound: Any, left: float) -> None:
        self._bound = bound
        self._loop = asyncio.get_running_loop()
        self._task = asyncio.current_task()
        #: (3.11+) the task's pending cancellations before ours, as asyncio.timeout keeps
        self._cancelling = self._task.cancelling() if sys.version_info >= (3, 11) else 0
        self._fired = False
        self._done = False
        self._handle: asyncio.TimerHandle | None = self._loop.call_later(left, self._fire)

    def _fire(self) -> None:
        left = self._bound.left()
        if left > 0:
            self._handle = self._loop.call_later(left, self._fire)
            return
        self._handle = None
        self._fired = True
        # (the future the task awaits, in CPython's Task, C or Python; one
        # cancelled is a timer's of an enclosing call, fired in the same turn)
        awaited = getattr(self._task, "_fut_waiter", None)
        if awaited is not None and awaited.done() and not awaited.cancelled():
            self._bound.answered |= awaited.exception() is None
        self._task.cancel()

    def expire(self) -> bool:
        """Stop the timer; True if it cancelled the task and no other
        cancellation is pending (the task's ``CancelledError`` is ours)."""
        if self._done:
            return False
        self._done = True
        if self._handle is not None:
            self._handle.cancel()
        if not self._fired:
            return False
        if sys.version_info >= (3, 11):
            return self._task.uncancel() <= self._cancelling
        return True


#: Cleanups still running after their task was cancelled again (kept alive here).
_cleanups: set[asyncio.Future[Any]] = set()


async def _shielded(call: Any) -> Any:
    task = asyncio.ensure_future(_bounded(call))
    _cleanups.add(task)
    task.add_done_callback(_cleanups.discard)
    return await asyncio.shield(task)
