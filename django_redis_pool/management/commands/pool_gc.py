"""``manage.py pool_gc``: reclaim what crashed holders left behind, now.

For the kinds on the lease engine that is expired holds and dead waiters
(:meth:`Kind.collect <...kinds.Kind.collect>`). Expired holds are also reclaimed
lazily by every acquire; this command reclaims them for primitives nobody is
acquiring from, so that holds, counts and the admin stay exact, and sends
``lease_reclaimed`` for each. ``--dry-run`` only reports
what would be reclaimed. ``--loop`` keeps running, every ``--interval`` seconds,
until SIGINT or SIGTERM (a long-running reaper; Redis errors are reported and
the next pass retries). ``--json`` prints one JSON document per pass; an error
is ``{"error": "<message>"}`` (exit status 1, or with ``--loop`` also
``"retry_in"`` seconds, and the loop goes on).
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable
from typing import Any

from django.core.management.base import CommandError, CommandParser

from ...exceptions import BackendUnavailable, PoolError
from ._base import PoolCommand


def _positive_seconds(value: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not 0 < seconds < float("inf"):
        raise CommandError(f"--interval must be a number of seconds > 0, got {value!r}")
    return seconds


class Command(PoolCommand):
    help = (
        "Reclaim expired holds and drop dead waiters of every configured primitive. "
        "--dry-run reports only; --loop runs every --interval s."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        super().add_arguments(parser)
        parser.add_argument(
            "--dry-run", action="store_true", help="Report what would be reclaimed; change nothing."
        )
        parser.add_argument(
            "--loop", action="store_true", help="Keep running until SIGINT or SIGTERM."
        )
        parser.add_argument(
            "--interval",
            default="10",
            metavar="SECONDS",
            help="Seconds between passes with --loop (default 10).",
        )
        parser.add_argument("--json", action="store_true", help="Print one JSON document per pass.")

    def handle(self, *args: Any, **options: Any) -> None:
        interval = _positive_seconds(options["interval"])
        primitives = self.primitives(options["names"])
        if not options["loop"]:
            with self.command_errors():
                self.run_pass(primitives, options)
            return
        stopped: list[int] = []  # a signal handler only appends (never blocks)
        restore = self._stop_on_signals(stopped)
        try:
            if options["verbosity"] >= 1 and not options["json"]:
                self.stdout.write(f"Reclaiming every {interval:g} s; stop with Ctrl-C or SIGTERM.")
            while not stopped:
                try:
                    self.run_pass(primitives, options, quiet=True)
                except PoolError as exc:  # Redis unreachable or failing: next pass retries
                    failed = "is unreachable" if isinstance(exc, BackendUnavailable) else "failed"
                    if options["json"]:
                        self.write_error_json(str(exc), retry_in=interval)
                    else:
                        self.stderr.write(f"Redis {failed}, retrying in {interval:g} s: {exc}")
                deadline = time.monotonic() + interval
                while not stopped and time.monotonic() < deadline:
                    time.sleep(min(0.1, max(0.0, deadline - time.monotonic())))
        finally:
            restore()

    @staticmethod
    def _stop_on_signals(stopped: list[int]) -> Callable[[], None]:
        """Make SIGINT and SIGTERM stop the loop; returns what restores them."""
        if threading.current_thread() is not threading.main_thread():
            return lambda: None  # signals can only be caught in the main thread
        previous = {
            signum: signal.signal(signum, lambda signum, _frame: stopped.append(signum))
            for signum in (signal.SIGINT, signal.SIGTERM)
        }

        def restore() -> None:
            for signum, handler in previous.items():
                signal.signal(signum, handler)

        return restore

    def run_pass(self, primitives: list[Any], options: dict[str, Any], quiet: bool = False) -> None:
        """Collect every primitive once and report it."""
        dry_run = options["dry_run"]
        reports = [self.kind_of(p).collect(p, dry_run=dry_run) for p in primitives]
        if options["json"]:
            totals = {"reclaimed": 0, "dropped": 0}
            for report in reports:
                for key, count in report.counts.items():
                    totals[key] = totals.get(key, 0) + count
            self.write_json(
                {"dry_run": dry_run, **totals, "primitives": [dict(o.data) for o in reports]}
            )
            return
        verbosity = options["verbosity"]
        for report in reports:
            if not report.changed:
                if verbosity >= 2 or (verbosity >= 1 and not quiet):
                    self.write_data(report.line)
                continue
            if verbosity >= 1:
                self.write_line(report.line, report.style)
            if verbosity >= 2:
                for line in report.details:
                    self.write_data(line)
        if verbosity >= 1 and not quiet and not primitives:
            self.say_none_configured()
