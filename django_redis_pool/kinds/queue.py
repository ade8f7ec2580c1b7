"""Task queues in Django: the ``QUEUES`` setting, ``get_queue``, handlers
registered with ``@task`` in apps' ``tasks.py``, ``pool_gc`` (requeueing the
tasks of dead workers), ``pool_status`` counts, the admin's failed tasks with
retry and delete, and ``manage.py pool_worker`` (:class:`WorkerCommand`), which
runs the handlers.

``pool_worker``: every ``--queue`` (default: every configured queue) gets a
worker in this process, listening for the task names registered for it; with
``--workers N`` (N > 1), N processes each run them. Idle workers block on the
queues' wake lists (no polling). ``--burst`` stops once nothing is ready;
``--max-jobs N`` after N tasks (per queue and process). SIGTERM or SIGINT: running tasks
finish, no new one is taken, then the command exits. Database connections are
closed around each task as Django does around a request; logs go through
Django's logging (logger ``django_redis_pool``)."""

from __future__ import annotations

import contextlib
import multiprocessing
import signal
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

from django import forms
from django.core.management.base import CommandError, CommandParser
from django.db import close_old_connections

from .. import conf, registry
from ..dashboard import Summary, action, message_or_fail, section, summary
from ..management.commands._base import PoolCommand
from ..primitives.queue import Task, TaskQueue
from ..primitives.validators import check_duration, check_name
from .base import Kind, Option, Report
from .leases import PAGE_SIZE, as_datetime, page_number, paged_table

__all__ = ["HANDLERS", "KIND", "QueueKind", "WorkerCommand", "get_queue", "handlers_of", "task"]

Handler = TypeVar("Handler", bound=Callable[[Task], Any])

#: queue name -> task name -> handler, filled by @task (apps' tasks.py modules
#: are imported when Django starts).
HANDLERS: dict[str, dict[str, Callable[[Task], Any]]] = {}
_handlers_lock = threading.Lock()


def task(name: str | None = None, *, queue: str = "default") -> Callable[[Handler], Handler]:
    """Register the decorated ``handler(task) -> result`` for tasks ``name``
    (default: the function's dotted path) of the configured queue ``queue``.
    The handler gets the :class:`~django_redis_pool.primitives.queue.Task`
    (``params``, ``update(current, total)``) and returns a JSON result."""
    queue = check_name(queue, "queue")

    def register(handler: Handler) -> Handler:
        if not callable(handler):
            raise TypeError(f"@task decorates a function of a Task, got {handler!r}")
        task_name = check_name(name or f"{handler.__module__}.{handler.__qualname__}", "task name")
        with _handlers_lock:
            HANDLERS.setdefault(queue, {})[task_name] = handler
        return handler

    return register


#: The task name of Django Tasks (``django_redis_pool.tasks``) in our queues.
DJANGO_TASKS = "django.tasks"
_BACKEND = "django_redis_pool.tasks.RedisBackend"


def handlers_of(queue: str) -> dict[str, Callable[[Task], Any]]:
    """The handlers registered for ``queue``, by task name; plus the runner
    of Django Tasks when a ``RedisBackend`` in ``settings.TASKS`` serves it:
    lists it in its ``QUEUES``, or has an empty ``QUEUES`` (any configured
    queue)."""
    from django.conf import settings

    handlers = dict(HANDLERS.get(queue, {}))
    for options in getattr(settings, "TASKS", {}).values():
        ours = isinstance(options, dict) and options.get("BACKEND") == _BACKEND
        listed = options.get("QUEUES", ["default"]) if ours else ()
        if ours and (not listed or queue in listed):
            handlers[DJANGO_TASKS] = _run_django_task
    return handlers


def _run_django_task(job: Task) -> Any:
    from ..tasks import run_django_task

    return run_django_task(job)


