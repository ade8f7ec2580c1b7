"""Slots moved between masters of a live Redis Cluster while processes use
every primitive: the way ``redis-cli --cluster reshard`` moves them (IMPORTING,
MIGRATING, MIGRATE in batches of one key, NODE), a move back, and a move that
a key on both nodes stops half-way (BUSYKEY), later fixed.

The processes keep records of their own: a witness in shared memory counts
the holders of every resource, permit and the lock (incremented once a grant
is returned, decremented before the release is sent); the rate limit's
allowed decisions; the ids of the tasks run. Afterwards: no two holders at
once, no permit beyond the size, no rate-limit excess, no task run twice or
lost, nothing held that nobody holds, every key of a moved slot on its owner,
and every error a ``BackendUnavailable``. The same load without migration is
the control: no error at all.

Marked ``reshard``: it starts a cluster of its own, so it runs on both Redis
lines (the default leg's Redis 7 run keeps it).
"""

from __future__ import annotations

import itertools
import multiprocessing
import threading
import time
import traceback
from collections.abc import Iterator
from typing import Any

import pytest

from django_redis_pool import (
    BackendUnavailable,
    Lock,
    RateLimiter,
    ResourcePool,
    Semaphore,
    TaskQueue,
)
from django_redis_pool.testing import EmbeddedRedisCluster
from django_redis_pool.testing.reshard import SlotMigration
from tests.support.primitive_helpers import ops, slot_lease
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.reshard]

PROCESSES = 3
RESOURCES = ["r0", "r1", "r2"]
PERMITS = 2
RATE, BURST = 200, 20
#: Where each primitive's witness counts its holders: pool r0..r2, semaphore, lock.
SLOTS = {"r0": 0, "r1": 1, "r2": 2, "sem": 3, "lock": 4}
HOLD = 0.002


@pytest.fixture(scope="module")
def cluster() -> Iterator[EmbeddedRedisCluster]:
    with EmbeddedRedisCluster(masters=3) as started:
        yield started


def primitives(client: Any) -> dict[str, Any]:
    return {
        "pool": ResourcePool(client, "rs-pool", lease_timeout=30),
        "sem": Semaphore(client, "rs-sem", lease_timeout=30),
        "lock": Lock(client, "rs-lock", lease_timeout=30),
        "rate": RateLimiter(client, "rs-rate", rate=RATE, per=1, burst=BURST),
        "queue": TaskQueue(client, "rs-queue", visibility_timeout=60),
    }


def base_key(primitive: Any) -> str:
    """The base key of ``primitive`` (its slot is the primitive's)."""
    return getattr(primitive, "base", None) or ops(primitive).base


class Witness:
    """Counts of holders in shared memory; a count above its bound is a violation."""

    def __init__(self, ctx: Any) -> None:
        self.held = ctx.Array("i", len(SLOTS), lock=False)
        self.worst = ctx.Array("i", len(SLOTS), lock=False)
        self.lock = ctx.Lock()

    def enter(self, name: str) -> None:
        slot = SLOTS[name]
        with self.lock:
            self.held[slot] += 1
            self.worst[slot] = max(self.worst[slot], self.held[slot])

    def leave(self, name: str) -> None:
        with self.lock:
            self.held[SLOTS[name]] -= 1


