"""ResourcePool behaviour, one sentence of API.md at a time.

Every test runs against a real redis-server and again against the real local
3-master Redis Cluster (the ``client`` fixture is parametrized).
"""

from __future__ import annotations

import collections
import time

import pytest

from django_redis_pool import Lease, ResourcePool, ResourceUnavailable
from django_redis_pool.exceptions import PoolError
from tests.support.primitive_helpers import assert_constructor_does_no_io, expire, expire_now, ops
from tests.support.waiting import wait_for

#: Every test here runs on the blocking API and on the asyncio twins.
pytestmark = pytest.mark.usefixtures("api")


@pytest.fixture
def pool(client):
    p = ResourcePool(client, "printers")
    for r in ("p1", "p2", "p3"):
        p.associate(r)
    return p


def test_constructor_does_no_io():
    assert_constructor_does_no_io(
        lambda client: ResourcePool(client, "x", lease_timeout=3, order="lifo")
    )


def test_associate_returns_false_when_already_in_pool_available_or_leased(client):
    pool = ResourcePool(client, "p")
    assert pool.associate("a") is True
    assert pool.associate("a") is False
    lease = pool.acquire()
    assert lease.resource == "a"
    assert pool.associate("a") is False
    assert pool.total_count() == 1


def test_disassociate_removes_available_and_leased_resources(pool):
    assert pool.disassociate("p1") is True
    assert pool.disassociate("p1") is False
    lease = pool.acquire()
    assert pool.disassociate(lease.resource) is True
    assert pool.has(lease.resource) is False
    assert lease.release() is False, "the holder of a removed resource cannot release it"
    assert pool.total_count() == 1


def test_acquire_returns_a_lease_and_none_when_exhausted(pool):
    leases = [pool.acquire() for _ in range(3)]
    assert all(isinstance(lease, Lease) for lease in leases)
    assert sorted(lease.resource for lease in leases) == ["p1", "p2", "p3"]
    assert pool.acquire() is None
    assert pool.acquire(timeout=0.05) is None


def test_counts_and_membership_follow_leases(pool):
    assert (pool.available_count(), pool.occupied_count(), pool.total_count()) == (3, 0, 3)
    lease = pool.acquire()
    assert (pool.available_count(), pool.occupied_count(), pool.total_count()) == (2, 1, 3)
    assert pool.is_occupied(lease.resource) and not pool.is_available(lease.resource)
    assert pool.has(lease.resource)
    assert not pool.has("nope") and not pool.is_available("nope") and not pool.is_occupied("nope")
    assert lease.resource not in pool.available()
    assert [held.resource for held in pool.leases()] == [lease.resource]
    assert pool.release(lease) is True
    assert pool.is_available(lease.resource)
    assert pool.leases() == []


def test_lease_carries_holder_fence_and_expiry_on_the_redis_clock(client):
    pool = ResourcePool(client, "p", lease_timeout=30)
    pool.associate("a")
    before = _redis_time(client)
    lease = pool.acquire(holder="worker-7")
    after = _redis_time(client)
    assert lease.holder == "worker-7"
    assert isinstance(lease.fence, int)
    assert before + 30 - 0.001 <= lease.expires_at <= after + 30 + 0.001
    listed = pool.leases()[0]
    assert (listed.resource, listed.holder, listed.fence) == ("a", "worker-7", lease.fence)


def test_lease_without_timeout_never_expires(pool):
    lease = pool.acquire()
    assert lease.expires_at is None
    assert pool.leases()[0].expires_at is None


def test_fence_is_strictly_increasing_across_holders(pool):
    fences = []
    for i in range(20):
        lease = pool.acquire(holder=f"h{i}")
        fences.append(lease.fence)
        if i % 3:
            lease.release()
        else:
            pool.release(lease.resource)
    assert fences == sorted(set(fences))


def test_release_with_plain_resource_is_a_force_release(pool):
    lease = pool.acquire()
    assert pool.release(lease.resource) is True
    assert pool.release(lease.resource) is False, "not leased any more"
    assert lease.release() is False, "the old holder lost it"
    assert lease.renew() is False


def test_release_of_a_lease_is_not_confused_with_the_next_holder(pool):
    first = pool.acquire()
    pool.release(first.resource)
    pool.disassociate("p2")
    pool.disassociate("p3")
    second = pool.acquire()
    assert second.resource == first.resource
    assert first.release() is False
    assert pool.is_occupied(second.resource), "the old lease must not free the new holder"
    assert second.release() is True


def test_expired_lease_is_reclaimed_and_old_holder_cannot_release_or_renew(client):
    pool = ResourcePool(client, "p", lease_timeout=30)  # (ended on purpose below)
    pool.associate("a")
    old = pool.acquire()
    assert pool.acquire() is None
    expire_now(old)
    assert pool.is_available("a") and pool.occupied_count() == 0
    new = pool.acquire()
    assert new is not None and new.resource == "a" and new.fence > old.fence
    assert old.release() is False
    assert old.renew() is False
    assert pool.is_occupied("a")


