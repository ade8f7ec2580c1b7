"""TaskQueue behaviour, one sentence of API.md at a time: the five policies,
workers, progress, failures, JSON only, redelivery after a worker dies, dead
letter, results expiring, deferred tasks.

Runs against a real redis-server and again against the real local Redis
Cluster (the ``client`` fixture is parametrized).
"""

from __future__ import annotations

import importlib
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from django_redis_pool import ResourceUnavailable
from django_redis_pool.primitives.queue.taskqueue import (
    Task,
    TaskExecutePolicy,
    TaskFailed,
    TaskQueue,
    WorkerLost,
)
from tests.support.client_specs import client_from, spec_of
from tests.support.primitive_helpers import (
    LONG_CHUNK,
    assert_constructor_does_no_io,
    ops,
    redis_time,
)
from tests.support.waiting import STALL, floor_of, wait_blocked, wait_for

Policy = TaskExecutePolicy
mp = multiprocessing.get_context("fork")

#: Every test here runs on the blocking API and on the asyncio twins.
pytestmark = pytest.mark.usefixtures("api")

PACKAGE = Path(__file__).resolve().parents[2] / "django_redis_pool"


def handler(task: Task) -> Any:
    """The handler every test process shares: what each task name does."""
    if task.name == "add":
        return task.params["a"] + task.params["b"]
    if task.name == "nothing":
        return None
    if task.name == "zero":
        return 0
    if task.name == "where":
        return f"{os.getpid()}"
    if task.name == "boom":
        raise RuntimeError("boom on purpose")
    if task.name == "bad-result":
        return {1, 2}
    if task.name == "progress":
        for i in range(1, 4):
            assert task.update(i, 3)
            time.sleep(0.05)
        return "counted"
    if task.name == "fraction":
        assert task.update(50.0, 100.0) and task.update(0.5, 1)
        return "halfway"
    if task.name == "bad-progress":
        refused = []
        for pair in task.params:  # {"float": "nan"}: a float JSON cannot carry
            current, total = (float(v["float"]) if isinstance(v, dict) else v for v in pair)
            try:
                task.update(current, total)
            except ValueError as exc:
                refused.append(str(exc))
        return refused
    if task.name == "exit":
        if task.params == "interrupt":
            raise KeyboardInterrupt("pressed inside the task")
        sys.exit(task.params)
    if task.name == "slow":
        time.sleep(task.params["seconds"])
        return "slept"
    raise KeyError(f"no handler for {task.name!r}")


@pytest.fixture
def queue(client: Any, request: pytest.FixtureRequest) -> TaskQueue:
    """The queue "jobs"; on ``long_client`` (idle waits of LONG_CHUNK) in a test
    that asks for it."""
    if "long_client" in request.fixturenames:
        client = request.getfixturevalue("long_client")
    return TaskQueue(client, "jobs", task_fn=handler, visibility_timeout=30)


@pytest.fixture
def worker(queue: TaskQueue) -> Iterator[threading.Event]:
    """A listening worker thread (for every name the tests use) until the test ends."""
    stop = threading.Event()
    names = ["add", "nothing", "zero", "where", "boom", "bad-result", "progress", "slow"]
    names += ["fraction", "bad-progress", "exit"]
    thread = threading.Thread(target=queue.listen, args=(names,), kwargs={"event": stop})
    thread.start()
    wait_for(lambda: queue.has_worker("add"), what="the worker to listen")
    yield stop
    stop.set()
    thread.join(10)
    assert not thread.is_alive()


def test_constructor_does_no_io() -> None:
    assert_constructor_does_no_io(
        lambda client: TaskQueue(
            client, "jobs", task_fn=handler, result_ttl=1, visibility_timeout=2
        )
    )


def test_pickle_is_imported_nowhere_in_the_package() -> None:
    offenders = [
        str(path)
        for path in PACKAGE.rglob("*.py")
        if "import pickle" in path.read_text() or "from pickle" in path.read_text()
    ]
    assert offenders == []


# -- policies ---------------------------------------------------------------------


def test_local_runs_in_the_calling_thread_and_writes_nothing(queue: TaskQueue, client: Any) -> None:
    assert queue.query("t1", "add", {"a": 1, "b": 2}, policy=Policy.Local) == 3
    assert queue.get_task("t1") is None
    assert queue.query("t2", "where", policy=Policy.Local) == str(os.getpid())


