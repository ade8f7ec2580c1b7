"""Allocator behaviour, one sentence of API.md at a time, and where it
deliberately differs from redis-allocator 0.7.0.

Every test runs against a real redis-server and again against the real local
3-master Redis Cluster (the ``client`` fixture is parametrized).
"""

from __future__ import annotations

import collections
import time

import pytest

from django_redis_pool import AllocatedKey, Allocator, AllocatorObject
from django_redis_pool.primitives.leased.allocator import MAX_KEY_PRIORITY
from tests.support.primitive_helpers import (
    assert_constructor_does_no_io,
    expire_now,
    ops,
    redis_time,
)
from tests.support.waiting import wait_for

#: Every test here runs on the blocking API and on the asyncio twins.
pytestmark = pytest.mark.usefixtures("api")


@pytest.fixture
def proxies(client):
    allocator = Allocator(client, "proxies", lease_timeout=30)
    allocator.extend(["p1", "p2", "p3"])
    return allocator


def test_constructor_does_no_io():
    assert_constructor_does_no_io(
        lambda client: Allocator(client, "x", shared=True, lease_timeout=0.5, soft_bind_timeout=10)
    )


# -- keys ------------------------------------------------------------------------


def test_extend_adds_keys_and_counts_only_the_new_ones(client):
    allocator = Allocator(client, "a")
    assert allocator.extend(["k1", "k2"]) == 2
    assert allocator.extend(["k2", "k3", "k3"]) == 1
    assert allocator.keys() == ["k1", "k2", "k3"]
    assert len(allocator) == 3
    assert "k2" in allocator and "k9" not in allocator and 42 not in allocator


def test_shrink_removes_free_and_held_keys(proxies):
    held = proxies.malloc_key()
    assert proxies.shrink([held, "p9"]) == 1
    assert str(held) not in proxies
    assert proxies.free_keys(held) == 0, "the holder of a removed key frees nothing"
    assert held.lease.renew() is False


def test_assign_replaces_the_whole_set(proxies):
    held = proxies.malloc_key()
    proxies.assign(["p1", "p4"])
    assert proxies.keys() == ["p1", "p4"]
    if held != "p1":
        assert proxies.is_locked(held) is False


def test_a_key_with_a_lifetime_leaves_when_it_ends(client):
    allocator = Allocator(client, "a")
    allocator.extend(["forever"])
    # The floor: a malloc and a free, once connected and the scripts loaded (the
    # first call of a Cluster's asyncio twin connects to every node); the
    # lifetime outlasts many, however busy the machine is.
    assert allocator.free_keys(allocator.malloc_key()) == 1
    started = time.monotonic()
    assert allocator.free_keys(allocator.malloc_key()) == 1
    lifetime = max(0.3, 20 * (time.monotonic() - started))
    before = redis_time(client)  # the lifetime starts later, with the extend
    allocator.extend(["brief"], lease_timeout=lifetime, priority=1)
    got = allocator.malloc_key()
    # Whether the malloc came before the end (Redis clock; 2 ms for rounding to
    # ms): after a long pause of this process it could not tell.
    if redis_time(client) < before + lifetime - 0.002:
        assert got == "brief", "a key is handed out until its lifetime ends"
    allocator.free_keys(got)
    start = redis_time(client)
    wait_for(
        lambda: redis_time(client) > start + lifetime + 0.05,
        lifetime + 10,
        what="the lifetime to end",
    )
    assert allocator.malloc_key() == "forever", "an ended key is never handed out"
    assert "brief" not in allocator


def test_fractional_lifetimes_are_milliseconds_not_forever(client):
    allocator = Allocator(client, "a")
    allocator.extend(["k"], lease_timeout=0.5)
    start = redis_time(client)
    wait_for(lambda: redis_time(client) > start + 0.55, what="half a second")
    assert allocator.gc(10) == 1
    assert len(allocator) == 0


def test_re_adding_a_held_key_keeps_its_lock(proxies):
    """redis-allocator 0.7.0 drops the lock of a key added again."""
    held = proxies.malloc_key()
    assert proxies.extend([held], priority=5) == 0
    assert proxies.is_locked(held)
    assert held not in [proxies.malloc_key() for _ in range(3)]
    assert proxies.free_keys(held) == 1


