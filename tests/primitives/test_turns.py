"""When a refused caller can expect its turn (issue 49): the pure estimate of
:mod:`django_redis_pool.primitives.leased.turns`, and the leased primitives'
``turn_estimate()`` and the ``retry_after`` of the refusals their
``lease()``, ``hold()`` and ``with lock`` raise, on a real redis-server."""

from __future__ import annotations

import asyncio
import math
import os
import signal
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from hypothesis import given, settings
from hypothesis import strategies as st
from redis.retry import Retry

from django_redis_pool import Allocator, Lock, ResourcePool, ResourceUnavailable, Semaphore
from django_redis_pool.primitives import counts
from django_redis_pool.primitives.clients.connections import DeadlineBackoff, DeadlineConnection
from django_redis_pool.primitives.clients.stopwatch import Stopwatch
from django_redis_pool.primitives.counts import Activity
from django_redis_pool.primitives.leased import turns
from django_redis_pool.primitives.leased.turns import (
    MAX_TURN,
    MIN_TURN,
    OVERDUE_SHARE,
    LiveHold,
    Turns,
    expected_left,
    mean_hold,
    turn_in,
)
from tests.support.primitive_helpers import ops, pool_of, queue_dead_waiter

# -- the pure estimate ----------------------------------------------------------

seconds = st.floats(min_value=0, max_value=10_000, allow_nan=False)
anything = st.one_of(
    st.none(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(10**6), max_value=10**6),
)
holds_of = st.lists(
    st.builds(
        LiveHold,
        age=st.one_of(seconds, anything),
        left=st.one_of(st.none(), seconds, anything),
        permits=st.one_of(st.integers(min_value=-3, max_value=5), st.just("x")),
    ),
    max_size=30,
)


@given(
    holds=holds_of,
    mean=st.one_of(seconds, anything),
    free=st.integers(min_value=-2, max_value=5),
    ahead=st.integers(min_value=0, max_value=3000),
    asked=st.lists(st.integers(min_value=-1, max_value=8), max_size=20),
    unread=st.integers(min_value=-2, max_value=50),
    permits=st.integers(min_value=1, max_value=6),
)
@settings(max_examples=400, deadline=None)
def test_an_estimate_is_none_or_a_finite_number_of_seconds_within_its_bounds(
    holds: list[LiveHold],
    mean: Any,
    free: int,
    ahead: int,
    asked: list[int],
    unread: int,
    permits: int,
) -> None:
    turn = turn_in(
        holds,
        mean_hold=mean,
        free=free,
        ahead=ahead,
        ahead_permits=asked,
        unread=unread,
        permits=permits,
    )
    assert turn is None or (math.isfinite(turn) and MIN_TURN <= turn <= MAX_TURN)


@given(
    holds=st.lists(
        st.builds(
            LiveHold,
            age=seconds,
            left=st.one_of(st.none(), seconds),
            permits=st.integers(min_value=1, max_value=4),
        ),
        max_size=20,
    ),
    mean=st.floats(min_value=0, max_value=600),
    free=st.integers(min_value=0, max_value=4),
    ahead=st.integers(min_value=0, max_value=2500),
    more=st.integers(min_value=1, max_value=1500),
    asked=st.lists(st.integers(min_value=1, max_value=6), max_size=20),
    permits=st.integers(min_value=1, max_value=4),
)
@settings(max_examples=400, deadline=None)
def test_more_callers_waiting_ahead_never_bring_the_turn_sooner(
    holds: list[LiveHold],
    mean: float,
    free: int,
    ahead: int,
    more: int,
    asked: list[int],
    permits: int,
) -> None:
    def turn(waiting: int) -> float | None:
        return turn_in(
            holds, mean_hold=mean, free=free, ahead=waiting, ahead_permits=asked, permits=permits
        )

    fewer, longer = turn(ahead), turn(ahead + more)
    assert (fewer is None) == (longer is None), "whether a turn comes depends on no queue"
    if fewer is not None and longer is not None:
        assert fewer <= longer


