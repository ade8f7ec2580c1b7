"""RateLimiter behaviour, one sentence of API.md at a time.

The behavioural tests run against a real redis-server and again against the
real local 3-master Redis Cluster (the ``client`` fixture), on the blocking API
and on the asyncio twins (the ``api`` fixture). Run the file on both Redis
lines (``DJANGO_REDIS_POOL_REDIS_SERVER=/usr/bin/redis-server`` for Redis 7).
"""

from __future__ import annotations

import asyncio
import bisect
import itertools
import math
import multiprocessing
import os
import threading
import time
import types
from pathlib import Path
from typing import Any

import pytest

from django_redis_pool import Decision, KeyState, RateLimiter
from django_redis_pool.metrics import COUNTERS
from django_redis_pool.primitives import counts
from django_redis_pool.primitives.ratelimit import limiter as limiter_module
from django_redis_pool.primitives.ratelimit.limiter import INDEX_LIMIT, MAX_KEY_LENGTH
from tests.support.client_specs import client_from, spec_of
from tests.support.primitive_helpers import (
    assert_constructor_does_no_io,
    calls_per_cycle,
    redis_time,
)
from tests.support.redis_inspect import command_calls, commands_run_by
from tests.support.waiting import STALL, await_for, floor_of, wait_for

mp = multiprocessing.get_context("fork")

#: Behaviour tests: on the blocking API and on the asyncio twins.
both_apis = pytest.mark.usefixtures("api")


def tat_of(client: Any, limiter: RateLimiter, key: str = "") -> bytes | None:
    """The stored TAT of ``key`` (a plain GET: no script runs)."""
    return client.get(f"{limiter.key_base(key)}:tat")


def script_calls(client: Any) -> int:
    """Script runs Redis did without an error (EVALSHA and FCALL)."""
    ran = command_calls(client)
    return ran.get("evalsha", 0) + ran.get("fcall", 0)


# -- deciding -------------------------------------------------------------------------


@both_apis
def test_a_burst_passes_then_the_next_is_refused(client):
    limiter = RateLimiter(client, "burst", rate=5, per=60)
    assert (limiter.rate, limiter.per, limiter.burst) == (5, 60.0, 5)
    assert [limiter.acquire() for _ in range(5)] == [True] * 5
    assert limiter.acquire() is False
    refused = limiter.decide()
    assert refused.allowed is False and refused.remaining == 0
    assert 0 < refused.retry_after <= 60 / 5, "the next unit comes within one interval"


@both_apis
def test_a_smaller_burst_caps_what_passes_at_once(client):
    limiter = RateLimiter(client, "small-burst", rate=100, per=60, burst=3)
    assert [limiter.acquire() for _ in range(4)] == [True, True, True, False]


@both_apis
def test_units_come_back_at_the_steady_rate(client):
    limiter = RateLimiter(client, "steady", rate=50, per=1, burst=5)
    interval = limiter.interval_us
    floor = floor_of(lambda: limiter.status())
    passed: list[int] = []
    while len(passed) < 25:
        decision = limiter.decide()
        if decision.allowed:
            passed.append(round(decision.at * 1e6))
    first = passed[0]
    for i, at in enumerate(passed[5:], start=1):
        assert at - first >= i * interval, f"unit {i + 5} passed before its turn"
    span = passed[-1] - first
    assert span / 1e6 <= 20 * interval / 1e6 + 100 * floor + STALL, "it passed at the rate"


@both_apis
def test_a_cost_takes_that_many_units(client):
    limiter = RateLimiter(client, "cost", rate=10, per=60)
    assert limiter.decide(cost=4).remaining == 6
    assert limiter.decide(cost=6).remaining == 0
    assert limiter.acquire(cost=1) is False
    remaining, retry_after = limiter.status()
    assert remaining < 1 and retry_after > 0