def test_remote_runs_by_a_worker(queue: TaskQueue, worker: threading.Event) -> None:
    assert queue.query("t1", "add", {"a": 2, "b": 3}, policy=Policy.Remote, timeout=10) == 5
    task = queue.get_task("t1")
    assert task is not None and task.status == "done" and task.result == 5
    assert task.attempts == 1 and task.worker is not None


def test_falsy_results_complete_normally(queue: TaskQueue, worker: threading.Event) -> None:
    assert queue.query("n", "nothing", policy=Policy.Remote, timeout=10) is None
    assert queue.query("z", "zero", policy=Policy.Remote, timeout=10) == 0
    assert queue.get_task("z").status == "done"


def test_remote_with_no_worker_times_out_and_withdraws(queue: TaskQueue) -> None:
    with pytest.raises(ResourceUnavailable, match=r"no result within 0\.3 s"):
        queue.query("t1", "add", {"a": 1, "b": 1}, policy=Policy.Remote, timeout=0.3)
    assert queue.get_task("t1") is None, "a task no worker started is withdrawn"
    assert queue.counts()["pending"] == 0


def test_a_started_task_waiting_for_redelivery_is_not_withdrawn_by_a_timed_out_query(
    client: Any,
) -> None:
    queue = TaskQueue(client, "jobs", task_fn=handler, visibility_timeout=0.2)
    task_id = queue.enqueue("add", {"a": 1, "b": 2})
    taken = ops(queue).run("queue_take", "dead-worker", 200, "add")  # (and the worker dies)
    assert taken[0] == task_id
    started = queue.get_task(task_id).started_at
    wait_for(lambda: redis_time(client) > started + 0.3, what="its deadline to pass")
    queue.gc()  # (back in the queue, to be delivered again)
    assert (queue.get_task(task_id).status, queue.get_task(task_id).attempts) == ("queued", 1)
    assert_a_query_giving_up_leaves(queue, task_id, 3, "what was begun is finished")


def assert_a_query_giving_up_leaves(queue: TaskQueue, task_id: str, result: int, why: str) -> None:
    """A query of task ``task_id`` ("add") that times out leaves it queued
    (``why``), and a worker then finishes it with ``result``."""
    with pytest.raises(ResourceUnavailable):
        queue.query(task_id, "add", {"a": 0, "b": 0}, policy=Policy.Remote, timeout=0.2)
    assert queue.get_task(task_id).status == "queued", why
    assert queue.listen(["add"], burst=True) == 1
    assert queue.get_task(task_id).result == result


def test_a_query_that_gives_up_leaves_the_task_another_query_waits_for(client: Any) -> None:
    # Two queries of one id share one task; the first to time out withdrew it,
    # and the other waited out its whole timeout for an end that never came.
    queue = TaskQueue(client, "jobs", task_fn=handler)
    results = []
    waiter = threading.Thread(
        target=lambda: results.append(
            queue.query("t1", "add", {"a": 1, "b": 2}, policy=Policy.Remote, timeout=30)
        )
    )
    waiter.start()
    wait_blocked(client, what="the first query to wait")
    assert_a_query_giving_up_leaves(queue, "t1", 3, "another query still waits for it")
    waiter.join(10)
    assert results == [3]


def test_a_query_that_gives_up_leaves_a_task_somebody_enqueued(client: Any) -> None:
    queue = TaskQueue(client, "jobs", task_fn=handler)
    task_id = queue.enqueue("add", {"a": 2, "b": 2})
    assert_a_query_giving_up_leaves(queue, task_id, 4, "it was asked for, to be run")


def test_once_leaves_the_result_to_the_other_queries_of_the_same_task(client: Any) -> None:
    queue = TaskQueue(client, "jobs", task_fn=handler)
    results = []

    def ask() -> None:
        results.append(
            queue.query("t1", "add", {"a": 3, "b": 4}, policy=Policy.Remote, timeout=30, once=True)
        )

    threads = [threading.Thread(target=ask) for _ in range(2)]
    for thread in threads:
        thread.start()
    wait_blocked(client, 2, what="both queries to wait")
    assert queue.listen(["add"], burst=True) == 1
    for thread in threads:
        thread.join(10)
    assert results == [7, 7]
    assert queue.get_task("t1") is None, "deleted once the last query read it"