def test_bad_keys_and_priorities_name_the_value(client):
    allocator = Allocator(client, "a")
    with pytest.raises(ValueError, match="not one str"):
        allocator.extend("k1")
    with pytest.raises(ValueError, match="'a b'"):
        allocator.extend(["a b"])
    with pytest.raises(ValueError, match="priority"):
        allocator.extend(["k"], priority=MAX_KEY_PRIORITY + 1)
    with pytest.raises(ValueError, match="shared"):
        Allocator(client, "a", shared="yes")


# -- exclusive malloc ------------------------------------------------------------


def test_malloc_key_locks_a_free_key_and_returns_none_when_none_is_free(proxies):
    keys = [proxies.malloc_key() for _ in range(3)]
    assert sorted(keys) == ["p1", "p2", "p3"]
    assert all(isinstance(k, AllocatedKey) and proxies.is_locked(k) for k in keys)
    assert proxies.malloc_key() is None, "malloc never waits"


def test_an_allocated_key_is_a_str_with_fence_and_holder(proxies):
    key = proxies.malloc_key(holder="worker-7")
    assert key == str(key) and hash(key) == hash(str(key)) and {key: 1}[str(key)] == 1
    assert key.holder == "worker-7"
    later = [proxies.malloc_key() for _ in range(2)]
    assert all(k.fence > key.fence for k in later), "fences only increase"


def test_an_expired_lock_comes_back(client):
    allocator = Allocator(client, "a", lease_timeout=30)  # (ended on purpose below)
    allocator.extend(["only"])
    first = allocator.malloc_key()
    assert allocator.malloc_key() is None
    expire_now(first.lease)
    second = allocator.malloc_key()
    assert second == "only" and second.fence > first.fence


def test_a_stale_free_never_frees_the_next_holders_key(client):
    """redis-allocator 0.7.0 lets a holder whose lock expired free the next
    holder's key."""
    allocator = Allocator(client, "a", lease_timeout=30)
    allocator.extend(["only"])
    stale = allocator.malloc_key()
    expire_now(stale.lease)
    current = allocator.malloc_key()
    assert current == "only"
    assert allocator.free_keys(stale) == 0
    assert allocator.is_locked("only"), "the next holder still holds it"
    assert allocator.free_keys(current) == 1


def test_a_plain_str_frees_whoever_holds_it(proxies):
    held = proxies.malloc_key()
    assert proxies.free_keys(str(held)) == 1
    assert not proxies.is_locked(held)
    assert held.lease.renew() is False


def test_fractional_lock_timeouts_are_honoured(client):
    allocator = Allocator(client, "a")
    allocator.extend(["k"])
    before = redis_time(client)
    key = allocator.malloc_key(lease_timeout=0.25)
    after = redis_time(client)
    assert key.lease.lease_timeout == 0.25
    # (the lease was stamped between the two readings; Redis keeps milliseconds)
    assert before + 0.25 - 0.001 <= key.lease.expires_at <= after + 0.25 + 0.001


def test_lease_timeout_none_locks_until_freed(client):
    allocator = Allocator(client, "a", lease_timeout=None)
    allocator.extend(["k"])
    key = allocator.malloc_key()
    assert key.lease.expires_at is None
    assert allocator.gc(10) == 0 and allocator.is_locked("k")


def test_higher_priority_keys_are_handed_out_first(client):
    allocator = Allocator(client, "a")
    allocator.extend(["low-1", "low-2"], priority=-1)
    allocator.extend(["mid"])
    allocator.extend(["top"], priority=10)
    order = [allocator.malloc_key() for _ in range(4)]
    assert order[:2] == ["top", "mid"]
    assert sorted(order[2:]) == ["low-1", "low-2"]


def test_a_freed_key_goes_behind_its_equals(client):
    allocator = Allocator(client, "a")
    allocator.extend(["k1", "k2", "k3"])
    first = allocator.malloc_key()
    allocator.free_keys(first)
    assert allocator.malloc_key() != first, "the key free the longest goes first"


