"""What the pool_* management commands share: choosing primitives by name and
turning configuration and Redis errors into ``CommandError`` (exit status 1)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError, CommandParser

from ... import conf, maintenance
from ...exceptions import BackendUnavailable, NotConfigured


class PoolCommand(BaseCommand):
    """Base of the commands that act on configured primitives (``--name``)."""

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--name",
            action="append",
            dest="names",
            metavar="NAME",
            help="Only this configured primitive (repeatable). Default: all of them.",
        )

    def primitives(self, names: list[str] | None) -> list[Any]:
        """The configured primitives named (all when ``names`` is empty)."""
        with self.command_errors():
            try:
                return maintenance.configured(names or None)
            except NotConfigured as exc:
                raise CommandError(f"{exc} Fix --name or add it to {conf.SETTING_NAME}.") from exc

    @contextlib.contextmanager
    def command_errors(self) -> Iterator[None]:
        """Report a bad setting or an unreachable Redis as a ``CommandError``."""
        try:
            yield
        except ImproperlyConfigured as exc:
            raise CommandError(f"{exc}\nRun manage.py check for details.") from exc
        except BackendUnavailable as exc:
            raise CommandError(
                f"{exc} Start Redis or fix {conf.setting_path('CONNECTION')}, then try again."
            ) from exc

    def write_json(self, data: Any) -> None:
        """One JSON document on stdout."""
        self.stdout.write(json.dumps(data, sort_keys=True))