@both_apis
def test_a_cost_over_burst_is_a_value_error_as_it_could_never_pass(client):
    limiter = RateLimiter(client, "too-big", rate=10, per=1, burst=3)
    for timeout in (0, 5, None):
        with pytest.raises(ValueError, match=r"cost=4 is more than burst=3.*never pass"):
            limiter.acquire(cost=4, timeout=timeout)
    for cost in (0, -1, 1.5, True, "1"):
        with pytest.raises(ValueError, match="cost"):
            limiter.decide(cost=cost)
    assert limiter.status() == (3.0, 0.0), "nothing was taken"


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"rate": 0, "per": 1}, "rate"),
        ({"rate": -3, "per": 1}, "rate"),
        ({"rate": 1.5, "per": 1}, "rate"),
        ({"rate": True, "per": 1}, "rate"),
        ({"rate": "10", "per": 1}, "rate"),
        ({"rate": 1, "per": 0}, "per"),
        ({"rate": 1, "per": -1}, "per"),
        ({"rate": 1, "per": math.nan}, "per"),
        ({"rate": 1, "per": math.inf}, "per"),
        ({"rate": 1, "per": None}, "per"),
        ({"rate": 1, "per": "1"}, "per"),
        ({"rate": 1, "per": 0.0001}, "per"),
        ({"rate": 1, "per": 1, "burst": 0}, "burst"),
        ({"rate": 1, "per": 1, "burst": 2.0}, "burst"),
        ({"rate": 2_000_000, "per": 1}, "rate=2000000"),
        ({"rate": 1, "per": 10**8, "burst": 10**9}, "burst"),
        ({"rate": 1, "per": 10**9}, "per must be at most"),
    ],
)
def test_bad_arguments_raise_value_error_naming_the_value(redis_client, options, named):
    with pytest.raises(ValueError, match=named):
        RateLimiter(redis_client, "bad", **options)


def test_bad_keys_timeouts_and_names_are_refused_naming_them(redis_client):
    limiter = RateLimiter(redis_client, "bad-calls", rate=1, per=1)
    with pytest.raises(ValueError, match=r"key .* 1001 characters long; the limit is 1000"):
        limiter.acquire("k" * 1001)
    with pytest.raises(ValueError, match="key must be a str"):
        limiter.acquire(b"bytes")
    with pytest.raises(ValueError, match="key must be a str"):
        limiter.status(None)
    with pytest.raises(ValueError, match="timeout"):
        limiter.acquire(timeout=-1)
    with pytest.raises(ValueError, match="limit"):
        limiter.busiest(0)
    with pytest.raises(ValueError, match="name"):
        RateLimiter(redis_client, "a{b}", rate=1, per=1)
    assert limiter.acquire("k" * 1000) is True, "1,000 characters are fine"
    assert len(redis_client.keys("*:tat")) == 1, "(only the valid call wrote)"


def test_the_constructor_does_no_io():
    assert_constructor_does_no_io(lambda client: RateLimiter(client, "no-io", rate=3, per=1))


def test_per_is_honoured_to_the_millisecond_and_the_interval_rounded_up(redis_client):
    limiter = RateLimiter(redis_client, "ms", rate=3, per=1.0004)
    assert limiter.per == 1.0
    assert limiter.interval_us == 333_334, "never more than rate per per"


# -- waiting ---------------------------------------------------------------------------


@both_apis
def test_a_waiter_whose_turn_comes_within_its_timeout_sleeps_once_and_passes(client):
    limiter = RateLimiter(client, "wait", rate=20, per=1, burst=1)
    assert limiter.acquire() is True
    started = time.monotonic()
    decision = limiter.decide(timeout=5)
    took = time.monotonic() - started
    assert decision.allowed is True and 0 < decision.waited <= 0.05
    assert took >= decision.waited, "it slept for its turn"
    assert decision.retry_after == 0.0 and decision.remaining == 0
    assert limiter.acquire(timeout=None) is True, "None waits as long as it takes"


@both_apis
def test_a_waiter_whose_turn_is_past_its_timeout_is_refused_at_once_reserving_nothing(client):
    limiter = RateLimiter(client, "too-late", rate=1, per=60)
    assert limiter.acquire() is True
    before = tat_of(client, limiter)
    floor = floor_of(lambda: limiter.acquire(timeout=0))
    started = time.monotonic()
    decision = limiter.decide(timeout=30)
    assert decision.allowed is False and 30 < decision.retry_after <= 60
    assert time.monotonic() - started < 10 * floor + STALL, "it did not wait"
    assert tat_of(client, limiter) == before, "nothing was reserved"