def test_changing_a_free_keys_priority_moves_it(client):
    allocator = Allocator(client, "a")
    allocator.extend(["k1", "k2"])
    allocator.extend(["k2"], priority=3)
    assert allocator.malloc_key() == "k2"


def test_a_held_keys_new_priority_applies_when_it_is_freed(client):
    """A lease keeps its key's priority so that its free reads no meta: a
    priority changed meanwhile must replace it."""
    allocator = Allocator(client, "a", lease_timeout=30)
    allocator.extend(["k1", "k2"])
    held = allocator.malloc_key()
    assert held == "k1"
    allocator.extend([held], priority=5)
    assert allocator.free_keys(held) == 1
    assert allocator.malloc_key() == "k1", "the freed key goes to its new priority"


@pytest.mark.parametrize("timer", ["lease", "lifetime", "cooldown"])
def test_a_timer_set_after_a_malloc_is_kept(client, timer):
    """A malloc skips the timer indexes while nothing is due (the earliest due
    time is kept beside the leases): a timer set since must still end on time."""
    allocator = Allocator(client, "a", lease_timeout=None)
    allocator.extend(["k1", "k2"])
    allocator.free_keys(allocator.malloc_key())  # the due time is now known: none
    if timer == "lease":
        short = allocator.malloc_key(lease_timeout=0.3)
        assert allocator.malloc_key() is not None  # the other key, for ever
    elif timer == "lifetime":
        allocator.extend(["k1"], lease_timeout=0.3, priority=1)
    else:
        assert allocator.report_unhealthy("k1", cooldown=0.3)
    start = redis_time(client)
    wait_for(lambda: redis_time(client) > start + 0.35, what="the timer to end")
    got = allocator.malloc_key()
    if timer == "lease":
        assert got == short and got.fence > short.fence, "the expired lease was reclaimed"
    elif timer == "lifetime":
        assert got == "k2" and "k1" not in allocator, "the ended key was dropped"
    else:
        assert {got, allocator.malloc_key()} == {"k1", "k2"}, "the cooldown ended"


# -- health ----------------------------------------------------------------------


def test_an_unhealthy_key_sits_out_its_cooldown(client):
    allocator = Allocator(client, "a")
    allocator.extend(["k1", "k2"])
    # (a cooldown no busy machine outlasts between the report and the mallocs)
    assert allocator.report_unhealthy("k1", cooldown=60)
    assert allocator.state("k1") == "unhealthy"
    assert allocator.unhealthy()[0] == 1
    got = [allocator.malloc_key() for _ in range(2)]
    assert got == ["k2", None], "unhealthy keys are never handed out"
    assert allocator.report_unhealthy("k1", cooldown=0.3)  # a new report replaces it
    reported = redis_time(client)  # (after the report: its cooldown ends before +0.3)
    wait_for(lambda: redis_time(client) > reported + 0.3, what="the cooldown")
    assert allocator.malloc_key() == "k1"


def test_a_held_key_reported_unhealthy_stays_with_its_holder_until_freed(proxies):
    held = proxies.malloc_key()
    assert proxies.report_unhealthy(held, cooldown=60)
    assert proxies.is_locked(held)
    assert proxies.free_keys(held) == 1
    assert proxies.state(held) == "unhealthy"
    assert held not in [proxies.malloc_key() for _ in range(3)]


def test_report_healthy_ends_a_cooldown(proxies):
    proxies.report_unhealthy("p1", cooldown=60)
    assert proxies.report_healthy("p1")
    assert proxies.state("p1") == "free"
    assert proxies.report_unhealthy("nope", cooldown=1) is False


def test_a_cooldown_must_be_positive(proxies):
    for bad in (0, -1, None, "1"):
        with pytest.raises(ValueError, match="cooldown"):
            proxies.report_unhealthy("p1", cooldown=bad)


# -- soft binding ----------------------------------------------------------------


