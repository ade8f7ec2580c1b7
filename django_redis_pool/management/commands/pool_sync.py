"""``manage.py pool_sync``: put the configured resources of every pool into Redis.

Each id in ``DJANGO_REDIS_POOL["POOLS"][name]["RESOURCES"]`` is associated with its
pool (ids already there, available or leased, are left alone). ``--prune`` also
removes the resources that are in Redis but no longer in the settings, leased ones
included (their holders' later release returns False).
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
        "pools in Redis; --prune removes resources that are no longer configured."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--name",
            action="append",
            dest="names",
            metavar="NAME",
            help="Only sync this pool (repeatable). Default: every configured pool.",
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
            for name in self._pool_names(config, options["names"]):
                self._sync(config, name, prune=options["prune"], dry_run=options["dry_run"])
        except ImproperlyConfigured as exc:
            raise CommandError(f"{exc}\nRun manage.py check for details.") from exc
        except BackendUnavailable as exc:
            raise CommandError(
                f"{exc} Start Redis or fix "
                f"{conf.setting_path('CONNECTION')}, then run pool_sync again."
            ) from exc

    def _pool_names(self, config: conf.Config, requested: list[str] | None) -> list[str]:
        kind = conf.KINDS_BY_NAME["pool"]
        configured = config.names(kind)
        if not requested:
            if not configured and self.verbosity >= 1:
                self.stdout.write(
                    self.style.WARNING(f"No pools in {conf.setting_path(kind.setting_key)}.")
                )
            return configured
        names = list(dict.fromkeys(requested))
        unknown = [n for n in names if n not in configured]
        if unknown:
            raise CommandError(
                f"No pool named {', '.join(map(repr, unknown))} in "
                f"{conf.setting_path(kind.setting_key)} (configured pools: "
                f"{', '.join(map(repr, configured)) or 'none'}). Fix --name or add the pool "
                "to the setting."
            )
        return names

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
