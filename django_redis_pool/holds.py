"""``holding()``: hold a configured primitive outside a request: in a Celery or
RQ task, a Django Tasks task, a management command, a script.

It is the request hold of ``@with_resource`` without the request: the same
:class:`~.guard.Guard` takes and gives back the hold (``request=None``), so
that it waits, renews, logs, counts, signals and traces exactly as a view's
hold does; only a refusal differs: it is raised (:class:`ResourceUnavailable`
with ``reason`` and ``retry_after``), where a view answers a response.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Callable
from types import FrameType, TracebackType
from typing import Any, TypeVar

from asgiref.sync import iscoroutinefunction

from .event_loop import start_task
from .guard import Guard
from .kinds import Grant
from .outcomes import Refusal
from .primitives.validators import DEFAULT, Seconds

__all__ = ["holding"]

F = TypeVar("F", bound=Callable[..., Any])


def caller_of(frame: FrameType | None) -> str:
    """The dotted name of the function running in ``frame`` (its module's
    name for code at a module's top), for the holder name."""
    if frame is None:
        return "-"
    code = frame.f_code
    module = frame.f_globals.get("__name__", "-")
    function = getattr(code, "co_qualname", code.co_name)  # (co_qualname: Python >= 3.11)
    return module if function == "<module>" else f"{module}.{function}"


def enter(guard: Guard) -> Grant | None:
    """Take ``guard``'s hold outside a request, blocking: the :class:`Grant`,
    None when Redis failed and ``FAIL_OPEN`` lets the body run; a refusal is
    raised."""
    outcome = guard.enter(None)
    if isinstance(outcome, Refusal):
        raise outcome.error
    return outcome


async def aenter(guard: Guard) -> Grant | None:
    """:func:`enter`, waiting on the event loop."""
    outcome = await guard.aenter(None)
    if isinstance(outcome, Refusal):
        raise outcome.error
    return outcome


def leave(guard: Guard, held: Grant | None) -> None:
    """Give ``held`` back (nothing for None), blocking."""
    if held is not None:
        guard.exit(None, held)


async def aleave(guard: Guard, held: Grant | None) -> None:
    """:func:`leave` on the event loop; it completes even when the task
    that awaits it is cancelled (again)."""
    if held is not None:
        loop = asyncio.get_running_loop()
        await asyncio.shield(start_task(loop, guard.aexit(None, held)))


class holding:  # (lower case: used as the function it reads as, ``with holding(...)``)
    """Hold the configured primitive ``name`` around a block or a function.

    ``with holding("printers") as held:``, ``async with holding(...) as held:``
    (waiting on the event loop), or ``@holding("printers")`` on a sync or an
    async function (each call holds; the function's arguments are untouched).
    ``held`` is what a request would find in ``request.resources[name]``
    (what the kind's ``hold`` gives: a :class:`Lease`, a key, a borrowed
    object, a decision; ``docs/background-work.md`` lists them); None when
    Redis failed and ``FAIL_OPEN`` let the block run (a warning is logged).

    ``timeout``: how long to wait (DEFAULT: the primitive's ``TIMEOUT`` if its
    kind has one, else forever; None: forever; 0: do not wait).
    ``lease_timeout``: the hold's lease (DEFAULT: the primitive's default;
    where that never expires, or None, ``REQUEST_LEASE``, renewed while the
    block runs). ``identity``: who holds (what a request's
    ``identity`` names), or what a kind keyed by it counts against (default "").
    ``permits``: the permits taken, for a kind whose holds take permits.

    Refused: :class:`ResourceUnavailable` with ``reason`` (``timeout``,
    ``full``, ``limited``) and ``retry_after`` (seconds until a turn is
    expected: when the kind tells it, its own (its next turn, or its estimate
    from the recent hold times and the callers waiting: :meth:`Kind.turn
    <.kinds.Kind.turn>`); else the wait it was refused after, or 1 s when it
    did not wait). Redis unreachable:
    :class:`BackendUnavailable`. The hold is given back on every exit, also on
    ``SystemExit`` and cancellation. One object serves one ``with`` at a time;
    as a decorator, each call holds on its own.
    """

    def __init__(
        self,
        name: str,
        *,
        timeout: Seconds = DEFAULT,
        lease_timeout: Seconds = DEFAULT,
        identity: str | None = None,
        permits: int | None = None,
    ) -> None:
        self._options: dict[str, Any] = {
            "timeout": timeout,
            "lease_timeout": lease_timeout,
            "identity": identity,
            "permits": permits,
        }
        frame = inspect.currentframe()
        self.guard = Guard(name, caller=caller_of(frame and frame.f_back), **self._options)
        self._entered: list[Grant | None] = []

    def __repr__(self) -> str:
        return f"<holding {self.guard.name!r} in {self.guard.caller}>"

    # -- with / async with -----------------------------------------------------

    def __enter__(self) -> Any:
        held = enter(self.guard)
        self._entered.append(held)
        return None if held is None else held.hold

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        leave(self.guard, self._entered.pop())

    async def __aenter__(self) -> Any:
        held = await aenter(self.guard)
        self._entered.append(held)
        return None if held is None else held.hold

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await aleave(self.guard, self._entered.pop())

    # -- @holding(...) ---------------------------------------------------------

    def __call__(self, function: F) -> F:
        caller = f"{function.__module__}.{function.__qualname__}"
        guard = Guard(self.guard.name, caller=caller, **self._options)

        if iscoroutinefunction(function):

            @functools.wraps(function)
            async def async_held(*args: Any, **kwargs: Any) -> Any:
                held = await aenter(guard)
                try:
                    return await function(*args, **kwargs)
                finally:
                    await aleave(guard, held)

            return async_held  # type: ignore[return-value]

        @functools.wraps(function)
        def held_call(*args: Any, **kwargs: Any) -> Any:
            held = enter(guard)
            try:
                return function(*args, **kwargs)
            finally:
                leave(guard, held)

        return held_call  # type: ignore[return-value]