def test_a_name_gets_its_bound_key_again_while_it_is_free(proxies):
    first = proxies.malloc_key(name="alice")
    assert proxies.get_soft_bind("alice") == first
    proxies.free_keys(first)
    proxies.malloc_key()  # someone else takes the key free the longest
    again = proxies.malloc_key(name="alice")
    assert again == first


def test_a_bound_key_that_is_busy_moves_the_binding(proxies):
    first = proxies.malloc_key(name="alice")
    other = proxies.malloc_key(name="alice")
    assert other is not None and other != first
    assert proxies.get_soft_bind("alice") == other


def test_a_binding_lives_cache_timeout(client):
    allocator = Allocator(client, "a", soft_bind_timeout=30)
    allocator.extend(["k1", "k2"])
    key = allocator.malloc_key(name="bob", cache_timeout=0.2)
    start = redis_time(client)
    wait_for(lambda: redis_time(client) > start + 0.25, what="the binding to expire")
    assert allocator.get_soft_bind("bob") is None
    assert allocator.free_keys(key) == 1


def test_bindings_of_names_never_seen_again_go_without_gc(redis_client):
    """An allocator bound per client address: each named malloc drops up to
    two expired bindings, so they never pile up, gc or not."""
    client = redis_client
    allocator = Allocator(client, "per-address", soft_bind_timeout=30)
    stored = f"{ops(allocator).base}:bind"
    allocator.extend(["k1", "k2"])
    for i in range(40):  # 40 addresses seen once (bound by hand: none dropped meanwhile)
        allocator.update_soft_bind(f"10.0.0.{i}", "k1", cache_timeout=0.05)
    start = redis_time(client)
    wait_for(lambda: redis_time(client) > start + 0.1, what="the bindings to expire")
    for i in range(15):  # the next 15 clients
        key = allocator.malloc_key(name=f"10.0.1.{i}", cache_timeout=30)
        assert key is not None and allocator.free_keys(key) == 1
    assert client.hlen(stored) == 40 + 15 - 2 * 15, "each new binding dropped two expired"
    for i in range(10):  # 10 more: the last 10 expired ones go
        key = allocator.malloc_key(name=f"10.0.2.{i}", cache_timeout=30)
        assert key is not None and allocator.free_keys(key) == 1
    assert client.hlen(stored) == 25, "only live bindings are left"
    assert allocator.soft_binds()[0] == 25


def test_soft_bindings_can_be_set_read_and_dropped(proxies):
    proxies.update_soft_bind("carol", "p3")
    assert proxies.get_soft_bind("carol") == "p3"
    assert proxies.malloc_key(name="carol") == "p3"
    total, rows = proxies.soft_binds()
    assert total == 1 and rows[0][:2] == ("carol", "p3")
    assert proxies.unbind_soft_bind("carol") is True
    assert proxies.unbind_soft_bind("carol") is False
    assert proxies.get_soft_bind("carol") is None


# -- malloc and AllocatorObject ----------------------------------------------------


class Browser:
    def __init__(self, name=None):
        self.name = name
        self.config = None

    def set_config(self, key, params):
        self.config = (str(key), params)


def test_malloc_configures_the_object_and_frees_on_close(proxies):
    browser = Browser("dave")
    with proxies.malloc(obj=browser, params={"region": "eu"}) as allocated:
        assert isinstance(allocated, AllocatorObject)
        assert browser.config == (str(allocated.key), {"region": "eu"})
        assert allocated.params == {"region": "eu"}
        assert proxies.get_soft_bind("dave") == allocated.key
        assert allocated.update(60) is True
        assert proxies.is_locked(allocated.key)
    assert not proxies.is_locked(allocated.key)
    assert allocated.close() is False, "closing twice frees nothing"


def test_free_takes_an_allocator_object(proxies):
    allocated = proxies.malloc(obj=object())
    assert proxies.free(allocated) is True
    assert proxies.free(allocated) is False


def test_malloc_returns_none_when_nothing_is_free(proxies):
    for _ in range(3):
        proxies.malloc()
    assert proxies.malloc(obj=Browser()) is None


# -- shared ----------------------------------------------------------------------


