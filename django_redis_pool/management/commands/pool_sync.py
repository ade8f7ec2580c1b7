"""``manage.py pool_sync``: make Redis hold what the settings configure.

What that is depends on the kind (:meth:`Kind.sync <...kinds.Kind.sync>`), e.g.
the configured resource ids or number of slots; a kind with no configured state
in Redis is reported as having nothing to sync. ``--prune`` also removes
what is in Redis but no longer configured; ``--dry-run`` changes nothing. An
unreachable Redis fails the command with one line before anything is reported.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandParser

from ... import registry
from ...exceptions import backend_errors
from ._base import PoolCommand


class Command(PoolCommand):
    help = (
        "Make Redis hold what DJANGO_REDIS_POOL configures (resource ids, sizes); "
        "--prune removes what is no longer configured."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        super().add_arguments(parser)
        parser.add_argument(
            "--prune",
            action="store_true",
            help="Also remove what is in Redis but not configured (held or not).",
        )
        parser.add_argument(
            "--dry-run",
            action="store_true",
            help="Report what would change without changing anything.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        verbosity: int = options["verbosity"]
        primitives = self.primitives(options["names"])
        if not primitives and verbosity >= 1:
            self.say_none_configured()
        config = registry.get_config()
        with self.command_errors():
            # (Redis first: no "nothing to sync" line before the command fails)
            clients = {id(c): c for c in (getattr(p, "client", None) for p in primitives) if c}
            for client in clients.values():
                with backend_errors():
                    client.ping()
            for primitive in primitives:
                report = self.kind_of(primitive).sync(
                    primitive,
                    config.entries[primitive.name].options,
                    prune=options["prune"],
                    dry_run=options["dry_run"],
                )
                if verbosity >= 1:
                    self.write_line(report.line, report.style)
                if verbosity >= 2:
                    for line in report.details:
                        self.write_data(line)
