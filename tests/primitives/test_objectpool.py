"""ObjectPool, node-pool's behaviours one by one (and the failures node-pool
has that this pool fixes), fork safety with a real fork, and the global cap
across processes through a real Redis Semaphore."""

from __future__ import annotations

import itertools
import multiprocessing
import os
import threading
import time
from typing import Any

import pytest

from django_redis_pool import NotConfigured, NotOwned, ResourceUnavailable, Semaphore
from django_redis_pool.primitives.object_pool import global_limit
from django_redis_pool.primitives.object_pool.pool import ObjectPool
from tests.support.client_specs import client_from, spec_of
from tests.support.waiting import STALL, floor_of, wait_for

mp = multiprocessing.get_context("fork")


class Conn:
    """A made object: knows its number and whether it was closed."""

    numbers = itertools.count(1)

    def __init__(self) -> None:
        self.number = next(self.numbers)
        self.closed = False
        self.healthy = True

    def __repr__(self) -> str:
        return f"<Conn {self.number}>"


def make_pool(**options: Any) -> tuple[ObjectPool[Conn], list[Conn]]:
    made: list[Conn] = []

    def factory() -> Conn:
        conn = Conn()
        made.append(conn)
        return conn

    def destroy(conn: Conn) -> None:
        conn.closed = True

    options.setdefault("destroy", destroy)
    return ObjectPool(factory, **options), made


def test_min_objects_are_created_at_start() -> None:
    pool, made = make_pool(min=2, max=4)
    wait_for(lambda: pool.available == 2, what="min objects")
    assert pool.size == 2 and len(made) == 2


def test_autostart_false_creates_nothing_until_start() -> None:
    pool, made = make_pool(min=2, autostart=False)
    time.sleep(0.05)  # (time for a wrong start in the background to happen)
    assert made == [] and pool.size == 0
    pool.start()
    wait_for(lambda: pool.available == 2)


def test_acquire_lends_and_release_returns_an_object() -> None:
    pool, _ = make_pool(max=2)
    obj = pool.acquire()
    assert pool.borrowed == 1 and pool.available == 0
    pool.release(obj)
    assert pool.borrowed == 0 and pool.available == 1
    assert pool.acquire() is obj, "the idle object is lent again"


def test_never_more_than_max_objects() -> None:
    pool, made = make_pool(max=2)
    a, b = pool.acquire(), pool.acquire()
    with pytest.raises(ResourceUnavailable):
        pool.acquire(timeout=0.1)
    assert len(made) == 2 and pool.spare_capacity == 0
    pool.release(a)
    pool.release(b)


def test_fifo_lends_the_longest_idle_and_lifo_the_latest() -> None:
    for fifo in (True, False):
        pool, _ = make_pool(max=3, fifo=fifo)
        objs = [pool.acquire() for _ in range(3)]
        for obj in objs:
            pool.release(obj)
        assert pool.acquire() is (objs[0] if fifo else objs[-1])


def test_waiters_are_served_by_priority_then_arrival() -> None:
    pool, _ = make_pool(max=1)
    held = pool.acquire()
    served: list[str] = []

    def wait(label: str, priority: int) -> None:
        obj = pool.acquire(priority=priority, timeout=10)
        served.append(label)
        pool.release(obj)

    threads: list[threading.Thread] = []
    for label, priority in (("low-1", 0), ("high", 5), ("low-2", 0)):
        thread = threading.Thread(target=wait, args=(label, priority))
        thread.start()
        threads.append(thread)
        queued = len(threads)
        wait_for(lambda queued=queued: pool.pending == queued)
    pool.release(held)
    for thread in threads:
        thread.join(10)
    assert served == ["high", "low-1", "low-2"]


def refused(pool: ObjectPool[Conn]) -> None:
    """An acquire(timeout=0) of ``pool`` (all on loan): a floor for a wait's bound."""
    with pytest.raises(ResourceUnavailable):
        pool.acquire(timeout=0)


def test_max_waiting_refuses_at_once() -> None:
    pool, _ = make_pool(max=1, max_waiting=1)
    held = pool.acquire()
    floor = floor_of(lambda: refused(pool))
    waiter = threading.Thread(target=lambda: pool.release(pool.acquire(timeout=5)))
    waiter.start()
    wait_for(lambda: pool.pending == 1)
    started = time.monotonic()
    with pytest.raises(ResourceUnavailable, match="max_waiting") as info:
        pool.acquire(timeout=5)
    assert time.monotonic() - started < 10 * floor + STALL, "not after its 5 s timeout"
    assert info.value.reason == ResourceUnavailable.FULL, "told apart from a timeout"
    pool.release(held)
    waiter.join(5)


