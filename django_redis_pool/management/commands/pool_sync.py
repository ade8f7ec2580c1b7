"""``manage.py pool_sync``: make Redis match the configured pools and semaphores.

Each id in ``DJANGO_REDIS_POOL["POOLS"][name]["RESOURCES"]`` is associated with its
pool (ids already there, available or leased, are left alone). ``--prune`` also
removes the resources that are in Redis but no longer in the settings, leased ones
included (their holders' later release returns False).

Each semaphore with a ``MAX_SIZE`` gets that max size in Redis (a smaller one
evicts no holder; a larger one serves waiting callers at once).
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError, CommandParser

from ... import conf, registry
from ...exceptions import BackendUnavailable


class Command(BaseCommand):
    help = (
        "Associate the RESOURCES configured in DJANGO_REDIS_POOL['POOLS'] with their "
        "pools in Redis and store each semaphore's MAX_SIZE; --prune removes pool "
        "resources that are no longer configured."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--name",
            action="append",
            dest="names",
            metavar="NAME",
            help="Only sync this pool or semaphore (repeatable). Default: all of them.",
        )
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
        try:
            config = registry.get_config()
            for name in self._names(config, options["names"]):
                if config.entries[name].kind.name == "semaphore":
                    self._sync_semaphore(config, name, dry_run=options["dry_run"])
                else:
                    self._sync(config, name, prune=options["prune"], dry_run=options["dry_run"])
        except ImproperlyConfigured as exc:
            raise CommandError(f"{exc}\nRun manage.py check for details.") from exc
        except BackendUnavailable as exc:
            raise CommandError(
                f"{exc} Start Redis or fix "
                f"{conf.setting_path('CONNECTION')}, then run pool_sync again."
            ) from exc

    def _names(self, config: conf.Config, requested: list[str] | None) -> list[str]:
        kinds = [conf.KINDS_BY_NAME["pool"], conf.KINDS_BY_NAME["semaphore"]]
        configured = [name for kind in kinds for name in config.names(kind)]
        if not requested:
            if not configured and self.verbosity >= 1:
                self.stdout.write(
                    self.style.WARNING(
                        f"No pools in {conf.setting_path('POOLS')} and no semaphores in "
                        f"{conf.setting_path('SEMAPHORES')}."
                    )
                )
            return configured
        names = list(dict.fromkeys(requested))
        unknown = [n for n in names if n not in configured]
        if unknown:
            raise CommandError(
                f"No pool or semaphore named {', '.join(map(repr, unknown))} in "
                f"{conf.SETTING_NAME} (configured: {', '.join(map(repr, configured)) or 'none'})."
                " Fix --name or add it to the setting."
            )
        return names

    def _sync_semaphore(self, config: conf.Config, name: str, *, dry_run: bool) -> None:
        size = config.entries[name].options["MAX_SIZE"]
        if size is None:
            if self.verbosity >= 1:
                self.stdout.write(f"{name}: no MAX_SIZE configured, max size left as it is")
            return
        semaphore = registry.get_semaphore(name)
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

    def _sync(self, config: conf.Config, name: str, *, prune: bool, dry_run: bool) -> None:
        pool = registry.get_pool(name)
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
