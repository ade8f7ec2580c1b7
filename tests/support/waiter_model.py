"""What the models of a primitive with callers queued in Redis share (the
pool's, the lock's and the weighted semaphore's, driven by hypothesis).

A model runs the engine's operations directly, so that a queued caller stays
queued while the next step runs; its grants are confirmed after the step, as
the waiter itself confirms one.

Callers die too: a queued caller whose liveness window (the check-in interval
it is queued with) or whose deadline passes is presumed dead. Hand-offs skip
it (at most SKIP_LIMIT dead ones each), an acquire that finds max_waiting
callers queued drops it (at most PRUNE_LIMIT, the earliest dead first), gc
drops it. A dropped caller learns it at its check-in ("gone"), and one that
was only late (its window passed, not its deadline) asks again with the same
request token, at the back of the queue. A caller may also die once a grant
was handed to it, before reading it: that grant is left unconfirmed (a
provisional lease of PROVISIONAL_MS at most) and comes back when it lapses.
"""

from __future__ import annotations

import uuid
from typing import Any

import hypothesis.strategies as st
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, precondition, rule

from django_redis_pool.primitives.wire.protocol import Reply
from django_redis_pool.primitives.wire.scripts import _constants
from tests.support.primitive_helpers import redis_time
from tests.support.waiting import wait_for

#: The lease engine's bounds (``engine.lua``).
GRACE_MS, SKIP_LIMIT, PRUNE_LIMIT, SERVE_LIMIT, PROVISIONAL_MS = (
    int(_constants()[name])
    for name in ("GRACE_MS", "SKIP_LIMIT", "PRUNE_LIMIT", "SERVE_LIMIT", "PROVISIONAL_MS")
)
#: The steps of one serving of a semaphore's or lock's queue (serve_slots).
SLOT_STEPS = SERVE_LIMIT + SKIP_LIMIT
#: How long a live caller waits and the check-in interval it is queued with.
LONG_MS = 60000
INF = float("inf")
#: How many steps a grant handed to a caller that died lasts unconfirmed in a
#: model (in Redis: PROVISIONAL_MS, which the steps never reach).
LAPSE_STEPS = 3
#: What becomes of a queued caller: it lives; its liveness window (queued
#: with a window ending 1 ms later: GRACE_MS shorter than a caller's shortest,
#: the record it leaves once a second passed without a check-in) or its 1 ms
#: deadline passes at once; it dies once it is handed a grant, unread.
FATES = st.sampled_from(["lives", "lives", "handed", "handed", "window", "deadline"])
#: Crowds of callers queued dead: one more than a hand-off skips, than an
#: acquire finding the queue full drops (also more than two hand-offs skip).
CROWDS = st.sampled_from([SKIP_LIMIT + 1, PRUNE_LIMIT + 1])


