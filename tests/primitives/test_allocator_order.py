"""The allocator's three ordering promises (docs/allocator.md, "Order"):

1. a key of higher priority is handed out first;
2. within one priority, the key that has been free the longest goes first
   (freed: from when it was freed, not when it was handed out);
3. shared: keys are handed out in turn;

and that re-adding a key (``extend``, ``pool_sync``), or reporting a healthy
key healthy, does not move it. Pinned by single cases (on a real Redis and
the Cluster), by cases across a wrap of the Redis clock at 2^32 microseconds
(71.6 minutes, where a score that keeps the clock modulo 2^32 restarts), and
by a hypothesis state machine whose model keeps the free order, each of its
runs crossing such a wrap.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from django_redis_pool import Allocator
from tests.support.clockshift import ShiftedClockRedis, shifted_redis  # noqa: F401 (fixture)
from tests.support.waiting import wait_for


def drain(allocator: Allocator) -> list[str]:
    """Every key a run of mallocs hands out until none is free."""
    got = []
    while (key := allocator.malloc_key()) is not None:
        got.append(str(key))
    return got


# -- free order ---------------------------------------------------------------


def test_a_freed_key_is_queued_by_when_it_was_freed(client):
    allocator = Allocator(client, "a", lease_timeout=30)
    allocator.extend(["a", "b", "c"])
    a, b = allocator.malloc_key(), allocator.malloc_key()
    assert (a, b) == ("a", "b")
    allocator.free_keys(b)
    allocator.free_keys(a)
    assert drain(allocator) == ["c", "b", "a"], "b has been free longer than a"


def test_a_key_whose_lock_expired_is_queued_by_when_it_came_back(client):
    allocator = Allocator(client, "a", lease_timeout=30)
    allocator.extend(["a", "b"])
    first = allocator.malloc_key(lease_timeout=0.05)
    assert first == "a"
    allocator.free_keys(allocator.malloc_key())  # b, freed before a's lock ends
    wait_for(lambda: not allocator.is_locked("a"), what="a's lock to end (Redis clock)")
    allocator.gc()
    assert drain(allocator) == ["b", "a"]


def test_re_adding_free_keys_keeps_their_places(client):
    allocator = Allocator(client, "a", lease_timeout=30)
    allocator.extend(["a", "b", "c"])
    allocator.free_keys(allocator.malloc_key())  # order now b, c, a
    allocator.extend(["a", "b", "c"])
    allocator.extend(["b"], lease_timeout=3600)  # a lifetime does not move it either
    assert drain(allocator) == ["b", "c", "a"]


def test_a_key_moved_to_another_priority_keeps_when_it_became_free(client):
    allocator = Allocator(client, "a", lease_timeout=30)
    allocator.extend(["a", "b", "c"])
    allocator.extend(["a"], priority=5)
    allocator.extend(["a"], priority=0)
    assert drain(allocator) == ["a", "b", "c"]


def test_reporting_a_healthy_free_key_healthy_keeps_its_place(client):
    allocator = Allocator(client, "a", lease_timeout=30)
    allocator.extend(["a", "b", "c"])
    assert allocator.report_healthy("a")
    assert drain(allocator) == ["a", "b", "c"]


def test_a_key_back_from_its_cooldown_is_queued_by_when_it_came_back(client):
    allocator = Allocator(client, "a", lease_timeout=30)
    allocator.extend(["a", "b", "c"])
    allocator.report_unhealthy("a", cooldown=60)
    allocator.report_healthy("a")
    assert drain(allocator) == ["b", "c", "a"]


def test_a_held_key_out_of_rotation_stays_out_when_re_added_and_freed(client):
    """Found by the model below: re-adding a held key that was reported
    unhealthy made its free skip the cooldown."""
    allocator = Allocator(client, "a", lease_timeout=30)
    allocator.extend(["a", "b"])
    held = allocator.malloc_key()
    allocator.report_unhealthy(held, cooldown=60)
    allocator.extend([held], priority=3)
    assert allocator.free_keys(held) == 1
    assert drain(allocator) == ["b"]
    assert allocator.state("a") == "unhealthy"


def test_re_adding_a_shared_key_keeps_its_turn(client):
    allocator = Allocator(client, "s", shared=True)
    allocator.extend(["k1", "k2", "k3"])
    assert allocator.malloc_key() == "k1"
    allocator.extend(["k1", "k2", "k3"])
    assert [allocator.malloc_key() for _ in range(3)] == ["k2", "k3", "k1"]


# -- across a wrap of the Redis clock (2^32 microseconds) ---------------------------


@pytest.fixture
def shifted(shifted_redis: ShiftedClockRedis) -> Iterator[ShiftedClockRedis]:  # noqa: F811
    conn = shifted_redis.client()
    conn.flushall()
    conn.close()
    yield shifted_redis


def test_the_free_order_holds_across_a_wrap_of_the_redis_clock(shifted):
    allocator = Allocator(shifted.client(), "a", lease_timeout=3600)
    wrap = shifted.place_before_wrap(500_000)
    allocator.extend(["x", "y"])
    allocator.free_keys(allocator.malloc_key())  # x freed before the wrap
    shifted.place(wrap + 1_000)
    allocator.free_keys(allocator.malloc_key())  # y freed after it
    assert shifted.now_us() > wrap
    assert drain(allocator) == ["x", "y"], "x has been free longer"


def test_shared_keys_keep_their_turns_across_a_wrap_of_the_redis_clock(shifted):
    allocator = Allocator(shifted.client(), "s", shared=True)
    wrap = shifted.place_before_wrap(500_000)
    allocator.extend(["p1", "p2", "p3"])
    assert allocator.malloc_key() == "p1"
    shifted.place(wrap + 1_000)
    got = [allocator.malloc_key() for _ in range(6)]
    assert got == ["p2", "p3", "p1", "p2", "p3", "p1"]


# -- the model --------------------------------------------------------------------

KEYS = ["k0", "k1", "k2", "k3", "k4"]
PRIORITIES = [-1, 0, 3]


class AllocatorOrder(RuleBasedStateMachine):
    """An exclusive allocator against a model of its free order. Each run
    starts 5 s before a wrap of the Redis clock and may jump past it."""

    shared = False
    server: ShiftedClockRedis
    crossings = 0  #: runs that crossed the wrap

    def __init__(self) -> None:
        super().__init__()
        self.conn = self.server.client()
        self.conn.flushall()
        self.allocator = Allocator(self.conn, "m", shared=self.shared, lease_timeout=None)
        self.wrap = self.server.place_before_wrap(5_000_000)
        self.crossed = False
        self.tick = 0
        #: key -> [priority, held, sick, since]: since = when it last became
        #: free (shared: when it was last handed out or added)
        self.keys: dict[str, list] = {}

    def _now(self) -> int:
        self.tick += 1
        return self.tick

    def free_order(self) -> list[str]:
        """The free keys in the order they are handed out."""
        free = [(k, v) for k, v in self.keys.items() if not v[1] and not v[2]]
        return [k for k, _ in sorted(free, key=lambda kv: (-kv[1][0], kv[1][3]))]

    def expected(self) -> str | None:
        order = self.free_order()
        return order[0] if order else None

    @initialize(keys=st.lists(st.sampled_from(KEYS), min_size=1, unique=True))
    def start(self, keys):
        self.add(keys, 0)

    @rule(
        keys=st.lists(st.sampled_from(KEYS), min_size=1, unique=True),
        priority=st.sampled_from(PRIORITIES),
    )
    def add(self, keys, priority):
        self.allocator.extend(keys, priority=priority)
        for key in keys:
            if key not in self.keys:
                self.keys[key] = [priority, False, False, self._now()]
            else:
                self.keys[key][0] = priority  # it keeps its place in the free order

    @rule()
    def malloc(self):
        expected = self.expected()
        got = self.allocator.malloc_key()
        assert (None if got is None else str(got)) == expected
        if got is not None:
            if self.shared:
                self.keys[expected][3] = self._now()
            else:
                self.keys[expected][1] = True

    @precondition(lambda self: not self.shared)
    @rule(data=st.data())
    def free(self, data):
        held = sorted(k for k, v in self.keys.items() if v[1])
        if not held:
            return
        key = data.draw(st.sampled_from(held))
        assert self.allocator.free_keys(key) == 1
        self.keys[key][1] = False
        self.keys[key][3] = self._now()

    @rule(key=st.sampled_from(KEYS))
    def report_unhealthy(self, key):
        assert self.allocator.report_unhealthy(key, cooldown=3600) == (key in self.keys)
        if key in self.keys:
            self.keys[key][2] = True

    @rule(key=st.sampled_from(KEYS))
    def report_healthy(self, key):
        assert self.allocator.report_healthy(key) == (key in self.keys)
        if key in self.keys and self.keys[key][2]:
            self.keys[key][2] = False
            if not self.keys[key][1]:
                self.keys[key][3] = self._now()  # free from now on

    @precondition(lambda self: not self.crossed)
    @rule()
    def cross_the_wrap(self):
        self.server.place(self.wrap + 1_000)
        self.crossed = True
        type(self).crossings += 1

    @invariant()
    def the_snapshot_lists_the_free_keys_in_hand_out_order(self):
        order = self.free_order()
        snapshot = self.allocator.snapshot()
        assert snapshot.available == order and snapshot.available_count == len(order)
        assert self.allocator.snapshot(limit=2, available_offset=1).available == order[1:3]

    def teardown(self):
        self.conn.close()


class SharedAllocatorOrder(AllocatorOrder):
    """The same model for a shared allocator: keys in turn, never held."""

    shared = True


@pytest.mark.parametrize("machine", [AllocatorOrder, SharedAllocatorOrder])
def test_the_order_matches_a_model_across_a_wrap_of_the_redis_clock(shifted, machine):
    machine.server = shifted
    test = machine.TestCase()
    test.settings = settings(
        max_examples=60,
        stateful_step_count=25,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    test.runTest()
    assert machine.crossings > 0, "no run crossed a wrap of the Redis clock"
