"""What the pool_* management commands share: choosing primitives by name,
reaching each one's kind, and turning configuration and Redis errors into
``CommandError`` (exit status 1)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError, CommandParser

from ... import conf, kinds, registry
from ...exceptions import BackendUnavailable, PoolError
from ...primitives.text import escaped


class PoolCommand(BaseCommand):
    """Base of the commands that act on configured primitives (``--name``).

    With ``--json`` (a command that has it), every outcome is JSON on stdout:
    an error too, as ``{"error": "<message>"}``, with exit status 1.
    """

    json_output = False  #: whether this run was asked for --json

    def execute(self, *args: Any, **options: Any) -> Any:
        self.json_output = bool(options.get("json"))
        try:
            return super().execute(*args, **options)
        except CommandError as exc:
            if self.json_output:
                self.write_error_json(str(exc))
            raise

    def write_error_json(self, message: str, **extra: Any) -> None:
        """The error document of ``--json``: ``{"error": message, ...}``."""
        self.write_json({"error": message, **extra})

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--name",
            action="append",
            dest="names",
            metavar="NAME",
            help="Only this configured primitive (repeatable). Default: all of them.",
        )

    def primitives(self, names: list[str] | None) -> list[Any]:
        """The configured primitives, sorted by name (only ``names``, in their
        order, if given)."""
        with self.command_errors():
            usable = registry.get_config().names()
            wanted = list(dict.fromkeys(names)) if names else usable
            unknown = [name for name in wanted if name not in usable]
            if unknown:
                raise CommandError(
                    f"Not configured: {', '.join(map(repr, unknown))} (configured: "
                    f"{', '.join(map(repr, usable)) or 'none'}). Fix --name or add it to "
                    f"{conf.SETTING_NAME}."
                )
            return [registry.get_resource(name) for name in wanted]

    @staticmethod
    def kind_of(primitive: Any) -> kinds.Kind:
        """The kind of ``primitive``."""
        return registry.by_name()[primitive.kind]

    def say_none_configured(self) -> None:
        """Warn that there is nothing to act on."""
        self.stdout.write(self.style.WARNING(f"No {registry.plurals()} are configured."))

    def write_line(self, line: str, style: str) -> None:
        """``line`` (data: :meth:`write_data`'s escapes), coloured by a
        :class:`~django_redis_pool.kinds.Report` style."""
        styled = {"success": self.style.SUCCESS, "warning": self.style.WARNING}
        line = escaped(line)
        self.stdout.write(styled[style](line) if style in styled else line)

    def write_data(self, line: str) -> None:
        """A line made of data read from Redis or the setting (a limited
        key, a holder): every control character escaped, so that it can
        neither clear the operator's terminal nor forge a line."""
        self.stdout.write(escaped(line))

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
        except PoolError as exc:  # Redis answered with an error (OOM, READONLY, ...)
            raise CommandError(
                f"{exc} Check the Redis server (manage.py check --deploy checks its settings)."
            ) from exc

    def write_json(self, data: Any) -> None:
        """One JSON document on stdout."""
        self.stdout.write(json.dumps(data, sort_keys=True))
