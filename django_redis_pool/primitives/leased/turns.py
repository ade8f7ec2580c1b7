"""When a refused caller of a leased primitive can expect its turn.

A refusal (nothing granted within the wait, or ``max_waiting`` callers
already waiting) says when to come back: ``ResourceUnavailable.retry_after``,
a request's ``Retry-After``. :func:`turn_in` estimates it, a pure function of
what one snapshot and the counts show:

* each live hold's expected time left: the mean recent hold (``mean_hold``)
  minus its age; a hold older than that is expected to end within
  :data:`OVERDUE_SHARE` of a mean hold; never later than its lease's expiry;
* the queue ahead (the callers waiting now, in the order they are served),
  each served as permits free, each holding a mean hold: a small simulation
  of at most :data:`SIMULATED` waiters, the rest added at the rate the slots
  turn over (a mean hold per slot);
* the result clamped to [:data:`MIN_TURN`, :data:`MAX_TURN`] seconds.

With no recent hold time (no holder released one in the last
:data:`RECENT_MINUTES` minutes, nor ever) or nothing that can free enough
permits (a pool without resources, more permits asked than the semaphore
has), there is no estimate (None): the caller keeps its own answer.

:class:`Turns` keeps one primitive's inputs for :data:`FRESH_FOR` seconds
(the mean hold for :data:`MEAN_FRESH_FOR`), so that a storm of refusals reads
Redis at most about once a second per primitive and process; one thread or
task reads at a time, the others use what is kept (or have no estimate).
Nothing here does I/O or imports Django.
"""

from __future__ import annotations

import heapq
import math
import os
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..counts import BUCKETS, Activity

__all__ = [
    "FRESH_FOR",
    "HOLDS_READ",
    "MAX_TURN",
    "MEAN_FRESH_FOR",
    "MIN_TURN",
    "OVERDUE_SHARE",
    "READ_DEADLINE",
    "RECENT_MINUTES",
    "SIMULATED",
    "LiveHold",
    "Queue",
    "Turns",
    "expected_left",
    "mean_hold",
    "turn_in",
]

#: The soonest turn an estimate promises, in seconds.
MIN_TURN = 0.1
#: The latest turn an estimate promises, in seconds (an hour).
MAX_TURN = 3600.0
#: A hold older than the mean recent hold is expected to end within this share
#: of a mean hold (and no later than its lease's expiry).
OVERDUE_SHARE = 0.1
#: Waiters ahead simulated one by one; those past them add a mean hold per slot each.
SIMULATED = 1000
#: The live holds and the waiters one estimate reads (the snapshot's page).
HOLDS_READ = 100
#: The minutes of counts the mean recent hold is taken from (else the totals).
RECENT_MINUTES = 10
#: Seconds an estimate's snapshot is used before it is read again.
FRESH_FOR = 1.0
#: Seconds the mean recent hold is used before it is read again.
MEAN_FRESH_FOR = 10.0
#: The longest an estimate's reads wait for Redis, in seconds.
READ_DEADLINE = 0.5


def _finite(value: Any, default: float | None) -> float | None:
    """``value`` as a finite float >= 0, else ``default``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return default
    value = float(value)
    if not math.isfinite(value):
        return default
    return max(0.0, value)


def _permits(value: Any) -> int:
    """``value`` as a whole number of permits >= 1 (data read back may be anything)."""
    if isinstance(value, bool) or not isinstance(value, int):
        return 1
    return max(1, value)


@dataclass(frozen=True)
class LiveHold:
    """One live hold as an estimate sees it: ``age`` (seconds since it began),
    ``left`` (seconds until its lease expires; None: never) and the
    ``permits`` it takes."""

    age: float
    left: float | None
    permits: int = 1


def expected_left(hold: LiveHold, mean: float) -> float:
    """Seconds until ``hold`` is expected to end, the mean recent hold being
    ``mean`` seconds: ``mean - age``, at least :data:`OVERDUE_SHARE` of
    ``mean`` (a hold older than the mean), at most its lease's time left."""
    age = _finite(hold.age, 0.0) or 0.0
    left = max(mean - age, mean * OVERDUE_SHARE)
    expiry = _finite(hold.left, None)
    return left if expiry is None else min(left, expiry)


def turn_in(
    holds: Sequence[LiveHold],
    *,
    mean_hold: float | None,
    free: int,
    ahead: int = 0,
    ahead_permits: Sequence[int] = (),
    unread: int = 0,
    permits: int = 1,
) -> float | None:
    """Seconds until a caller asking for ``permits`` can expect its turn.

    ``holds``: the live holds read; ``unread``: the permits of those not read
    (they expire after every one read: expected to end with the latest of
    them); ``free``: the permits (a pool's resources) free now; ``ahead``: the
    callers waiting, served before this one, the first ones asking for
    ``ahead_permits`` (the others for 1; one asking for more than there are
    in all holds up nobody); ``mean_hold``: the mean recent hold, in seconds.

    None when ``mean_hold`` is unknown (None, negative, not finite) or when
    nothing held or free can ever make ``permits``; else a float within
    [:data:`MIN_TURN`, :data:`MAX_TURN`], never less when more wait ahead.
    """
    mean = _finite(mean_hold, None)
    if mean is None or mean_hold < 0:  # type: ignore[operator]
        return None
    permits = _permits(permits)
    unread = max(0, int(unread)) if isinstance(unread, int) else 0
    free = max(0, int(free)) if isinstance(free, int) else 0
    events = [(expected_left(hold, mean), _permits(hold.permits)) for hold in holds]
    if unread:
        events.append((max((end for end, _ in events), default=mean), unread))
    total = free + sum(taken for _, taken in events)
    if permits > total:
        return None
    heapq.heapify(events)
    ahead = max(0, int(ahead)) if isinstance(ahead, int) else 0
    simulated = min(ahead, SIMULATED)
    now = 0.0
    for asked in _queue(ahead_permits, simulated, total):
        while free < asked:  # (free + what the events give back is always total)
            end, taken = heapq.heappop(events)
            now, free = max(now, end), free + taken
        free -= asked
        heapq.heappush(events, (now + mean, asked))
    while free < permits:
        end, taken = heapq.heappop(events)
        now, free = max(now, end), free + taken
    # Past the simulated ones, each waiter ahead (1 permit) takes a slot for a
    # mean hold: the slots turn over ``total`` permits per mean hold.
    now += (ahead - simulated) * mean / total
    return min(MAX_TURN, max(MIN_TURN, now))


