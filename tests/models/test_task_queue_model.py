"""TaskQueue against a Python model of it, driven by hypothesis.

Tasks enqueued (ids from a small set, so that an id already there is enqueued
again; priorities; ready now, deferred far, or deferred a moment and then
due), workers taking the next ready task of their names, beating, reporting
progress and finishing with a result or an error, a worker stalling past its
deadline, redelivery up to the task's max attempts and then the dead letter
(WorkerLost), a stale worker (its delivery superseded or ended) reporting,
retry, delete, withdraw, forget, gc with a small bound, and workers leaving.
After every step the queue's sets, counts(), failed(), get_task() of every id,
the live workers and the wake and done lists must be the model's.

It runs the queue's engine operations directly, as a worker runs them
(``queue_take``, ``queue_beat``, ``queue_progress``, ``queue_finish``), so
that steps interleave precisely; the workers' threads around them are tested in
``test_queue.py``. Time is on the Redis clock: every time-dependent step is
bracketed by two reads of it, and a time is due in the model only when it is
due for every instant of the bracket (a deferred task or a deadline is made due
by waiting on the Redis clock, never by sleeping blindly).
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Callable
from typing import Any

import hypothesis.strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from django_redis_pool.primitives.queue.task import task_from_fields, task_from_flat
from django_redis_pool.primitives.queue.taskqueue import Task, TaskQueue
from tests.support.primitive_helpers import ops
from tests.support.waiter_model import WaiterModel
from tests.support.waiting import wait_for

IDS = ["t0", "t1", "t2", "t3"]
NAMES = ["a", "b"]
#: What a worker listens for: one name, or both in either order.
LISTENS = st.sampled_from([("a",), ("b",), ("a", "b"), ("b", "a")])
#: A worker taking a task: one of two that take again and again, or a new one.
WORKERS = st.sampled_from(["w0", "w0", "w1", ""])
PRIORITIES = st.sampled_from([0, 0, 1, -1, 100, -100])
#: The visibility (and presence) of a delivery that does not stall: no step
#: sequence lasts that long.
LONG_MS = 60_000
#: How far ahead a task deferred "a moment" is (then waited for, so it is due).
MOMENT_MS = 30
UPKEEP_LIMIT = 16  # engine.lua's: what every take does first
WAKE_TOKENS = 64  # engine.lua's: wake tokens kept per task name
WORKER_LOST = "django_redis_pool.primitives.queue.WorkerLost"
TIMES = [
    ("enqueued", "enqueued_at"),
    ("started", "started_at"),
    ("first", "first_started_at"),
    ("finished", "finished_at"),
]
_names = itertools.count()

#: A time of the model: ms on the Redis clock, or (lo, hi) while it is only
#: known to be within a step's bracket (pinned once Redis shows it).
When = int | tuple[int, int]


def span(when: When) -> tuple[int, int]:
    return when if isinstance(when, tuple) else (when, when)


def due(when: When, t0: int, t1: int) -> bool:
    """Whether ``when`` is due (<= NOW) in a script that ran within [t0, t1]."""
    lo, hi = span(when)
    if hi <= t0:
        return True
    assert lo > t1, f"due at {when}, within the step's bracket [{t0}, {t1}]: a step ran a minute?"
    return False


class TaskQueueModel(RuleBasedStateMachine):
    client: Any = None  # set by the test

    def __init__(self) -> None:
        super().__init__()
        name = f"task-model{next(_names)}"
        # a queue per max_attempts and result_ttl (an hour, or 1 ms: a result
        # that expires at once); the same tasks, keys and engine
        self.queues = {
            (m, ttl): TaskQueue(self.client, name, max_attempts=m, result_ttl=ttl)
            for m in (1, 2, 3)
            for ttl in (3600, 0.001)
        }
        self.queue = self.queues[2, 3600]
        self.engine = ops(self.queue)
        self.base = self.engine.base
        self.tasks: dict[str, dict[str, Any]] = {}
        self.seq = 0  # the :seq counter (the arrival order)
        self.names: set[str] = set()  # task names ever enqueued
        self.live: dict[str, set[str]] = {name: set() for name in NAMES}
        self.wake: dict[str, list[str]] = {name: [] for name in NAMES}
        self.deliveries: list[dict[str, Any]] = []  # every take, stale ones too
        self.idle: list[dict[str, Any]] = []  # workers listening that took nothing
        self.workers = itertools.count()
        self.values = itertools.count()

    # -- the Redis clock

    def now_ms(self) -> int:
        sec, usec = self.client.time()
        return int(sec) * 1000 + int(usec) // 1000

    def timed(self, call: Callable[[], Any]) -> tuple[int, Any, int]:
        """(Redis ms before, ``call()``, Redis ms after): its script's NOW is within."""
        t0 = self.now_ms()
        reply = call()
        return t0, reply, self.now_ms()

    def wait_past(self, ms: int, what: str) -> None:
        wait_for(lambda: self.now_ms() > ms, what=what)

    # -- the model's engine

    def ready(self, id: str) -> None:
        """queue_ready: the task waits in its name's ready set; a worker is woken."""
        t = self.tasks[id]
        t["where"], t["deadline"] = "pending", None
        self.push_wake(t["name"], "1")

    def push_wake(self, name: str, token: str) -> None:
        self.wake[name] = (self.wake[name] + [token])[-WAKE_TOKENS:]

    def settle(self, id: str, status: str, text: str, trace: str, now: When) -> None:
        """queue_settle: a task's end (its in-flight entry already gone)."""
        t = self.tasks[id]
        t.update(status=status, finished=now, deadline=None, ends=t["ends"] + 1)
        if status == "done":
            t.update(result=text, where=None)
        else:
            t.update(error=text, trace=trace, where="failed")

    def upkeep(self, limit: int, t0: int, t1: int) -> tuple[int, list[str], list[str]]:
        """queue_upkeep: due deferred tasks made ready, tasks past their deadline
        delivered again or failed (each at most ``limit``, earliest first)."""
        deferred = sorted(
            (t["run_at"], id) for id, t in self.tasks.items() if t["where"] == "sched"
        )
        made_ready = [id for at, id in deferred if due(at, t0, t1)][:limit]
        for id in made_ready:
            self.ready(id)
        inflight = sorted(
            (span(t["deadline"]), id) for id, t in self.tasks.items() if t["where"] == "inflight"
        )
        requeued, failed = [], []
        for id in [id for deadline, id in inflight if due(deadline, t0, t1)][:limit]:
            t = self.tasks[id]
            if t["attempts"] >= t["max"]:
                error = (
                    f"{WORKER_LOST}: its worker died or stalled on each of its "
                    f"{t['attempts']} attempt(s)"
                )
                self.settle(id, "failed", error, error + "\n", (t0, t1))
                failed.append(id)
            else:
                t.update(status="queued", worker=None)
                self.ready(id)
                requeued.append(id)
        return len(made_ready), requeued, failed

    def holds(self, d: dict[str, Any]) -> bool:
        """Whether delivery ``d`` still holds its task (the only one that may
        report on it)."""
        t = self.tasks.get(d["id"])
        return (
            t is not None
            and t["status"] == "running"
            and t["worker"] == d["worker"]
            and t["attempts"] == d["attempt"]
        )

    def runs(self, d: dict[str, Any]) -> bool:
        """Whether the worker of delivery ``d`` runs its task now (whichever
        delivery): a beat names tasks, not deliveries."""
        t = self.tasks.get(d["id"])
        return t is not None and t["status"] == "running" and t["worker"] == d["worker"]

    def redelivered(self, d: dict[str, Any]) -> bool:
        """Whether ``d`` is stale, its task running in a later delivery."""
        t = self.tasks.get(d["id"])
        return t is not None and t["status"] == "running" and not self.holds(d)

    def pending(self, name: str) -> list[str]:
        """The ready tasks of ``name`` in the order they are taken."""
        ready = [
            (-t["priority"], t["seq"], id)
            for id, t in self.tasks.items()
            if t["where"] == "pending" and t["name"] == name
        ]
        return [id for _, _, id in sorted(ready)]

    def expected(self, id: str) -> Task:
        t = self.tasks[id]

        def secs(when: When | None) -> float | None:
            return None if when is None else span(when)[0] / 1000

        return Task(
            id=id,
            name=t["name"],
            params=json.loads(t["params"]),
            status=t["status"],
            result=None if t["result"] is None else json.loads(t["result"]),
            error=t["error"],
            traceback=t["trace"] or None,
            attempts=t["attempts"],
            progress=None if t["progress"] is None else tuple(map(json.loads, t["progress"])),
            priority=t["priority"],
            enqueued_at=secs(t["enqueued"]),
            started_at=secs(t["started"]),
            finished_at=secs(t["finished"]),
            first_started_at=secs(t["first"]),
            run_at=secs(t["run_at"]),
            worker=t["worker"],
            workers=list(t["workers"]),
        )

    def pin(self, t: dict[str, Any], key: str, actual_ms: int | None, what: str) -> None:
        """A time of the model known within a bracket becomes the one Redis shows."""
        if isinstance(t[key], tuple) and actual_ms is not None:
            lo, hi = t[key]
            assert lo <= actual_ms <= hi, (what, key, actual_ms, t[key])
            t[key] = actual_ms

    def check_task(self, id: str, got: Task | None) -> None:
        if id not in self.tasks:
            assert got is None, (id, got)
            return
        assert got is not None, (id, self.tasks[id])
        t = self.tasks[id]
        for key, attr in TIMES:
            value = getattr(got, attr)
            self.pin(t, key, None if value is None else round(value * 1000), id)
        assert got == self.expected(id), (id, got, self.expected(id))

    # -- enqueueing

    @initialize(
        tasks=st.lists(
            st.tuples(st.sampled_from(IDS), st.sampled_from(NAMES), PRIORITIES), max_size=3
        )
    )
    def some_ready(self, tasks: list[tuple[str, str, int]]) -> None:
        """A few tasks ready from the start, for the workers."""
        for id, name, priority in tasks:
            self.enqueue(id, name, priority, "now", 2, 3600, False)

    @rule(
        id=st.sampled_from(IDS),
        name=st.sampled_from(NAMES),
        priority=PRIORITIES,
        when=st.sampled_from(["now", "now", "past", "moment", "far"]),
        max_attempts=st.sampled_from([1, 2, 2, 3]),
        result_ttl=st.sampled_from([3600, 3600, 0.001]),
        waits=st.booleans(),
    )
    def enqueue(
        self,
        id: str,
        name: str,
        priority: int,
        when: str,
        max_attempts: int,
        result_ttl: float,
        waits: bool,
    ) -> None:
        """``submit``, or (``waits``) a query's enqueue: the query then waits
        for the task's end, and ends by ``withdraw`` or ``collect``."""
        queue = self.queues[max_attempts, result_ttl]
        params = {"n": next(self.values)}
        payload = json.dumps(params, separators=(",", ":"))
        start = self.now_ms()
        ahead = {"now": None, "past": -5_000, "moment": MOMENT_MS, "far": 3_600_000}[when]
        run_at = None if ahead is None else (start + ahead) / 1000
        if waits:  # (as TaskQueue._remote sends it, deferral and priority aside)
            at = -1 if run_at is None else math.floor(run_at * 1000)
            args = (name, payload, priority, at, max_attempts, round(result_ttl * 1000))
            t0, (added, flat), t1 = self.timed(
                lambda: self.engine.run("queue_enqueue", id, *args, 1)
            )
            fields = dict(zip(flat[0::2], flat[1::2], strict=True))
            if int(added):
                fields[b"params"] = payload
            got = task_from_fields(id, fields)
        else:
            t0, got, t1 = self.timed(
                lambda: queue.submit(name, params, id=id, priority=priority, run_at=run_at)
            )
        if id in self.tasks:  # left as it is, but for who waits for it
            self.check_task(id, got)
            if waits:
                self.tasks[id]["queries"] += 1
            else:
                self.tasks[id]["keep"] = True
            return
        self.seq += 1
        self.names.add(name)
        self.tasks[id] = t = {
            "name": name,
            "params": payload,
            "status": "queued",
            "attempts": 0,
            "priority": priority,
            "seq": self.seq,
            "max": max_attempts,
            "ttl": round(result_ttl * 1000),
            "enqueued": (t0, t1),
            "started": None,
            "first": None,
            "finished": None,
            "run_at": None,
            "worker": None,
            "workers": [],
            "result": None,
            "error": None,
            "trace": None,
            "progress": None,
            "where": None,
            "deadline": None,
            "ends": 0,
            "queries": int(waits),  # queries counted as waiting for it
            "keep": not waits,  # enqueued by somebody who does not wait
        }
        at = None if run_at is None else math.floor(run_at * 1000)  # as enqueue sends it
        # deferred iff run_at > NOW: where the bracket cannot tell, the stored task says
        if at is not None and (at > t1 or (at > t0 and got.run_at is not None)):
            t.update(where="sched", run_at=at)
            self.push_wake(name, "0")
        else:
            self.ready(id)
        self.check_task(id, got)
        if t["where"] == "sched" and when == "moment":
            self.wait_past(at, "the deferred task to be due")

    # -- a worker's operations

    @precondition(lambda self: self.tasks)
    @rule(names=LISTENS, worker=WORKERS)
    def take(self, names: tuple[str, ...], worker: str) -> None:
        """A worker takes the next ready task of its names (upkeep first). A
        worker's id is kept from one task to the next; one that may still report
        on an earlier delivery (a stale one) takes again too."""
        worker = worker or f"n{next(self.workers)}"
        t0, reply, t1 = self.timed(lambda: self.engine.run("queue_take", worker, LONG_MS, *names))
        self.upkeep(UPKEEP_LIMIT, t0, t1)
        heads = [ids[0] for ids in map(self.pending, names) if ids]
        if not heads:
            assert isinstance(reply, int), reply
            dues = [span(t["run_at"]) for t in self.tasks.values() if t["where"] == "sched"]
            dues += [span(t["deadline"]) for t in self.tasks.values() if t["where"] == "inflight"]
            if not dues:
                assert reply == -1
            else:
                lo = max(0, min(d[0] for d in dues) - t1)
                hi = max(0, min(d[1] for d in dues) - t0)
                assert lo <= reply <= hi, (reply, lo, hi)
            return
        id = min(heads, key=lambda i: (-self.tasks[i]["priority"], self.tasks[i]["seq"]))
        t = self.tasks[id]
        t.update(
            status="running",
            progress=None,
            attempts=t["attempts"] + 1,
            worker=worker,
            workers=t["workers"] + [worker],
            started=(t0, t1),
            where="inflight",
            deadline=(t0 + LONG_MS, t1 + LONG_MS),
        )
        if t["first"] is None:
            t["first"] = (t0, t1)
        assert isinstance(reply, list), (id, reply)
        task_id, name, params, attempt, flat = reply
        assert (task_id, name, params, int(attempt)) == (id, t["name"], t["params"], t["attempts"])
        fields = dict(zip(flat[0::2], flat[1::2], strict=True))
        fields["params"] = params
        self.check_task(id, task_from_fields(id, fields))
        self.deliveries.append(
            {"worker": worker, "id": id, "attempt": t["attempts"], "names": names}
        )

    def beat_of(self, d: dict[str, Any], visibility_ms: int) -> tuple[int, int]:
        t0, held, t1 = self.timed(
            lambda: self.engine.run(
                "queue_beat", d["worker"], LONG_MS, visibility_ms, "\n".join(d["names"]), d["id"]
            )
        )
        for name in d["names"]:
            self.live[name].add(d["worker"])
        expected = self.runs(d)
        assert held == int(expected), (d, held)
        if expected:
            self.tasks[d["id"]]["deadline"] = (t0 + visibility_ms, t1 + visibility_ms)
        return t0, t1

    @precondition(lambda self: self.deliveries)
    @rule(
        data=st.data(),
        what=st.sampled_from(["done", "failed", "beat", "progress", "stall"]),
        stale=st.booleans(),
        progress=st.sampled_from([("1", "2"), ("2", "4.0"), ("0.5", "1")]),
        then=st.sampled_from(["", "again", "w0", "w1", "gc"]),
    )
    def work(
        self, data: st.DataObject, what: str, stale: bool, progress: tuple[str, str], then: str
    ) -> None:
        """A worker goes on with a task it took: it reports its end (a result or
        an error), beats, reports progress, or stalls (see ``stall_of``). With
        ``stale``, any delivery does, a stale one too (its task delivered again,
        ended, retried or deleted since): only the one that holds the task may
        change it, and a worker's beat extends only the tasks it runs."""
        held = self.held()
        if what == "stall" and held:
            self.stall_of(data.draw(st.sampled_from(held)), then)
            return
        if held and not stale:
            d = data.draw(st.sampled_from(held))
        else:  # half the time one whose task runs again, if any (a rare state)
            again = [d for d in self.deliveries if self.redelivered(d)]
            choices = st.sampled_from(self.deliveries)
            d = data.draw(st.sampled_from(again) | choices if again else choices)
        if what in ("beat", "stall"):
            self.beat_of(d, LONG_MS)
        elif what == "progress":
            got = self.engine.run("queue_progress", d["id"], d["worker"], d["attempt"], *progress)
            expected = self.holds(d)
            assert got == int(expected), (d, got)
            if expected:
                self.tasks[d["id"]]["progress"] = progress
        else:
            self.finish_of(d, what == "done")

    def stall_of(self, d: dict[str, Any], then: str) -> None:
        """The worker of ``d`` stalls: its task's deadline (made 1 ms away by a
        beat) passes on the Redis clock; the next take or gc presumes it dead.
        ``then``: such a take at once by a worker of its names (that worker
        ``again``, or another), or gc."""
        _, t1 = self.beat_of(d, 1)
        self.wait_past(t1 + 1, "the deadline to pass")
        if then == "gc":
            self.upkeep_now(100)
        elif then:
            self.take(d["names"], d["worker"] if then == "again" else then)

    def held(self) -> list[dict[str, Any]]:
        return [d for d in self.deliveries if self.holds(d)]

    def finish_of(self, d: dict[str, Any], ok: bool) -> None:
        n = next(self.values)
        status, text, trace = (
            ("done", json.dumps({"r": n}), "")
            if ok
            else ("failed", f"RuntimeError: boom {n}", f"Traceback: boom {n}\n")
        )
        t0, got, t1 = self.timed(
            lambda: self.engine.run(
                "queue_finish", d["id"], d["worker"], d["attempt"], status, text, trace
            )
        )
        if not self.holds(d):
            assert got == 0, (d, got)
            return
        assert t0 <= got <= t1, (got, t0, t1)
        self.settle(d["id"], status, text, trace, got)
        if ok and self.tasks[d["id"]]["ttl"] < LONG_MS:  # its result expires
            self.wait_past(got + self.tasks[d["id"]]["ttl"] + 1, "the result to expire")
            del self.tasks[d["id"]]

    @rule(data=st.data(), names=LISTENS)
    def presence(self, data: st.DataObject, names: tuple[str, ...]) -> None:
        """A worker starts listening (its first beat, before it takes anything),
        or one leaves."""
        if not data.draw(st.booleans()) and (self.deliveries or self.idle):
            d = data.draw(st.sampled_from(self.deliveries + self.idle))
            assert self.engine.run("queue_leave", d["worker"], "\n".join(d["names"])) == 1
            for name in d["names"]:
                self.live[name].discard(d["worker"])
            return
        d = {"worker": f"i{next(self.workers)}", "id": "", "attempt": 0, "names": names}
        assert self.engine.run("queue_beat", d["worker"], LONG_MS, LONG_MS, "\n".join(names)) == 0
        for name in names:
            self.live[name].add(d["worker"])
        self.idle.append(d)

    # -- upkeep and an operator's changes

    def upkeep_now(self, count: int) -> None:
        t0, got, t1 = self.timed(lambda: self.queue.gc(count))
        assert got == self.upkeep(count, t0, t1)

    @precondition(lambda self: self.tasks)
    @rule(
        data=st.data(),
        what=st.sampled_from(
            ["gc", "gc", "retry", "delete", "withdraw", "collect", "collect once"]
        ),
        count=st.sampled_from([1, 2, 100]),
    )
    def admin(self, data: st.DataObject, what: str, count: int) -> None:
        """gc (at most ``count`` of each kind of upkeep); an operator retries or
        deletes a task; a query gives up on its task (withdrawn unless a worker
        started it, another query waits for it or somebody enqueued it without
        waiting) or reads its end (and deletes it with query(once=True), unless
        another query waits to read it): mostly a task there, sometimes any id."""
        if what == "gc":
            self.upkeep_now(count)
            return
        id = data.draw(st.sampled_from(sorted(self.tasks) or IDS) | st.sampled_from(IDS))
        t = self.tasks.get(id)
        status = t and t["status"]
        if what == "retry":
            assert self.queue.retry(id) is (status == "failed")
            if status == "failed":
                for key in ("result", "error", "trace", "finished", "worker", "progress"):
                    t[key] = None
                t.update(status="queued", attempts=0, workers=[], started=None, first=None, ends=0)
                t.update(run_at=None, queries=0)
                self.ready(id)
            return
        if what == "delete":
            got, expected = int(self.queue.delete(id)), status not in (None, "running")
        elif what == "withdraw":
            got = self.engine.run("queue_withdraw", id)
            if t:
                t["queries"] -= 1
            expected = bool(
                status == "queued"
                and t["attempts"] == 0  # (never started)
                and t["queries"] <= 0
                and not t["keep"]
            )
        else:  # (it answers the task as it was; whether it deleted it: the invariant)
            once = what == "collect once"
            self.check_task(id, task_from_flat(id, self.engine.run("queue_collect", id, int(once))))
            if t:
                t["queries"] -= 1
                if once and status in ("done", "failed") and t["queries"] <= 0:
                    del self.tasks[id]
            return
        assert got == int(expected), (what, id, got, t)
        if expected:
            del self.tasks[id]

    # -- after every step

    def zset(self, suffix: str) -> dict[str, int]:
        members = self.client.zrange(f"{self.base}:{suffix}", 0, -1, withscores=True)
        return {member.decode(): int(score) for member, score in members}

    def where(self, where: str) -> set[str]:
        return {id for id, t in self.tasks.items() if t["where"] == where}

    @invariant()
    def agrees_with_model(self) -> None:
        inflight, failed = self.zset("inflight"), self.zset("failed")
        assert set(inflight) == self.where("inflight"), inflight
        for id, deadline in inflight.items():
            self.pin(self.tasks[id], "deadline", deadline, id)
            assert self.tasks[id]["deadline"] == deadline, (id, deadline)
        assert self.zset("sched") == {id: self.tasks[id]["run_at"] for id in self.where("sched")}
        assert set(failed) == self.where("failed"), failed
        for id, at in failed.items():
            self.pin(self.tasks[id], "finished", at, id)
            assert self.tasks[id]["finished"] == at, (id, at)
        for name in NAMES:
            ids = [m.decode() for m in self.client.zrange(f"{self.base}:pending:{name}", 0, -1)]
            assert ids == self.pending(name), name
        live = set().union(*self.live.values())
        assert self.queue.counts() == {
            "pending": len(self.where("pending")),
            "running": len(inflight),
            "scheduled": len(self.where("sched")),
            "failed": len(failed),
            "workers": len(live),
        }
        for id in IDS:
            self.check_task(id, self.queue.get_task(id))
            t = self.tasks.get(id)
            queries, keep = self.client.hmget(f"{self.base}:t:{id}", "queries", "keep")
            assert int(queries or 0) == (t["queries"] if t else 0), (id, queries, t)
            assert (keep is not None) == bool(t and t["keep"]), (id, keep, t)
            ttl = self.client.pttl(f"{self.base}:t:{id}")
            if t is None:
                assert ttl == -2
            else:  # a result is kept result_ttl; nothing else expires
                assert (ttl > 0) if t["status"] == "done" else (ttl == -1), (id, ttl)
            ends = self.client.llen(f"{self.base}:done:{id}")
            assert ends == (t["ends"] if t else 0), (id, ends)
            ttl = self.client.pttl(f"{self.base}:done:{id}")  # as long as the task
            if ends:  # (a result's ttl, or none: a failed task's)
                assert (ttl > 0) if t["status"] == "done" else (ttl == -1), (id, ttl)
        total, listed = self.queue.failed(limit=len(IDS))
        latest = sorted(self.where("failed"), key=lambda i: (self.tasks[i]["finished"], i))[::-1]
        assert total == len(latest)
        assert [(x.id, x.name, x.error, x.attempts, x.finished_at) for x in listed] == [
            (
                id,
                self.tasks[id]["name"],
                self.tasks[id]["error"],
                self.tasks[id]["attempts"],
                self.tasks[id]["finished"] / 1000,
            )
            for id in latest
        ]
        for name in NAMES:
            assert self.queue.has_worker(name) is bool(self.live[name]), name
            tokens = [x.decode() for x in self.client.lrange(f"{self.base}:wake:{name}", 0, -1)]
            assert tokens == self.wake[name], name


def test_a_task_queue_matches_the_model(redis_client: Any) -> None:
    TaskQueueModel.client = redis_client
    run_state_machine_as_test(TaskQueueModel, settings=WaiterModel.SETTINGS)
