"""ResourcePool against a simple in-memory model, driven by hypothesis.

Any sequence of associate / disassociate / acquire / release / force-release /
renew must leave Redis agreeing with the model: the same available resources in
the same (fifo) order, the same holders, and fences that only ever increase.
The second model adds callers queued in Redis, expiries, withdrawals and gc:
who gets each resource handed back.
"""

from __future__ import annotations

import itertools
import uuid
from typing import Any

import hypothesis.strategies as st
from hypothesis import HealthCheck, settings
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from django_redis_pool import ResourcePool
from django_redis_pool.primitives.wire.protocol import Reply
from tests.support.primitive_helpers import ops
from tests.support.waiter_model import FATES, LONG_MS, SERVE_LIMIT, WaiterModel

RESOURCES = st.sampled_from(["a", "b", "c", "d"])
PRIORITIES = st.integers(min_value=0, max_value=1)
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


class PoolWaiterModel(WaiterModel):
    """A fifo pool with callers queued in Redis (as a blocking acquire queues
    them: by priority, then arrival; refused past ``max_waiting``, counting
    live callers), expiries, releases, withdrawals, gc, members added and
    removed while they wait, check-ins, callers giving up what was handed to
    them, and callers dying (see WaiterModel).
    Each step's hand-offs are the model's; after every step, the available
    resources in order, the live holds, the queue, its dead callers and fences
    that only grow."""

    client = None  # set by the test
    FIELDS = ("max_waiting",)

    def __init__(self) -> None:
        super().__init__()
        self.pool = ResourcePool(self.client, f"qmodel{next(_names)}", order="fifo")
        self.engine = ops(self.pool)
        # resource -> the operation that made it available: in that order,
        # then by name (one operation, one Redis time: the same score)
        self.available: dict[str, int] = {}
        self.held: dict[str, str] = {}  # resource -> token (expired ones included)
        self.expired: list[str] = []  # expired holds, in the order they expire
        self.floor = 0  # every fence granted in a step is above those of the steps before
        self.last_fence = 0
        self.ops = 0

    # -- the model's engine

    def op(self, *args: Any) -> Any:
        self.ops += 1
        return self.engine.run(*args)

    def in_order(self) -> list[str]:
        return sorted(self.available, key=lambda r: (self.available[r], r))

    def take(self) -> str | None:
        order = self.in_order()
        if order:
            del self.available[order[0]]
            return order[0]
        return None

    def new_fence(self, fence: int) -> None:
        assert fence > self.floor
        self.last_fence = max(self.last_fence, fence)

    def give(self, r: str, w: dict[str, Any]) -> None:
        self.held[r] = w["token"]
        self.hand(r, w, resource=r)

    def put_back(self, r: str) -> None:
        """To the head live waiter, else available."""
        w = self.next_live()
        if w is None:
            self.available[r] = self.ops
        else:
            self.give(r, w)

    def end(self, r: str) -> None:
        del self.held[r]
        if r in self.expired:
            self.expired.remove(r)
        self.put_back(r)

    def reclaim(self) -> None:
        for r in list(self.expired):
            self.end(r)

    def serve_waiters(self) -> bool:
        """Serve the queue from the available resources; True if it gave up
        with callers still queued (a hand-off found only dead ones)."""
        for _ in range(SERVE_LIMIT):
            if not self.queue:
                return False
            r = self.take()
            if r is None:
                return False
            w = self.next_live()
            if w is None:
                self.available[r] = self.ops
                return bool(self.queue)
            self.give(r, w)
        return bool(self.queue)

    def newcomer(self, token: str) -> str | None:
        """The resource a newcomer gets at once, or None: never one while
        callers it was not served after are queued."""
        self.reclaim()
        if self.serve_waiters():
            return None
        r = self.take()
        if r is not None:
            self.held[r] = token
        return r

    def granted(self, reply: Any, resource: str | None) -> None:
        if resource is None:
            return
        assert isinstance(reply, str) and reply.startswith(f"{resource}\n"), reply
        self.new_fence(int(reply.split("\n", 1)[1].split("|")[1]))

    def ask(self, token: str, priority: int, fate: str, max_waiting: int = -1) -> None:
        self.ops += 1
        reply = self.request(token, priority, fate, max_waiting, 1, "model")
        resource = self.newcomer(token)
        self.granted(reply, resource)
        if resource is not None:
            return
        if not self.room_to_wait(max_waiting):
            assert reply == Reply.FULL, reply
        else:
            assert isinstance(reply, int), reply
            self.queued(token, priority, fate, max_waiting=max_waiting)

    def quiet(self) -> bool:
        return not self.available and not self.expired

    def hold_of(self, resource: str) -> Any:
        live = resource in self.held and resource not in self.expired
        return self.held[resource] if live else None

    def expire_hold(self, resource: str) -> None:
        self.expire_in_redis(resource)
        self.expired.append(resource)

    # -- rules

    @rule(r=RESOURCES)
    def associate(self, r: str) -> None:
        expected = r not in self.available and r not in self.held
        self.ops += 1
        assert self.pool.associate(r) is expected
        if expected:
            self.put_back(r)

    @rule(r=RESOURCES)
    def disassociate(self, r: str) -> None:
        expected = r in self.available or r in self.held
        self.ops += 1
        assert self.pool.disassociate(r) is expected
        self.available.pop(r, None)
        self.held.pop(r, None)
        if r in self.expired:
            self.expired.remove(r)

    @rule(priority=PRIORITIES)
    def acquire_now(self, priority: int) -> None:
        token = uuid.uuid4().hex
        reply = self.op("acquire", token, LONG_MS, priority, 0, -1, LONG_MS, "", 1, "model")
        resource = self.newcomer(token)
        self.granted(reply, resource)
        if resource is None:
            assert reply == Reply.NONE, reply

    @rule(priority=PRIORITIES, max_waiting=st.sampled_from([-1, 0, 1, 2]), fate=FATES)
    def queue_caller(self, priority: int, max_waiting: int, fate: str) -> None:
        """A caller that waits (``max_waiting``: -1 none), queued by the
        acquire itself (its wake list is not read here)."""
        self.ask(uuid.uuid4().hex, priority, fate, max_waiting)

    def check_in_serves(self) -> None:
        self.ops += 1  # (the wait operation)
        self.reclaim()
        self.serve_waiters()

    def lasting(self, w: dict[str, Any]) -> str | None:
        return w["resource"] if self.held.get(w["resource"]) == w["token"] else None

    @precondition(lambda self: self.handed)
    @rule(data=st.data())
    def give_up_handed(self, data: st.DataObject) -> None:
        """A caller handed a resource gives up before reading it: the resource
        goes to the next caller in line, or back to the available ones."""
        w = data.draw(st.sampled_from(self.handed))
        self.handed.remove(w)
        mine = self.held.get(w["resource"]) == w["token"]
        assert self.op("withdraw", w["token"]) == int(mine)
        if mine:
            self.end(w["resource"])

    @precondition(lambda self: self.held)
    @rule(data=st.data())
    def release(self, data: st.DataObject) -> None:
        r = data.draw(st.sampled_from(sorted(self.held)))
        live = r not in self.expired
        got = self.op("release", self.held[r], uuid.uuid4().hex, "", 0, r)
        assert got == (1 if live else 0), (r, got)
        self.end(r)  # (an expired one: reclaimed on the way)

    @precondition(lambda self: set(self.held) - set(self.expired))
    @rule(data=st.data())
    def expire(self, data: st.DataObject) -> None:
        self.expire_hold(data.draw(st.sampled_from(sorted(set(self.held) - set(self.expired)))))

    @rule()
    def gc(self) -> None:
        self.ops += 1
        _, dropped = self.engine.gc()
        assert [w.priority for w in dropped] == [w["priority"] for w in self.drop_dead()]
        self.reclaim()
        self.serve_waiters()

    # -- after every step

    @invariant()
    def agrees_with_model(self) -> None:
        self.pass_deaths()
        served = sorted({r for r, _ in self.served})
        for r in served:
            self.new_fence(self.pool.lease_of(r).fence)
        self.confirm_served()
        self.floor = self.last_fence
        # (an expired hold counts as available until it is reclaimed)
        assert self.pool.available() == self.in_order() + self.expired
        live = {r: t for r, t in self.held.items() if r not in self.expired}
        assert {lease.resource: lease.token for lease in self.pool.leases()} == live
        assert [w.priority for w in self.pool.waiters()] == [w["priority"] for w in self.ordered()]
        self.agrees_on_dead()


def test_a_pool_with_waiters_matches_the_model(redis_client):
    PoolWaiterModel.client = redis_client
    run_state_machine_as_test(
        PoolWaiterModel,
        settings=WaiterModel.SETTINGS,
    )