def test_old_holder_release_after_expiry_reclaims_without_claiming_success(client):
    pool = ResourcePool(client, "p", lease_timeout=0.1)
    pool.associate("a")
    old = pool.acquire()
    expire(old)
    assert old.release() is False
    assert pool.is_available("a")


def test_renew_extends_and_by_default_keeps_the_current_duration(client):
    # Renewed every 0.5 s, a 2 s lease outlives its first 2 s: 1.5 s of margin
    # for each step, which a busy machine's stalls do not reach.
    pool = ResourcePool(client, "p", lease_timeout=2)
    pool.associate("a")
    lease = pool.acquire()
    for _ in range(5):
        time.sleep(0.5)
        assert lease.renew() is True
    assert pool.is_occupied("a")
    before = _redis_time(client)
    assert lease.renew(60) is True
    assert lease.expires_at >= before + 60 - 0.001
    before = _redis_time(client)
    assert lease.renew() is True
    assert lease.expires_at >= before + 60 - 0.001, "DEFAULT keeps the 60 s duration"


def test_an_acquires_lease_timeout_overrides_the_pool_default(client):
    pool = ResourcePool(client, "p", lease_timeout=60)
    pool.associate("a")
    lease = pool.acquire(lease_timeout=0.1)
    expire(lease)
    assert lease.renew() is False


def test_gc_reclaims_expired_leases_and_counts_them(client):
    pool = ResourcePool(client, "p", lease_timeout=30)  # (ended on purpose below)
    for r in "abcde":
        pool.associate(r)
    leases = [pool.acquire() for _ in range(4)]
    assert pool.gc() == 0
    expire_now(*leases)
    assert pool.gc() == 4
    assert pool.gc() == 0
    assert pool.available_count() == 5


def test_gc_reclaims_more_than_one_batch(client):
    pool = ResourcePool(client, "big", lease_timeout=30)  # (outlasts 40 acquires)
    for i in range(40):
        pool.associate(f"r{i}")
    leases = [pool.acquire(timeout=0) for _ in range(40)]
    assert all(leases)
    expire_now(*leases)
    assert len(ops(pool).gc(batch=7)[0]) == 40


def test_fifo_hands_out_the_resource_available_longest(client):
    pool = ResourcePool(client, "fifo", order="fifo")
    for r in "abc":
        pool.associate(r)
    assert [pool.acquire().resource for _ in range(3)] == ["a", "b", "c"]
    pool.release("b")
    pool.release("a")
    assert pool.available() == ["b", "a"]
    assert pool.acquire().resource == "b"


def test_lifo_hands_out_the_most_recently_released(client):
    pool = ResourcePool(client, "lifo", order="lifo")
    for r in "abc":
        pool.associate(r)
    assert pool.acquire().resource == "c"
    pool.release("c")
    held = [pool.acquire(), pool.acquire()]
    assert [lease.resource for lease in held] == ["c", "b"]
    held[1].release()
    held[0].release()
    assert pool.acquire().resource == "c"


def test_random_order_is_roughly_uniform(client):
    pool = ResourcePool(client, "random", order="random")
    for r in "abcd":
        pool.associate(r)
    seen = collections.Counter()
    for _ in range(400):
        lease = pool.acquire()
        seen[lease.resource] += 1
        lease.release()
    assert set(seen) == set("abcd")
    assert min(seen.values()) > 50, seen


def test_lease_context_manager_releases_on_exit_and_on_error(pool):
    with pool.hold(timeout=1) as lease:
        assert pool.is_occupied(lease.resource)
    assert pool.is_available(lease.resource)
    with pytest.raises(RuntimeError), pool.hold(timeout=1) as lease:
        raise RuntimeError("boom")
    assert pool.occupied_count() == 0


def test_lease_context_manager_raises_resource_unavailable_on_timeout(pool):
    held = [pool.acquire() for _ in range(3)]
    with pytest.raises(ResourceUnavailable) as info, pool.hold(timeout=0.05):
        pass
    assert isinstance(info.value, TimeoutError) and isinstance(info.value, PoolError)
    assert len(held) == 3


def test_lease_object_is_a_context_manager(pool):
    with pool.acquire() as lease:
        assert pool.is_occupied(lease.resource)
    assert pool.is_available(lease.resource)


def test_auto_renew_keeps_a_short_lease_alive(client):
    # (renewed every 1 s, a 1.5 s lease has 0.5 s of margin, which a busy
    # machine's stalls do not reach)
    pool = ResourcePool(client, "p", lease_timeout=1.5)
    pool.associate("a")
    with pool.hold(auto_renew=True) as lease:
        time.sleep(3.2)  # two lease durations
        assert pool.is_occupied("a")
        assert not lease.lost
    assert pool.is_available("a")