def test_waiting_callers_are_served_in_arrival_order_with_one_script_call_each(redis_client, api):
    limiter = RateLimiter(redis_client, "queue", rate=10, per=1, burst=1)
    interval = limiter.interval_us
    assert limiter.acquire("warm") and limiter.acquire() is True  # (paths found, scripts loaded)
    results: dict[int, tuple[Decision, float]] = {}

    def wait(index: int) -> None:
        started = time.monotonic()
        decision = limiter.decide(timeout=10)
        results[index] = (decision, time.monotonic() - started)

    before = script_calls(redis_client)
    threads = []
    for index in range(4):
        tat = tat_of(redis_client, limiter)
        thread = threading.Thread(target=wait, args=(index,))
        thread.start()
        threads.append(thread)
        wait_for(lambda tat=tat: tat_of(redis_client, limiter) != tat, what="its reservation")
    for thread in threads:
        thread.join(30)
    assert script_calls(redis_client) - before == 4, "one script call per waiter, no polling"
    passed = [results[index][0] for index in range(4)]
    assert all(decision.allowed for decision in passed)
    ats = [round(decision.at * 1e6) for decision in passed]
    assert [b - a for a, b in itertools.pairwise(ats)] == [interval] * 3, (
        "each waiter passes one interval after the one that asked before it"
    )
    for decision, took in results.values():
        assert took >= decision.waited > 0, "each slept until its turn"


def sleeps_counted(monkeypatch: Any) -> list[float]:
    """The sleeps the rate limiter's awaited waits have begun (its module's
    ``asyncio.sleep`` is counted): a waiter is cancelled once it sleeps, not
    while its decision's reply is still on the way (the reservation is seen in
    Redis before the waiter has read it)."""
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)
        await asyncio.sleep(seconds)

    monkeypatch.setattr(limiter_module, "asyncio", types.SimpleNamespace(sleep=sleep))
    return slept


def test_a_cancelled_async_wait_gives_its_units_back(redis_client, monkeypatch):
    limiter = RateLimiter(redis_client, "cancel", rate=1, per=60)
    assert limiter.acquire() is True
    before = tat_of(redis_client, limiter)
    slept = sleeps_counted(monkeypatch)

    async def scenario() -> None:
        waiter = asyncio.ensure_future(limiter.adecide(timeout=300))
        await await_for(lambda: len(slept) == 1, what="the waiter to sleep until its turn")
        assert tat_of(redis_client, limiter) != before, "its turn is reserved"
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter

    asyncio.run(scenario())
    assert tat_of(redis_client, limiter) == before, "the bucket is as before the wait"


def test_a_cancelled_wait_behind_which_another_reserved_keeps_its_units_used(
    redis_client, monkeypatch
):
    limiter = RateLimiter(redis_client, "cancel-first", rate=1, per=60)
    assert limiter.acquire() is True
    slept = sleeps_counted(monkeypatch)

    async def scenario() -> tuple[bytes | None, bytes | None, bytes | None]:
        first = asyncio.ensure_future(limiter.adecide(timeout=300))
        await await_for(lambda: len(slept) == 1, what="the first waiter to sleep")
        reserved = tat_of(redis_client, limiter)
        second = asyncio.ensure_future(limiter.adecide(timeout=300))
        await await_for(lambda: len(slept) == 2, what="the second waiter to sleep")
        both = tat_of(redis_client, limiter)
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first
        assert tat_of(redis_client, limiter) == both, "the first's units stay used"
        second.cancel()  # the latest: its own units come back
        with pytest.raises(asyncio.CancelledError):
            await second
        return reserved, both, tat_of(redis_client, limiter)

    reserved, both, after = asyncio.run(scenario())
    assert reserved != both and after == reserved