def worker(ports: list[int], witness: Witness, stop: Any, out: Any) -> None:
    """One process: loops over the pool, the semaphore, the lock and the rate
    limit, and runs tasks, until ``stop``; puts its records on ``out``."""
    from redis.cluster import ClusterNode, RedisCluster

    client = RedisCluster(startup_nodes=[ClusterNode("127.0.0.1", p) for p in ports])
    prims = primitives(client)
    ran: list[str] = []
    errors: dict[str, int] = {}
    others: list[str] = []
    allowed: list[float] = []
    grants: dict[str, int] = {}
    fences: dict[str, list[int]] = {"pool": [], "sem": [], "lock": []}
    unavailable: dict[str, float] = {}
    granted: dict[str, list[float]] = {"pool": [], "sem": [], "lock": [], "rate": []}

    def handler(task: Any) -> Any:
        ran.append(task.id)
        return task.params

    prims["queue"].task_fn = handler
    listener = threading.Thread(
        target=prims["queue"].listen, args=(["job"],), kwargs={"event": stop}, daemon=True
    )
    listener.start()
    identity = f"p{multiprocessing.current_process().pid}"

    def step(name: str, body: Any) -> None:
        started = time.monotonic()
        try:
            at = body()
            if at is not None:
                grants[name] = grants.get(name, 0) + 1
                granted[name].append(at)
        except BackendUnavailable:
            errors[name] = errors.get(name, 0) + 1
            unavailable[name] = unavailable.get(name, 0.0) + time.monotonic() - started
        except Exception as exc:
            others.append(f"{name}: {type(exc).__name__}: {exc}\n{traceback.format_exc()}")

    def pool() -> float | None:
        lease = prims["pool"].acquire(timeout=1)
        if lease is None:
            return None
        at = time.time()
        fences["pool"].append(lease.fence)
        witness.enter(lease.resource)
        time.sleep(HOLD)
        witness.leave(lease.resource)
        lease.release()
        return at

    def sem() -> float | None:
        lease = slot_lease(prims["sem"], identity, timeout=1)
        if lease is None:
            return None
        at = time.time()
        fences["sem"].append(lease.fence)
        witness.enter("sem")
        time.sleep(HOLD)
        witness.leave("sem")
        prims["sem"].release(identity)
        return at

    def lock() -> float | None:
        if not prims["lock"].acquire(timeout=1):
            return None
        at = time.time()
        fences["lock"].append(prims["lock"].fence)
        witness.enter("lock")
        time.sleep(HOLD)
        witness.leave("lock")
        prims["lock"].release()
        return at

    def rate() -> float | None:
        at = None
        for _ in range(5):
            if prims["rate"].acquire("k"):
                at = time.time()
                allowed.append(at)
        return at

    while not stop.is_set():
        for name, body in (("pool", pool), ("sem", sem), ("lock", lock), ("rate", rate)):
            step(name, body)
    listener.join(30)
    out.put(
        {
            "ran": ran,
            "errors": errors,
            "others": others,
            "allowed": allowed,
            "grants": grants,
            "fences": fences,
            "unavailable": unavailable,
            "granted": granted,
        }
    )


class Load:
    """:data:`PROCESSES` workers over one cluster, and tasks enqueued while they run."""

    def __init__(self, cluster: EmbeddedRedisCluster) -> None:
        self.cluster = cluster
        self.client = cluster.client()
        self.prims = primitives(self.client)
        for resource in RESOURCES:
            self.prims["pool"].associate(resource)
        self.prims["sem"].set_max_size(PERMITS)
        ctx = multiprocessing.get_context("fork")
        self.witness = Witness(ctx)
        self.stop = ctx.Event()
        self.out = ctx.Queue()
        ports = cluster.ports
        self.procs = [
            ctx.Process(target=worker, args=(ports, self.witness, self.stop, self.out))
            for _ in range(PROCESSES)
        ]
        self.enqueued: list[str] = []
        self.enqueue_errors = 0
        self._enqueuing = threading.Event()
        self._feeder = threading.Thread(target=self._feed, daemon=True)

    def _feed(self) -> None:
        n = 0
        while not self._enqueuing.is_set():
            task_id = f"t{n}"
            try:
                self.prims["queue"].enqueue("job", n, id=task_id)
                self.enqueued.append(task_id)
                n += 1
            except BackendUnavailable:
                self.enqueue_errors += 1
            time.sleep(0.01)

    def __enter__(self) -> Load:
        for proc in self.procs:
            proc.start()
        self._feeder.start()
        self.started = time.time()
        return self

    def __exit__(self, *exc: object) -> None:
        self._enqueuing.set()
        self._feeder.join(10)
        try:
            wait_for(
                lambda: all(
                    (t := self.prims["queue"].get_task(i)) is not None and t.status == "done"
                    for i in self.enqueued
                ),
                timeout=60,
                what="every enqueued task done",
            )
        finally:  # (never leave workers behind for the next test)
            self.stop.set()
            self.records = [self.out.get(timeout=60) for _ in self.procs]
            for proc in self.procs:
                proc.join(30)
                if proc.is_alive():
                    proc.kill()

    def slot_of(self, name: str) -> int:
        return int(self.client.keyslot(base_key(self.prims[name])))

    def check(self) -> dict[str, Any]:
        """The safety properties, from the processes' records; returns the totals."""
        others = [line for record in self.records for line in record["others"]]
        assert not others, "errors other than BackendUnavailable:\n" + "\n".join(others[:5])
        worst = dict(zip(SLOTS, self.witness.worst, strict=True))
        assert all(worst[r] <= 1 for r in RESOURCES), f"a resource had two holders: {worst}"
        assert worst["sem"] <= PERMITS, f"more than {PERMITS} permits held: {worst}"
        assert worst["lock"] <= 1, f"the lock had two holders: {worst}"
        for name in ("pool", "sem", "lock"):
            fences = [f for record in self.records for f in record["fences"][name]]
            assert len(fences) == len(set(fences)), f"{name}: a fence granted twice"
        allowed = sorted(t for record in self.records for t in record["allowed"])
        span = allowed[-1] - allowed[0]
        assert len(allowed) <= BURST + RATE * span + 2, (
            f"the rate limit let {len(allowed)} through in {span:.2f} s "
            f"(at most {BURST + RATE * span:.0f})"
        )
        ran = [task for record in self.records for task in record["ran"]]
        twice = {task for task in ran if ran.count(task) > 1}
        assert not twice, f"tasks run twice: {sorted(twice)}"
        assert set(ran) == set(self.enqueued), "a task was lost"
        # nothing held that nobody holds
        assert self.prims["pool"].available_count() == len(RESOURCES)
        assert self.prims["sem"].get_current_size() == 0
        assert not self.prims["lock"].locked()
        grants: dict[str, int] = {}
        errors: dict[str, int] = {}
        unavailable: dict[str, float] = {}
        for record in self.records:
            for name, count in record["grants"].items():
                grants[name] = grants.get(name, 0) + count
            for name, count in record["errors"].items():
                errors[name] = errors.get(name, 0) + count
            for name, seconds in record["unavailable"].items():
                unavailable[name] = unavailable.get(name, 0.0) + seconds
        longest = {}
        for name in ("pool", "sem", "lock", "rate"):
            times = sorted(t for record in self.records for t in record["granted"][name])
            longest[name] = max((b - a for a, b in itertools.pairwise(times)), default=0.0)
        return {
            "grants": grants,
            "errors": errors,
            "unavailable": unavailable,
            "ran": len(ran),
            "longest_gap": longest,
        }

    def stranded(self, slots: list[int]) -> list[str]:
        """Keys of ``slots`` on a node that does not serve them."""
        found = []
        for slot in slots:
            migration = SlotMigration(self.cluster.nodes, slot)
            try:
                owner = migration.owner_of(slot)
                for port in migration.masters:
                    if port != owner:
                        found += migration.keys_on(port)
            finally:
                migration.close()
        return found