def test_a_retried_task_is_ready_at_once_and_its_run_at_is_gone(client: Any) -> None:
    queue = TaskQueue(client, "jobs", task_fn=handler)
    run_at = redis_time(client) + 0.2
    task_id = queue.enqueue("boom", run_at=run_at)
    wait_for(lambda: redis_time(client) > run_at, what="the task to be due")
    assert queue.listen(["boom"], burst=True) == 1
    assert queue.retry(task_id)
    task = queue.get_task(task_id)
    assert (task.status, task.run_at) == ("queued", None)
    assert queue.counts()["pending"] == 1


def test_a_task_delivered_again_starts_without_its_dead_workers_progress(client: Any) -> None:
    queue = TaskQueue(client, "jobs", visibility_timeout=0.2)
    task_id = queue.enqueue("add", {"a": 1, "b": 2})
    ops(queue).run("queue_take", "dead-worker", 200, "add")
    assert ops(queue).run("queue_progress", task_id, "dead-worker", 1, "3", "10") == 1
    assert queue.get_task(task_id).progress == (3, 10)
    started = queue.get_task(task_id).started_at
    wait_for(lambda: redis_time(client) > started + 0.3, what="its deadline to pass")
    assert ops(queue).run("queue_take", "next-worker", 60000, "add")[0] == task_id
    assert queue.get_task(task_id).progress is None


def test_local_first_runs_here_and_remotely_when_it_fails(client: Any) -> None:
    def flaky(task: Task) -> Any:
        raise RuntimeError("not here")

    here = TaskQueue(client, "jobs", task_fn=flaky)
    remote = TaskQueue(client, "jobs", task_fn=handler)
    stop = threading.Event()
    thread = threading.Thread(target=remote.listen, args=(["add"],), kwargs={"event": stop})
    thread.start()
    try:
        wait_for(lambda: remote.has_worker("add"))
        assert here.query("t1", "add", {"a": 4, "b": 4}, policy=Policy.LocalFirst, timeout=10) == 8
        assert here.get_task("t1").status == "done", "it ran remotely"
        no_local = TaskQueue(client, "jobs")
        assert no_local.query("t2", "add", {"a": 1, "b": 0}, policy=Policy.LocalFirst) == 1
    finally:
        stop.set()
        thread.join(10)


def test_remote_first_runs_here_when_no_worker_listens(queue: TaskQueue) -> None:
    assert queue.query("t1", "where", policy=Policy.RemoteFirst, timeout=5) == str(os.getpid())
    assert queue.get_task("t1") is None


def test_remote_first_runs_here_when_no_worker_takes_it_in_time(
    queue: TaskQueue, client: Any
) -> None:
    # A live worker for "where", busy with a long task: nobody takes ours in time.
    stop = threading.Event()
    busy = TaskQueue(client, "jobs", task_fn=handler)
    thread = threading.Thread(target=busy.listen, args=(["slow", "where"],), kwargs={"event": stop})
    thread.start()
    try:
        wait_for(lambda: busy.has_worker("where"))
        # The floor: a task the idle worker takes and runs, there and back
        floor = floor_of(lambda: queue.query("t0", "where", policy=Policy.RemoteFirst, timeout=10))
        assert queue.get_task("t0").status == "done", "run remotely"
        busy.enqueue("slow", {"seconds": 1.5}, id="blocker")
        wait_for(lambda: busy.get_task("blocker").status == "running")
        started = time.monotonic()
        got = queue.query("t1", "where", policy=Policy.RemoteFirst, timeout=0.3)
        took = time.monotonic() - started
        assert got == str(os.getpid()) and queue.get_task("t1") is None, "withdrawn, run here"
        assert took < 0.3 + 10 * floor + STALL, "after its 0.3 s wait, not the 1.5 s task's"
    finally:
        stop.set()
        thread.join(10)


def test_remote_first_leaves_a_task_it_cannot_withdraw_and_says_so(queue: TaskQueue) -> None:
    queue.enqueue("where", id="t0")
    assert ops(queue).run("queue_take", "busy-worker", 60_000, "where")[0] == "t0"
    ops(queue).run("queue_beat", "busy-worker", 60_000, 60_000, "where", "t0")
    assert queue.has_worker("where"), "a live worker, busy with t0"
    queue.enqueue("where", id="t1")
    with pytest.raises(ResourceUnavailable):
        queue.query("t1", "where", policy=Policy.RemoteFirst, timeout=0.2)
    assert queue.get_task("t1").status == "queued", "enqueued to run: not withdrawn, not run here"


