"""Data someone else wrote into Redis fails alone.

A task whose stored record cannot be read (not UTF-8, not JSON, a field
missing, a count that is not one, a key that is not a hash) is stored as
failed with the library's error, counted and logged once; the worker goes
on with the next task; reading it raises :class:`CorruptRecord`, never a raw
decode error. A hypothesis test writes random bytes into each field of a
stored task and checks exactly that.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from django_redis_pool import CorruptRecord, PoolError, ResourcePool, TaskQueue
from tests.support.primitive_helpers import ops

#: The fields of a stored task's hash (engine.lua's key map).
FIELDS = ["name", "params", "status", "attempts", "priority", "enqueued", "max", "ttl", "keep"]


def stored(queue: TaskQueue, task_id: str) -> str:
    return f"{queue.base}:t:{task_id}"


def run_all(queue: TaskQueue) -> int:
    """Run every ready task in burst mode; fails the test if a worker thread dies."""
    return queue.listen(["job"], burst=True)


def ran_by(seen: list[str]) -> Any:
    def handler(task: Any) -> Any:
        seen.append(task.id)
        return task.params

    return handler


@pytest.mark.parametrize(
    ("field", "value"),
    [("params", b"\xff"), ("params", b"not json"), ("name", b"\xfe\xff"), ("attempts", b"many")],
)
def test_a_corrupt_task_fails_alone_and_the_worker_goes_on(redis_client, caplog, field, value):
    seen: list[str] = []
    queue = TaskQueue(redis_client, "corrupt", task_fn=ran_by(seen))
    for task_id in ("before", "bad", "after"):
        queue.enqueue("job", {"n": task_id}, id=task_id)
    redis_client.hset(stored(queue, "bad"), field, value)
    with caplog.at_level(logging.ERROR, logger="django_redis_pool"):
        run_all(queue)
    if field == "attempts":  # (a count that is not one is not the task's data)
        assert sorted(seen) == ["after", "bad", "before"]
        return
    assert sorted(seen) == ["after", "before"], "the others ran, the bad one did not"
    with pytest.raises(CorruptRecord, match="cannot be read"):
        queue.get_task("bad")
    total, failed = queue.failed()
    assert total == 1 and failed[0].id == "bad" and "cannot be read" in failed[0].error
    logged = [r for r in caplog.records if "cannot be read" in r.getMessage()]
    assert len(logged) == 1, "logged once"


def test_an_id_whose_record_is_not_a_hash_is_dropped_and_logged(redis_client, caplog):
    seen: list[str] = []
    queue = TaskQueue(redis_client, "nohash", task_fn=ran_by(seen))
    queue.enqueue("job", 1, id="a")
    queue.enqueue("job", 2, id="b")
    redis_client.delete(stored(queue, "a"))
    redis_client.set(stored(queue, "a"), "a string")
    with caplog.at_level(logging.ERROR, logger="django_redis_pool"):
        run_all(queue)
    assert seen == ["b"]
    assert any("no stored record" in r.getMessage() for r in caplog.records)
    assert queue.counts()["pending"] == 0


def test_reading_a_corrupt_task_is_the_librarys_error(redis_client):
    queue = TaskQueue(redis_client, "reads")
    queue.enqueue("job", [1], id="t")
    redis_client.hset(stored(queue, "t"), "params", b"\xff\xfe")
    with pytest.raises(CorruptRecord) as raised:
        queue.get_task("t")
    assert isinstance(raised.value, PoolError) and "\\udcff" not in str(raised.value)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(field=st.sampled_from(FIELDS), value=st.binary(max_size=24))
def test_random_bytes_in_any_field_never_stop_a_worker(redis_client, field, value):
    seen: list[str] = []
    redis_client.flushdb()
    queue = TaskQueue(redis_client, "fuzzed", task_fn=ran_by(seen))
    for task_id in ("one", "two", "three"):
        queue.enqueue("job", {"n": task_id}, id=task_id)
    redis_client.hset(stored(queue, "two"), field, value)
    run_all(queue)  # (a worker thread that dies fails the test: see pyproject's filterwarnings)
    assert {"one", "three"} <= set(seen), "every other task ran"
    try:
        task = queue.get_task("two")
    except CorruptRecord:
        task = None
    if "two" in seen:
        assert task is None or task.status in ("done", "failed")
    else:
        failed = {t.id: t for t in queue.failed()[1]}
        assert "two" in failed or task is None, "a task that did not run ended as failed"
    assert queue.counts()["pending"] == 0 and queue.counts()["running"] == 0


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(record=st.binary(max_size=40))
def test_random_bytes_as_a_lease_record_fail_that_lease_alone(redis_client, record):
    """A pool whose lease record of one resource was overwritten still lists
    its other holders, and the overwritten one reads as unreadable or as what
    the bytes say; an acquire never raises a raw decode error."""
    redis_client.flushdb()
    pool = ResourcePool(redis_client, "records", resources=["a", "b", "c"])
    held = [pool.acquire(holder=f"h{i}") for i in range(2)]
    assert all(held)
    redis_client.hset(f"{ops(pool).base}:info", held[0].resource, record)
    leases = {lease.resource: lease for lease in pool.leases()}
    assert leases[held[1].resource].holder == "h1", "the other lease is read as it is"
    try:
        lease = pool.acquire(timeout=0)
    except PoolError:
        lease = None  # (the library's own error only)
    if lease is not None:
        assert lease.resource == "c"
    pool.snapshot()  # (the admin's read: never a raw error)