def test_acquire_timeout_is_the_default_wait() -> None:
    pool, _ = make_pool(max=1, acquire_timeout=0.2)
    held = pool.acquire()
    floor = floor_of(lambda: refused(pool))
    started = time.monotonic()
    with pytest.raises(ResourceUnavailable):
        pool.acquire()
    assert 0.15 < time.monotonic() - started < 0.2 + 10 * floor + STALL
    pool.release(held)


def test_test_on_borrow_destroys_invalid_objects_and_lends_a_valid_one() -> None:
    pool, made = make_pool(max=2, test_on_borrow=True, validate=lambda c: c.healthy)
    first = pool.acquire()
    pool.release(first)
    first.healthy = False
    second = pool.acquire()
    assert second is not first and first.closed and len(made) == 2


def test_test_on_return_destroys_an_invalid_object() -> None:
    pool, _ = make_pool(max=2, test_on_return=True, validate=lambda c: c.healthy)
    obj = pool.acquire()
    obj.healthy = False
    pool.release(obj)
    assert obj.closed and pool.available == 0 and pool.size == 0


def test_validate_that_raises_counts_as_invalid() -> None:
    def explode(conn: Conn) -> bool:
        raise RuntimeError("probe failed")

    pool, _ = make_pool(max=2, test_on_return=True, validate=explode)
    obj = pool.acquire()
    pool.release(obj)
    assert obj.closed


def test_hard_idle_eviction_keeps_min_in_size() -> None:
    pool, _ = make_pool(min=1, max=4, idle_timeout=0.05, num_tests_per_eviction_run=10)
    objs = [pool.acquire() for _ in range(3)]
    for obj in objs:
        pool.release(obj)
    time.sleep(0.1)
    assert pool.evict() == 2
    assert pool.size == 1


def test_soft_idle_eviction_keeps_min_idle() -> None:
    pool, _ = make_pool(min=1, max=4, soft_idle_timeout=0.05, num_tests_per_eviction_run=10)
    objs = [pool.acquire() for _ in range(3)]
    pool.release(objs[0])
    pool.release(objs[1])
    time.sleep(0.1)
    assert pool.evict() == 1, "one idle object stays (min), the borrowed one too"
    assert pool.available == 1
    pool.release(objs[2])


def test_num_tests_per_eviction_run_bounds_a_run() -> None:
    pool, _ = make_pool(max=6, idle_timeout=0.01, num_tests_per_eviction_run=2)
    objs = [pool.acquire() for _ in range(6)]
    for obj in objs:
        pool.release(obj)
    time.sleep(0.05)
    assert pool.evict() == 2 and pool.available == 4


def test_eviction_runs_in_the_background_every_interval() -> None:
    pool, _ = make_pool(max=3, idle_timeout=0.01, eviction_interval=0.05)
    objs = [pool.acquire() for _ in range(3)]
    for obj in objs:
        pool.release(obj)
    wait_for(lambda: pool.size == 0, what="the evictor")


def test_use_releases_and_destroys_on_an_exception() -> None:
    pool, _ = make_pool(max=1)
    assert pool.use(lambda c: c.number) > 0
    assert pool.available == 1
    with pytest.raises(ZeroDivisionError):
        pool.use(lambda c: 1 / 0)
    assert pool.size == 0, "a possibly broken object is destroyed"


def test_borrow_is_a_context_manager() -> None:
    pool, _ = make_pool(max=1)
    with pool.hold() as obj:
        assert pool.borrowed == 1
    assert pool.borrowed == 0 and pool.available == 1
    with pytest.raises(KeyError), pool.hold() as obj:
        raise KeyError("broken")
    assert obj.closed


def test_releasing_a_foreign_object_or_twice_is_an_error_that_changes_nothing() -> None:
    pool, _ = make_pool(max=2)
    obj = pool.acquire()
    with pytest.raises(NotOwned):
        pool.release(Conn())
    pool.release(obj)
    with pytest.raises(NotOwned):
        pool.release(obj)
    with pytest.raises(NotOwned):
        pool.destroy(obj)
    assert (pool.available, pool.borrowed, obj.closed) == (1, 0, False)


def test_drain_serves_earlier_waiters_refuses_new_ones_and_waits_for_loans() -> None:
    pool, _ = make_pool(max=1)
    held = pool.acquire()
    got: list[Any] = []
    waiter = threading.Thread(target=lambda: got.append(pool.acquire(timeout=5)))
    waiter.start()
    wait_for(lambda: pool.pending == 1)
    done = threading.Event()
    drainer = threading.Thread(target=lambda: (pool.drain(), done.set()))
    drainer.start()
    wait_for(lambda: pool._draining)
    with pytest.raises(ResourceUnavailable, match="draining"):
        pool.acquire(timeout=0)
    pool.release(held)
    waiter.join(5)
    assert got and not done.is_set(), "the earlier waiter was served; its loan is out"
    pool.release(got[0])
    assert done.wait(5)