def test_auto_renewal_counts_from_when_the_lease_was_granted(client):
    """Auto-renewal started late (the caller did something else first, or the
    acquire's reply reached a busy process late) still renews 2/3 of the lease
    duration after the grant, not after start_auto_renew: 1.5 + 2 s would be
    past the 3 s lease."""
    pool = ResourcePool(client, "p", lease_timeout=3)
    pool.associate("a")
    lease = pool.acquire()
    time.sleep(1.5)
    lease.start_auto_renew()
    time.sleep(1.8)  # 3.3 s after the grant
    assert pool.is_occupied("a") and not lease.lost, "renewed at 2 s, not at 3.5 s"
    assert lease.release()


def test_auto_renew_marks_the_lease_lost_and_logs_when_it_is_taken_away(client, caplog):
    pool = ResourcePool(client, "p", lease_timeout=0.3)
    pool.associate("a")
    lost = []
    lease = pool.acquire()
    lease.start_auto_renew(on_lost=lost.append)
    pool.release("a")
    # (lost is set, and logged, before on_lost is called: wait for the call)
    wait_for(lambda: lease.lost and lost, what="the next renewal to find the lease gone")
    assert lost == [lease]
    assert "was lost" in caplog.text
    assert lease.release() is False


def test_release_is_idempotent_when_redis_py_retries_it(pool):
    lease = pool.acquire()
    assert ops(pool).release(lease.resource, lease.token, "req-1") == 1
    assert ops(pool).release(lease.resource, lease.token, "req-1") == 1, "a retry agrees"
    assert ops(pool).release(lease.resource, lease.token) == 0, "a new request does not"
    assert pool.available_count() == 3


def test_acquire_is_idempotent_when_redis_py_retries_it(pool):
    engine = ops(pool)
    args = (-1, 0, 0, -1, 2000, "", 1, "h")
    first = engine.run("acquire", "tok-1", *args)
    again = engine.run("acquire", "tok-1", *args)
    assert first == again, "same lease, same fence"
    assert pool.occupied_count() == 1


@pytest.mark.parametrize("bad", ["", "a b", "a{b", "x}", "t\tab", "x" * 201, 7, None, b""])
def test_bad_resource_ids_raise_value_error_naming_them(pool, bad):
    with pytest.raises(ValueError, match="resource"):
        pool.associate(bad)


@pytest.mark.parametrize("bad", ["", "has space", "{tag}", "x" * 201, 3])
def test_bad_pool_names_raise_value_error_naming_them(client, bad):
    with pytest.raises(ValueError) as info:
        ResourcePool(client, bad)
    assert "name" in str(info.value)


def test_bytes_resource_ids_are_decoded(pool):
    assert pool.associate(b"p9") is True
    assert pool.has("p9")


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"timeout": -1}, "timeout"),
        ({"timeout": "soon"}, "timeout"),
        ({"lease_timeout": 0}, "lease_timeout"),
        ({"lease_timeout": -2}, "lease_timeout"),
        ({"priority": 1.5}, "priority"),
        ({"holder": ""}, "holder"),
    ],
)
def test_bad_acquire_arguments_raise_value_error(pool, kwargs, needle):
    with pytest.raises(ValueError, match=needle):
        pool.acquire(**kwargs)


def test_bad_order_and_client_are_rejected(client):
    with pytest.raises(ValueError, match="'newest'"):
        ResourcePool(client, "p", order="newest")
    with pytest.raises(TypeError, match="redis-py client"):
        ResourcePool("redis://localhost", "p")


def test_keys_share_one_hash_tag(client):
    pool = ResourcePool(client, "tagged", lease_timeout=10)
    pool.associate("a")
    pool.acquire()
    keys = [k.decode() for k in client.scan_iter()]
    assert keys and all("{pool:tagged}" in k for k in keys)
    assert all(k.startswith("drp:") for k in keys)


def test_key_prefix_separates_pools(client):
    one = ResourcePool(client, "p", key_prefix="app1")
    two = ResourcePool(client, "p", key_prefix="app2")
    one.associate("a")
    assert two.total_count() == 0


def _redis_time(client) -> float:
    sec, usec = client.time()
    return sec + usec / 1e6


def test_a_released_lease_reads_released_and_not_lost(client):
    pool = ResourcePool(client, "released-not-lost", resources=["r"])
    lease = pool.acquire()
    assert lease is not None and lease.release()
    assert (lease.released, lease.lost, lease.ended) == (True, False, True)
    assert lease.renew() is False and not lease.lost
    taken = pool.acquire()
    assert taken is not None
    assert pool.release("r")  # an operator's force-release: the holder lost it
    assert taken.release() is False
    assert (taken.released, taken.lost) == (True, True)