@given(mean=st.floats(min_value=0.5, max_value=600), slots=st.integers(min_value=1, max_value=8))
@settings(max_examples=100, deadline=None)
def test_a_long_queue_adds_a_mean_hold_per_slot_for_each_caller_ahead(
    mean: float, slots: int
) -> None:
    holds = [LiveHold(age=0.0, left=None)] * slots
    turn = turn_in(holds, mean_hold=mean, free=0, ahead=3000)
    assert turn == pytest.approx(min(MAX_TURN, mean * (1 + 3000 // slots)), rel=0.01)


def test_a_hold_is_expected_to_end_a_mean_hold_after_it_began() -> None:
    assert turn_in([LiveHold(age=2.0, left=28.0)], mean_hold=10.0, free=0) == pytest.approx(8.0)


def test_the_soonest_of_several_holds_frees_the_first_slot() -> None:
    holds = [LiveHold(age=1.0, left=None), LiveHold(age=6.0, left=None)]
    assert turn_in(holds, mean_hold=10.0, free=0) == pytest.approx(4.0)


def test_callers_waiting_ahead_are_served_first_each_for_a_mean_hold() -> None:
    holds = [LiveHold(age=2.0, left=None), LiveHold(age=1.0, left=None)]
    # the holds end at 8 and 9; the waiters ahead take them until 18 and 19,
    # the third the first of those until 28: this caller's turn is at 19
    assert turn_in(holds, mean_hold=10.0, free=0, ahead=3) == pytest.approx(19.0)


def test_a_hold_ends_no_later_than_its_lease_expires() -> None:
    assert turn_in([LiveHold(age=0.0, left=3.0)], mean_hold=10.0, free=0) == pytest.approx(3.0)


def test_a_hold_older_than_the_mean_is_expected_within_a_share_of_a_mean_hold() -> None:
    overdue = LiveHold(age=50.0, left=None)
    assert expected_left(overdue, 10.0) == pytest.approx(10.0 * OVERDUE_SHARE)
    assert turn_in([overdue], mean_hold=10.0, free=0) == pytest.approx(max(MIN_TURN, 1.0))


def test_a_free_slot_with_nobody_ahead_is_a_turn_at_once() -> None:
    assert turn_in([LiveHold(age=0.0, left=None)], mean_hold=10.0, free=1) == MIN_TURN


def test_a_caller_asking_for_more_permits_than_are_held_and_free_has_no_turn() -> None:
    assert (
        turn_in([LiveHold(age=0.0, left=None, permits=2)], mean_hold=1.0, free=1, permits=4) is None
    )
    assert turn_in([], mean_hold=1.0, free=0) is None, "a pool without resources"


def test_without_a_mean_hold_there_is_no_estimate() -> None:
    for mean in (None, -1.0, math.nan, math.inf):
        assert turn_in([LiveHold(age=0.0, left=5.0)], mean_hold=mean, free=0) is None


def test_a_waiter_asking_for_more_than_there_is_holds_up_nobody() -> None:
    holds = [LiveHold(age=0.0, left=None)]
    alone = turn_in(holds, mean_hold=4.0, free=0)
    assert turn_in(holds, mean_hold=4.0, free=0, ahead=1, ahead_permits=[9]) == alone


def test_the_holds_not_read_end_with_the_latest_read() -> None:
    holds = [LiveHold(age=0.0, left=None), LiveHold(age=8.0, left=None)]
    # 2 permits free at 2 and 10 among those read; the 3 not read free at 10
    assert turn_in(holds, mean_hold=10.0, free=0, unread=3, permits=4) == pytest.approx(10.0)


def test_the_mean_hold_is_the_recent_minutes_else_the_totals() -> None:
    recent = Activity(
        totals={"hold_us": 1, "hold_3": 1},
        minutes=[
            (0, {"hold_us": 4_000_000, "hold_12": 1}),
            (60, {"hold_us": 2_000_000, "hold_9": 1}),
        ],
    )
    assert mean_hold(recent) == pytest.approx(3.0)
    older = Activity(totals={"hold_us": 10_000_000, "hold_11": 2}, minutes=[(0, {})])
    assert mean_hold(older) == pytest.approx(5.0)
    assert mean_hold(Activity()) is None


# -- the primitives -------------------------------------------------------------


@pytest.fixture
def unkept(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every estimate reads Redis again (nothing kept between two)."""
    monkeypatch.setattr(turns, "FRESH_FOR", -1.0)
    monkeypatch.setattr(turns, "MEAN_FRESH_FOR", -1.0)


def timed(primitive: Any, *holds: float) -> None:
    """Count holds of ``holds`` seconds for ``primitive`` (as releases record
    them) and add them into Redis."""
    for held in holds:
        ops(primitive).counts.released(held)
    assert counts.flush() == 0


def test_a_pool_held_without_timed_holds_has_no_estimate(redis_client: Any) -> None:
    pool = pool_of(redis_client, "no-times", "r1")
    assert pool.acquire() is not None
    assert pool.turn_estimate() is None
    with pytest.raises(ResourceUnavailable) as refused, pool.hold(timeout=0):
        pass
    assert refused.value.retry_after is None


def test_a_pool_expects_its_turn_a_mean_hold_after_its_hold_began(
    client: Any, unkept: None
) -> None:
    """On a redis-server, and on the Cluster."""
    pool = pool_of(client, "timed", "r1", lease_timeout=60)
    timed(pool, 10.0, 10.0)
    began = time.monotonic()
    assert pool.acquire() is not None
    turn = pool.turn_estimate()
    # (ages are whole milliseconds of the Redis clock)
    assert turn is not None and 10.0 - (time.monotonic() - began) - 0.01 <= turn <= 10.0


def test_callers_waiting_ahead_push_a_pools_turn_back(redis_client: Any, unkept: None) -> None:
    pool = pool_of(redis_client, "queued", "r1", lease_timeout=60)
    timed(pool, 10.0)
    assert pool.acquire() is not None
    between = time.monotonic()
    alone = pool.turn_estimate()
    queue_dead_waiter(pool, "ahead-1")
    queue_dead_waiter(pool, "ahead-2")
    behind = pool.turn_estimate()
    between = time.monotonic() - between
    assert alone is not None and behind is not None
    # two more mean holds, from a hold older by the time in between
    assert 20.0 - between - 0.01 <= behind - alone <= 20.0 + 0.01


def test_a_hold_whose_lease_expires_sooner_is_expected_by_then(
    redis_client: Any, unkept: None
) -> None:
    pool = pool_of(redis_client, "short-lease", "r1")
    timed(pool, 30.0)
    assert pool.acquire(lease_timeout=2) is not None
    turn = pool.turn_estimate()
    assert turn is not None and turn <= 2.0


def test_a_pool_refusal_of_lease_carries_the_estimate(redis_client: Any, unkept: None) -> None:
    pool = pool_of(redis_client, "lease-refused", "r1", lease_timeout=60)
    timed(pool, 10.0)
    assert pool.acquire() is not None
    with pytest.raises(ResourceUnavailable) as refused, pool.hold(timeout=0):
        pass
    assert refused.value.reason == ResourceUnavailable.TIMEOUT
    assert refused.value.retry_after is not None and 5.0 < refused.value.retry_after <= 10.0


def test_a_refusal_at_once_for_max_waiting_carries_the_estimate(
    redis_client: Any, unkept: None
) -> None:
    pool = pool_of(redis_client, "full", "r1", lease_timeout=60, max_waiting=0)
    timed(pool, 10.0)
    assert pool.acquire() is not None
    with pytest.raises(ResourceUnavailable) as refused, pool.hold(timeout=5):
        pass
    assert refused.value.reason == ResourceUnavailable.FULL
    assert refused.value.retry_after is not None and 5.0 < refused.value.retry_after <= 10.0


def test_an_awaited_pool_refusal_carries_the_estimate(redis_client: Any, unkept: None) -> None:
    pool = pool_of(redis_client, "alease-refused", "r1", lease_timeout=60)
    timed(pool, 10.0)
    assert pool.acquire() is not None

    async def refused() -> ResourceUnavailable:
        with pytest.raises(ResourceUnavailable) as refusal:
            async with pool.ahold(timeout=0):
                pass
        return refusal.value

    error = asyncio.run(refused())
    assert error.retry_after is not None and 5.0 < error.retry_after <= 10.0


def test_a_semaphore_estimates_the_turn_of_the_permits_asked(
    redis_client: Any, unkept: None
) -> None:
    sem = Semaphore(redis_client, "weighted", default_max_size=3, lease_timeout=60)
    timed(sem, 10.0)
    assert sem.acquire("a", permits=2)
    assert sem.acquire("b", permits=1)
    assert sem.turn_estimate(1) is not None and sem.turn_estimate(1) <= 10.0  # type: ignore[operator]
    assert sem.turn_estimate(4) is None, "more than the max size: no turn comes"
    with pytest.raises(ResourceUnavailable) as refused, sem.hold("c", timeout=0, permits=2):
        pass
    assert refused.value.retry_after is not None and 5.0 < refused.value.retry_after <= 10.0


def test_a_lock_refusal_carries_the_estimate(redis_client: Any, unkept: None) -> None:
    lock = Lock(redis_client, "estimated", lease_timeout=60, timeout=0)
    timed(lock, 10.0)
    assert lock.for_holder("someone").acquire()
    with pytest.raises(ResourceUnavailable) as refused, lock:
        pass
    assert refused.value.retry_after is not None and 5.0 < refused.value.retry_after <= 10.0

    async def awaited() -> ResourceUnavailable:
        with pytest.raises(ResourceUnavailable) as refusal:
            async with lock:
                pass
        return refusal.value

    assert asyncio.run(awaited()).retry_after == pytest.approx(refused.value.retry_after, abs=1)


def test_an_allocator_estimates_from_its_held_keys_locks(redis_client: Any, unkept: None) -> None:
    allocator = Allocator(redis_client, "estimated-keys", lease_timeout=60)
    allocator.extend(["k1", "k2"])
    timed(allocator, 10.0)
    assert allocator.malloc_key() is not None and allocator.malloc_key() is not None
    assert allocator.malloc_key() is None
    turn = allocator.turn_estimate()
    assert turn is not None and 5.0 < turn <= 10.0


def test_a_hold_whose_record_cannot_be_read_is_expected_as_one_not_read(
    redis_client: Any, unkept: None
) -> None:
    pool = pool_of(redis_client, "corrupt", "r1", lease_timeout=60)
    timed(pool, 10.0)
    lease = pool.acquire()
    assert lease is not None
    redis_client.hset(f"{ops(pool).base}:info", lease.resource, b"\xff|not|a|record")
    with pytest.raises(ResourceUnavailable) as refused, pool.hold(timeout=0):
        pass
    assert refused.value.retry_after == pytest.approx(10.0), "a mean hold from now"


def test_a_redis_that_stops_answering_gives_no_estimate_within_the_reads_deadline(
    hung_server: Any, unkept: None
) -> None:
    client = redis.Redis.from_url(
        hung_server.url,
        connection_class=DeadlineConnection,
        socket_timeout=5,
        retry=Retry(DeadlineBackoff(cap=0.5, base=0.05), 3),
    )
    pool = ResourcePool(client, "hung-estimate", resources=["r"], lease_timeout=30)
    pool.collect()  # (connected, and the pool filled)
    assert pool.acquire(timeout=5) is not None
    watch = Stopwatch()
    assert pool.acquire(timeout=0) is None
    floor = watch.waited()  # (a call on a Redis that answers)
    os.kill(hung_server.pid, signal.SIGSTOP)
    watch = Stopwatch()
    assert pool.turn_estimate() is None, "no estimate, and nothing raised"
    assert watch.waited() < turns.READ_DEADLINE + 1.0 + 10 * floor


@pytest.fixture
def kept_long(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Estimates kept a minute (a slow machine does not see them go stale)."""
    monkeypatch.setattr(turns, "FRESH_FOR", 60.0)
    monkeypatch.setattr(turns, "MEAN_FRESH_FOR", 60.0)
    yield


def test_an_estimate_is_kept_and_counts_down_until_read_again(
    redis_client: Any, kept_long: None
) -> None:
    pool = pool_of(redis_client, "kept", "r1", lease_timeout=60)
    timed(pool, 10.0)
    lease = pool.acquire()
    assert lease is not None
    first = pool.turn_estimate()
    assert lease.release()  # (a read now would find a free resource: no wait at all)
    again = pool.turn_estimate()
    assert first is not None and again is not None
    assert first - 2.0 < again <= first, "what was read, less the time since"


def test_a_lock_for_another_holder_shares_the_kept_estimates(
    redis_client: Any, kept_long: None
) -> None:
    lock = Lock(redis_client, "shared-kept", lease_timeout=60)
    timed(lock, 10.0)
    holder = lock.for_holder("someone")
    assert holder.acquire()
    first = lock.turn_estimate()
    holder.release()
    again = lock.for_holder("another").turn_estimate()
    assert first is not None and again is not None and again <= first


def test_only_one_read_at_a_time_the_others_use_what_is_kept() -> None:
    kept = Turns()
    assert kept.kept(1) == (False, None), "nothing read yet"
    assert kept.claim()
    assert not kept.claim(), "a second reader waits for nothing: it has no estimate"
    kept.keep(turns.Queue(holds=(LiveHold(age=0.0, left=None),)), 10.0, read=True)
    known, turn = kept.kept(1)
    assert known and turn is not None and turn <= 10.0
    assert not kept.mean_wanted()
    assert kept.claim(), "given back"
    kept.keep(None)  # a failed read is kept too: no estimate, and no read again at once
    assert kept.kept(1) == (True, None)