def test_clear_destroys_idle_objects_and_never_lends_them() -> None:
    pool, _ = make_pool(min=0, max=3)
    objs = [pool.acquire() for _ in range(3)]
    pool.release(objs[0])
    pool.release(objs[1])
    pool.clear()
    assert objs[0].closed and objs[1].closed and pool.available == 0
    fresh = pool.acquire(timeout=5)
    assert not fresh.closed and fresh not in objs[:2]
    pool.release(objs[2])


def test_a_failing_factory_backs_off_and_fails_on_time_with_its_error() -> None:
    calls: list[float] = []

    def broken() -> Conn:
        calls.append(time.monotonic())
        raise ConnectionError("cannot connect")

    pool = ObjectPool(broken, max=2)
    full, _ = make_pool(max=1)
    full.acquire()
    floor = floor_of(lambda: refused(full))
    started = time.monotonic()
    with pytest.raises(ResourceUnavailable) as raised:
        pool.acquire(timeout=0.5)
    assert time.monotonic() - started < 0.5 + 10 * floor + STALL, "fails on time"
    assert isinstance(raised.value.__cause__, ConnectionError)
    assert len(calls) < 10, f"no spinning: {len(calls)} calls in half a second"
    gaps = [b - a for a, b in itertools.pairwise(calls)]
    assert all(g >= 0.04 for g in gaps[1:]), gaps


def test_a_factory_that_keeps_failing_refuses_a_caller_that_waits_forever() -> None:
    def broken() -> Conn:
        raise OSError("still down")

    pool = ObjectPool(broken, max=1)
    with pytest.raises(ResourceUnavailable, match="failed 4 times") as raised:
        pool.acquire()  # no timeout: refused after the retries, not forever
    assert isinstance(raised.value.__cause__, OSError)


def test_min_is_restored_after_failures_and_destroys() -> None:
    failures = iter([True, True, False, False, False])

    def flaky() -> Conn:
        if next(failures, False):
            raise RuntimeError("flaky")
        return Conn()

    pool = ObjectPool(flaky, min=2, max=3)
    wait_for(lambda: pool.available == 2, timeout=10, what="min after failures")
    obj = pool.acquire()
    pool.destroy(obj)
    wait_for(lambda: pool.size == 2, what="min after a destroy")


def test_counters_add_up() -> None:
    pool, _ = make_pool(min=1, max=5)
    wait_for(lambda: pool.available == 1)
    obj = pool.acquire()
    assert (pool.size, pool.available, pool.borrowed, pool.pending) == (1, 0, 1, 0)
    assert (pool.spare_capacity, pool.max, pool.min) == (4, 5, 1)
    pool.release(obj)


def test_bad_options_name_the_value() -> None:
    with pytest.raises(ValueError, match="min"):
        ObjectPool(Conn, min=3, max=2)
    with pytest.raises(ValueError, match="max"):
        ObjectPool(Conn, max=0)
    with pytest.raises(TypeError, match="factory"):
        ObjectPool("Conn")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="idle_timeout"):
        ObjectPool(Conn, idle_timeout=-1)


# -- fork safety ------------------------------------------------------------------------


def test_a_forked_child_starts_empty_and_never_touches_the_parents_objects() -> None:
    pool, _ = make_pool(min=2, max=4)
    wait_for(lambda: pool.available == 2)
    # the parent's objects themselves (kept alive here, so that no new object
    # in the child can take the address, and so the id, of one of them)
    parent_objs = [item.obj for item in pool._idle]
    lent = pool.acquire()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        ok = True
        try:
            ok &= pool.borrowed == 0 and pool.available == 0
            try:
                pool.release(lent)
                ok = False
            except NotOwned:
                pass
            wait_for(lambda: pool.available == 2, what="the child's own min")
            child_objs = [item.obj for item in pool._idle]
            shared = [c for c in child_objs if any(c is p for p in parent_objs)]
            ok &= not shared and not lent.closed
        finally:
            os.write(write, b"1" if ok else b"0")
            os._exit(0)
    os.waitpid(pid, 0)
    assert os.read(read, 1) == b"1"
    assert pool.borrowed == 1 and not lent.closed, "the parent's loan is untouched"
    pool.release(lent)


# -- the global cap ------------------------------------------------------------------------