def pause() -> None:
    time.sleep(0.02)


def test_the_same_load_without_migration_is_clean(cluster):
    cluster.flushall()
    with Load(cluster) as load:
        time.sleep(3)
    totals = load.check()
    assert not totals["errors"] and not load.enqueue_errors, totals
    assert all(totals["grants"].get(name) for name in ("pool", "sem", "lock", "rate"))


def test_every_primitive_stays_safe_while_its_slot_moves_and_moves_back(cluster):
    cluster.flushall()
    with Load(cluster) as load:
        slots = [load.slot_of(name) for name in ("pool", "sem", "lock", "rate", "queue")]
        owners = {}
        time.sleep(0.5)
        for slot in slots:
            migration = SlotMigration(cluster.nodes, slot)
            owners[slot] = migration.source
            try:
                migration.run(batch=1, pause=pause)
            finally:
                migration.close()
            time.sleep(0.2)
        for slot in slots[:3]:  # and back
            migration = SlotMigration(cluster.nodes, slot, target=owners[slot])
            try:
                migration.run(batch=1, pause=pause)
            finally:
                migration.close()
            time.sleep(0.2)
    totals = load.check()
    assert all(totals["grants"].get(name) for name in ("pool", "sem", "lock", "rate")), totals
    assert not load.stranded(slots)
    print("reshard totals:", totals)


def test_a_move_stopped_by_a_key_on_both_nodes_is_unavailable_not_wrong_until_fixed(cluster):
    cluster.flushall()
    with Load(cluster) as load:
        time.sleep(0.5)
        slot = load.slot_of("pool")
        base = base_key(load.prims["pool"])
        planted = f"{base}:planted"
        migration = SlotMigration(cluster.nodes, slot)
        try:
            load.client.set(planted, "source")
            migration.begin()
            target = migration._conns[migration.target]
            pipe = target.pipeline(transaction=False)
            pipe.execute_command("ASKING")
            pipe.set(planted, "target")
            pipe.execute()
            ours = [key for key in migration.keys_on(migration.source) if key != planted]
            assert ours, "the pool has keys to move"
            migration.move(keys=ours[:1])
            with pytest.raises(Exception, match="BUSYKEY"):
                migration.move(keys=[planted])
            time.sleep(3.0)  # the slot stays half-moved while the load runs
            migration.fix()
        finally:
            migration.close()
        time.sleep(0.5)
    totals = load.check()
    assert totals["errors"].get("pool"), "the half-moved pool answered as if whole"
    assert totals["longest_gap"]["pool"] >= 2.5, totals
    assert not load.stranded([slot])
