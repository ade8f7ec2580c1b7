"""A lock (reentrant or not) against a Python model of it: holders asking at
once, callers queued in Redis as a blocking acquire queues them (several of one
holder too), their check-ins, releases, expiries, gc, withdrawals and callers
giving up what was handed (or shared) to them; after every step the hold, its
count, its fence and the queue must be the model's.

It runs the engine's operations directly (as ``test_permits``' model does), so
that a queued caller stays queued while the next step runs: the waiting, its
wake-up and the Python API around them are tested in ``test_lock.py``.
"""

from __future__ import annotations

import itertools
import uuid
from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis.stateful import (
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from django_redis_pool import Lock
from django_redis_pool.primitives.wire.protocol import Reply
from tests.support.primitive_helpers import ops
from tests.support.waiter_model import FATES, INF, LONG_MS, SLOT_STEPS, WaiterModel

HOLDERS = st.sampled_from(["a", "b"])
PRIORITIES = st.integers(min_value=0, max_value=1)
_names = itertools.count()


class LockModel(WaiterModel):
    """One lock; ``reentrant`` is set by the test."""

    client: Any = None
    reentrant = False
    FIELDS = ("holder", "max_waiting")

    def __init__(self) -> None:
        super().__init__()
        self.lock = Lock(self.client, f"lock-model{next(_names)}", reentrant=self.reentrant)
        self.engine = ops(self.lock)
        self.holder: str | None = None
        self.count = 0  # a reentrant hold's count
        self.expired = False
        self.fence = 0  # the fence of the hold (0: none yet)
        self.last_fence = 0
        self.hold = 0  # which hold it is (one more for each grant)

    # -- the model's engine

    def grant(self, holder: str) -> None:
        self.holder, self.count, self.expired = holder, 1, False
        self.hold += 1
        self.fence = -1  # (a new fence: read back from Redis, checked to grow)
        if self.reentrant:  # its queued callers share the hold, each counted (the dead dropped)
            for w in [w for w in self.ordered() if w["holder"] == holder]:
                if w["dead"]:
                    self.drop(w)
                    continue
                self.queue.remove(w)
                self.handed_to(w, share=True)
                self.count += 1

    def handed_to(self, w: dict[str, Any], *, share: bool) -> None:
        self.hand(w["holder"], w, hold=self.hold, share=share)

    def serve(self) -> float | None:
        """The head live caller gets a free lock (the dead before it dropped);
        the priority a newcomer must pass (INF: the lock is held, or the
        step limit was reached; None: nobody live is queued)."""
        if not self.queue:
            return None
        for _ in range(SLOT_STEPS):
            if self.holder is not None:
                return INF
            if not self.queue:
                return None
            w = self.ordered()[0]
            if w["dead"]:
                self.drop(w)
                continue
            self.queue.remove(w)
            self.grant(w["holder"])
            self.handed_to(w, share=False)
        return INF

    def end(self) -> None:
        self.holder, self.count, self.expired = None, 0, False
        self.serve()

    def acquire(self, holder: str, priority: int) -> str:
        """ "granted", "held" or "not": as acquire.lua answers a newcomer."""
        if self.holder is not None and self.expired:
            self.end()  # (its own expired hold first, or reclaimed on the way)
        ahead = self.serve()
        if self.holder == holder:
            if not self.reentrant:
                return "held"
            self.count += 1
            return "granted"
        if self.holder is None and (ahead is None or priority > ahead):
            self.grant(holder)
            return "granted"
        return "not"

    def caller(self, data: st.DataObject) -> dict[str, Any]:
        return {"holder": data.draw(HOLDERS)}

    def ask(
        self, token: str, priority: int, fate: str, holder: str = "a", max_waiting: int = -1
    ) -> None:
        reply = self.request(token, priority, fate, max_waiting, 1, holder)
        expected = self.acquire(holder, priority)
        if expected == "not" and not self.room_to_wait(max_waiting):
            assert reply == Reply.FULL, reply
        elif expected == "not":
            assert isinstance(reply, int), reply
            self.queued(token, priority, fate, holder=holder, max_waiting=max_waiting)
        elif expected == "held":
            assert reply == Reply.HELD
        else:
            assert isinstance(reply, str) and reply.startswith(f"{holder}\n"), reply
            self.confirm_reply(reply)

    def quiet(self) -> bool:
        return self.holder is not None and not self.expired

    def hold_of(self, resource: str) -> Any:
        live = self.holder == resource and not self.expired
        return self.hold if live else None

    def expire_hold(self, resource: str) -> None:
        self.expire_in_redis(resource)
        self.expired = True

    # -- rules

    @rule(holder=HOLDERS, priority=PRIORITIES)
    def acquire_now(self, holder: str, priority: int) -> None:
        expected = self.acquire(holder, priority)
        reply = self.engine.run(
            "acquire", uuid.uuid4().hex, LONG_MS, priority, 0, -1, LONG_MS, "", 1, holder
        )
        got = "granted" if "\n" in str(reply) else {Reply.HELD: "held", Reply.NONE: "not"}[reply]
        assert got == expected, (holder, reply)
        self.confirm_reply(reply)

    @rule(
        holder=HOLDERS,
        priority=PRIORITIES,
        fate=FATES,
        max_waiting=st.sampled_from([-1, -1, 0, 1, 2]),
    )
    def queue_caller(
        self, holder: str, priority: int, fate: str = "lives", max_waiting: int = -1
    ) -> None:
        """A caller that waits, queued by the acquire operation itself, as
        ``acquire(timeout=60)`` queues it (its wake list is not read here)."""
        self.ask(uuid.uuid4().hex, priority, fate, holder, max_waiting)

    def check_in_serves(self) -> None:
        if self.holder is not None and self.expired:
            self.end()
        self.serve()

    def lasting(self, w: dict[str, Any]) -> str | None:
        return w["holder"] if w["hold"] == self.hold and self.holder is not None else None

    @precondition(lambda self: self.handed)
    @rule(data=st.data())
    def give_up_handed(self, data: st.DataObject) -> None:
        """A caller handed the hold (or a share of it) gives up before reading
        it: its one count goes back, the hold ending with the last."""
        self.give_up(data.draw(st.sampled_from(self.handed)))

    def give_up(self, w: dict[str, Any]) -> None:
        self.handed.remove(w)
        got = self.engine.run("withdraw", w["token"])
        expected = 0
        if w["hold"] == self.hold and self.holder is not None:
            if w["share"] and self.expired:
                pass  # (an expired hold is not shared: it is reclaimed)
            elif self.count > 1:
                self.count -= 1
                expected = 1
            else:
                self.end()
                expected = 1
        assert got == expected, (w, got)

    @rule(holder=HOLDERS)
    def release(self, holder: str) -> None:
        """A release by the holder's name (as a lock that does not know the
        lease sends it)."""
        live = self.holder == holder and not self.expired
        expected = 0
        if live and self.count > 1:
            self.count -= 1
            expected = 2
        elif live:
            expected = 1
            self.end()
        elif self.holder == holder:  # expired: reclaimed on the way
            self.end()
        got = self.engine.run("release", "", uuid.uuid4().hex, "", 0, holder)
        assert got == expected, (holder, got)

    @precondition(lambda self: self.holder is not None and not self.expired)
    @rule()
    def expire(self) -> None:
        self.expire_hold(self.holder)

    @rule()
    def gc(self) -> None:
        _, dropped = self.engine.gc()
        assert [w.holder for w in dropped] == [w["holder"] for w in self.drop_dead()]
        if self.holder is not None and self.expired:
            self.end()
        self.serve()

    # -- after every step

    @invariant()
    def agrees_with_model(self) -> None:
        self.pass_deaths()
        self.confirm_served()
        holds = self.lock.holders()
        live = [] if self.holder is None or self.expired else [self.holder]
        assert [lease.holder for lease in holds] == live
        if live:
            (lease,) = holds
            record = self.client.hget(f"{self.engine.base}:info", self.holder).decode()
            assert int(record.split("|")[6]) == self.count, record  # (its count, n)
            if self.fence == -1:  # a new hold: a fence above every earlier one
                assert lease.fence > self.last_fence
                self.fence = self.last_fence = lease.fence
            assert lease.fence == self.fence
        assert [(w.holder, w.priority) for w in self.lock.waiters()] == [
            (w["holder"], w["priority"]) for w in self.ordered()
        ]
        self.agrees_on_dead()


def test_a_lock_matches_the_model(redis_client):
    run(redis_client, reentrant=False)


def test_a_reentrant_lock_matches_the_model(redis_client):
    run(redis_client, reentrant=True)


@pytest.mark.parametrize("reentrant", [False, True])
def test_a_holders_own_caller_served_as_its_expired_hold_ends_is_its_hold(redis_client, reentrant):
    # (A sequence the model rarely draws.) Two callers of "h" queue behind "x";
    # the first gets the lock; when its hold expires, a newcomer of "h" ends it,
    # which serves the second: the newcomer finds "h" holding (refused as
    # holding a lock that is not reentrant; counted in a reentrant one), never
    # granted over that hold nor queued behind itself.
    LockModel.client, LockModel.reentrant = redis_client, reentrant
    model = LockModel()
    model.acquire_now("x", 0)
    model.queue_caller("h", 0)
    model.queue_caller("h", 0)
    model.release("x")
    model.agrees_with_model()
    model.expire()
    model.acquire_now("h", 0)
    model.agrees_with_model()
    model.release("h")
    model.agrees_with_model()


@pytest.mark.parametrize("then", ["check_in", "give_up"])
def test_a_caller_given_a_share_of_its_holders_reentrant_hold_reads_it_or_gives_it_back(
    redis_client, then
):
    # Two callers of "x" wait behind "y", the later one first in line. When y's
    # hold expires, the earlier one's own check-in (or an acquire, or gc) serves
    # the later one, and the earlier one's place is given up for a share of that
    # hold, counted for it. Checking in, it reads that share (it was told it was
    # gone, and asking again counted it twice); giving up, its count goes back
    # (it stayed counted). Either way the hold ends with its last count.
    LockModel.client, LockModel.reentrant = redis_client, True
    model = LockModel()
    model.acquire_now("y", 0)
    model.queue_caller("x", 0)
    model.queue_caller("x", 1)
    model.expire()
    earlier = model.ordered()[-1]
    if then == "check_in":
        model.check_in_of(earlier)
    else:
        model.gc()
        model.give_up(next(h for h in model.handed if h["token"] == earlier["token"]))
    model.agrees_with_model()
    while model.holder is not None:
        model.release("x")
        model.agrees_with_model()


def run(client: Any, *, reentrant: bool) -> None:
    LockModel.client, LockModel.reentrant = client, reentrant
    run_state_machine_as_test(
        LockModel,
        settings=WaiterModel.SETTINGS,
    )