def test_shared_keys_are_handed_out_in_turn_and_never_locked(client):
    allocator = Allocator(client, "s", shared=True)
    allocator.extend(["k1", "k2", "k3"])
    got = [allocator.malloc_key() for _ in range(6)]
    assert collections.Counter(got) == {"k1": 2, "k2": 2, "k3": 2}
    assert got[:3] == got[3:]
    assert not any(allocator.is_locked(k) for k in ("k1", "k2", "k3"))
    assert allocator.free_keys(*got) == 0
    assert got[1].fence > got[0].fence


def test_shared_soft_binding_returns_the_bound_key(client):
    allocator = Allocator(client, "s", shared=True)
    allocator.extend(["k1", "k2", "k3"])
    first = allocator.malloc_key(name="erin")
    assert [allocator.malloc_key(name="erin") for _ in range(3)] == [first] * 3


# -- gc --------------------------------------------------------------------------


def test_gc_checks_at_most_count_entries_per_call(client):
    # (the locks outlast the 25 mallocs, however busy the machine is: an expired
    # one would be taken again by the next malloc; then they are ended together)
    allocator = Allocator(client, "a", lease_timeout=30)
    allocator.extend([f"k{i}" for i in range(25)])
    keys = [allocator.malloc_key() for _ in range(25)]
    expire_now(*(key.lease for key in keys))
    assert allocator.gc(10) == 10
    assert allocator.gc(10) == 10
    assert allocator.gc(10) == 5
    assert allocator.gc(10) == 0
    assert len([k for k in keys if allocator.is_locked(k)]) == 0


def test_malloc_reclaims_lazily(client):
    allocator = Allocator(client, "a", lease_timeout=30)  # (ended on purpose below)
    allocator.extend(["k"])
    first = allocator.malloc_key()
    expire_now(first.lease)
    assert allocator.malloc_key() == "k"


def test_a_retried_malloc_gets_the_same_key(client):
    """What redis-py's retry after a dropped connection does: the same request
    (token) run twice is granted once."""
    allocator = Allocator(client, "a")
    allocator.extend(["k1", "k2"])
    engine = ops(allocator)
    first = engine.run("alloc_malloc", "tok-1", 30000, 1000, "0\n\nme")
    again = engine.run("alloc_malloc", "tok-1", 30000, 1000, "0\n\nme")
    assert first == again
    assert allocator.state("k2" if first.startswith("k1\n") else "k1") == "free"


def test_snapshot_counts_keys_held_free_and_out_of_rotation(proxies):
    proxies.malloc_key()
    proxies.report_unhealthy("p3", cooldown=60)
    snap = proxies.snapshot()
    assert (snap.size, snap.held_count, snap.free) == (3, 1, 1)
    assert len(snap.leases) == 1 and snap.waiters == []


#: The brief keys' lifetime in the bounded-work test, in seconds.
LIFETIME = 5.0


def test_one_malloc_call_does_bounded_work_whatever_has_expired(redis_client):
    """redis-allocator 0.7.0 walks every expired head in one call (a 750 ms stall
    at 50,000). Here one script call drops at most 16 + 64 ended keys and
    answers 'more'; malloc_key calls again until it reaches a live key, so
    Redis serves other clients in between."""
    allocator = Allocator(redis_client, "a", lease_timeout=0.05)
    # (a lifetime that the 100 mallocs below do not outlast on a busy machine)
    allocator.extend([f"brief-{i}" for i in range(5_000)], lease_timeout=LIFETIME, priority=1)
    allocator.extend(["lasting"])
    held = [allocator.malloc_key() for _ in range(100)]  # their locks expire too
    assert all(k.startswith("brief-") for k in held)
    extended = redis_time(redis_client)  # (the last brief key was stamped before)
    wait_for(
        lambda: redis_time(redis_client) > extended + LIFETIME + 0.05,
        timeout=LIFETIME + 30,
        what="everything to expire",
    )
    before = len(allocator)
    assert ops(allocator).run("alloc_malloc", "t-1", 50, 1000, "0\n\nme") == "more"
    assert 0 < before - len(allocator) <= 16 + 64
    assert allocator.malloc_key() == "lasting"
    assert allocator.keys() == ["lasting"]
