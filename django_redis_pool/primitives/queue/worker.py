"""The workers of :meth:`.queue.TaskQueue.listen`: threads that take a task,
run it with the queue's ``task_fn`` while a heartbeat keeps it (and the
worker's presence) fresh, and store its end; between tasks they block on the
wake lists of their names, never poll. Nothing here imports Django."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import threading
import traceback
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from ...exceptions import CorruptRecord, PoolError, backend_errors
from .. import counts
from ..clients.connections import waits_client
from ..clients.deadlines import deadline
from ..text import printable, text
from ..wire.channel import MIN_BLOCK
from ..wire.keys import to_ms
from ..wire.protocol import TaskStatus
from .task import Task, dumps, error_message, task_from_fields

if TYPE_CHECKING:
    from ..wire.channel import Channel

__all__ = ["Budget", "Served", "Worker", "run_workers"]


class Served(Protocol):
    """What the workers need of the task queue they serve (a
    :class:`.queue.TaskQueue`): its channel and keys, its handler and limits."""

    channel: Channel
    base: str
    client: Any
    task_fn: Callable[[Task], Any] | None
    visibility_timeout: float
    max_payload: int


logger = logging.getLogger("django_redis_pool")

_HOST = socket.gethostname()
#: How often listen() looks at its stop event (a local check, no Redis call).
_STOP_CHECK = 0.1
#: How long the tokens that wake a stopping listen()'s idle workers last.
_HALT_TTL = 60.0
#: A worker that cannot reach Redis when it starts tries again after this many
#: seconds, then twice as long each time, up to RETRY_LONGEST.
RETRY_FIRST = 1.0
RETRY_LONGEST = 30.0


def run_workers(
    queue: Served,
    names: list[str],
    workers: int,
    stop: threading.Event,
    burst: bool,
    max_jobs: int | None,
) -> int:
    """What :meth:`.queue.TaskQueue.listen` does once its arguments are
    checked: run ``workers`` :class:`Worker` threads on ``names`` until they
    end; returns how many tasks ran."""
    budget = Budget(max_jobs)
    halt = uuid.uuid4().hex
    failures: list[BaseException] = []

    def run(worker: Worker) -> None:
        try:
            worker.run()
        except BaseException as exc:  # (told to the caller of listen(): never exit 0)
            failures.append(exc)
            stop.set()

    runners = [
        threading.Thread(
            target=run,
            args=(Worker(queue, names, stop, burst, budget, halt),),
            name=f"drp-worker-{i}",
            daemon=True,
        )
        for i in range(workers)
    ]
    for runner in runners:
        runner.start()
    try:
        _supervise(queue, runners, stop, halt)
    finally:
        with contextlib.suppress(PoolError), backend_errors():
            queue.client.delete(f"{queue.base}:halt:{halt}")
    if failures:
        raise failures[0]
    return budget.done


def _supervise(
    queue: Served, runners: list[threading.Thread], stop: threading.Event, halt: str
) -> None:
    """Wait for the worker threads. When ``stop`` is set, wake the idle ones
    at once (a push to the list they block on beside their wake lists), so
    that they need not wait for the end of their blocking chunk."""
    pending = runners
    while pending:
        pending[0].join(_STOP_CHECK)  # (returns at once when that thread ends)
        pending = [runner for runner in pending if runner.is_alive()]
        if pending and stop.is_set():
            try:
                queue.channel.run(
                    queue.channel.op("queue_halt", halt, len(pending), to_ms(_HALT_TTL))
                )
            except PoolError as exc:  # they see ``stop`` at their chunk's end
                logger.warning("could not wake the idle workers to stop: %s", exc)
            for runner in pending:
                runner.join()
            return


class Budget:
    """Tasks a listen() may still run (None: no limit), shared by its threads."""

    def __init__(self, limit: int | None) -> None:
        self.limit, self.done, self._lock = limit, 0, threading.Lock()

    def take(self) -> bool:
        with self._lock:
            if self.limit is not None and self.done >= self.limit:
                return False
            self.done += 1
            return True

    def give_back(self) -> None:
        with self._lock:
            self.done -= 1


class Worker:
    """One worker thread of :meth:`.queue.TaskQueue.listen`: takes a task, runs it
    while a heartbeat keeps it (and the worker's presence) fresh, reports its
    end; between tasks, blocks on the wake lists of its names."""

    def __init__(
        self,
        queue: Served,
        names: list[str],
        stop: threading.Event,
        burst: bool,
        budget: Budget,
        halt: str,
    ) -> None:
        self.queue, self.names, self.stop, self.burst, self.budget = (
            queue,
            names,
            stop,
            burst,
            budget,
        )
        #: Where its listen() pushes when it stops (blocked on beside the wake lists).
        self.halt_key = f"{queue.base}:halt:{halt}"
        self.id = f"{_HOST}:{os.getpid()}:{uuid.uuid4().hex[:12]}"
        self.running: list[str] = []
        #: Heartbeat period; presence lasts three periods.
        self.period = max(0.05, min(queue.visibility_timeout / 3, 10.0))
        self._beating = threading.Event()

    def run(self) -> None:
        beat = threading.Thread(target=self._heartbeat, name=f"{self.id}-beat", daemon=True)
        if not self._announce():
            return
        beat.start()
        try:
            while not self.stop.is_set():
                if not self.budget.take():
                    return
                try:
                    taken = self.queue.channel.run(
                        self.queue.channel.op(
                            "queue_take", self.id, to_ms(self.queue.visibility_timeout), *self.names
                        )
                    )
                except PoolError as exc:  # Redis down or failing: try again shortly
                    self.budget.give_back()
                    logger.warning("worker %s could not take a task: %s", self.id, exc)
                    self.stop.wait(self.period)
                    continue
                if isinstance(taken, list):
                    self._execute(*taken)
                    continue
                self.budget.give_back()
                if self.burst:
                    return
                try:
                    self._idle(int(taken))
                except PoolError as exc:
                    logger.warning("worker %s lost Redis while idle: %s", self.id, exc)
                    self.stop.wait(self.period)
        finally:
            self._beating.set()
            beat.join()
            with contextlib.suppress(PoolError):  # its presence expires anyway
                self.queue.channel.run(
                    self.queue.channel.op("queue_leave", self.id, "\n".join(self.names))
                )

    def _announce(self) -> bool:
        """The first heartbeat. While Redis cannot be reached, retry with a
        log line each time, pausing longer each time (up to
        :data:`RETRY_LONGEST` s), as Celery does with its broker; False if
        told to stop meanwhile. In ``burst`` mode, raise instead: a worker run
        once (from cron) must fail, not wait."""
        pause = RETRY_FIRST
        while True:
            try:
                self._beat()
                return True
            except PoolError as exc:
                if self.burst:
                    raise
                logger.error(
                    "worker %s cannot reach Redis (%s); trying again in %.0f s",
                    self.id,
                    exc,
                    pause,
                )
            if self.stop.wait(pause):
                return False
            pause = min(pause * 2, RETRY_LONGEST)

    def _idle(self, next_due_ms: int) -> None:
        """Wait for a wake token, the next deferred task or deadline, or a
        chunk (to see ``stop``), whichever comes first."""
        chunk = self.queue.channel.read_chunk()[0]
        block = chunk if next_due_ms < 0 else max(MIN_BLOCK, min(chunk, next_due_ms / 1000))
        keys = [f"{self.queue.base}:wake:{name}" for name in self.names] + [self.halt_key]
        with backend_errors():
            waits_client(self.queue.client).blpop(keys, timeout=block)

    def _execute(self, task_id: Any, name: Any, params: Any, attempt: Any, flat: Any) -> None:
        """Run the task just taken (its fields as ``queue_take`` returned them)
        and store its end. A task whose stored record cannot be read fails
        alone (:meth:`_unreadable`)."""
        task_id = text(task_id)
        if params is None and not flat:  # (queue_take dropped an id with no task hash)
            logger.error(
                "task %s of %r had no stored record (or not a hash): dropped from the queue",
                printable(task_id),
                self.queue,
            )
            self.queue.channel.counts.add(counts.FAILED)
            return
        fields = dict(zip(flat[0::2], flat[1::2], strict=True))
        fields["params"] = params
        attempt = str(int(attempt))
        try:
            task = task_from_fields(task_id, fields)
        except CorruptRecord as exc:
            self._unreadable(task_id, attempt, exc)
            return
        task.reporter = lambda current, total: (
            int(
                self.queue.channel.run(
                    self.queue.channel.op(
                        "queue_progress", task.id, self.id, attempt, current, total
                    )
                )
            )
            == 1
        )
        self.running.append(task.id)
        try:
            try:
                result = dumps(
                    self.queue.task_fn(task),  # type: ignore[misc]
                    f"the result of task {task.name!r}",
                    self.queue.max_payload,
                )
            except BaseException as exc:
                # Whatever the handler raised, SystemExit and KeyboardInterrupt
                # included, is its task's failure, not this worker's end: this
                # thread is never the main thread, so no signal to the process
                # raises here (its main thread handles them, see listen()).
                message = error_message(exc)
                logger.warning("task %r (%s) failed: %s", task.name, task.id, message)
                self._finish(task, attempt, TaskStatus.FAILED, message, traceback.format_exc())
            else:
                self._finish(task, attempt, TaskStatus.DONE, result, "")
        finally:
            self.running.remove(task.id)

    def _unreadable(self, task_id: str, attempt: str, exc: CorruptRecord) -> None:
        """Fail the task ``task_id``, whose stored record cannot be read, with
        ``exc``'s message (logged once, counted as failed): it is not run."""
        logger.error("%s: it fails without running", exc)
        # (the id as Redis has it, even if it is not UTF-8)
        stored_id = task_id.encode("utf-8", "surrogateescape")
        task = Task(id=stored_id, name="?", params=None)  # type: ignore[arg-type]
        self._finish(task, attempt, TaskStatus.FAILED, error_message(exc), "")

    def _finish(self, task: Task, attempt: str, status: str, outcome: str, trace: str) -> None:
        """Store the end of this delivery of ``task`` (``outcome``: its result
        as JSON text, or its error); then, if it was stored, tell the task's
        ``on_end`` hook what was stored. A Redis Cluster moving the queue's
        slot is waited out for up to the visibility timeout (the heartbeat
        keeps the task this worker's meanwhile): the task runs once."""
        try:
            with deadline(self.queue.visibility_timeout):
                finished = self.queue.channel.run(
                    self.queue.channel.op(
                        "queue_finish", task.id, self.id, attempt, status, outcome, trace
                    )
                )
        except PoolError as exc:
            logger.error(
                "task %r (%s) ran, but its outcome could not be stored (%s): it is "
                "delivered again once its deadline passes",
                task.name,
                task.id,
                exc,
            )
            return
        if not int(finished):
            logger.warning(
                "task %r (%s) finished after its deadline passed and it was delivered "
                "again: this run's outcome is dropped",
                task.name,
                task.id,
            )
            return
        done = status == TaskStatus.DONE
        self.queue.channel.counts.add(counts.COMPLETED if done else counts.FAILED)
        if task.on_end is None:
            return
        task.status, task.finished_at = status, int(finished) / 1000
        if status == TaskStatus.DONE:
            task.result = json.loads(outcome)
        else:
            task.error, task.traceback = outcome, trace or None
        try:
            task.on_end(task)
        except Exception:
            logger.exception("the end hook of task %r (%s) failed", task.name, task.id)

    def _heartbeat(self) -> None:
        while not self._beating.wait(self.period):
            try:
                self._beat()
            except PoolError as exc:
                logger.warning("worker %s missed a heartbeat: %s", self.id, exc)

    def _beat(self) -> None:
        self.queue.channel.run(
            self.queue.channel.op(
                "queue_beat",
                self.id,
                to_ms(self.period * 3),
                to_ms(self.queue.visibility_timeout),
                "\n".join(self.names),
                *list(self.running),
            )
        )
