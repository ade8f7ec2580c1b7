"""RateLimiter: at most ``rate`` units per ``per`` seconds per key, decided in Redis.

Each decision is one Lua operation (``ratelimit_decide.lua``, beside this module, run by the
lease engine's script runner: a function of the library on Redis >= 7, else
EVALSHA; Redis Cluster too), so it is exact under any concurrency: GCRA (the
generic cell rate algorithm, a token bucket kept as one timestamp) on the Redis
clock, in microseconds. With the emission interval ``T = per / rate``, a
decision of ``cost`` units passes iff ``max(TAT, now) + cost * T - now <=
burst * T``, and then the key's TAT (theoretical arrival time) advances by
``cost * T``.

A caller that may wait (``timeout`` > 0 or None) and whose turn comes within
its timeout has that turn reserved by the same script, which answers how long
to sleep: the caller sleeps exactly that long, once, and passes. No polling,
one command per caller, waiters served in the order they asked. A caller whose
turn would come later is refused at once and reserves nothing.

Keys: each limited key has a base of its own, ``<prefix>:{ratelimit:<name>:<key>}``
(its own hash tag, so a limiter keyed per user or address spreads over every
shard of a Redis Cluster), holding one string, its TAT, that expires when its
bucket is full again (an idle key vanishes). The limiter's own base
(``{ratelimit:<name>}``) holds its counts and a bounded index (a sorted set,
key -> TAT) for :meth:`RateLimiter.busiest` and :meth:`RateLimiter.active_count`,
kept off the decisions' path: each process records the keys it decided on
and adds them into the index with its counts (:mod:`.counts`, every few
seconds), trimmed of full buckets, held to :data:`INDEX_LIMIT` entries and
expiring with its latest bucket. The rate and burst are sent with every call
and stored nowhere: two processes that build the same limiter with different
settings share each key's state (its TAT) and each judges it by its own
settings. Nothing here imports Django.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .. import counts
from ..clients.waits import Wait
from ..counts import Activity
from ..validators import check_client, check_count, check_duration, check_name
from ..wire import packing
from ..wire.channel import Channel
from ..wire.keys import DEFAULT_KEY_PREFIX
from ..wire.protocol import Mode
from ..wire.steps import Local, Op, Steps

__all__ = [
    "INDEX_LIMIT",
    "MAX_KEY_LENGTH",
    "Decision",
    "KeyState",
    "RateLimiter",
    "check_limits",
]

#: The longest limited key, in characters.
MAX_KEY_LENGTH = 1000
#: The most keys :meth:`RateLimiter.busiest` reads at once.
MAX_BUSIEST = 1000
#: The most keys the index keeps (``RATE_INDEX_LIMIT`` in ``engine.lua``):
#: past it, the fullest are dropped from it (their own keys stay exact), so
#: :meth:`RateLimiter.active_count` counts at most this many; a process also
#: records at most this many keys between two of its flushes.
INDEX_LIMIT = 10_000
#: The longest bucket (``burst * per / rate``) in µs: Redis's Lua numbers are
#: exact integers up to 2**53, and the clock takes 2**51 of it now.
_MAX_WINDOW_US = 2**51


@dataclass(frozen=True)
class Decision:
    """What one decision of a :class:`RateLimiter` said. For a caller that
    waited, the fields are as of when it passed (after its sleep)."""

    #: Whether the units were taken (at once, or after ``waited`` seconds).
    allowed: bool
    #: Whole units left after this decision (0 when it waited: it took the
    #: bucket's last ones).
    remaining: int
    #: Seconds until this cost would pass; 0.0 when allowed.
    retry_after: float
    #: Seconds until the key's bucket is full again.
    reset_after: float
    #: The most units at once: the limiter's ``burst``.
    limit: int
    #: Seconds the caller slept before passing (0.0 at once, or refused).
    waited: float = 0.0
    #: When it was decided (passed, for a caller that waited): unix seconds on
    #: the Redis clock, to the microsecond.
    at: float = 0.0


@dataclass(frozen=True)
class KeyState:
    """One limited key's bucket now (:meth:`RateLimiter.busiest`)."""

    key: str
    #: Units free now (fractional: the bucket refills continuously).
    remaining: float
    #: Seconds until a cost-1 request passes (0.0 if now).
    retry_after: float
    #: Seconds until the bucket is full again.
    reset_after: float


