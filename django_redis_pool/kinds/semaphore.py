"""Counting semaphores in Django: the ``SEMAPHORES`` setting, ``get_semaphore``,
a request's permits, and ``pool_sync`` of ``MAX_SIZE``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .. import conf
from ..primitives.leased.semaphore import Semaphore, check_max_size
from ..primitives.validators import check_permits
from .contract import MAX_WAITING, Ask, Grant, Option, OptionError, Report
from .leased import LEASE_TIMEOUT, LeaseKind

__all__ = ["KIND", "PERMITS_HINT", "SemaphoreKind"]

#: How to fix a bad ``PERMITS`` (an entry's, a rule's, a view's).
PERMITS_HINT = (
    "Use how many of the semaphore's permits one request's hold takes, as an int >= 1 "
    "(at most its MAX_SIZE), e.g. 2."
)


def _validate_max_size(value: Any, path: str) -> int | None:
    return None if value is None else check_max_size(value, path)


class SemaphoreKind(LeaseKind[Semaphore]):
    """A :class:`Semaphore` of ``MAX_SIZE`` permits; a request's hold takes
    ``PERMITS`` of them (its rule's or view's, else the entry's)."""

    name = "semaphore"
    setting_key = "SEMAPHORES"
    primitive = Semaphore
    options = {
        "MAX_SIZE": Option(
            _validate_max_size,
            None,
            "Use the number of permits as an int >= 0, e.g. 3. It is stored in Redis on "
            "first use (if Redis has none) and by manage.py pool_sync.",
        ),
        "LEASE_TIMEOUT": LEASE_TIMEOUT,
        "MAX_WAITING": MAX_WAITING,
        "PERMITS": Option(check_permits, 1, PERMITS_HINT),
    }
    size_option = "MAX_SIZE"
    takes_permits = True

    def max_permits(self, options: Mapping[str, Any]) -> int | None:
        """``MAX_SIZE``, when it is set and not 0 (a semaphore closed until it
        is sized at run time is not checked)."""
        return options.get("MAX_SIZE") or None

    def check_entry(self, options: Mapping[str, Any], path: str) -> None:
        """An entry's ``PERMITS`` (what its requests take by default) is at most
        its ``MAX_SIZE`` (E039)."""
        limit = self.max_permits(options)
        if limit is not None and options["PERMITS"] > limit:
            raise OptionError(
                f'{path}["PERMITS"] = {options["PERMITS"]} is more than its MAX_SIZE '
                f"({limit}): no request's hold could ever be granted",
                id="E039",
                hint=f"Lower PERMITS to at most {limit}, or raise MAX_SIZE.",
            )

    def entry_warnings(
        self, name: str, options: Mapping[str, Any], *, proxied: Sequence[str] = ()
    ) -> list[tuple[str, str]]:
        """A semaphore without ``MAX_SIZE``: until a max size is stored in Redis,
        every acquire raises ``NotConfigured`` (a request gets a 500)."""
        if options["MAX_SIZE"] is not None:
            return []
        path = conf.setting_path(self.setting_key, name, "MAX_SIZE")
        return [
            (
                f"{path} is not set: the semaphore {name!r} has no max size until one is "
                "stored in Redis, so until then every request for it fails (NotConfigured, "
                "a 500).",
                f"Set {path}, e.g. 3 (stored by the first acquire and by manage.py "
                "pool_sync), " + self.run_time_hint("set it", "set_max_size()"),
            )
        ]

    def build(
        self, client: Any, name: str, key_prefix: str, options: Mapping[str, Any]
    ) -> Semaphore:
        return Semaphore(
            client,
            name,
            lease_timeout=options["LEASE_TIMEOUT"],
            default_max_size=options["MAX_SIZE"],  # stored on first acquire if Redis has none
            key_prefix=key_prefix,
            max_waiting=options["MAX_WAITING"],
        )

    def grant(self, primitive: Semaphore, ask: Ask) -> Grant | None:
        """``ask.permits`` (None: the entry's ``PERMITS``) for the identity
        ``holder`` (requests sharing it share its hold; refused at once past
        ``MAX_WAITING``)."""
        hold = primitive.hold(
            ask.holder,
            timeout=ask.timeout,
            lease_timeout=ask.lease_timeout,
            permits=self.permits_of(primitive, ask),
        )
        return self.held(self.entered(hold))

    async def agrant(self, primitive: Semaphore, ask: Ask) -> Grant | None:
        """:meth:`grant` on the event loop."""
        hold = primitive.ahold(
            ask.holder,
            timeout=ask.timeout,
            lease_timeout=ask.lease_timeout,
            permits=self.permits_of(primitive, ask),
        )
        return self.held(await self.aentered(hold))

    def permits_asked(self, primitive: Semaphore, ask: Ask) -> int:
        """:meth:`permits_of`: what its turn is estimated for."""
        return self.permits_of(primitive, ask)

    def permits_of(self, primitive: Semaphore, ask: Ask) -> int:
        """The permits a request's hold takes: its own, else its entry's
        ``PERMITS`` (1 for a semaphore the setting does not configure)."""
        if ask.permits is not None:
            return ask.permits
        configured = self.configured(primitive)
        return configured.options.get("PERMITS", 1) if configured is not None else 1

    def sync(
        self, primitive: Semaphore, options: Mapping[str, Any], *, prune: bool, dry_run: bool
    ) -> Report:
        """Store ``MAX_SIZE`` (a smaller one evicts no holder; a larger one
        serves waiting callers at once)."""
        name, size = primitive.name, options["MAX_SIZE"]
        if size is None:
            path = conf.setting_path(self.setting_key, name, "MAX_SIZE")
            return Report(
                f"{name}: no MAX_SIZE configured, max size left as it is (set {path} and run "
                f"pool_sync again, or set it{self.from_the_admin() or ' with set_max_size()'})",
                style="warning",
            )
        before = primitive.get_max_size()
        if before == size:
            return Report(f"{name}: max size {size} already set", style="success")
        if not dry_run:
            primitive.set_max_size(size)
        would = "would be " if dry_run else ""
        note = " (dry run, nothing changed)" if dry_run else ""
        return Report(
            f"{name}: max size {would}set to {size} (was {before}){note}",
            changed=True,
            style="warning",
        )


KIND = SemaphoreKind()
