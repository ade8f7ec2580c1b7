"""``manage.py pool_status``: what every configured primitive holds right now.

A table of counts (held, free, waiting, size) per primitive, then the holders
(resource, holder, fence, seconds left) and the waiters of each. ``--json``
prints the same as one JSON document: ``{"primitives": [...]}`` with, for each,
``kind``, ``name``, ``time``, ``size``, ``free``, ``held``, ``waiting``,
``available``, ``holders`` and ``waiters``. Reads only; one round trip per
primitive.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandParser

from ._base import PoolCommand


def _seconds(value: float | None) -> str:
    return "no expiry" if value is None else f"{value:.1f} s left"


class Command(PoolCommand):
    help = (
        "Show every configured pool, semaphore and lock: counts, holders (with fence "
        "and time left) and waiters. --json for machine-readable output."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        super().add_arguments(parser)
        parser.add_argument("--json", action="store_true", help="Print one JSON document.")

    def handle(self, *args: Any, **options: Any) -> None:
        primitives = self.primitives(options["names"])
        with self.command_errors():
            snapshots = [primitive.snapshot() for primitive in primitives]
        if options["json"]:
            self.write_json({"primitives": [snapshot.as_dict() for snapshot in snapshots]})
            return
        if not snapshots:
            self.stdout.write(self.style.WARNING("No pools, semaphores or locks are configured."))
            return
        width = max(len("NAME"), *(len(s.name) for s in snapshots))
        header = f"{'NAME':<{width}}  {'KIND':<9}  {'HELD':>4}  {'FREE':>4}  {'WAITING':>7}  SIZE"
        self.stdout.write(self.style.MIGRATE_HEADING(header))
        for s in snapshots:
            size = "unset" if s.size is None else str(s.size)
            row = (
                f"{s.name:<{width}}  {s.kind:<9}  {len(s.leases):>4}  {s.free:>4}  "
                f"{len(s.waiters):>7}  {size}"
            )
            busy = s.free == 0 and (s.leases or s.waiters)
            self.stdout.write(self.style.WARNING(row) if busy else row)
        if options["verbosity"] < 1:
            return
        for s in snapshots:
            if not s.leases and not s.waiters:
                continue
            self.stdout.write("")
            self.stdout.write(self.style.MIGRATE_LABEL(f"{s.name} ({s.kind})"))
            for lease in s.leases:
                what = "" if lease.resource == lease.holder else f"{lease.resource}  "
                self.stdout.write(
                    f"  {what}held by {lease.holder}  fence {lease.fence}  "
                    f"{_seconds(s.seconds_left(lease))}"
                )
            for position, waiter in enumerate(s.waiters, 1):
                self.stdout.write(
                    f"  waiting #{position}: {waiter.holder}  priority {waiter.priority}  "
                    f"for {max(0.0, s.now - waiter.since):.1f} s"
                )