def _dispatch(queue: str) -> Callable[[Task], Any]:
    def run(job: Task) -> Any:
        handler = HANDLERS.get(queue, {}).get(job.name) or handlers_of(queue).get(job.name)
        if handler is None:
            raise LookupError(f"no @task handler named {job.name!r} for queue {queue!r}")
        return handler(job)

    return run


def _validate_attempts(value: Any, path: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{path} must be an int >= 1, got {value!r}")
    return value


class QueueKind(Kind):
    """A :class:`TaskQueue` whose handlers are the ``@task`` functions of its name."""

    name = "queue"
    setting_key = "QUEUES"
    primitive = TaskQueue
    commands = ("pool_worker",)
    modules = ("tasks.py",)  # django_redis_pool.tasks.RedisBackend, named in TASKS
    options = {
        "RESULT_TTL": Option(
            check_duration, 3600.0, "Use how many seconds a finished task is kept, e.g. 3600."
        ),
        "VISIBILITY_TIMEOUT": Option(
            check_duration,
            300.0,
            "Use how many seconds without a heartbeat make a running task's worker "
            "presumed dead (its task is then delivered again), e.g. 300.",
        ),
        "MAX_ATTEMPTS": Option(
            _validate_attempts, 3, "Use how many deliveries a task gets, an int >= 1, e.g. 3."
        ),
    }

    def __init__(self) -> None:
        summary(self.name)(queue_summary)
        section(self.name, title="Failed tasks", template=TEMPLATE)(failed_section)
        action(
            self.name,
            "retry",
            label="Retry",
            form=TaskForm,
            placement="row",
            question="Queue the failed task {task_id} of queue {primitive.name!r} again?",
        )(retry_task)
        action(
            self.name,
            "delete",
            label="Delete",
            form=TaskForm,
            placement="row",
            dangerous=True,
            question="Delete task {task_id} of queue {primitive.name!r}?",
        )(delete_task)
        action(
            self.name,
            "gc",
            label="Run gc now",
            question="Requeue the tasks of dead workers of queue {primitive.name!r} now?",
        )(run_gc)

    def build(self, client: Any, name: str, key_prefix: str, options: Mapping[str, Any]) -> Any:
        return TaskQueue(
            client,
            name,
            task_fn=_dispatch(name),
            result_ttl=options["RESULT_TTL"],
            visibility_timeout=options["VISIBILITY_TIMEOUT"],
            max_attempts=options["MAX_ATTEMPTS"],
            key_prefix=key_prefix,
        )

    def collect(self, primitive: Any, *, dry_run: bool) -> Report:
        """Deliver again the tasks whose worker died (deadline passed), fail
        those past their last attempt, and make due deferred tasks ready."""
        if dry_run:
            return Report(f"{primitive.name}: gc of a queue has no dry run; nothing changed")
        ready, requeued, failed = 0, [], []
        while True:
            made, again, dead = primitive.gc(1000)
            ready, requeued, failed = ready + made, requeued + again, failed + dead
            if made < 1000 and len(again) + len(dead) < 1000:
                break
        line = (
            f"{primitive.name}: {len(requeued)} tasks of dead workers requeued, "
            f"{len(failed)} failed after their last attempt, {ready} deferred made ready"
        )
        changed = bool(ready or requeued or failed)
        return Report(
            line if changed else f"{primitive.name}: nothing to reclaim",
            changed=changed,
            style="warning",
            details=(*(f"  requeued: {i}" for i in requeued), *(f"  failed: {i}" for i in failed)),
            data={
                "kind": self.name,
                "name": primitive.name,
                "requeued": requeued,
                "failed": failed,
                "ready": ready,
            },
            counts={"requeued": len(requeued), "failed": len(failed)},
        )

    def status(self, primitive: Any) -> Report:
        counts = primitive.counts()
        busy = counts["pending"] > 0 and counts["workers"] == 0
        return Report(
            primitive.name,
            changed=busy,
            details=(
                f"  {counts['scheduled']} deferred, {counts['failed']} failed, "
                f"{counts['workers']} live workers",
            ),
            data={
                "kind": self.name,
                "name": primitive.name,
                "held": counts["running"],
                "free": None,
                "waiting": counts["pending"],
                "size": None,
                **counts,
            },
        )


TEMPLATE = "admin/django_redis_pool/kinds/queue_failed.html"


def queue_summary(queue: Any) -> Summary:
    """Running and pending tasks; a warning when tasks wait with no worker, or failed."""
    counts = queue.counts()
    notes, health = [], "ok"
    if counts["pending"] and not counts["workers"]:
        health = "warning"
        notes.append(f"{counts['pending']} pending, no live worker: run manage.py pool_worker")
    if counts["failed"]:
        health = "warning"
        notes.append(f"{counts['failed']} failed")
    notes.append(f"{counts['workers']} workers, {counts['scheduled']} deferred")
    return Summary(
        held=counts["running"], waiting=counts["pending"], health=health, note="; ".join(notes)
    )


def failed_section(queue: Any, request: Any) -> dict[str, Any]:
    """Counts, and one page of the failed tasks (the latest first)."""
    number = page_number(request, "failed")
    total, tasks = queue.failed(offset=(number - 1) * PAGE_SIZE, limit=PAGE_SIZE)
    rows = [
        {
            "task_id": t.id,
            "name": t.name,
            "error": t.error,
            "attempts": t.attempts,
            "finished": as_datetime(t.finished_at),
        }
        for t in tasks
    ]
    return {"counts": queue.counts(), "failed": paged_table(request, "failed", rows, total, number)}


class TaskForm(forms.Form):
    """Names one task."""

    task_id = forms.CharField(max_length=200)


def retry_task(queue: Any, data: dict[str, Any]) -> str:
    """Queue a failed task again (its attempts start over)."""
    task_id = data["task_id"]
    retried = queue.retry(task_id)
    return message_or_fail(
        retried, f"Task {task_id} is queued again.", f"Task {task_id} is not failed (any more)."
    )


def delete_task(queue: Any, data: dict[str, Any]) -> str:
    """Remove a task that is not running."""
    task_id = data["task_id"]
    deleted = queue.delete(task_id)
    return message_or_fail(
        deleted, f"Task {task_id} was deleted.", f"Task {task_id} is gone or running."
    )


def run_gc(queue: Any, data: dict[str, Any]) -> str:
    """What ``manage.py pool_gc --name`` does, for one queue."""
    counts = KIND.collect(queue, dry_run=False).counts
    return (
        f"gc of queue {queue.name!r}: requeued {counts.get('requeued', 0)} task(s), "
        f"failed {counts.get('failed', 0)}."
    )


KIND = QueueKind()


def get_queue(name: str) -> TaskQueue:
    """The :class:`TaskQueue` configured in ``DJANGO_REDIS_POOL["QUEUES"][name]``;
    its ``task_fn`` runs the ``@task`` handlers registered for ``name``."""
    queue: TaskQueue = registry.get(KIND, name)
    return queue


# ------------------------------------------------------------ manage.py pool_worker


def _positive_int(value: str, what: str) -> int:
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1:
        raise CommandError(f"{what} must be an int >= 1, got {value!r}")
    return number


def _closing_connections(fn: Callable[[Task], Any]) -> Callable[[Task], Any]:
    """``fn`` with Django's database connections closed around it, as Django
    does around a request (a worker is a long-running process)."""

    def run(task: Task) -> Any:
        close_old_connections()
        try:
            return fn(task)
        finally:
            close_old_connections()

    return run


class WorkerCommand(PoolCommand):
    """``manage.py pool_worker`` (see the module's docs and docs/queue.md)."""

    help = (
        "Run the @task handlers of the configured queues (all, or --queue). "
        "--workers N processes, --burst to stop when idle, --max-jobs N per queue."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--queue",
            action="append",
            dest="queues",
            metavar="NAME",
            help="Only this configured queue (repeatable). Default: every queue.",
        )
        parser.add_argument("--workers", default="1", metavar="N", help="Processes (default 1).")
        parser.add_argument(
            "--burst", action="store_true", help="Stop once no task is ready (after running them)."
        )
        parser.add_argument(
            "--max-jobs", metavar="N", help="Stop after N tasks (per queue and process)."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        workers = _positive_int(options["workers"], "--workers")
        max_jobs = None
        if options["max_jobs"] is not None:
            max_jobs = _positive_int(options["max_jobs"], "--max-jobs")
        queues = self._queues(options["queues"])
        plan = {queue.name: sorted(handlers_of(queue.name)) for queue in queues}
        if not any(plan.values()):
            raise CommandError(
                "No @task handler is registered for "
                + ", ".join(map(repr, plan))
                + ": decorate functions with @django_redis_pool.task(name, queue=...) in an "
                "app's tasks.py."
            )
        if options["verbosity"] >= 1:
            for name, tasks in plan.items():
                self.stdout.write(f"{name}: {', '.join(tasks) or 'no handler'}")
        if workers == 1:
            ran = self.work(plan, options["burst"], max_jobs)
            if options["verbosity"] >= 1:
                self.stdout.write(f"Stopped after {ran} task(s).")
            return
        processes = [
            multiprocessing.get_context("fork").Process(
                target=self.work, args=(plan, options["burst"], max_jobs)
            )
            for _ in range(workers)
        ]

        def drain() -> None:  # each process finishes its running tasks, then exits
            for process in processes:
                if process.is_alive():
                    process.terminate()

        with self._on_signals(drain):
            for process in processes:
                process.start()
            for process in processes:
                process.join()
        failed = [p.exitcode for p in processes if p.exitcode != 0]
        if failed:
            raise CommandError(f"{len(failed)} worker process(es) failed: exit codes {failed}")

    def _queues(self, names: list[str] | None) -> list[Any]:
        with self.command_errors():
            config = registry.get_config()
            configured = config.names(KIND)
            wanted = list(dict.fromkeys(names)) if names else configured
            if not configured:
                raise CommandError(
                    f"No queues are configured, so there is nothing to work on: add one to "
                    f'{conf.setting_path(KIND.setting_key)}, e.g. {{"default": {{}}}}, and '
                    "its @task handlers to an app's tasks.py."
                )
            unknown = [name for name in wanted if name not in configured]
            if unknown:
                raise CommandError(
                    f"Not a configured queue: {', '.join(map(repr, unknown))} (configured "
                    f"queues: {', '.join(map(repr, configured)) or 'none'})."
                )
            return [registry.get(KIND, name) for name in wanted]

    def work(self, plan: dict[str, list[str]], burst: bool, max_jobs: int | None) -> int:
        """Run every queue's handlers in this process until stopped; returns
        how many tasks ran."""
        stop = threading.Event()
        ran: list[int] = []
        threads = []
        for name, tasks in plan.items():
            if not tasks:
                continue
            configured = registry.get(KIND, name)
            queue = TaskQueue(
                configured.client,
                name,
                task_fn=_closing_connections(configured.task_fn),
                result_ttl=configured.result_ttl,
                visibility_timeout=configured.visibility_timeout,
                max_attempts=configured.max_attempts,
                key_prefix=configured.key_prefix,
            )

            def listen(queue: TaskQueue = queue, tasks: list[str] = tasks) -> None:
                ran.append(queue.listen(tasks, event=stop, burst=burst, max_jobs=max_jobs))

            threads.append(threading.Thread(target=listen, name=f"drp-queue-{name}"))
        with self._on_signals(stop.set):
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        return sum(ran)

    @staticmethod
    @contextlib.contextmanager
    def _on_signals(stop: Any) -> Iterator[None]:
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
