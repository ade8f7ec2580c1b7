"""``manage.py pool_sync``: make Redis match the configured primitives.

Each id in ``DJANGO_REDIS_POOL["POOLS"][name]["RESOURCES"]`` is associated with its
pool (ids already there, available or leased, are left alone). ``--prune`` also
removes the resources that are in Redis but no longer in the settings, leased ones
included (their holders' later release returns False).

Each semaphore with a ``MAX_SIZE`` gets that max size in Redis (a smaller one
evicts no holder; a larger one serves waiting callers at once).

Locks keep no configured state in Redis: they are reported as in sync. A later
kind adds its step to ``Command.steps``.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandParser

from ... import conf, registry
from ...primitives.pool import ResourcePool
from ...primitives.semaphore import Semaphore
from ._base import PoolCommand


class Command(PoolCommand):
    help = (
        "Make Redis match DJANGO_REDIS_POOL: associate each pool's RESOURCES and store "
        "each semaphore's MAX_SIZE; --prune removes pool resources that are no longer "
        "configured."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        super().add_arguments(parser)
        parser.add_argument(
            "--prune",
            action="store_true",
            help="Also remove resources (available or leased) that are not configured.",
        )
        parser.add_argument(
            "--dry-run",
            action="store_true",
            help="Report what would change without changing anything.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        self.verbosity: int = options["verbosity"]
        primitives = self.primitives(options["names"])
        if not primitives and self.verbosity >= 1:
            self.stdout.write(self.style.WARNING("No pools, semaphores or locks are configured."))
        config = registry.get_config()
        steps = {"pool": self._sync, "semaphore": self._sync_semaphore}
        with self.command_errors():
            for primitive in primitives:
                step = steps.get(primitive.kind)
                if step is not None:
                    step(config, primitive, prune=options["prune"], dry_run=options["dry_run"])
                elif self.verbosity >= 1:
                    self.stdout.write(f"{primitive.name}: a {primitive.kind}, nothing to sync")

    def _sync_semaphore(
        self, config: conf.Config, semaphore: Semaphore, *, prune: bool, dry_run: bool
    ) -> None:
        name = semaphore.name
        size = config.entries[name].options["MAX_SIZE"]
        if size is None:
            if self.verbosity >= 1:
                self.stdout.write(f"{name}: no MAX_SIZE configured, max size left as it is")
            return
        before = semaphore.get_max_size()
        if before == size:
            if self.verbosity >= 1:
                self.stdout.write(self.style.SUCCESS(f"{name}: max size {size} already set"))
            return
        if not dry_run:
            semaphore.set_max_size(size)
        if self.verbosity >= 1:
            would = "would be " if dry_run else ""
            note = " (dry run, nothing changed)" if dry_run else ""
            self.stdout.write(
                self.style.WARNING(f"{name}: max size {would}set to {size} (was {before}){note}")
            )

    def _sync(self, config: conf.Config, pool: ResourcePool, *, prune: bool, dry_run: bool) -> None:
        name = pool.name
        configured: tuple[str, ...] = config.entries[name].options["RESOURCES"]
        added: list[str] = []
        present: list[str] = []
        for resource in configured:
            is_new = not pool.has(resource) if dry_run else pool.associate(resource)
            (added if is_new else present).append(resource)
        removed: list[str] = []
        if prune:
            in_redis = set(pool.available()) | {lease.resource for lease in pool.leases()}
            for resource in sorted(in_redis - set(configured)):
                if dry_run or pool.disassociate(resource):
                    removed.append(resource)
        self._report(name, added, present, removed, prune=prune, dry_run=dry_run)

    def _report(
        self,
        name: str,
        added: list[str],
        present: list[str],
        removed: list[str],
        *,
        prune: bool,
        dry_run: bool,
    ) -> None:
        if self.verbosity < 1:
            return
        would = "would be " if dry_run else ""
        summary = f"{name}: {len(added)} {would}added, {len(present)} already there"
        if prune:
            summary += f", {len(removed)} {would}removed"
        if dry_run:
            summary += " (dry run, nothing changed)"
        style = self.style.WARNING if dry_run or removed else self.style.SUCCESS
        self.stdout.write(style(summary))
        if self.verbosity >= 2:
            for label, ids in (("added", added), ("already there", present), ("removed", removed)):
                for resource in ids:
                    self.stdout.write(
                        f"  {would if label != 'already there' else ''}{label}: {resource}"
                    )