def _capped_worker(spec: tuple[str, str, int], log_key: str, seconds: float) -> None:
    client = client_from(spec)
    semaphore = Semaphore(client, "conns", lease_timeout=5)

    def factory() -> str:
        client.incr(log_key)  # one more live object everywhere
        peak = int(client.get(log_key))
        client.rpush(f"{log_key}:peaks", peak)
        return f"conn-{os.getpid()}-{time.monotonic()}"

    def destroy(obj: str) -> None:
        client.decr(log_key)

    pool = ObjectPool(factory, destroy=destroy, max=5, global_limit=semaphore)
    deadline = time.monotonic() + seconds

    def borrow_repeatedly() -> None:  # three borrowers: this process wants up to 3
        while time.monotonic() < deadline:
            with pool.hold(timeout=30) as _obj:
                time.sleep(0.01)
            if int(time.monotonic() * 10) % 3 == 0:
                pool.clear()  # objects come and go

    threads = [threading.Thread(target=borrow_repeatedly) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    pool.drain()

    # a creation still waiting for a slot may finish after the last borrow:
    # clear until nothing is left
    def cleared() -> bool:
        pool.clear()
        return not pool.size

    wait_for(cleared, what="the last creations to end")


def test_four_processes_of_max_5_never_hold_more_than_the_global_limit_of_6(client: Any) -> None:
    Semaphore(client, "conns").set_max_size(6)
    log_key = "{semaphore:conns}:live"
    procs = [
        mp.Process(target=_capped_worker, args=(spec_of(client), log_key, 2.0)) for _ in range(4)
    ]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(60)
        assert proc.exitcode == 0
    peaks = [int(p) for p in client.lrange(f"{log_key}:peaks", 0, -1)]
    assert peaks and max(peaks) <= 6, max(peaks)
    assert max(peaks) == 6, "the cap was reached"
    assert int(client.get(log_key)) == 0
    assert Semaphore(client, "conns").get_current_size() == 0, "every slot was released"


def test_borrowing_an_idle_object_makes_no_redis_call(redis_client: Any) -> None:
    from tests.support.redis_inspect import commands_run_by

    semaphore = Semaphore(redis_client, "conns", lease_timeout=30)
    semaphore.set_max_size(2)
    pool = ObjectPool(Conn, max=2, global_limit=semaphore)
    obj = pool.acquire(timeout=5)
    pool.release(obj)
    ran = commands_run_by(redis_client, lambda: [pool.release(pool.acquire()) for _ in range(50)])
    assert ran == {}, ran
    pool.clear()


def test_a_global_limit_function_is_called_by_the_first_creation_not_by_the_build(
    redis_client: Any,
) -> None:
    semaphore = Semaphore(redis_client, "found-late", lease_timeout=30)
    semaphore.set_max_size(1)
    asked: list[int] = []

    def find() -> Semaphore:
        asked.append(1)
        return semaphore

    pool = ObjectPool(Conn, max=2, global_limit=find, autostart=False)
    assert asked == [], "building the pool calls nothing"
    lent = pool.acquire(timeout=5)
    assert asked == [1] and semaphore.get_current_size() == 1
    pool.destroy(lent)
    pool.destroy(pool.acquire(timeout=5))
    assert asked == [1], "called once"
    assert semaphore.get_current_size() == 0


def test_a_global_limit_name_needs_the_django_layer(monkeypatch: Any) -> None:
    monkeypatch.setattr(global_limit, "semaphore_by_name", None)
    pool = ObjectPool(Conn, max=1, global_limit="configured-in-django")  # no I/O, no import
    with pytest.raises(ResourceUnavailable) as raised:
        pool.acquire(timeout=0.3)
    assert isinstance(raised.value.__cause__, NotConfigured)
    assert "configured-in-django" in str(raised.value.__cause__)


def test_a_forked_child_never_frees_or_renews_its_parents_global_slots(redis_client: Any) -> None:
    semaphore = Semaphore(redis_client, "slots", lease_timeout=30)
    semaphore.set_max_size(5)
    pool = ObjectPool(Conn, max=2, global_limit=semaphore, global_lease_timeout=1.0)
    lent = pool.acquire(timeout=5)
    assert semaphore.get_current_size() == 1
    pid = os.fork()
    if pid == 0:  # the child: an empty pool of its own; the parent's slot is not its
        code = 1
        try:
            pool.clear()
            code = 0 if (pool.size, pool.borrowed) == (0, 0) else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    time.sleep(1.5)  # past the slot's 1 s lease: the parent's renewal thread kept it
    assert semaphore.get_current_size() == 1
    pool.destroy(lent)
    assert semaphore.get_current_size() == 0
