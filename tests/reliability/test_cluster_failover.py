"""A Redis Cluster failover mid-run: a replica of the shard holding a pool and
a lock takes over (``CLUSTER FAILOVER``) while threads acquire and release;
and a shard that hangs.

The clients follow the new master, scripts are loaded there again when
missing, and the guarantees hold across it: fences keep increasing and no two
holds of one resource overlap. A coordinated failover loses no write; what an
unplanned one can lose is stated in docs/operations.md.
"""

from __future__ import annotations

import itertools
import os
import signal
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from django_redis_pool import Lock, PoolError, ResourcePool, get_pool
from django_redis_pool.primitives.clients.deadlines import DEADLINE_SLACK
from django_redis_pool.primitives.clients.stopwatch import Stopwatch
from django_redis_pool.testing import EmbeddedRedis, EmbeddedRedisCluster
from tests.support.primitive_helpers import ops
from tests.support.waiting import STALL, wait_for

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def replicated() -> Iterator[EmbeddedRedisCluster]:
    """3 masters, each with one replica."""
    with EmbeddedRedisCluster(masters=3, replicas=1) as cluster:
        yield cluster


def role_of(node: EmbeddedRedis) -> list[Any]:
    conn = node.client()
    try:
        return list(conn.execute_command("ROLE"))
    finally:
        conn.close()


def replica_of(cluster: EmbeddedRedisCluster, client: Any, key: str) -> EmbeddedRedis:
    """The replica of the master that serves ``key``."""
    master = client.nodes_manager.get_node_from_slot(client.keyslot(key))
    for node in cluster.nodes:
        role = role_of(node)
        if role[0] in (b"slave", "slave") and int(role[2]) == int(master.port):
            return node
    raise AssertionError(f"no replica of {master.name}")


def test_pools_and_locks_keep_their_guarantees_across_a_failover(replicated):
    client = replicated.client()
    pool = ResourcePool(client, "failover", resources=["r0", "r1"], lease_timeout=5)
    lock = Lock(client, "failover", lease_timeout=5)
    pool.collect()
    order = itertools.count()
    mutex = threading.Lock()
    holds: list[tuple[str, int, int, int]] = []  # (resource, fence, granted at, released at)
    errors: list[str] = []
    stop = threading.Event()

    def tick() -> int:
        with mutex:
            return next(order)

    def work(n: int) -> None:
        while not stop.is_set():
            try:
                if n % 2:
                    lease = pool.acquire(timeout=1)
                    if lease is None:
                        continue
                    granted = tick()
                    time.sleep(0.002)
                    ended = tick()
                    lease.release()
                    holds.append((lease.resource, lease.fence, granted, ended))
                else:
                    if not lock.acquire(timeout=1):
                        continue
                    granted = tick()
                    fence = lock.fence
                    time.sleep(0.002)
                    ended = tick()
                    lock.release()
                    holds.append(("lock", fence, granted, ended))
            except PoolError as exc:  # the shard is failing over: try again
                errors.append(type(exc).__name__)
                time.sleep(0.05)

    threads = [threading.Thread(target=work, args=(n,), daemon=True) for n in range(4)]
    for thread in threads:
        thread.start()
    try:
        wait_for(lambda: len(holds) >= 50, what="holds before the failover")
        before = len(holds)
        replica = replica_of(replicated, client, ops(pool).base)
        conn = replica.client()
        try:
            conn.execute_command("CLUSTER", "FAILOVER")
        finally:
            conn.close()
        wait_for(
            lambda: role_of(replica)[0] in (b"master", "master"), timeout=30, what="the failover"
        )
        wait_for(lambda: len(holds) >= before + 100, timeout=30, what="holds after the failover")
    finally:
        stop.set()
        for thread in threads:
            thread.join(10)

    by_resource: dict[str, list[tuple[int, int, int]]] = {}
    for resource, fence, granted, ended in holds:
        by_resource.setdefault(resource, []).append((granted, ended, fence))
    for resource, seq in by_resource.items():
        seq.sort()
        for (_, first_end, first_fence), (second_start, _, second_fence) in itertools.pairwise(seq):
            assert first_end < second_start, f"{resource}: two holds overlap"
            assert second_fence > first_fence, f"{resource}: a fence went backwards"
    assert sorted(pool.available()) == ["r0", "r1"] and not lock.locked()


def test_a_hung_shard_fails_a_request_within_its_timeout_plus_the_slack(settings):
    """The registry's Cluster client keeps deadlines too: a master that stops
    answering (SIGSTOP) fails an acquire within its timeout + 1 s."""
    with EmbeddedRedisCluster(masters=3) as cluster:
        settings.DJANGO_REDIS_POOL = {
            "CONNECTION": {"URL": cluster.url, "CLUSTER": True},
            "POOLS": {"printers": {"RESOURCES": ["p1"], "LEASE_TIMEOUT": 30}},
        }
        pool = get_pool("printers")
        watch = Stopwatch()
        held = pool.acquire(timeout=0)
        floor = watch.waited()  # the same call on a Cluster that answers
        assert held is not None
        client = pool.client
        port = client.nodes_manager.get_node_from_slot(client.keyslot(ops(pool).base)).port
        (node,) = [n for n in cluster.nodes if n.port == port]
        os.kill(node.pid, signal.SIGSTOP)
        try:
            watch = Stopwatch()  # (the time waited: a busy machine's CPU waits are not)
            with pytest.raises(PoolError):
                pool.acquire(timeout=0.5)
            assert watch.waited() < 0.5 + DEADLINE_SLACK + 10 * floor + STALL
        finally:
            os.kill(node.pid, signal.SIGCONT)