def test_auto_goes_remote_only_while_a_worker_listens(queue: TaskQueue, client: Any) -> None:
    assert queue.query("t1", "where", policy=Policy.Auto) == str(os.getpid())
    assert queue.get_task("t1") is None
    pid = os.fork()
    if pid == 0:  # a worker in another process
        try:
            child = TaskQueue(client_from(spec_of(client)), "jobs", task_fn=handler)
            child.listen(["where"], max_jobs=1)
        finally:
            os._exit(0)
    try:
        wait_for(lambda: queue.has_worker("where"), what="the child to listen")
        assert queue.query("t2", "where", policy=Policy.Auto, timeout=10) == str(pid)
    finally:
        os.waitpid(pid, 0)


# -- failures, JSON, progress ---------------------------------------------------------


def test_a_failing_handler_fails_the_task_at_once(
    queue: TaskQueue, worker: threading.Event
) -> None:
    with pytest.raises(TaskFailed, match="RuntimeError: boom on purpose") as failed:
        queue.query("t1", "boom", policy=Policy.Remote, timeout=10)
    task = queue.get_task("t1")
    assert task.status == "failed" and task.attempts == 1
    assert "raise RuntimeError" in task.traceback
    assert failed.value.task.traceback == task.traceback
    assert queue.counts()["failed"] == 1


def test_a_non_json_result_fails_the_task(queue: TaskQueue, worker: threading.Event) -> None:
    with pytest.raises(TaskFailed, match="JSON"):
        queue.query("t1", "bad-result", policy=Policy.Remote, timeout=10)
    with pytest.raises(TaskFailed, match="JSON"):
        queue.query("t2", "bad-result", policy=Policy.Local)


@pytest.mark.parametrize("params", [{1, 2}, b"bytes", object(), float("nan"), {"a": object()}])
def test_non_json_params_raise_type_error_before_anything_is_written(
    queue: TaskQueue, client: Any, params: Any
) -> None:
    with pytest.raises(TypeError, match="JSON"):
        queue.query("t1", "add", params, policy=Policy.Remote, timeout=0)
    with pytest.raises(TypeError, match="JSON"):
        queue.enqueue("add", params)
    assert queue.get_task("t1") is None and queue.counts()["pending"] == 0


def test_progress_is_visible_while_the_task_runs(queue: TaskQueue, worker: threading.Event) -> None:
    task_id = queue.enqueue("progress")
    seen: set[tuple[int, int]] = set()

    def saw_the_end() -> bool:
        task = queue.get_task(task_id)
        if task is not None and task.progress:
            seen.add(task.progress)
        return task is not None and task.status == "done"

    wait_for(saw_the_end, what="the task to end")
    final = queue.get_task(task_id)
    assert final.result == "counted", "progress never overwrites the result"
    assert final.progress == (3, 3) and seen & {(1, 3), (2, 3)}


def test_progress_takes_floats_and_keeps_ints_as_ints(
    queue: TaskQueue, worker: threading.Event
) -> None:
    assert queue.query("f", "fraction", policy=Policy.Remote, timeout=10) == "halfway"
    assert queue.query("i", "progress", policy=Policy.Remote, timeout=10) == "counted"
    fraction, whole = queue.get_task("f").progress, queue.get_task("i").progress
    assert fraction == (0.5, 1) and [type(v) for v in fraction] == [float, int]
    assert whole == (3, 3) and [type(v) for v in whole] == [int, int]


def test_progress_that_is_not_a_finite_number_is_refused_naming_it(
    queue: TaskQueue, worker: threading.Event
) -> None:
    bad = [[True, 1], ["1", 2], [1, None], [{"float": "nan"}, 1], [1, {"float": "-inf"}]]
    refused = queue.query("b", "bad-progress", bad, policy=Policy.Remote, timeout=10)
    named = ["current", "current", "total", "current", "total"]
    got = ["True", "'1'", "None", "nan", "-inf"]
    assert [m.split(" ")[0] for m in refused] == named
    assert [m.rpartition("got ")[2].split(":")[0] for m in refused] == got
    assert all("must be a finite int or float" in m for m in refused)
    assert queue.get_task("b").progress is None, "nothing was stored"


