"""What each primitive did in this process, added into Redis in the background.

Every primitive's channel keeps a :class:`Counts`: grants (and how long each caller
waited for its grant), refusals (by reason: timed out, ``max_waiting`` full, or
a rate limiter's decision that did not pass), how long each lease this process
held was held (observed when its holder releases it: a release by resource
name or identity is not timed), leases found lost, leases reclaimed, tasks completed
and failed. Recording one is a few increments under a lock, no I/O. One daemon
thread per process adds what was recorded into Redis every
:data:`FLUSH_EVERY` seconds, one ``counts_add`` operation per primitive: into
the primitive's totals (every process and host adds into the same ones) and
into the current minute of the Redis clock, kept for :data:`HISTORY_MINUTES`.
A flush that fails keeps its counts for the next one; a flush retried by
redis-py carries the same request id, so nothing is added twice. A forked
child starts with nothing recorded (its parent's counts are its parent's), and
what is left is flushed at exit.

:func:`read` returns a primitive's totals and its last minutes (for metrics
and charts); :func:`flush` adds what is recorded now. Primitives built on a
``redis.asyncio`` client directly keep no counts: the thread has no blocking
client for them (the Django registry's primitives are built on blocking
clients, and their async methods are counted). Nothing here imports Django.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import threading
import weakref
from bisect import bisect_left
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..clients import deadlines

__all__ = [
    "BUCKETS",
    "DECIDED_LIMIT",
    "FAST",
    "FIELDS",
    "HELPERS",
    "NO_COUNTS",
    "OPERATIONS",
    "Activity",
    "Counts",
    "Owner",
    "flush",
    "flush_one",
    "forget",
    "read",
    "read_steps",
]

logger = logging.getLogger("django_redis_pool")

#: The family's named operations, each ``<op>.lua`` beside this file.
OPERATIONS = ("counts_add", "counts_read")
#: On the EVALSHA path: operation -> the script of its common case: none.
FAST: dict[str, str] = {}
#: The family's helper files: none (its operations use ``engine.lua``'s).
HELPERS: tuple[str, ...] = ()

#: Upper bounds (seconds) of the wait and hold time histograms' buckets; a
#: last bucket takes what is longer.
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)
_FIRST = BUCKETS[0]  # (most waits and many holds fall in it: no bisect for them)
#: The counted fields, as stored in Redis. ``wait_<i>``/``hold_<i>``: how many
#: waits/holds fell in bucket i (not cumulative); ``*_us``: their sums in µs.
FIELDS = (
    "acquired",
    "refused_timeout",
    "refused_full",
    "refused_limited",
    "lost",
    "reclaimed",
    "completed",
    "failed",
    "wait_us",
    "hold_us",
    *(f"wait_{i}" for i in range(len(BUCKETS) + 1)),
    *(f"hold_{i}" for i in range(len(BUCKETS) + 1)),
)
(
    ACQUIRED,
    REFUSED_TIMEOUT,
    REFUSED_FULL,
    REFUSED_LIMITED,
    LOST,
    RECLAIMED,
    COMPLETED,
    FAILED,
    WAIT_US,
    HOLD_US,
) = range(10)
_WAIT0 = 10
_HOLD0 = _WAIT0 + len(BUCKETS) + 1

#: Seconds between two flushes (a process's counts reach Redis within about this).
FLUSH_EVERY = 2.0
#: How long one flush of one primitive waits for Redis, in seconds.
FLUSH_DEADLINE = 2.0
#: Minutes of history kept per primitive (``counts_add.lua`` expires older ones).
HISTORY_MINUTES = 24 * 60
#: The most keys a rate limiter records between two flushes for its index
#: (``INDEX_LIMIT`` of :mod:`.ratelimit`, ``RATE_INDEX_LIMIT`` of ``engine.lua``).
DECIDED_LIMIT = 10_000


class Owner(Protocol):
    """What counts need of the channel they count for: its name for the log,
    and how to run the ``counts_add`` and ``counts_read`` operations."""

    label: str

    def op(self, op: str, *args: Any) -> Any:
        """The step of operation ``op``."""
        ...

    def run(self, steps: Any) -> Any:
        """Run an operation (or one step), blocking."""
        ...


class Counts:
    """The counts of one primitive not yet added into Redis (and, for a rate
    limiter, the keys it decided on: :meth:`decided`)."""

    __slots__ = ("__weakref__", "_decided", "_lock", "_values", "channel", "pending")

    def __init__(self, channel: Owner) -> None:
        self.channel = channel
        self._lock = threading.Lock()
        self._values = [0] * len(FIELDS)
        #: A rate limiter's keys decided on since the last flush -> the TAT
        #: each was left with (its index, ``counts_add.lua``).
        self._decided: dict[str, str] = {}
        #: Whether anything was recorded since the last flush.
        self.pending = False
        _every.add(self)

    def decided(self, key: str, tat: str, waited: float = 0.0) -> None:
        """A rate limiter's decision that let ``key`` pass (after ``waited``
        seconds), leaving it the TAT ``tat`` (µs, as text): a grant, and the
        key for the limiter's index (at most :data:`DECIDED_LIMIT` keys
        between two flushes; the latest TAT of each)."""
        with self._lock:
            values = self._values
            values[ACQUIRED] += 1
            if waited:
                values[WAIT_US] += int(waited * 1e6)
            values[_WAIT0 + (0 if waited <= _FIRST else bisect_left(BUCKETS, waited))] += 1
            decided = self._decided
            if key in decided or len(decided) < DECIDED_LIMIT:
                decided[key] = tat
            if not self.pending:
                self._mark()

    def granted(self, waited: float) -> None:
        """A grant, after ``waited`` seconds (0 for an immediate one)."""
        with self._lock:
            values = self._values
            values[ACQUIRED] += 1
            values[WAIT_US] += int(waited * 1e6)
            values[_WAIT0 + (0 if waited <= _FIRST else bisect_left(BUCKETS, waited))] += 1
            if not self.pending:
                self._mark()

    def released(self, held: float) -> None:
        """A lease ended by its holder after ``held`` seconds."""
        with self._lock:
            values = self._values
            values[HOLD_US] += int(held * 1e6)
            values[_HOLD0 + (0 if held <= _FIRST else bisect_left(BUCKETS, held))] += 1
            if not self.pending:
                self._mark()

    def add(self, index: int, count: int = 1) -> None:
        """Count ``count`` more of field ``index`` (``REFUSED_FULL``, ``LOST``...)."""
        if count:
            with self._lock:
                self._values[index] += count
                if not self.pending:
                    self._mark()

    def _mark(self) -> None:  # (with the lock held)
        self.pending = True
        _recorder.wake_for(self)

    def take(self) -> tuple[list[int], dict[str, str]]:
        """What was recorded (the counts, the keys decided on), now
        forgotten here (see :meth:`give_back`)."""
        with self._lock:
            values, self._values = self._values, [0] * len(FIELDS)
            decided, self._decided = self._decided, {}
            self.pending = False
            return values, decided

    def give_back(self, values: list[int], decided: dict[str, str]) -> None:
        """Record again what :meth:`take` returned (its flush failed); a key
        decided on since keeps its newer TAT."""
        with self._lock:
            for index, value in enumerate(values):
                self._values[index] += value
            for key, tat in decided.items():
                if len(self._decided) < DECIDED_LIMIT:
                    self._decided.setdefault(key, tat)
            if not self.pending:
                self._mark()

    def _forget(self) -> None:  # (a forked child)
        self._lock = threading.Lock()
        self._values = [0] * len(FIELDS)
        self._decided = {}
        self.pending = False


#: Every Counts of the process (a forked child gives each a new lock).
_every: weakref.WeakSet[Counts] = weakref.WeakSet()


class _NoCounts(Counts):
    """Counts that are not kept (a primitive on a ``redis.asyncio`` client)."""

    def __init__(self) -> None:
        super().__init__(None)  # type: ignore[arg-type]

    def granted(self, waited: float) -> None:
        pass

    def released(self, held: float) -> None:
        pass

    def add(self, index: int, count: int = 1) -> None:
        pass

    def decided(self, key: str, tat: str, waited: float = 0.0) -> None:
        pass


#: What a primitive built on a ``redis.asyncio`` client keeps.
NO_COUNTS = _NoCounts()


def flush_one(counts: Counts) -> bool:
    """Add what ``counts`` recorded into Redis now (nothing when nothing is
    pending); False (and kept) if that failed."""
    if not counts.pending:
        return True
    values, decided = counts.take()
    args = [x for i, v in enumerate(values) if v for x in (FIELDS[i], v)]
    if decided:
        args += ["index", *(x for pair in decided.items() for x in pair)]
    if not args:
        return True
    channel = counts.channel
    request = os.urandom(8).hex()
    try:
        with deadlines.deadline(FLUSH_DEADLINE):
            channel.run(channel.op("counts_add", request, *args))
    except Exception as exc:
        counts.give_back(values, decided)
        logger.debug("adding the counts of %s into Redis failed: %s", channel.label, exc)
        return False
    return True


class _Recorder:
    """The process's flushing thread and the counts it flushes."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        #: Counts with something to flush (held strongly: the counts of a
        #: primitive dropped since are flushed all the same).
        self._due: set[Counts] = set()
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    def wake_for(self, counts: Counts) -> None:
        with self._lock:
            self._due.add(counts)
            if self._thread is None and background:
                self._thread = threading.Thread(
                    target=self._run, name="django-redis-pool-counts", daemon=True
                )
                self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(FLUSH_EVERY):
            self.flush()

    def flush(self) -> int:
        """Flush every primitive with counts; how many flushes failed."""
        with self._lock:
            due = [counts for counts in self._due if counts.pending]
            self._due = set()
        failed = 0
        for counts in due:
            try:
                failed += not flush_one(counts)
            except Exception:  # (never let the thread die)
                logger.exception("adding the counts of %s failed", counts.channel.label)
        return failed


