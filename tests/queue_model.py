"""What the models of a primitive with callers queued in Redis share (the
pool's, the lock's and the weighted semaphore's, driven by hypothesis).

A model runs the engine's operations directly, so that a queued caller stays
queued while the next step runs; its grants are confirmed after the step, as
the waiter itself confirms one.
"""

from __future__ import annotations

from typing import Any

import hypothesis.strategies as st
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, precondition, rule

from django_redis_pool.primitives.protocol import Reply

from .primitive_helpers import redis_time
from .waiting import wait_for


class QueueModel(RuleBasedStateMachine):
    """Its ``queue``: the callers queued in Redis (token, priority, seq: the
    order they are served in); ``served``: what was handed to them in a step."""

    engine: Any
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
        self.served: list[str] = []
        # callers handed a grant (or a share of a hold) that have not read it
        self.handed: list[dict[str, Any]] = []
        self.seq = 0

    def ordered(self) -> list[dict[str, Any]]:
        """The queue in serving order: priority, then arrival."""
        return sorted(self.queue, key=lambda w: (-w["priority"], w["seq"]))

    def queued(self, token: str, priority: int, **more: Any) -> None:
        self.seq += 1
        self.queue.append({"token": token, "priority": priority, "seq": self.seq, **more})

    def withdrawn(self) -> None:
        """What the model does once a caller left the queue (nothing here)."""

    def check_in_serves(self) -> None:
        """What a check-in does before it looks at its caller: the model's
        reclaim of expired holds and serving of the queue."""
        raise NotImplementedError

    def lasting(self, w: dict[str, Any]) -> str | None:
        """The resource of what was handed to ``w`` while it lasts, else None."""
        raise NotImplementedError

    @precondition(lambda self: self.queue)
    @rule(data=st.data())
    def withdraw(self, data: st.DataObject) -> None:
        w = data.draw(st.sampled_from(self.ordered()))
        assert self.engine.run("withdraw", w["token"]) == 0
        self.queue.remove(w)
        self.withdrawn()

    @precondition(lambda self: self.queue or self.handed)
    @rule(data=st.data())
    def check_in(self, data: st.DataObject) -> None:
        """A queued caller checks in (its blocking read ended): expiries are
        reclaimed and the queue served on the way; it reads what was handed (or
        shared) to it while that lasts, else it is still queued, or gone."""
        self.check_in_of(data.draw(st.sampled_from(self.ordered() + self.handed)))

    def check_in_of(self, w: dict[str, Any]) -> None:
        reply = self.engine.run("wait", w["token"], 60000)
        self.check_in_serves()
        if w in self.queue:
            assert isinstance(reply, int), reply
            return
        w = next(h for h in self.handed if h["token"] == w["token"])
        self.handed.remove(w)
        resource = self.lasting(w)
        if resource is None:
            assert reply == Reply.GONE, reply
        else:
            assert isinstance(reply, str) and reply.startswith(f"{resource}\n"), reply

    def expire_in_redis(self, resource: str) -> None:
        """Make the hold on ``resource`` (whoever holds it) end in 1 ms, and
        wait until the Redis clock has passed that."""
        expires_ms = self.engine.run("renew", "", 1, resource)
        assert expires_ms >= 0
        wait_for(
            lambda: redis_time(self.engine.client) * 1000 >= expires_ms + 1,
            what="the lease to expire",
        )

    def confirm_served(self) -> list[str]:
        """Confirm each grant handed to a queued caller (as that caller would);
        returns what was served."""
        served, self.served = self.served, []
        for resource in served:
            assert self.engine.run("renew", "", 60000, resource) >= 0
        return served