def test_an_interrupted_blocking_wait_gives_its_units_back(redis_client, monkeypatch):
    limiter = RateLimiter(redis_client, "interrupt", rate=1, per=60)
    assert limiter.acquire() is True
    before = tat_of(redis_client, limiter)
    slept: list[float] = []

    def interrupted(seconds: float) -> None:  # Ctrl-C while it sleeps for its turn
        slept.append(seconds)
        assert tat_of(redis_client, limiter) != before, "its turn is reserved"
        raise KeyboardInterrupt

    monkeypatch.setattr(limiter_module, "time", types.SimpleNamespace(sleep=interrupted))
    with pytest.raises(KeyboardInterrupt):
        limiter.acquire(timeout=300)
    assert 0 < slept[0] <= 60
    assert tat_of(redis_client, limiter) == before


# -- reading and resetting -----------------------------------------------------------


@both_apis
def test_status_reads_units_and_retry_time_changing_nothing(client):
    limiter = RateLimiter(client, "status", rate=5, per=60)
    assert limiter.status("new") == (5.0, 0.0)
    assert limiter.acquire("k", cost=2) is True
    stored = tat_of(client, limiter, "k")
    remaining, retry_after = limiter.status("k")
    assert 3 <= remaining < 3.1 and retry_after == 0.0
    assert tat_of(client, limiter, "k") == stored, "a read changes nothing"
    assert limiter.acquire("k", cost=3) is True
    remaining, retry_after = limiter.status("k")
    assert remaining < 1 and 0 < retry_after <= 60 / 5


@both_apis
def test_reset_forgets_a_key(client):
    limiter = RateLimiter(client, "reset", rate=1, per=60)
    assert limiter.acquire("k") is True and limiter.acquire("k") is False
    assert limiter.reset("k") is True
    assert limiter.reset("k") is False, "no state left"
    assert limiter.acquire("k") is True


def test_busiest_lists_the_emptiest_keys_first_and_active_count_counts_them(client):
    limiter = RateLimiter(client, "busy", rate=10, per=60)
    for key, cost in (("light", 1), ("heavy", 9), ("middle", 5)):
        assert limiter.acquire(key, cost=cost)
    busiest = limiter.busiest()
    assert [state.key for state in busiest] == ["heavy", "middle", "light"]
    heavy = busiest[0]
    assert isinstance(heavy, KeyState) and 1 <= heavy.remaining < 1.1
    assert heavy.retry_after == 0.0 and 53 < heavy.reset_after <= 54
    assert [state.key for state in limiter.busiest(2)] == ["heavy", "middle"]
    assert limiter.active_count() == 3
    assert limiter.reset("heavy")
    assert limiter.active_count() == 2 and "heavy" not in {s.key for s in limiter.busiest()}
    assert RateLimiter(client, "idle", rate=1, per=1).busiest() == []


def test_idle_keys_vanish_and_the_index_lets_go_of_them_by_itself(redis_client):
    limiter = RateLimiter(redis_client, "idle", rate=1000, per=1, burst=50)
    index = f"{limiter.base}:index"
    assert limiter.acquire("short", cost=50)
    key = f"{limiter.key_base('short')}:tat"
    assert 0 < redis_client.pttl(key) <= 50, "it expires when its bucket is full again"
    assert limiter.active_count() == 1
    assert 0 < redis_client.pttl(index) <= 50, "the index expires with its latest bucket"
    wait_for(lambda: not redis_client.exists(key), what="the key to expire")
    assert limiter.active_count() == 0 and limiter.busiest() == [], "a full bucket is not live"
    wait_for(lambda: not redis_client.exists(index), what="the index to expire")
    assert limiter.acquire("long", cost=1)  # (a bucket of 1 ms: idle again at once)
    assert limiter.acquire("later", cost=50)
    assert limiter.active_count() >= 1
    later = f"{limiter.key_base('later')}:tat"
    wait_for(lambda: not redis_client.exists(later), what="the later bucket to be full")
    # the flush of a key decided on trims the index of full buckets; the
    # limiter of the same name at 1/min gives "last" a bucket live for a
    # minute, so it is live at the flush however starved the machine
    steady = RateLimiter(redis_client, "idle", rate=1, per=60)
    assert steady.acquire("last")
    counts.flush()
    assert redis_client.zrange(index, 0, -1) == [b"last"]


