"""What ``manage.py pool_worker`` runs: the ``@task`` handlers of configured
queues, in this process or in forked ones, until told to stop.

:func:`work` gives each queue of a plan (queue name -> the task names to
take) a listening thread in this process; :func:`work_in_processes` runs
:func:`work` in N forked processes. Idle workers block on the queues' wake
lists (no polling). SIGTERM or SIGINT: running tasks finish, no new one is
taken, then they return. Database connections are closed around each task as
Django does around a request.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import signal
import threading
from collections.abc import Callable, Iterator
from typing import Any

from django.db import close_old_connections

from . import registry
from .kinds.queue import KIND
from .primitives.queue.taskqueue import Task, TaskQueue

__all__ = ["closing_connections", "on_signals", "work", "work_in_processes"]


def closing_connections(fn: Callable[[Task], Any]) -> Callable[[Task], Any]:
    """``fn`` with Django's database connections closed around it, as Django
    does around a request (a worker is a long-running process)."""

    def run(task: Task) -> Any:
        close_old_connections()
        try:
            return fn(task)
        finally:
            close_old_connections()

    return run


def work(plan: dict[str, list[str]], burst: bool, max_jobs: int | None) -> int:
    """Run the handlers of every queue of ``plan`` in this process, one thread
    per queue that has tasks to take, until stopped (``burst``: once nothing
    is ready; ``max_jobs``: after that many tasks per queue); returns how many
    tasks ran. A worker that failed (Redis unreachable in ``burst`` mode, a
    bug) stops the others and its error is raised here."""
    stop = threading.Event()
    ran: list[int] = []
    failures: list[BaseException] = []
    threads = []
    for name, tasks in plan.items():
        if not tasks:
            continue
        configured = registry.get(KIND, name)
        handlers = configured.task_fn
        assert handlers is not None  # (the queue kind builds each queue with its handlers)
        queue = TaskQueue(
            configured.client,
            name,
            task_fn=closing_connections(handlers),
            result_ttl=configured.result_ttl,
            visibility_timeout=configured.visibility_timeout,
            max_attempts=configured.max_attempts,
            key_prefix=configured.key_prefix,
            max_payload=configured.max_payload,
        )

        def listen(queue: TaskQueue = queue, tasks: list[str] = tasks) -> None:
            try:
                ran.append(queue.listen(tasks, event=stop, burst=burst, max_jobs=max_jobs))
            except BaseException as exc:  # (raised below: the command exits non-zero)
                failures.append(exc)
                stop.set()

        threads.append(threading.Thread(target=listen, name=f"drp-queue-{name}"))
    with on_signals(stop.set):
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    if failures:
        raise failures[0]
    return sum(ran)


def work_in_processes(
    plan: dict[str, list[str]], burst: bool, max_jobs: int | None, processes: int
) -> list[int | None]:
    """:func:`work` in ``processes`` forked processes; SIGTERM or SIGINT here
    drains them all. Returns the exit codes of those that failed."""
    children = [
        multiprocessing.get_context("fork").Process(target=work, args=(plan, burst, max_jobs))
        for _ in range(processes)
    ]

    def drain() -> None:  # each process finishes its running tasks, then exits
        for child in children:
            if child.is_alive():
                child.terminate()

    with on_signals(drain):
        for child in children:
            child.start()
        for child in children:
            child.join()
    return [child.exitcode for child in children if child.exitcode != 0]


@contextlib.contextmanager
def on_signals(stop: Callable[[], object]) -> Iterator[None]:
    """While inside, SIGTERM and SIGINT call ``stop`` (in the main thread
    only); their handlers before are put back after, so that a
    ``call_command("pool_worker", ...)`` leaves Ctrl-C working."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = {
        signum: signal.signal(signum, lambda _signum, _frame: stop())
        for signum in (signal.SIGTERM, signal.SIGINT)
    }
    try:
        yield
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)