def _queue(asked: Sequence[int], count: int, total: int) -> Iterable[int]:
    """The permits each of the first ``count`` waiters asks for (``asked``,
    then 1), leaving out those asking for more than ``total``."""
    for index in range(count):
        permits = _permits(asked[index]) if index < len(asked) else 1
        if permits <= total:
            yield permits


def mean_hold(activity: Activity) -> float | None:
    """The mean hold, in seconds, of the holds counted in ``activity``'s
    minutes, else of its totals; None when none was counted."""
    for counted in ([counts for _, counts in activity.minutes], [activity.totals]):
        held = sum(counts.get("hold_us", 0) for counts in counted)
        holds = sum(
            counts.get(f"hold_{i}", 0) for counts in counted for i in range(len(BUCKETS) + 1)
        )
        if holds > 0 and held >= 0:
            return held / holds / 1e6
    return None


@dataclass(frozen=True)
class Queue:
    """What one snapshot says for an estimate (:func:`turn_in`'s arguments
    but ``mean_hold`` and ``permits``)."""

    holds: tuple[LiveHold, ...] = ()
    free: int = 0
    ahead: int = 0
    ahead_permits: tuple[int, ...] = ()
    unread: int = 0

    @classmethod
    def of(cls, snapshot: Any) -> Queue:
        """The queue of a :class:`.primitive.Snapshot` (one page of it)."""
        now = snapshot.now
        holds = tuple(
            LiveHold(
                age=now - lease.acquired_at if lease.acquired_at is not None else 0.0,
                left=None if lease.expires_at is None else lease.expires_at - now,
                permits=lease.permits,
            )
            for lease in snapshot.leases
        )
        read = sum(_permits(hold.permits) for hold in holds)
        return cls(
            holds=holds,
            free=snapshot.free,
            ahead=snapshot.waiting_count,
            ahead_permits=tuple(waiter.permits for waiter in snapshot.waiters),
            unread=max(0, snapshot.held_permits - read),
        )

    def turn(self, mean: float | None, permits: int) -> float | None:
        """:func:`turn_in` of this queue."""
        return turn_in(
            self.holds,
            mean_hold=mean,
            free=self.free,
            ahead=self.ahead,
            ahead_permits=self.ahead_permits,
            unread=self.unread,
            permits=permits,
        )


@dataclass
class _Kept:
    """What :class:`Turns` keeps: the queue (None: its read failed) read at
    ``read_at`` (monotonic), the estimates made of it by permits asked."""

    queue: Queue | None
    mean: float | None
    read_at: float
    turns: dict[int, float | None] = field(default_factory=dict)


class Turns:
    """One primitive's estimates, kept a short while (see the module).

    :meth:`kept` answers from what was read, while fresh; else the caller
    :meth:`claim`\\ s the read (one at a time), reads (a snapshot page, and the
    counts when :meth:`mean_wanted`) and :meth:`keep`\\ s what it read (None:
    the read failed, which is kept too: no read again before it is stale)."""

    def __init__(self) -> None:
        self._kept: _Kept | None = None
        self._mean: tuple[float | None, float] | None = None  # (mean, read at)
        self._lock = threading.Lock()
        self._pid = os.getpid()

    def kept(self, permits: int, *, stale: bool = False) -> tuple[bool, float | None]:
        """(whether an estimate is known, the estimate now for ``permits``):
        from a read at most :data:`FRESH_FOR` seconds old (``stale``: of any
        age), less the time passed since."""
        kept = self._kept
        if kept is None:
            return False, None
        elapsed = time.monotonic() - kept.read_at
        if elapsed > FRESH_FOR and not stale:
            return False, None
        if kept.queue is None:
            return True, None
        if permits not in kept.turns:
            kept.turns[permits] = kept.queue.turn(kept.mean, permits)
        turn = kept.turns[permits]
        return True, None if turn is None else max(MIN_TURN, turn - elapsed)

    def claim(self) -> bool:
        """Take the read (False: another thread or task is reading)."""
        if self._pid != os.getpid():  # (a forked child: a lock held at the fork stays held)
            self._lock, self._pid = threading.Lock(), os.getpid()
        return self._lock.acquire(blocking=False)

    def mean_wanted(self) -> bool:
        """Whether the read must read the counts too (the mean hold kept is stale)."""
        mean = self._mean
        return mean is None or time.monotonic() - mean[1] > MEAN_FRESH_FOR

    def keep(self, queue: Queue | None, mean: float | None = None, read: bool = False) -> None:
        """Keep what the read read (``read``: ``mean`` was read with it), and
        give the read back."""
        now = time.monotonic()
        if read:
            self._mean = (mean, now)
        elif self._mean is not None:
            mean = self._mean[0]
        self._kept = _Kept(queue, mean, now)
        self._lock.release()