def test_submit_returns_the_task_as_get_task_reads_it(queue: TaskQueue, client: Any) -> None:
    before = redis_time(client)
    submitted = queue.submit("add", {"a": 1, "b": (2, 3)}, priority=5, run_at=before + 60)
    assert submitted == queue.get_task(submitted.id)
    assert submitted.params == {"a": 1, "b": [2, 3]}, "as JSON stores it"
    assert submitted.status == "queued" and submitted.priority == 5
    before_ms = int(before * 1000) / 1000  # the task's times are whole ms
    assert before_ms <= submitted.enqueued_at <= redis_time(client), "on the Redis clock"
    again = queue.submit("add", {"a": 9}, id=submitted.id)
    assert again == submitted, "an id already there: the task as it is"


def test_a_task_delivered_again_keeps_its_first_and_latest_start(client: Any) -> None:
    queue = TaskQueue(client, "jobs", task_fn=handler, visibility_timeout=30)
    task_id = queue.enqueue("add", {"a": 1, "b": 1})
    assert isinstance(ops(queue).run("queue_take", "ghost", 200, "add"), list)
    first = queue.get_task(task_id)
    assert first.first_started_at == first.started_at is not None
    start = redis_time(client)
    wait_for(lambda: redis_time(client) > start + 0.25, what="the ghost's deadline")
    assert queue.gc()[1] == [task_id]
    waiting = queue.get_task(task_id)
    assert waiting.status == "queued" and waiting.workers == ["ghost"]
    assert (waiting.first_started_at, waiting.started_at) == (first.started_at,) * 2
    assert queue.listen(["add"], burst=True) == 1
    done = queue.get_task(task_id)
    assert done.first_started_at == first.started_at < done.started_at
    assert done.attempts == 2 and done.workers[0] == "ghost"


def test_a_retried_enqueue_changes_nothing_twice(queue: TaskQueue) -> None:
    assert queue.enqueue("add", {"a": 1, "b": 1}, id="same") == "same"
    assert queue.enqueue("add", {"a": 9, "b": 9}, id="same") == "same"
    assert queue.get_task("same").params == {"a": 1, "b": 1}
    assert queue.counts()["pending"] == 1


# -- workers ----------------------------------------------------------------------------


def test_burst_runs_what_is_ready_and_returns(queue: TaskQueue) -> None:
    ids = [queue.enqueue("add", {"a": i, "b": i}) for i in range(5)]
    assert queue.listen(["add"], burst=True) == 5
    assert [queue.get_task(i).result for i in ids] == [0, 2, 4, 6, 8]


def test_max_jobs_stops_a_worker(queue: TaskQueue) -> None:
    for i in range(5):
        queue.enqueue("add", {"a": i, "b": 0})
    assert queue.listen(["add"], workers=2, max_jobs=3) == 3
    assert queue.counts()["pending"] == 2


@pytest.mark.parametrize("how", [0, 3, "interrupt"])
def test_a_handler_that_exits_fails_its_task_and_the_worker_goes_on(
    queue: TaskQueue, how: Any
) -> None:
    failed = queue.enqueue("exit", how)
    after = queue.enqueue("add", {"a": 1, "b": 1})
    assert queue.listen(["exit", "add"], burst=True) == 2, "one worker thread ran both"
    task = queue.get_task(failed)
    cls = "KeyboardInterrupt" if how == "interrupt" else "SystemExit"
    assert task.status == "failed" and task.error.startswith(cls)
    assert task.attempts == 1 and f"{cls}" in task.traceback
    assert queue.get_task(after).result == 2


def _listen_in_the_main_thread(spec: tuple[str, str, int]) -> None:
    signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a fresh process
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    queue = TaskQueue(client_from(spec), "jobs", task_fn=handler)
    queue.listen(["add"])


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_to_the_worker_process_still_stops_it(client: Any, signum: int) -> None:
    queue = TaskQueue(client, "jobs", task_fn=handler)
    proc = mp.Process(target=_listen_in_the_main_thread, args=(spec_of(client),))
    proc.start()
    try:
        wait_for(lambda: queue.has_worker("add"), what="the worker to listen")
        os.kill(proc.pid, signum)
        proc.join(10)
        assert proc.exitcode is not None and proc.exitcode != 0
    finally:
        if proc.is_alive():
            proc.kill()
            proc.join()


def test_higher_priority_tasks_run_first(queue: TaskQueue) -> None:
    low = queue.enqueue("add", {"a": 0, "b": 0}, priority=-5)
    high = queue.enqueue("add", {"a": 0, "b": 0}, priority=50)
    queue.listen(["add"], max_jobs=1)
    assert queue.get_task(high).status == "done" and queue.get_task(low).status == "queued"


