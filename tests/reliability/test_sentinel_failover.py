"""Redis Sentinel failovers under load: processes loop over a semaphore of 2
and a lock through Sentinel (three Sentinels, a master, two replicas) while
the master is failed over on purpose (``SENTINEL FAILOVER``), stopped for 3 s
(SIGSTOP) and killed (SIGKILL).

Asynchronous replication lets a failover lose the last writes of the old
master: a grant it made just before the failover (or, on a master that comes
back from a stop, until the Sentinels demote it) may be gone on the new one,
which can then grant the same permit or lock again. What the library promises
(docs/operations.md, "What a failover can do") is the fenced model: each such
overlap is between an earlier hold whose holder finds it lost (at its release
or renewal) and a later hold with a higher fence. The processes record every
hold (its fence, when it began and ended on this host's monotonic clock, and
what its release said), and the test checks that model, that every error
reached them as ``BackendUnavailable``, and that every process went on alone
after each failover.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
import traceback
from collections.abc import Iterator
from typing import Any

import pytest
from redis.retry import Retry
from redis.sentinel import Sentinel

from django_redis_pool import BackendUnavailable, Lock, NotOwned, Semaphore
from django_redis_pool.primitives.clients.connections import (
    DeadlineBackoff,
    DeadlineSentinelManagedConnection,
)
from django_redis_pool.testing.sentinel import EmbeddedSentinelGroup
from tests.support.primitive_helpers import slot_lease

PROCESSES = 4
PERMITS = 2
HOLD = 0.003
#: A release that a failover lost leaves its hold until its lease ends.
LEASE = 3


@pytest.fixture(scope="module")
def group() -> Iterator[EmbeddedSentinelGroup]:
    with EmbeddedSentinelGroup(replicas=2, sentinels=3, down_after_ms=1000) as started:
        yield started


def client_of(sentinels: list[tuple[str, int]]) -> Any:
    """A client of the master as the Django layer builds one (deadlines, a
    short timeout, a few retries)."""
    return Sentinel(sentinels, sentinel_kwargs={"socket_timeout": 0.5}).master_for(
        "mymaster",
        socket_timeout=1,
        connection_class=DeadlineSentinelManagedConnection,
        retry=Retry(DeadlineBackoff(cap=0.5, base=0.05), 3),
    )


def worker(sentinels: list[tuple[str, int]], stop: Any, out: Any, index: int) -> None:
    client = client_of(sentinels)
    sem = Semaphore(client, "soak-sem", lease_timeout=LEASE)
    lock = Lock(client, "soak-lock", lease_timeout=LEASE)
    identity = f"w{index}"
    holds: list[tuple[str, int, float, float, str]] = []
    unavailable = 0
    others: list[str] = []

    def hold_sem() -> None:
        lease = slot_lease(sem, identity, timeout=1)
        if lease is None:
            return
        began = time.monotonic()
        time.sleep(HOLD)
        ended = time.monotonic()
        released = lease.release()
        holds.append(("sem", lease.fence, began, ended, "ok" if released else "lost"))

    def hold_lock() -> None:
        if not lock.acquire(timeout=1):
            return
        fence = lock.fence
        began = time.monotonic()
        time.sleep(HOLD)
        ended = time.monotonic()
        try:
            lock.release()
            outcome = "ok"
        except NotOwned:
            outcome = "lost"
        holds.append(("lock", fence, began, ended, outcome))

    while not stop.is_set():
        for body in (hold_sem, hold_lock):
            try:
                body()
            except BackendUnavailable:
                unavailable += 1
            except Exception as exc:
                others.append(f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}")
    out.put({"holds": holds, "unavailable": unavailable, "others": others})


def outside_the_fenced_model(holds: list[tuple[Any, ...]], bound: int) -> list[str]:
    """Holds that began while ``bound`` others were live, where the extra
    live ones were not all found lost by their holders with lower fences."""
    ordered = sorted(holds, key=lambda hold: hold[2])
    found = []
    for i, (_, fence, began, _, _) in enumerate(ordered):
        live = [other for other in ordered[:i] if other[3] > began]
        if len(live) < bound:
            continue
        lost = [other for other in live if other[4] == "lost" and other[1] < fence]
        if len(live) - len(lost) >= bound:
            found.append(f"{ordered[i]} began while {live} were live")
    return found


def test_failovers_keep_the_fenced_model_and_every_process_goes_on(group):
    setup = client_of(group.sentinels)
    Semaphore(setup, "soak-sem").set_max_size(PERMITS)
    ctx = multiprocessing.get_context("fork")
    stop, out = ctx.Event(), ctx.Queue()
    procs = [
        ctx.Process(target=worker, args=(group.sentinels, stop, out, i)) for i in range(PROCESSES)
    ]
    for proc in procs:
        proc.start()
    marks = []
    try:
        time.sleep(2)
        marks.append(("planned failover", time.monotonic()))
        group.failover()
        time.sleep(3)
        stopped = group.master()
        marks.append(("master stopped 3 s", time.monotonic()))
        os.kill(stopped.pid, signal.SIGSTOP)
        time.sleep(3)
        os.kill(stopped.pid, signal.SIGCONT)
        time.sleep(6)
        marks.append(("master killed", time.monotonic()))
        group.kill_master()
        time.sleep(LEASE + 4)
    finally:
        stop.set()
        records = [out.get(timeout=60) for _ in procs]
        for proc in procs:
            proc.join(30)
    others = [line for record in records for line in record["others"]]
    assert not others, "errors other than BackendUnavailable:\n" + "\n".join(others[:3])
    holds = [hold for record in records for hold in record["holds"]]
    for kind, bound in (("sem", PERMITS), ("lock", 1)):
        of_kind = [hold for hold in holds if hold[0] == kind]
        assert not outside_the_fenced_model(of_kind, bound), kind
        for name, at in marks:
            assert any(hold[2] > at + 2 for hold in of_kind), f"{kind}: nothing after {name}"
    last = marks[-1][1]
    for index, record in enumerate(records):
        assert any(hold[2] > last for hold in record["holds"]), f"process {index} stopped"
