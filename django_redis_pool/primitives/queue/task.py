"""A task queue's task as this process sees it: :class:`Task` (what a handler
gets, and what :meth:`.queue.TaskQueue.get_task` reads), the JSON its params,
results and progress are written as (:func:`dumps`), how it is read from its
hash in Redis (:func:`task_from_fields`) and how a handler's error is stored
(:func:`error_message`). The queue's operations are :mod:`.taskqueue`'s, its
workers :mod:`.worker`'s. Nothing here imports Django."""

from __future__ import annotations

import contextlib
import json
import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ...exceptions import CorruptRecord
from ..text import is_text, printable, text
from ..wire.protocol import TaskStatus

__all__ = [
    "MAX_PAYLOAD",
    "Task",
    "check_payload_limit",
    "dumps",
    "error_message",
    "task_from_fields",
    "task_from_flat",
]

#: The default limit on a task's params and on its result, in bytes of JSON
#: text (UTF-8): 16 MiB (``TaskQueue(max_payload=...)``, ``MAX_PAYLOAD``).
MAX_PAYLOAD = 16 * 1024 * 1024
#: The largest limit allowed: Redis's own limit on one string is 512 MiB.
PAYLOAD_CEILING = 512 * 1024 * 1024


def check_payload_limit(value: object, what: str = "max_payload") -> int:
    """A payload limit: an int of bytes from 1 to 512 MiB (Redis's string limit)."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= PAYLOAD_CEILING:
        raise ValueError(
            f"{what} must be an int of bytes from 1 to {PAYLOAD_CEILING} (512 MiB), got {value!r}"
        )
    return value


@dataclass
class Task:
    """One task: what a handler gets, and what :meth:`.queue.TaskQueue.get_task` reads."""

    id: str
    name: str
    params: Any
    status: str = TaskStatus.QUEUED  #: "queued", "running", "done" or "failed" (TaskStatus)
    result: Any = None
    error: str | None = None
    traceback: str | None = None
    attempts: int = 0
    #: (current, total), from update(): ints or floats, as they were given
    progress: tuple[float, float] | None = None
    priority: int = 0
    enqueued_at: float | None = None  #: unix seconds, Redis clock
    #: when the latest delivery started (kept while the task waits to be delivered again)
    started_at: float | None = None
    finished_at: float | None = None
    first_started_at: float | None = None  #: when the first delivery started
    run_at: float | None = None  #: a deferred task's start (unix seconds)
    worker: str | None = None  #: the worker of the latest delivery
    workers: list[str] = field(default_factory=list)  #: every delivery's worker, in order
    #: Set by the worker running it: stores a progress report (:meth:`update`).
    reporter: Callable[[str, str], bool] | None = field(default=None, repr=False, compare=False)
    #: Set by the handler if it wants to know: called by the worker once this
    #: delivery's end is stored, with the task as stored (status, result,
    #: error, traceback, finished_at); inside the ``except`` block when the
    #: handler raised.
    on_end: Callable[[Task], None] | None = field(default=None, repr=False, compare=False)

    def update(self, current: float, total: float) -> bool:
        """Report progress: ``current`` out of ``total``, each a real number
        (readers in other processes get an integer back as an int, any other
        number as a float). Visible while the task runs; never overwrites the result.
        False if this run no longer holds the task (its worker was presumed
        dead and the task delivered again). A bool, NaN, infinity or anything
        that is not a number raises ``ValueError``."""
        texts = [_progress(current, "current"), _progress(total, "total")]
        self.progress = (current, total)
        return self.reporter(*texts) if self.reporter is not None else True


def _progress(value: object, what: str) -> str:
    """``value`` as JSON text: an integer (``int``, numpy's) as an int, another
    real number (``float``, ``Fraction``, numpy's) as a float if it is finite;
    anything else (a bool, NaN, infinity, a str) raises ``ValueError``."""
    number: int | float | None = None
    if isinstance(value, bool):
        pass
    elif isinstance(value, numbers.Integral):
        number = int(value)
    elif isinstance(value, numbers.Real):
        with contextlib.suppress(OverflowError):
            number = float(value)
        if number is not None and not math.isfinite(number):
            number = None
    if number is None:
        raise ValueError(
            f"{what} must be a finite int or float (not a bool, NaN or infinity), got "
            f"{value!r}: e.g. task.update(3, 10) or task.update(0.3, 1.0)"
        )
    return json.dumps(number)


def dumps(value: Any, what: str, limit: int = MAX_PAYLOAD) -> str:
    """``value`` as JSON text, or ``TypeError`` naming ``what``: nothing that is
    not JSON (objects, bytes, NaN, nesting deeper than Python can write) is
    ever written; ``ValueError`` when the text is longer than ``limit`` bytes."""
    try:
        encoded = json.dumps(value, allow_nan=False, separators=(",", ":"))
    except RecursionError:
        raise TypeError(f"{what} is nested too deep to be written as JSON; flatten it") from None
    except (TypeError, ValueError) as exc:
        raise TypeError(
            f"{what} must be JSON-serialisable (dicts, lists, str, numbers, bools, None): {exc}"
        ) from exc
    if len(encoded) * 4 > limit and (size := len(encoded.encode())) > limit:
        raise ValueError(
            f"{what} is {size} bytes of JSON, over the payload limit of {limit} bytes: "
            "pass a reference (a key, a path) instead, or raise the limit "
            "(TaskQueue(max_payload=...), the queue's MAX_PAYLOAD option)"
        )
    return encoded


def task_from_fields(id: str, fields: dict[Any, Any]) -> Task:
    """Task ``id`` from the fields of its hash in Redis (bytes or str), as
    ``queue_read``, ``queue_enqueue`` and ``queue_take`` return them; a hash
    that cannot be read as a task (not UTF-8, not JSON, a field missing or
    malformed: written by someone else) raises :class:`CorruptRecord`."""
    try:
        return _task_from_fields(id, fields)
    except (ValueError, TypeError, KeyError, AttributeError, RecursionError) as exc:
        reason = "is not UTF-8 text" if isinstance(exc, UnicodeError) else f"({type(exc).__name__})"
        raise CorruptRecord(
            f"the stored record of task {printable(id)} cannot be read: {reason} "
            f"{printable(str(exc), 120)}"
        ) from None


def _task_from_fields(id: str, fields: dict[Any, Any]) -> Task:
    f = {text(k): text(v) for k, v in fields.items()}
    for key in ("name", "params", "result", "error", "trace", "current", "total"):
        if key in f and not is_text(f[key]):
            raise UnicodeError(f"its {key!r} field")

    def ms(key: str) -> float | None:
        return int(f[key]) / 1000 if f.get(key) else None

    task = Task(
        id=id,
        name=f["name"],
        params=json.loads(f["params"]),
        status=f["status"],
        attempts=int(f.get("attempts", 0)),
        priority=int(f.get("priority", 0)),
        enqueued_at=ms("enqueued"),
        started_at=ms("started"),
        finished_at=ms("finished"),
        first_started_at=ms("first"),
        run_at=ms("run_at"),
        worker=f.get("worker"),
        workers=f["workers"].split("\n") if f.get("workers") else [],
        error=f.get("error"),
        traceback=f.get("trace") or None,
    )
    if "result" in f:
        task.result = json.loads(f["result"])
    if "current" in f:
        task.progress = (json.loads(f["current"]), json.loads(f["total"]))
    return task


def task_from_flat(id: str, flat: list[Any]) -> Task | None:
    """Task ``id`` from its hash's fields as a flat list, as ``HGETALL`` gives
    them (empty: there is none, None)."""
    return task_from_fields(id, dict(zip(flat[0::2], flat[1::2], strict=True))) if flat else None


def error_message(exc: BaseException) -> str:
    """``"ValueError: ..."`` (``module.Class: ...`` outside the builtins)."""
    cls = type(exc)
    path = (
        cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"
    )
    return f"{path}: {exc}"
