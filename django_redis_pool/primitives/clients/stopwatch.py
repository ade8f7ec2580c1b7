"""How long a thread waited, not counting the time it ran or waited for a CPU.

A deadline (:mod:`.deadlines`) bounds how long a caller *waits*: a busy or
starved process is not a hung Redis. :class:`Stopwatch` tells the two apart
from Linux's ``/proc/thread-self/schedstat`` (elsewhere: the thread's CPU
time). Nothing here imports Django.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time

__all__ = ["Stopwatch", "busy_time"]


class _Schedstat:
    """This thread's ``/proc/thread-self/schedstat`` (Linux), kept open: its
    first two fields are the nanoseconds the thread ran and waited for a CPU."""

    def __init__(self) -> None:
        self.fd = os.open("/proc/thread-self/schedstat", os.O_RDONLY)

    def read(self) -> float:
        running, runnable = os.pread(self.fd, 128, 0).split()[:2]
        return (int(running) + int(runnable)) / 1e9

    def __del__(self) -> None:  # (the thread ended, or a fork replaced it)
        with contextlib.suppress(OSError):
            os.close(self.fd)


_local = threading.local()
#: False once /proc/thread-self/schedstat proved unreadable (not Linux...).
_schedstat = True


def busy_time() -> float:
    """Seconds the calling thread has spent running or waiting for a CPU
    (runnable but not running: the machine's CPUs were taken). Where Linux's
    ``/proc/thread-self/schedstat`` is missing, only the thread's CPU time
    (``time.thread_time()``). Only differences between two readings on one
    thread mean something."""
    global _schedstat
    if _schedstat:
        try:
            reader = _local.__dict__.get("reader")
            if reader is None:
                reader = _local.reader = _Schedstat()
            return reader.read()
        except (OSError, ValueError):
            _schedstat = False
    return time.thread_time()


def _busy_of(mark: bytes | float) -> float:
    """The :func:`busy_time` of a :class:`Stopwatch`'s ``busy`` mark."""
    if type(mark) is bytes:
        running, runnable = mark.split()[:2]
        return (int(running) + int(runnable)) / 1e9
    return mark  # type: ignore[return-value]


def _new_thread_readers() -> None:
    global _local
    _local = threading.local()  # (a forked child's thread is not its parent's)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_new_thread_readers)


class Stopwatch:
    """Time elapsed since it was made, and the part of it its thread spent
    waiting: blocked on I/O (a Redis reply), sleeping or stopped, but neither
    running nor waiting for a CPU (:func:`busy_time`). Read on another thread,
    waiting time is the whole elapsed time.

    ``seconds`` (None: no end) is how long the wait it times may last, ending
    at ``until`` (monotonic; None: never): a :class:`.waits.Wait` reads them
    (set here, so that starting a wait is one call)."""

    __slots__ = ("busy", "seconds", "started", "thread", "until")

    def __init__(self, seconds: float | None = None) -> None:
        self.seconds = seconds
        self.thread = threading.get_ident()
        # busy_time() as read, parsed only when needed (_busy_of): a stopwatch
        # is started on every acquire, and read back only when one was slow.
        try:
            self.busy: bytes | float = os.pread(_local.reader.fd, 128, 0)
        except (AttributeError, OSError):  # (no reader on this thread yet, or none can be)
            self.busy = busy_time()
        self.started = started = time.monotonic()
        self.until = None if seconds is None else started + seconds

    def elapsed(self) -> float:
        """Seconds since it was made."""
        return time.monotonic() - self.started

    def waited(self) -> float:
        """Seconds since it was made, less those its thread spent running or
        waiting for a CPU."""
        elapsed = time.monotonic() - self.started
        if threading.get_ident() != self.thread:
            return elapsed
        return elapsed - max(0.0, busy_time() - _busy_of(self.busy))