def test_counts_a_worker_that_listens_before_any_task_of_its_names(
    queue: TaskQueue, worker: threading.Event
) -> None:
    # Nothing was ever enqueued: the listening worker is live all the same
    # (counts() found live workers only under names of enqueued tasks).
    assert queue.has_worker("add") and queue.counts()["workers"] == 1


def test_an_idle_worker_is_woken_by_the_enqueue(
    long_client: Any, queue: TaskQueue, worker: threading.Event
) -> None:
    wait_blocked(queue.client, what="the worker to block on its wake list")
    chunk = ops(queue).chunk()  # how long an idle wait lasts without a push
    assert chunk == LONG_CHUNK
    started = time.monotonic()
    assert queue.query("t1", "add", {"a": 1, "b": 1}, policy=Policy.Remote, timeout=10) == 2
    # woken by the push, not by its chunk running out
    assert time.monotonic() - started < chunk * 0.75


def test_idle_workers_stop_at_once_when_the_event_is_set(
    long_client: Any, queue: TaskQueue, client: Any
) -> None:
    chunk = ops(queue).chunk()  # how long an idle wait lasts without a push
    assert chunk == LONG_CHUNK
    stop = threading.Event()
    thread = threading.Thread(
        target=queue.listen, args=(["add"],), kwargs={"event": stop, "workers": 3}
    )
    thread.start()
    wait_for(lambda: queue.has_worker("add"), what="the workers to listen")
    wait_blocked(queue.client, 3, what="the workers to block")
    stop.set()
    thread.join(chunk * 0.75)  # woken by the push of a listen() that stops, not by a chunk
    assert not thread.is_alive()
    assert not list(client.scan_iter(match=f"{queue.base}:halt:*"))


def test_a_deferred_task_runs_when_due(
    long_client: Any, queue: TaskQueue, client: Any, worker: threading.Event
) -> None:
    chunk = ops(queue).chunk()  # an idle wait not timed to the task ends then
    assert chunk == LONG_CHUNK
    # (deferred by 3 s, not 0.5 s: on a busy machine the enqueue and the count,
    # the first calls of an asyncio Cluster twin, took longer than 0.5 s)
    run_at = redis_time(client) + chunk / 10
    task_id = queue.enqueue("add", {"a": 5, "b": 5}, run_at=run_at)
    scheduled = queue.counts()["scheduled"]
    if redis_time(client) < run_at:  # counted before it was due (Redis clock)
        assert scheduled == 1
    wait_for(lambda: queue.get_task(task_id).status == "done", what="the deferred task")
    task = queue.get_task(task_id)
    assert task.started_at >= run_at and task.result == 10
    assert task.started_at - run_at < chunk / 2, "woken on time, not by a chunk"


def _die_mid_task(spec: tuple[str, str, int]) -> None:
    queue = TaskQueue(client_from(spec), "jobs", task_fn=handler, visibility_timeout=0.5)
    queue.listen(["slow"], max_jobs=1)


def test_a_task_of_a_killed_worker_is_delivered_again(client: Any) -> None:
    queue = TaskQueue(client, "jobs", task_fn=handler, visibility_timeout=0.5)
    task_id = queue.enqueue("slow", {"seconds": 60})
    proc = mp.Process(target=_die_mid_task, args=(spec_of(client),))
    proc.start()
    wait_for(lambda: queue.get_task(task_id).status == "running", what="the worker to start it")
    os.kill(proc.pid, signal.SIGKILL)
    proc.join(10)
    assert queue.get_task(task_id).attempts == 1
    fast = TaskQueue(client, "jobs", task_fn=lambda task: "second run", visibility_timeout=0.5)
    # The deadline passes (no heartbeat): the next take delivers it again.
    assert fast.listen(["slow"], max_jobs=1) == 1
    task = queue.get_task(task_id)
    assert (task.status, task.result, task.attempts) == ("done", "second run", 2)