def test_the_decisions_path_writes_only_the_keys_own_bucket(redis_client):
    limiter = RateLimiter(redis_client, "offpath", rate=10, per=60)
    assert limiter.acquire("warm")  # (the script loaded)
    counts.flush()
    ran = commands_run_by(redis_client, lambda: limiter.acquire("k"))
    writes = {name for name in ran if name in ("set", "zadd", "del", "pexpire", "hincrby")}
    assert writes == {"set"}, ran
    assert redis_client.zscore(f"{limiter.base}:index", "k") is None, "the index waits"
    counts.flush()
    assert redis_client.zrange(f"{limiter.base}:index", 0, -1) == [b"warm", b"k"]


def test_any_key_is_listed_even_the_longest_of_one_character(redis_client):
    # A new index starts with a marker member; no key can be that member.
    limiter = RateLimiter(redis_client, "marker", rate=1, per=60)
    for key in ("-" * 80, "-" * MAX_KEY_LENGTH):
        assert limiter.acquire(key)
    assert sorted(len(state.key) for state in limiter.busiest()) == [80, MAX_KEY_LENGTH]
    assert limiter.active_count() == 2


def test_the_index_keeps_at_most_its_limit_dropping_the_fullest(redis_client):
    limiter = RateLimiter(redis_client, "many", rate=1, per=3600)
    index = f"{limiter.base}:index"
    soon = round((redis_time(redis_client) + 60) * 1e6)  # (fuller than a new hour-long debt)
    pipe = redis_client.pipeline(transaction=False)
    for i in range(INDEX_LIMIT):  # (as earlier flushes would leave them)
        pipe.zadd(index, {f"k{i}": soon + i})
    pipe.execute()
    assert limiter.acquire("newest")
    counts.flush()
    assert redis_client.zcard(index) == INDEX_LIMIT
    assert redis_client.zscore(index, "newest") is not None, "the emptiest stay"
    assert redis_client.zscore(index, "k0") is None, "the fullest were dropped"
    assert limiter.active_count() == INDEX_LIMIT


@both_apis
def test_keys_are_isolated_and_any_text_is_a_key(client):
    limiter = RateLimiter(client, "isolated", rate=1, per=60)
    keys = ["", "a", "a|b", "{tag}", "line\nbreak", "ünï", "x" * 1000]
    for key in keys:
        assert limiter.acquire(key) is True, key
    for key in keys:
        assert limiter.acquire(key) is False, key
    other = RateLimiter(client, "isolated-2", rate=1, per=60)
    assert other.acquire("a") is True, "another limiter's keys are its own"
    for key in keys:
        assert client.exists(f"{limiter.key_base(key)}:tat"), "each key has its own bucket"


@both_apis
def test_decide_answers_the_whole_decision(client):
    limiter = RateLimiter(client, "fields", rate=4, per=60, burst=2)
    before = redis_time(client)
    passed = limiter.decide()
    after = redis_time(client)
    assert passed == Decision(
        allowed=True, remaining=1, retry_after=0.0, reset_after=15.0, limit=2, at=passed.at
    )
    assert before <= passed.at <= after, "decided on the Redis clock"
    assert limiter.decide().remaining == 0
    refused = limiter.decide()
    assert (refused.allowed, refused.remaining, refused.limit, refused.waited) == (
        False,
        0,
        2,
        0.0,
    )
    assert 0 < refused.retry_after <= 15 and 15 < refused.reset_after <= 30


@both_apis
def test_limiters_with_different_settings_each_enforce_their_own(client):
    """They share each key's state (its TAT), and each judges it by its own
    rate and burst."""
    strict = RateLimiter(client, "shared", rate=1, per=60)
    loose = RateLimiter(client, "shared", rate=100, per=60, burst=200)
    assert strict.acquire() is True and strict.acquire() is False
    assert loose.acquire() is True, "its own bucket is bigger"
    assert strict.acquire() is False


# -- counts -----------------------------------------------------------------------------