class WaiterModel(RuleBasedStateMachine):
    """Its ``queue``: the callers queued in Redis (token, priority, seq: the
    order they are served in; dead: None, "window" or "deadline"; died: the
    order they died in); ``served``: what was handed to them in a step;
    ``ghosts``: dead callers whose place was dropped, not told yet."""

    engine: Any
    #: What the model's callers carry besides a priority (``caller``, ``ask``).
    FIELDS: tuple[str, ...] = ()
    #: How a test runs such a model (every step talks to Redis: no deadline).
    SETTINGS = settings(
        max_examples=60,
        stateful_step_count=30,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )

    def __init__(self) -> None:
        super().__init__()
        self.queue: list[dict[str, Any]] = []
        # (resource, whether its receiver reads it) handed in a step
        self.served: list[tuple[str, bool]] = []
        # callers handed a grant (or a share of a hold) that have not read it
        self.handed: list[dict[str, Any]] = []
        self.ghosts: list[dict[str, Any]] = []
        # resource -> the hold handed to callers that died before reading it
        self.unconfirmed: dict[str, Any] = {}
        self.seq = 0
        self.deaths = 0
        self.dying = False  # a caller died in this step: the Redis clock must pass it

    # -- the model's engine

    def ordered(self) -> list[dict[str, Any]]:
        """The queue in serving order: priority, then arrival."""
        return sorted(self.queue, key=lambda w: (-w["priority"], w["seq"]))

    def queued(self, token: str, priority: int, fate: str = "lives", **more: Any) -> None:
        self.seq += 1
        w = {"token": token, "priority": priority, "seq": self.seq, "fate": fate, "dead": None}
        self.queue.append({**w, **more})
        if fate in ("window", "deadline"):
            self.died(self.queue[-1], fate)

    def died(self, w: dict[str, Any], how: str) -> None:
        self.deaths += 1
        w["dead"], w["died"], self.dying = how, self.deaths, True

    def drop(self, w: dict[str, Any]) -> None:
        """A dead caller's place is dropped (it learns it when it checks in)."""
        assert w["dead"], w
        self.queue.remove(w)
        self.ghosts.append(w)

    def next_live(self) -> dict[str, Any] | None:
        """A hand-off's waiter: the head live one, taken off the queue, the dead
        ones before it dropped (at most SKIP_LIMIT: then none)."""
        for _ in range(SKIP_LIMIT):
            if not self.queue:
                return None
            w = self.ordered()[0]
            if not w["dead"]:
                self.queue.remove(w)
                return w
            self.drop(w)
        return None

    def room_to_wait(self, max_waiting: int) -> bool:
        """Whether a caller of ``max_waiting`` (-1: none) may queue: fewer are
        queued once the earliest dead (at most PRUNE_LIMIT) are dropped."""
        if max_waiting < 0 or len(self.queue) < max_waiting:
            return True
        dead = sorted((w for w in self.queue if w["dead"]), key=lambda w: w["died"])
        for w in dead[:PRUNE_LIMIT]:
            self.drop(w)
        return bool(dead) and len(self.queue) < max_waiting

    def drop_dead(self) -> list[dict[str, Any]]:
        """gc: every dead caller dropped (in queue order)."""
        dead = [w for w in self.ordered() if w["dead"]]
        for w in dead:
            self.drop(w)
        return dead

    def hand(self, handed: str, w: dict[str, Any], **more: Any) -> None:
        """``resource`` (a grant, or a share of a hold) handed to queued ``w``."""
        reads = w["fate"] != "handed"
        self.served.append((handed, reads))
        if reads:
            self.handed.append({**w, **more})

    def pass_deaths(self) -> None:
        """Once a caller died in a step: wait until the Redis clock has passed
        its death (1 ms after the step's last operation; 3 for a whole ms)."""
        if self.dying:
            self.until_redis_ms(redis_time(self.engine.client) * 1000 + 3)
            self.dying = False

    def until_redis_ms(self, ms: float) -> None:
        """Wait until the Redis clock reads ``ms`` (a few ms away: asked every ms)."""
        client = self.engine.client
        wait_for(lambda: redis_time(client) * 1000 >= ms, what=f"Redis ms {ms}", interval=0.001)

    # -- what each model says

    def withdrawn(self) -> None:
        """What the model does once a caller left the queue (nothing here)."""

    def check_in_serves(self) -> None:
        """What a check-in does before it looks at its caller: the model's
        reclaim of expired holds and serving of the queue."""
        raise NotImplementedError

    def lasting(self, w: dict[str, Any]) -> str | None:
        """The resource of what was handed to ``w`` while it lasts, else None."""
        raise NotImplementedError

    def caller(self, data: st.DataObject) -> dict[str, Any]:
        """What the model's queued callers carry besides a priority (drawn)."""
        return {}

    def ask(self, token: str, priority: int, fate: str, **more: Any) -> None:
        """A caller that waits asks (``fate``: see FATES), queued in the model
        if Redis queued it (its wake list is not read here)."""
        raise NotImplementedError

    def request(
        self, token: str, priority: int, fate: str, max_waiting: int, permits: int, holder: str
    ) -> Any:
        """The engine's acquire for a caller that lives, or dies by ``fate``
        ("deadline": its deadline, "window": its liveness window, 1 ms on)."""
        return self.engine.run(
            "acquire",
            token,
            LONG_MS,
            priority,
            1 if fate == "deadline" else LONG_MS,
            max_waiting,
            1 - GRACE_MS if fate == "window" else LONG_MS,
            "",
            permits,
            holder,
        )

    def quiet(self) -> bool:
        """Whether an acquire can serve nobody now (nothing free, nothing expired)."""
        raise NotImplementedError

    def hold_of(self, resource: str) -> Any:
        """Which hold of ``resource`` lasts (None: none, or expired)."""
        raise NotImplementedError

    def expire_hold(self, resource: str) -> None:
        """End the live hold on ``resource`` now, in Redis and in the model."""
        raise NotImplementedError

    # -- rules

    def reachable(self) -> list[dict[str, Any]]:
        """Queued callers that may still act (not those that die once handed)."""
        return [w for w in self.ordered() if w["fate"] != "handed" or w["dead"]]

    @precondition(lambda self: self.reachable())
    @rule(data=st.data())
    def withdraw(self, data: st.DataObject) -> None:
        w = data.draw(st.sampled_from(self.reachable()))
        assert self.engine.run("withdraw", w["token"]) == 0
        self.queue.remove(w)
        self.withdrawn()

    @precondition(lambda self: self.reachable() or self.handed)
    @rule(data=st.data())
    def check_in(self, data: st.DataObject) -> None:
        """A caller checks in (its blocking read ended): expiries are reclaimed
        and the queue served on the way; it reads what was handed (or shared)
        to it while that lasts, else it is still queued (a dead one revived,
        unless its deadline passed), or gone (dropped by that serving)."""
        self.check_in_of(data.draw(st.sampled_from(self.reachable() + self.handed)))

    @precondition(lambda self: self.ghosts)
    @rule(data=st.data(), late=st.booleans())
    def ghost_checks_in(self, data: st.DataObject, late: bool) -> None:
        """A dead caller whose place was dropped checks in late (told it is
        gone: one that was only late asks again), or gives up (its deadline
        passed on its own clock): nothing of it is left to withdraw."""
        w = data.draw(st.sampled_from(self.ghosts))
        if late:
            self.check_in_of(w)
        else:
            assert self.engine.run("withdraw", w["token"]) == 0
            self.ghosts.remove(w)

    @precondition(lambda self: any(not w["dead"] for w in self.reachable()))
    @rule(data=st.data())
    def die(self, data: st.DataObject) -> None:
        """A queued caller checks in for the last time (a window ending 1 ms
        later), and dies."""
        w = data.draw(st.sampled_from([w for w in self.reachable() if not w["dead"]]))
        if self.check_in_of(w, 1 - GRACE_MS):
            self.died(w, "window")

    @precondition(lambda self: self.quiet())
    @rule(data=st.data(), priority=st.integers(min_value=0, max_value=1), n=CROWDS)
    def crowd(self, data: st.DataObject, priority: int, n: int) -> None:
        """``n`` callers queue and die at once (their deadlines pass). Only
        while nothing can be served (``quiet``): no one of them is served by
        the next one's acquire before its 1 ms deadline has passed, or after."""
        more = self.caller(data)
        for _ in range(n):
            self.ask(uuid.uuid4().hex, priority, "deadline", **more)

    def check_in_of(self, w: dict[str, Any], alive_ms: int = LONG_MS) -> bool:
        """``w`` checks in (with ``alive_ms``); True if it is still queued."""
        reply = self.engine.run("wait", w["token"], alive_ms)
        self.check_in_serves()
        if w in self.queue:
            assert isinstance(reply, int), reply
            if w["dead"] == "window":
                w["dead"] = None  # (only late: its window runs again)
            return True
        if w in self.ghosts:
            self.ghosts.remove(w)
            assert reply == Reply.GONE, (w, reply)
            if w["dead"] == "window":  # time is left: it asks again
                self.ask(w["token"], w["priority"], "lives", **{k: w[k] for k in self.FIELDS})
            return False
        w = next(h for h in self.handed if h["token"] == w["token"])
        self.handed.remove(w)
        resource = self.lasting(w)
        if resource is None:
            assert reply == Reply.GONE, reply
        else:
            assert isinstance(reply, str) and reply.startswith(f"{resource}\n"), reply
            self.confirm_reply(reply)
        return False

    def expire_in_redis(self, resource: str) -> None:
        """Make the hold on ``resource`` (whoever holds it) end in 1 ms, and
        wait until the Redis clock has passed that."""
        expires_ms = self.engine.run("renew", "", 1, resource)
        assert expires_ms >= 0
        self.until_redis_ms(expires_ms + 1)

    def confirm_reply(self, reply: Any) -> None:
        """A grant read by a caller: confirmed by it if it is provisional (as
        the caller's ``_lease`` does); a live caller holds it."""
        if isinstance(reply, str) and "\n" in reply:
            resource, raw = reply.split("\n", 1)
            if raw.split("|")[5] == "1":
                token = raw.split("|", 1)[0]
                assert self.engine.run("renew", token, -2, resource) >= 0
            self.confirmed(resource)

    def confirmed(self, resource: str) -> None:
        """The hold on ``resource`` was confirmed by a caller that read it."""
        self.unconfirmed.pop(resource, None)
        self.served = [(r, reads or r == resource) for r, reads in self.served]

    def confirm_served(self) -> list[str]:
        """Confirm each grant handed to a queued caller (as that caller would),
        unless every caller it was handed to died; returns what was confirmed.
        An unconfirmed one stays provisional, and lapses: ended here LAPSE_STEPS
        steps after its grant (the model's clock: long before PROVISIONAL_MS),
        if nothing ended it before."""
        served, self.served = self.served, []
        confirmed = sorted({r for r, reads in served if reads})
        for resource in confirmed:
            assert self.engine.run("renew", "", LONG_MS, resource) >= 0
            self.unconfirmed.pop(resource, None)
        for resource in sorted({r for r, _ in served} - set(confirmed)):
            self.unconfirmed[resource] = [self.hold_of(resource), LAPSE_STEPS]
        now_ms = redis_time(self.engine.client) * 1000
        for resource, (hold, steps) in sorted(self.unconfirmed.items()):
            if hold is None or self.hold_of(resource) != hold:
                del self.unconfirmed[resource]  # (ended, taken, or expired)
                continue
            raw = self.engine.client.hget(f"{self.engine.base}:info", resource).decode()
            fields = raw.split("|")
            assert fields[5] == "1", raw  # provisional
            assert 0 < int(fields[3]) - now_ms <= PROVISIONAL_MS, (raw, now_ms)
            if steps:
                self.unconfirmed[resource][1] -= 1
            else:
                self.expire_hold(resource)
                del self.unconfirmed[resource]
        return confirmed

    def agrees_on_dead(self) -> None:
        """Redis's dead waiters (what gc would drop) are the model's."""
        _, dead = self.engine.expired()
        assert [w.priority for w in dead] == [w["priority"] for w in self.ordered() if w["dead"]]
