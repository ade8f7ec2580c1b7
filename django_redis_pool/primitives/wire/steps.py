"""What an operation yields: the steps that :mod:`.runner` runs.

An operation that talks to Redis is a generator (:data:`Steps`) that yields
each step it needs and is sent back its reply: a :class:`Call` of a redis-py
method, an :class:`Op` (a named operation, run by :mod:`.scripts`) or a
:class:`Local` function of this process. This module only names them, so
that :mod:`.scripts` (which yields calls) and :mod:`.runner` (which runs every
step, an engine operation by :mod:`.scripts`) depend on it and not on each
other. Nothing here imports Django.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any, NamedTuple, TypeVar

__all__ = ["Call", "Local", "Op", "Steps", "new_op", "single"]

T = TypeVar("T")


class Call(NamedTuple):
    """A redis-py method call: ``client.<method>(*args, **kwargs)``."""

    method: str
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = {}  # (never mutated)
    #: A blocking read (BLPOP, BLMOVE): sent on :func:`.connections.waits_client`.
    waits: bool = False


class Op(NamedTuple):
    """A named operation (``<family>/<op>.lua``), run by the client's
    :class:`.scripts.ScriptRunner`."""

    op: str
    keys_and_args: tuple[Any, ...]
    streaks: dict[str, int] | None = None


#: ``new_op(Op, (op, keys_and_args, streaks))``: an :class:`Op` made from its
#: fields without its NamedTuple constructor (a Python call, on every operation).
new_op = tuple.__new__


class Local(NamedTuple):
    """A function of this process (a task handler): called as is on the
    blocking path; awaited if it is a coroutine function, else run in a thread,
    on the asyncio path."""

    fn: Callable[..., Any]
    args: tuple[Any, ...] = ()


#: An operation: yields steps, receives their replies, returns its result.
Steps = Generator[Any, Any, T]


def single(step: Any) -> Steps[Any]:
    """The operation made of ``step`` alone: returns its reply."""
    return (yield step)