def test_decisions_are_counted_as_grants_and_limited_refusals(redis_client):
    limiter = RateLimiter(redis_client, "counted", rate=20, per=1, burst=1)
    assert limiter.acquire() is True
    assert limiter.acquire() is False
    assert limiter.acquire(timeout=5) is True  # waited
    assert counts.flush() == 0
    totals = limiter.activity().totals
    assert (totals["acquired"], totals["refused_limited"]) == (2, 1)
    assert 0 < totals["wait_us"] <= 50_000, "the wait is observed"
    assert "held_max" not in limiter.activity(1).minutes[-1][1], "it holds nothing"
    assert ("refused_limited", ("limited",)) in COUNTERS["refused"][1]


# -- exactness under concurrency ---------------------------------------------------------

RATE, PER, BURST, RUN_FOR, PROCESSES = 100, 1.0, 10, 3.0, 8


def _hammer(spec: tuple[str, str, int], name: str, start: Any, log: str) -> None:
    client = client_from(spec)
    limiter = RateLimiter(client, name, rate=RATE, per=PER, burst=BURST)
    start.wait(30)
    passed = []
    until = time.monotonic() + RUN_FOR
    while time.monotonic() < until:
        decision = limiter.decide("hot")
        if decision.allowed:
            passed.append(round(decision.at * 1e6))
    with open(log, "w") as out:
        out.write("\n".join(map(str, passed)))
    os._exit(0)


def test_no_window_of_per_seconds_passes_more_than_rate_plus_burst_under_8_processes(
    client, tmp_path
):
    name = "exact"
    start = mp.Barrier(PROCESSES)
    logs = [str(tmp_path / f"p{i}.log") for i in range(PROCESSES)]
    procs = [mp.Process(target=_hammer, args=(spec_of(client), name, start, log)) for log in logs]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(60)
        assert proc.exitcode == 0
    passed = sorted(int(at) for log in logs for at in Path(log).read_text().split())
    per_us = round(PER * 1e6)
    most = max(bisect.bisect_right(passed, at + per_us) - i for i, at in enumerate(passed))
    assert most <= RATE + BURST, f"{most} passed within {PER} s"
    assert most >= RATE, "a full window came close to the limit"
    interval = RateLimiter(client, name, rate=RATE, per=PER, burst=BURST).interval_us
    span = passed[-1] - passed[0]
    assert len(passed) >= BURST + 0.9 * span / interval, "close to the most passed, not far below"
    assert len(passed) <= BURST + span / interval + 1


# -- the lean path -------------------------------------------------------------------------

#: Most Python calls ours may add to one Script call per decision (acquire):
#: 9 on 2026-11-26 (redis-py 8.1), the reply being one string. The timing
#: beside the peers is ``python -m benchmarks ratelimit``'s (``--quick``: a smoke run).
DECISION_BUDGET = 20


def test_a_decision_adds_at_most_the_budgeted_python_calls(redis_client):
    script = redis_client.register_script("return 1")
    floor = calls_per_cycle(lambda: script(["calls-floor"]))
    limiter = RateLimiter(redis_client, "calls", rate=10**6, per=1)
    ours = calls_per_cycle(lambda: limiter.acquire("k")) - floor
    assert ours <= DECISION_BUDGET, f"{ours:.0f} calls a decision over the floor"


@pytest.mark.cluster
def test_a_limiters_keys_spread_over_every_master_each_exact(cluster_client):
    """A limit keyed per user is many buckets: each has its own slot, so a
    3-master cluster carries the decisions of one limit on all three."""
    limiter = RateLimiter(cluster_client, "spread", rate=2, per=60)
    keys = [f"user:{i}" for i in range(600)]
    for key in keys:
        assert limiter.acquire(key, cost=2), key
    assert not any(limiter.acquire(key) for key in keys), "exact per key"
    held: dict[str, int] = {}
    for node in cluster_client.get_primaries():
        found = node.redis_connection.keys("drp:{ratelimit:spread:*}:tat")
        held[node.name] = len(found)
    assert sum(held.values()) == len(keys)
    assert len(held) == 3 and min(held.values()) >= 0.15 * len(keys), held
    assert limiter.active_count() == len(keys)
    assert len(limiter.busiest(1000)) == len(keys)
    assert limiter.reset("user:7") and limiter.acquire("user:7")
