"""``manage.py pool_worker``: run the ``@task`` handlers of the configured queues.

Every ``--queue`` (default: every configured queue) gets a worker in this
process, listening for the task names registered for it; with ``--workers N``
(N > 1), N processes each run them (:mod:`django_redis_pool.worker`). Idle
workers block on the queues' wake lists (no polling). ``--burst`` stops once
nothing is ready; ``--max-jobs N`` after N tasks (per queue and process).
SIGTERM or SIGINT: running tasks finish, no new one is taken, then the command
exits. Database connections are closed around each task as Django does around
a request; logs go through Django's logging (logger ``django_redis_pool``).
See docs/queue.md.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError, CommandParser
from django.template.defaultfilters import pluralize

from ... import conf, registry, worker
from ...kinds.queue import KIND, handlers_of
from ._base import PoolCommand

__all__ = ["Command"]


def _positive_int(value: str, what: str) -> int:
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1:
        raise CommandError(f"{what} must be an int >= 1, got {value!r}")
    return number


def handled(tasks: list[str]) -> str:
    """What a queue's worker runs, as its start-up line says it: "no handler",
    "1 handler: count", "3 handlers: a, b, c"."""
    if not tasks:
        return "no handler"
    return f"{len(tasks)} handler{pluralize(len(tasks))}: {', '.join(tasks)}"


class Command(PoolCommand):
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
        names = self._queues(options["queues"])
        plan = {name: sorted(handlers_of(name)) for name in names}
        if not any(plan.values()):
            raise CommandError(
                "No @task handler is registered for "
                + ", ".join(map(repr, plan))
                + ": decorate functions with @django_redis_pool.task(name, queue=...) in an "
                "app's tasks.py."
            )
        if options["verbosity"] >= 1:
            for name, tasks in plan.items():
                self.stdout.write(f"queue {name}: {handled(tasks)}")
        if workers == 1:
            with self.command_errors():  # (a worker that failed: never exit 0)
                ran = worker.work(plan, options["burst"], max_jobs)
            if options["verbosity"] >= 1:
                self.stdout.write(f"Stopped after {ran} task{pluralize(ran)}.")
            return
        failed = worker.work_in_processes(plan, options["burst"], max_jobs, workers)
        if failed:
            raise CommandError(
                f"{len(failed)} worker process{pluralize(len(failed), 'es')} failed: "
                f"exit codes {failed}"
            )

    def _queues(self, names: list[str] | None) -> list[str]:
        """The names of the queues to work on (built: a bad setting or an
        unreachable Redis Cluster fails here, not in a worker)."""
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
            return [registry.get(KIND, name).name for name in wanted]
