"""``manage.py pool_status``: what every configured primitive holds right now.

A table of counts (held, free, waiting, size) per primitive, then what each
kind details (:meth:`Kind.status <...kinds.Kind.status>`; for the kinds on the
lease engine: the holders with fence and seconds left, and the waiters).
``--json`` prints the same as one JSON document: ``{"primitives": [...]}`` with,
for each, ``kind``, ``name``, the counts and the details (for the lease-engine
kinds: ``time``, ``available``, ``holders``, ``waiters``); an error (Redis down,
a bad setting or ``--name``) is ``{"error": "<message>"}`` there too, with exit
status 1. Reads only; one round trip per primitive.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandParser

from ._base import PoolCommand


class Command(PoolCommand):
    help = (
        "Show every configured primitive: counts, holders (with fence and time left) "
        "and waiters. --json for machine-readable output."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        super().add_arguments(parser)
        parser.add_argument("--json", action="store_true", help="Print one JSON document.")

    def handle(self, *args: Any, **options: Any) -> None:
        primitives = self.primitives(options["names"])
        with self.command_errors():
            reports = [self.kind_of(primitive).status(primitive) for primitive in primitives]
        if options["json"]:
            self.write_json({"primitives": [dict(report.data) for report in reports]})
            return
        if not reports:
            self.say_none_configured()
            return
        width = max(len("NAME"), *(len(p.name) for p in primitives))
        header = f"{'NAME':<{width}}  {'KIND':<9}  {'HELD':>4}  {'FREE':>4}  {'WAITING':>7}  SIZE"
        self.stdout.write(self.style.MIGRATE_HEADING(header))
        for primitive, report in zip(primitives, reports, strict=True):
            counts = {key: report.data.get(key) for key in ("held", "free", "waiting", "size")}
            held, free, waiting = (
                "-" if counts[key] is None else counts[key] for key in ("held", "free", "waiting")
            )
            size = "unset" if counts["size"] is None else str(counts["size"])
            row = (
                f"{primitive.name:<{width}}  {primitive.kind:<9}  {held:>4}  {free:>4}  "
                f"{waiting:>7}  {size}"
            )
            self.stdout.write(self.style.WARNING(row) if report.changed else row)
        if options["verbosity"] < 1:
            return
        for primitive, report in zip(primitives, reports, strict=True):
            if not report.details:
                continue
            self.stdout.write("")
            self.stdout.write(self.style.MIGRATE_LABEL(f"{primitive.name} ({primitive.kind})"))
            for line in report.details:
                self.write_data(line)