def check_limits(rate: Any, per: Any, burst: Any) -> tuple[int, float, int, int]:
    """``(rate, per, burst, interval µs)`` of a limiter of ``rate`` units per
    ``per`` seconds (to the millisecond), up to ``burst`` (None: ``rate``) at
    once, the interval ``per / rate`` rounded up to whole microseconds; a value
    that cannot be counted so raises ``ValueError`` naming it. (The settings
    reader checks a rate limit's entry with it, without building one.)"""
    rate = _check_units(rate, "rate")
    per_ms = round(check_duration(per, "per") * 1000)
    burst = rate if burst is None else _check_units(burst, "burst")
    interval_us = -(-per_ms * 1000 // rate)
    if per_ms * 1000 < rate:
        raise ValueError(
            f"rate={rate!r} per {per!r} s is more than one unit per microsecond; "
            "use a smaller rate or a longer per"
        )
    if burst * interval_us > _MAX_WINDOW_US:
        raise ValueError(
            f"burst={burst!r} units of {per_ms / 1000!r}/{rate!r} s each make a bucket "
            f"of more than {_MAX_WINDOW_US // 10**6 // 86400 // 365} years; use a smaller "
            "burst or per"
        )
    return rate, per_ms / 1000, burst, interval_us


class RateLimiter:
    """At most ``rate`` units per ``per`` seconds for each key, at most ``burst``
    (default ``rate``) at once, shared by every process on the same Redis,
    ``name`` and ``key_prefix``.

    ``rate`` and ``burst`` are ints >= 1, ``per`` a number of seconds >= 0.001
    (honoured to the millisecond). The emission interval ``per / rate`` is
    rounded up to whole microseconds (never more than ``rate`` per ``per``),
    so it must be at least one. Building one does no I/O; a bad value raises
    ``ValueError`` naming it. The settings are sent with each call, not
    stored: two processes with different settings share each key's state and
    each enforces its own settings on it.

    A limited key (``key``) is any ``str`` of up to 1,000 characters (the
    empty one by default). Each has its own hash tag: on a Redis Cluster the
    keys of one limiter spread over every shard, and a decision is one
    script on the shard of its key. :meth:`busiest` and :meth:`active_count`
    read an index that each process adds the keys it decided on into every
    few seconds (:mod:`.counts`; its own first, at once).
    """

    kind = "ratelimit"

    def __init__(
        self,
        client: Any,
        name: str,
        *,
        rate: int,
        per: float,
        burst: int | None = None,
        key_prefix: str = DEFAULT_KEY_PREFIX,
    ) -> None:
        self.client = check_client(client)
        self.name = check_name(name)
        self.key_prefix = check_name(key_prefix, "key_prefix")
        #: ``per`` to the millisecond; the emission interval in µs (``per / rate``,
        #: rounded up).
        self.rate, self.per, self.burst, self.interval_us = check_limits(rate, per, burst)
        self._channel = Channel(
            client, kind=self.kind, name=self.name, mode=Mode.RATELIMIT, prefix=self.key_prefix
        )
        #: Every key of the limiter is this base plus a suffix (``engine.lua``).
        self.base = self._channel.base
        #: What every decision's packed argument starts with: the mode, the
        #: interval and the burst (:func:`.packing.ratelimit_decide`).
        self._packed_head = packing.ratelimit_head(Mode.RATELIMIT, self.interval_us, self.burst)
        #: A limited key's own base is this, the key and "}" (:meth:`key_base`).
        self._key_head = self.base[:-1] + ":"
        self._mode = Mode.RATELIMIT.encode()
        self._counts = self._channel.counts

    def key_base(self, key: str = "") -> str:
        """The base of limited key ``key``'s own Redis keys (its hash tag is
        the limiter's, the key and "}" ... up to the key's first "}")."""
        return f"{self._key_head}{key}}}"

    def _key_op(self, op: str, key: str, *args: Any) -> Op:
        """Operation ``op`` on limited key ``key``'s own base."""
        return Op(op, (f"{self._key_head}{key}}}".encode(), self._mode, *args))

    def __repr__(self) -> str:
        return f"<RateLimiter {self.name!r}: {self.rate}/{self.per:g}s, burst {self.burst}>"

    # -- deciding -----------------------------------------------------------------

    def acquire(self, key: str = "", *, cost: int = 1, timeout: float | None = 0) -> bool:
        """Take ``cost`` units of ``key``'s bucket: True if they were taken.

        ``timeout`` (seconds; None: for ever): when the units are not there
        now but will be within it, the turn is reserved and the caller sleeps
        exactly until then, once, and gets True; when they would come later,
        False at once (nothing reserved). A ``cost`` over ``burst`` could never
        pass: ``ValueError``. Interrupted while it sleeps (``KeyboardInterrupt``),
        the units are given back if no later caller reserved behind them
        (else they stay used)."""
        return self._channel.run(self._decide(key, cost, timeout, time.sleep, False))  # type: ignore[no-any-return]

    async def aacquire(self, key: str = "", *, cost: int = 1, timeout: float | None = 0) -> bool:
        """:meth:`acquire` on the event loop (its sleep is ``asyncio.sleep``).
        Cancelled while it sleeps, the units are given back if no later caller
        reserved behind them (else they stay used), then ``CancelledError``
        propagates."""
        return await self._channel.arun(self._decide(key, cost, timeout, asyncio.sleep, False))  # type: ignore[no-any-return]

    def decide(self, key: str = "", *, cost: int = 1, timeout: float | None = 0) -> Decision:
        """:meth:`acquire`, answering the whole :class:`Decision` (what is
        left, when to retry, when the bucket is full again)."""
        return self._channel.run(self._decide(key, cost, timeout, time.sleep, True))  # type: ignore[no-any-return]

    async def adecide(self, key: str = "", *, cost: int = 1, timeout: float | None = 0) -> Decision:
        """:meth:`decide` on the event loop (as :meth:`aacquire`)."""
        return await self._channel.arun(self._decide(key, cost, timeout, asyncio.sleep, True))  # type: ignore[no-any-return]

    def _decide(
        self,
        key: str,
        cost: int,
        timeout: float | Wait | None,
        sleep: Callable[[float], Any],
        whole: bool,
    ) -> Steps[Decision | bool]:
        """The decision behind :meth:`acquire` and its twins (one operation
        for both paths: ``sleep`` is ``time.sleep`` or ``asyncio.sleep``);
        returns the :class:`Decision` if ``whole``, else whether it passed."""
        if type(key) is not str or len(key) > MAX_KEY_LENGTH:
            _check_key(key)
        if type(cost) is not int or not 1 <= cost <= self.burst:
            self._check_cost(cost)
        # (the wait sent as every operation's: -1 forever, 0 do not wait, else ms)
        wait_ms = 0 if timeout == 0 else Wait.of(timeout).wire_ms()
        keybase = f"{self._key_head}{key}}}".encode()
        reply = yield Op(
            "ratelimit_decide",
            (keybase, packing.ratelimit_decide(self._packed_head, cost, wait_ms)),
        )
        if reply[0] == "0":
            self._counts.add(counts.REFUSED_LIMITED)
            if not whole:
                return False
            _, remaining, delay, debt, now, _ = map(int, reply.split("|"))
            return Decision(False, remaining, delay / 1e6, debt / 1e6, self.burst, 0.0, now / 1e6)
        if wait_ms == 0 and not whole:  # (the common case: passed at once)
            self._counts.decided(key, reply[reply.rindex("|") + 1 :])
            return True
        _, remaining, delay, debt, now, tat = map(int, reply.split("|"))
        self._counts.decided(key, str(tat), waited=delay / 1e6)
        waited = delay / 1e6
        if delay:
            try:
                yield Local(sleep, (waited,))
            except GeneratorExit:
                raise
            except BaseException:
                # Cancelled or interrupted: give the units back if ours is
                # still the latest reservation (a later one keeps them used).
                with contextlib.suppress(Exception):
                    yield self._key_op("ratelimit_refund", key, tat, cost * self.interval_us)
                raise
        if not whole:
            return True
        return Decision(True, remaining, 0.0, debt / 1e6, self.burst, waited, (now + delay) / 1e6)

    def _check_cost(self, cost: object) -> None:
        if isinstance(cost, bool) or not isinstance(cost, int) or cost < 1:
            raise ValueError(f"cost must be an int >= 1 (units to take), got {cost!r}")
        if cost > self.burst:
            raise ValueError(
                f"cost={cost!r} is more than burst={self.burst!r} of {self!r}: it could never pass"
            )

    # -- reading and resetting -------------------------------------------------------

    def status(self, key: str = "") -> tuple[float, float]:
        """(units free now, seconds until a cost-1 request passes: 0.0 if now)
        for ``key``. Reads only."""
        return self._channel.run(self._status(key))

    async def astatus(self, key: str = "") -> tuple[float, float]:
        """:meth:`status` on the event loop."""
        return await self._channel.arun(self._status(key))

    def _status(self, key: str) -> Steps[tuple[float, float]]:
        _check_key(key)
        [debt] = yield self._key_op("ratelimit_read", key, "status")
        state = self._state(key, int(debt))
        return state.remaining, state.retry_after

    def reset(self, key: str = "") -> bool:
        """Forget ``key`` (its bucket is full again); True if it had state."""
        return self._channel.run(self._reset(key))

    async def areset(self, key: str = "") -> bool:
        """:meth:`reset` on the event loop."""
        return await self._channel.arun(self._reset(key))

    def _reset(self, key: str) -> Steps[bool]:
        _check_key(key)
        had = int((yield self._key_op("ratelimit_reset", key, "key"))) == 1
        yield self._channel.op("ratelimit_reset", "index", key)
        return had

    def busiest(self, limit: int = 20) -> list[KeyState]:
        """At most ``limit`` (1 to 1,000) keys with the fewest units left now,
        fewest first; full keys are left out. One bounded read (for the admin)."""
        limit = check_count(limit, "limit", minimum=1)
        if limit > MAX_BUSIEST:
            raise ValueError(f"limit must be an int from 1 to {MAX_BUSIEST}, got {limit!r}")
        counts.flush_one(self._counts)
        now, *flat = self._channel.run(self._channel.op("ratelimit_read", "busiest", limit))
        keys = [str(key) for key in flat[0::2]]
        # (each read again from its own key, on its own shard: the index may be
        # behind a reset, a refund or a bucket that filled up since)
        pipe = self.client.pipeline(transaction=False)
        for key in keys:
            pipe.get(f"{self._key_head}{key}}}:tat")
        states = []
        for key, tat in zip(keys, pipe.execute(), strict=True):
            debt = int(tat) - int(now) if tat is not None else 0
            if debt > 0:
                states.append(self._state(key, debt))
        states.sort(key=lambda state: state.reset_after, reverse=True)
        return states

    def active_count(self) -> int:
        """How many keys are not full now (at most :data:`INDEX_LIMIT`), as
        the index says: this process's decisions at once, other processes'
        within a few seconds."""
        counts.flush_one(self._counts)
        [count] = self._channel.run(self._channel.op("ratelimit_read", "count"))
        return int(count)

    def activity(self, minutes: int = 0) -> Activity:
        """What every process counted for this limiter (decisions allowed, with
        how long they waited, and refused: :mod:`.counts`): the totals and the
        last ``minutes`` minutes. This process's counts reach Redis within a
        few seconds (:func:`.counts.flush`: now)."""
        return counts.read(self._channel, minutes)

    def _state(self, key: str, debt_us: int) -> KeyState:
        """The bucket of ``key`` whose TAT is ``debt_us`` µs ahead of now."""
        window = self.burst * self.interval_us
        return KeyState(
            key=key,
            remaining=max(0.0, (window - debt_us) / self.interval_us),
            retry_after=max(0, debt_us + self.interval_us - window) / 1e6,
            reset_after=debt_us / 1e6,
        )


def _check_units(value: object, what: str) -> int:
    """``rate`` or ``burst``: an int from 1 to 2**52."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 2**52:
        raise ValueError(f"{what} must be an int >= 1 (units), got {value!r}")
    return value


def _check_key(key: object) -> None:
    """Raise ``ValueError`` naming ``key`` unless it is a str of at most
    :data:`MAX_KEY_LENGTH` characters."""
    if not isinstance(key, str):
        raise ValueError(f"key must be a str, got {key!r} ({type(key).__name__})")
    if len(key) > MAX_KEY_LENGTH:
        raise ValueError(
            f"key {key[:40]!r}... is {len(key)} characters long; the limit is {MAX_KEY_LENGTH}"
        )