def test_a_task_whose_workers_keep_dying_ends_in_the_dead_letter(client: Any) -> None:
    queue = TaskQueue(client, "jobs", task_fn=handler, visibility_timeout=0.3, max_attempts=2)
    task_id = queue.enqueue("slow", {"seconds": 60})
    for attempt in (1, 2):
        proc = mp.Process(target=_die_mid_task, args=(spec_of(client),))
        proc.start()
        wait_for(lambda a=attempt: queue.get_task(task_id).attempts == a)
        os.kill(proc.pid, signal.SIGKILL)
        proc.join(10)
    start = redis_time(client)  # the killed workers' visibility timeout is 0.5 s
    wait_for(lambda: redis_time(client) > start + 0.55, what="the last deadline")
    _, requeued, failed = queue.gc()
    assert (requeued, failed) == ([], [task_id])
    task = queue.get_task(task_id)
    assert task.status == "failed" and "died" in task.error and task.attempts == 2
    # its error names an importable exception class, and its traceback says why
    module, _, name = task.error.partition(":")[0].rpartition(".")
    assert getattr(importlib.import_module(module), name) is WorkerLost
    assert task.traceback == task.error + "\n"
    with pytest.raises(WorkerLost, match="died or stalled on each of its 2 attempt"):
        queue.query(task_id, "slow", {"seconds": 60}, policy=Policy.Remote, timeout=5)
    total, listed = queue.failed()
    assert total == 1 and listed[0].id == task_id
    assert queue.retry(task_id)
    retried = queue.get_task(task_id)
    assert retried.status == "queued" and retried.attempts == 0 and retried.workers == []
    assert retried.started_at is None and retried.first_started_at is None, "as new"
    assert queue.delete(task_id) and queue.get_task(task_id) is None


def test_a_worker_presumed_dead_cannot_finish_a_redelivered_task(client: Any) -> None:
    queue = TaskQueue(client, "jobs", task_fn=handler, visibility_timeout=0.2)
    task_id = queue.enqueue("add", {"a": 1, "b": 1})
    first = ops(queue).run("queue_take", "w1", 200, "add")
    start = redis_time(client)
    wait_for(lambda: redis_time(client) > start + 0.25)
    second = ops(queue).run("queue_take", "w2", 10_000, "add")
    assert second[0] == first[0] and int(second[3]) == 2
    assert ops(queue).run("queue_finish", task_id, "w1", "1", "done", "1", "") == 0
    assert ops(queue).run("queue_finish", task_id, "w2", "2", "done", "2", "") > 0, "its end time"
    assert queue.get_task(task_id).result == 2


# -- results ------------------------------------------------------------------------------


def test_results_expire_after_result_ttl(client: Any) -> None:
    queue = TaskQueue(client, "jobs", task_fn=handler, result_ttl=0.3)
    task_id = queue.enqueue("add", {"a": 1, "b": 2})
    queue.listen(["add"], burst=True)
    assert queue.get_task(task_id).result == 3
    wait_for(lambda: queue.get_task(task_id) is None, what="the result to expire")


def test_a_failed_task_queried_after_result_ttl_raises_its_failure_at_once(client: Any) -> None:
    # A failed task stays until retried or deleted, and so does the list its
    # end was pushed to (it expired after result_ttl, and a later query of the
    # task waited out its timeout for an end that had come long before).
    queue = TaskQueue(client, "jobs", task_fn=handler, result_ttl=0.2)
    task_id = queue.enqueue("boom")
    assert queue.listen(["boom"], burst=True) == 1
    finished = queue.get_task(task_id).finished_at
    wait_for(lambda: redis_time(client) > finished + 0.3, what="result_ttl to pass")
    assert queue.get_task(task_id).status == "failed", "kept for inspection"
    with pytest.raises(TaskFailed, match="boom on purpose"):
        queue.query(task_id, "boom", policy=Policy.Remote, timeout=5)


def test_once_deletes_the_task_when_its_result_is_read(
    queue: TaskQueue, worker: threading.Event
) -> None:
    assert queue.query("t1", "add", {"a": 1, "b": 1}, policy=Policy.Remote, once=True) == 2
    assert queue.get_task("t1") is None


def test_bad_arguments_name_the_value(client: Any) -> None:
    with pytest.raises(ValueError, match="max_attempts"):
        TaskQueue(client, "q", max_attempts=0)
    with pytest.raises(ValueError, match="visibility_timeout"):
        TaskQueue(client, "q", visibility_timeout=0)
    with pytest.raises(TypeError, match="task_fn"):
        TaskQueue(client, "q", task_fn="handler")
    queue = TaskQueue(client, "q")
    with pytest.raises(ValueError, match="priority"):
        queue.enqueue("x", priority=101)
    with pytest.raises(ValueError, match="task name"):
        queue.enqueue("has space")
    with pytest.raises(ValueError, match="policy"):
        queue.query("t", "x", policy="auto")