_recorder = _Recorder()
#: Whether counts are flushed by the background thread (else only by
#: :func:`flush`; the test suite turns it off so that no test sees writes it
#: did not make).
background = True


def flush() -> int:
    """Add every count recorded in this process into Redis now; returns how
    many primitives' counts could not be added (they are kept for the next flush)."""
    return _recorder.flush()


def forget() -> None:
    """Drop every count this process recorded and has not added into Redis
    (a forked child does this: its parent's counts are its parent's)."""
    global _recorder
    old = _recorder
    _recorder = _Recorder()
    old._stop.set()
    # Every one, not only those with counts: a thread of the parent may have
    # held one's lock when it forked.
    for counts in list(_every):
        counts._forget()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=forget)


@atexit.register
def _flush_at_exit() -> None:
    # One deadline for all of them: a hung Redis delays an exit by at most
    # FLUSH_DEADLINE (on connections that keep deadlines), not that per primitive.
    with contextlib.suppress(Exception), deadlines.deadline(FLUSH_DEADLINE):
        _recorder.flush()


@dataclass
class Activity:
    """A primitive's counts as stored in Redis: ``totals`` since it was first
    counted, and ``minutes``: (unix time of the minute's start, its counts) for
    the last minutes asked for, oldest first (a minute with nothing counted
    has an empty dict)."""

    totals: dict[str, int] = field(default_factory=dict)
    minutes: list[tuple[int, dict[str, int]]] = field(default_factory=list)

    def histogram(self, which: str, counts: dict[str, int] | None = None) -> list[int]:
        """Cumulative bucket counts of ``which`` ("wait" or "hold"), one per
        bound of :data:`BUCKETS` then +Inf, from ``counts`` (default: the totals)."""
        counts = self.totals if counts is None else counts
        total, out = 0, []
        for i in range(len(BUCKETS) + 1):
            total += counts.get(f"{which}_{i}", 0)
            out.append(total)
        return out

    def quantile(self, which: str, q: float, counts: dict[str, int] | None = None) -> float | None:
        """The ``q`` quantile (0..1) of ``which`` ("wait" or "hold") seconds in
        ``counts`` (default: the totals), as Prometheus's ``histogram_quantile``
        estimates it from the buckets (linear within one; the last finite
        bound for the +Inf one). None when nothing was observed."""
        cumulative = self.histogram(which, counts)
        if not cumulative[-1]:
            return None
        rank = q * cumulative[-1]
        below, lower = 0, 0.0
        for bound, seen in zip((*BUCKETS, BUCKETS[-1]), cumulative, strict=True):
            if seen >= rank:
                inside = seen - below
                return lower + (bound - lower) * ((rank - below) / inside if inside else 1.0)
            below, lower = seen, bound
        return BUCKETS[-1]


def read(channel: Owner, minutes: int = 0) -> Activity:
    """``channel``'s primitive's counts: its totals and its last ``minutes``
    minutes (at most :data:`HISTORY_MINUTES`), in one round trip."""
    return channel.run(read_steps(channel, minutes))


def read_steps(channel: Owner, minutes: int = 0) -> Generator[Any, Any, Activity]:
    """The operation behind :func:`read` (run blocking or on an event loop)."""
    minutes = max(0, min(int(minutes), HISTORY_MINUTES))
    reply = yield channel.op("counts_read", minutes)
    now_minute, totals, *history = reply
    first = int(now_minute) - len(history) + 1
    return Activity(
        totals=_pairs(totals),
        minutes=[((first + i) * 60, _pairs(flat)) for i, flat in enumerate(history)],
    )


def _pairs(flat: list[Any]) -> dict[str, int]:
    return {str(k): int(v) for k, v in zip(flat[0::2], flat[1::2], strict=True)}
