"""ResourcePool against a simple in-memory model, driven by hypothesis.

Any sequence of associate / disassociate / acquire / release / force-release /
renew must leave Redis agreeing with the model: the same available resources in
the same (fifo) order, the same holders, and fences that only ever increase.
"""

from __future__ import annotations

import itertools

import hypothesis.strategies as st
from hypothesis import HealthCheck, settings
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    invariant,
    rule,
    run_state_machine_as_test,
)

from django_redis_pool import ResourcePool

RESOURCES = st.sampled_from(["a", "b", "c", "d"])
_names = itertools.count()


class PoolModel(RuleBasedStateMachine):
    client = None  # set by the test
    leases = Bundle("leases")

    def __init__(self) -> None:
        super().__init__()
        self.pool = ResourcePool(self.client, f"model{next(_names)}", order="fifo")
        self.available: list[str] = []  # in fifo order
        self.held: dict[str, str] = {}  # resource -> token of the current lease
        self.last_fence = 0

    @rule(r=RESOURCES)
    def associate(self, r):
        expected = r not in self.available and r not in self.held
        assert self.pool.associate(r) is expected
        if expected:
            self.available.append(r)

    @rule(r=RESOURCES)
    def disassociate(self, r):
        expected = r in self.available or r in self.held
        assert self.pool.disassociate(r) is expected
        if r in self.available:
            self.available.remove(r)
        self.held.pop(r, None)

    @rule(target=leases)
    def acquire(self):
        lease = self.pool.acquire(holder="model")
        if not self.available:
            assert lease is None
            return None
        expected = self.available.pop(0)
        assert lease is not None and lease.resource == expected
        assert lease.fence > self.last_fence
        self.last_fence = lease.fence
        self.held[expected] = lease.token
        return lease

    @rule(lease=consumes(leases))
    def release(self, lease):
        if lease is None:
            return
        current = self.held.get(lease.resource) == lease.token
        assert lease.release() is current
        if current:
            del self.held[lease.resource]
            self.available.append(lease.resource)

    @rule(r=RESOURCES)
    def force_release(self, r):
        expected = r in self.held
        assert self.pool.release(r) is expected
        if expected:
            del self.held[r]
            self.available.append(r)

    @rule(lease=leases)
    def renew(self, lease):
        if lease is None:
            return
        current = self.held.get(lease.resource) == lease.token
        assert lease.renew() is (current and not lease.lost)

    @invariant()
    def agrees_with_model(self):
        assert self.pool.available() == self.available
        assert {lease.resource: lease.token for lease in self.pool.leases()} == self.held
        assert self.pool.available_count() == len(self.available)
        assert self.pool.occupied_count() == len(self.held)
        assert self.pool.total_count() == len(self.available) + len(self.held)


def test_pool_matches_model(client):
    PoolModel.client = client
    run_state_machine_as_test(
        PoolModel,
        settings=settings(
            max_examples=40,
            stateful_step_count=25,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )
