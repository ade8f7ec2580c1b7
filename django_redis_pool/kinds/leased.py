"""What the kinds built on the lease engine share (resource pools, semaphores,
locks, allocators): :class:`LeaseKind`. Its ``LEASE_TIMEOUT`` option, the
``W006`` of an entry with no members or size (:class:`Members`), ``pool_sync``'s
report of named members, and ``pool_gc`` and ``pool_status`` on a
:class:`Snapshot` (reclaiming expired holds, flagging a hold older than
``LONG_HOLD``). The admin's panels of these kinds are in
:mod:`django_redis_pool.dashboard.lease_panels`; the admin action that fills a
primitive of a kind (:data:`FILL_LABELS`) is registered there, by kind class.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, NamedTuple, TypeVar

from .. import conf, signals
from ..holder_names import holder_words, request_of
from ..primitives.leased.lease import Lease
from ..primitives.leased.primitive import AsyncHold, Hold, LeasedPrimitive, Snapshot
from ..primitives.validators import check_lease_timeout
from .contract import Ask, Grant, Kind, Option, Report

__all__ = [
    "FILL_LABELS",
    "LEASE_TIMEOUT",
    "LeaseKind",
    "Members",
    "lease_timeout_option",
    "long_hold_note",
    "status_data",
]

logger = logging.getLogger("django_redis_pool")


def lease_timeout_option(default: float | None) -> Option:
    """The ``LEASE_TIMEOUT`` option, with ``default``."""
    return Option(
        check_lease_timeout,
        default,
        "Use a number of seconds > 0 (e.g. 30), or None for leases that never expire.",
    )


LEASE_TIMEOUT = lease_timeout_option(None)


class Members(NamedTuple):
    """What an entry of a kind names as its members (a pool's resources, an
    allocator's keys)."""

    option: str  #: the option listing them, e.g. "RESOURCES"
    what: str  #: what they are, in messages, e.g. "resource ids"
    method: str  #: the primitive's method adding them at run time, e.g. "associate()"


#: Kind class -> the label of the admin's action that gives a primitive of
#: that kind its size or members ("Add a resource"), registered with the action
#: (``dashboard.action(..., fills=kind_class)``): the hints and notes name it
#: (:meth:`LeaseKind.fill_label`). Forgotten with the class.
FILL_LABELS: weakref.WeakKeyDictionary[type[Kind[Any]], str] = weakref.WeakKeyDictionary()

#: The primitive of a kind on the lease engine.
L = TypeVar("L", bound=LeasedPrimitive)


def long_hold_note(snap: Snapshot, limit: float | None) -> str:
    """A note when the oldest live hold of ``snap`` is older than ``limit``
    (the setting's ``LONG_HOLD``: a stuck holder that keeps renewing?), else ''."""
    if limit is None or snap.oldest_since is None or snap.now - snap.oldest_since <= limit:
        return ""
    hours = (snap.now - snap.oldest_since) / 3600
    return f"a hold began {hours:.1f} h ago (over LONG_HOLD, {limit:g} s): stuck?"


class LeaseKind(Kind[L]):
    """A kind whose primitive ``L`` stands on the lease engine (a
    :class:`LeasedPrimitive`).

    Its subclasses say how a request holds one and what Redis must hold for it
    (``pool_sync``); the rest is shared.
    """

    counted = ("acquired", "refused", "lost", "reclaimed", "wait_seconds", "hold_seconds")
    #: What a primitive with no size lacks, in the notes of ``pool_status`` and
    #: the admin ("no resources", "no max size").
    size_word = "max size"
    #: What an entry's members are (None: its entries name no members); a
    #: plain ``(option, what, method)`` tuple is read as its :class:`Members`.
    #: An entry whose members option is empty or absent gets W006
    #: (``entry_warnings``).
    members: ClassVar[Members | None] = None
    #: The option giving an entry its size or members (None: none does; by
    #: default the ``members`` option). It names what fills an empty primitive
    #: in its notes and in the hints, with the admin's action that fills it
    #: (:meth:`fill_label`); a kind sized by a number (no ``members``) says in
    #: its own ``entry_warnings`` what a missing size does.
    size_option: ClassVar[str | None] = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        members = vars(cls).get("members")
        if members is not None and not isinstance(members, Members):
            cls.members = members = Members(*members)
        if "size_option" not in vars(cls) and members:
            cls.size_option = members.option

    # -- requests --------------------------------------------------------------

    def turn(self, primitive: L, ask: Ask) -> float | None:
        """The primitive's estimate (:meth:`LeasedPrimitive.turn_estimate`)
        for the permits the hold asks (:meth:`permits_asked`)."""
        return primitive.turn_estimate(self.permits_asked(primitive, ask))

    async def aturn(self, primitive: L, ask: Ask) -> float | None:
        """:meth:`turn` on the event loop."""
        return await primitive.aturn_estimate(self.permits_asked(primitive, ask))

    def permits_asked(self, primitive: L, ask: Ask) -> int:
        """The permits a request's hold of ``primitive`` takes (1, but for a semaphore)."""
        return 1

    # -- settings --------------------------------------------------------------

    def entry_warnings(
        self, name: str, options: Mapping[str, Any], *, proxied: Sequence[str] = ()
    ) -> list[tuple[str, str]]:
        """An entry whose ``members`` option is empty or absent (W006)."""
        if self.members is None or options[self.members.option]:
            return []
        option, what, method = self.members
        return [
            (
                f"{conf.setting_path(self.setting_key, name, option)} is empty or absent: the "
                f"{self.label} {name!r} has no {what}, so no request can get one: each is answered "
                "with a 503 (after waiting its whole timeout, where it waits).",
                f"List its {what} in {option} and run manage.py pool_sync, "
                + self.run_time_hint("add them", method),
            )
        ]

    def fill_label(self) -> str | None:
        """The label of the admin's action that gives a primitive of this kind
        its size or members, as the dashboard registered it for this kind's
        class (:data:`FILL_LABELS`); None: it has none."""
        return FILL_LABELS.get(type(self))

    def from_the_admin(self) -> str:
        """How to fill a primitive of this kind from the admin, as the end of a
        sentence (" from the admin ('Add a resource' on its page)"); "" for a
        kind without a fill action."""
        add = self.fill_label()
        return f" from the admin ({add!r} on its page)" if add else ""

    def run_time_hint(self, verb: str, method: str) -> str:
        """The end of a W006 hint: how to ``verb`` (e.g. "add them") at run time
        (the admin's fill action, or ``method``), and how to silence W006 if that
        is the plan."""
        admin = self.from_the_admin()
        return (
            f"or {verb} at run time{admin}{' or' if admin else ''} with {method}. If you only "
            f"{verb} at run time, silence this with "
            'SILENCED_SYSTEM_CHECKS = ["django_redis_pool.W006"].'
        )

    def long_hold(self, primitive: L) -> float | None:
        """The ``LONG_HOLD`` of ``primitive``'s setting, as the registry told it
        (None for a primitive it did not build: no hold is flagged)."""
        configured = self.configured(primitive)
        return None if configured is None else configured.long_hold

    def empty_note(self, primitive: L) -> str:
        """What ``pool_status`` and the admin say of a primitive with no size (or
        no members) in Redis: what actually fills it, given what its entry
        configures (as the registry told it)."""
        name = primitive.name
        entry = self.configured(primitive)
        option = self.size_option
        add = self.fill_label()
        or_add = f", or use the admin's {add!r} action" if add else ""
        if option is None or entry is None:
            return f"no {self.size_word}: run manage.py pool_sync"
        configured = entry.options.get(option)
        path = conf.setting_path(self.setting_key, name, option)
        if configured is None or (not isinstance(configured, (int, float)) and not configured):
            if self.members is not None:
                return (
                    f"no {self.size_word}, and {path} lists none: list them there and run "
                    f"manage.py pool_sync{or_add}"
                )
            return (
                f"no {self.size_word}, and {path} is not set: set it and run manage.py "
                f"pool_sync{or_add}"
            )
        if configured == 0:
            return f"no {self.size_word}: {path} is 0{or_add}"
        return f"no {self.size_word} in Redis: run manage.py pool_sync (it stores {option}){or_add}"

    # -- requests --------------------------------------------------------------

    @staticmethod
    def held(lease: Lease | None) -> Grant | None:
        """A request's hold of ``lease`` (None: nothing granted)."""
        return None if lease is None else Grant(lease, lease, lease.release, lease.arelease)

    @staticmethod
    def entered(hold: Hold) -> Any:
        """What the primitive's ``hold()`` (``hold``) takes, for a request,
        which keeps it past one ``with`` block (its :class:`Grant` releases
        it): None when nothing was granted in time; refused at once
        (``max_waiting`` callers already wait), :class:`ResourceUnavailable`
        (``reason`` ``FULL``) propagates. The refusal's turn is the guard's to
        estimate (:meth:`turn`), once, when it needs one."""
        return hold.granted()

    @staticmethod
    async def aentered(hold: AsyncHold) -> Any:
        """:meth:`entered` for the primitive's ``ahold()``."""
        return await hold.agranted()

    # -- management commands ---------------------------------------------------

    @staticmethod
    def split_members(
        configured: Sequence[str], in_redis: set[str]
    ) -> tuple[list[str], list[str], list[str]]:
        """``pool_sync``'s three lists for named members: the configured ones to
        add, the configured ones already there, and those in Redis that are no
        longer configured (sorted)."""
        added = [member for member in configured if member not in in_redis]
        present = [member for member in configured if member in in_redis]
        return added, present, sorted(in_redis - set(configured))

    def members_synced(
        self,
        primitive: L,
        added: list[str],
        present: list[str],
        removed: list[str],
        *,
        unconfigured: Sequence[str],
        prune: bool,
        dry_run: bool,
    ) -> Report:
        """``pool_sync``'s report for a primitive of named members (a pool's
        resources, an allocator's keys). ``unconfigured``: the members in Redis
        but not in the settings, left there without ``prune``; an entry that
        lists none is told which setting to fill (and the admin's action)."""
        name = primitive.name
        option_path = conf.setting_path(self.setting_key, name, self.size_option)
        from_the_admin = self.from_the_admin()
        would = "would be " if dry_run else ""
        line = f"{name}: {len(added)} {would}added, {len(present)} already there"
        none_listed = option_path and not (added or present)
        if none_listed:
            line += f" ({option_path} lists none: list them there and run pool_sync again" + (
                f", or add them{from_the_admin})" if from_the_admin else ")"
            )
        if prune:
            line += f", {len(removed)} {would}removed"
        elif unconfigured:
            line += (
                f", {len(unconfigured)} in Redis but not in the settings (left there; "
                "manage.py pool_sync --prune removes them)"
            )
        if dry_run:
            line += " (dry run, nothing changed)"
        details = [f"  {would}added: {member}" for member in added]
        details += [f"  already there: {member}" for member in present]
        details += [f"  {would}removed: {member}" for member in removed]
        if not prune:
            details += [f"  not in the settings: {member}" for member in unconfigured]
        return Report(
            line,
            changed=bool(added or removed),
            style="warning" if dry_run or removed or unconfigured or none_listed else "success",
            details=tuple(details),
        )

    def collect(self, primitive: L, *, dry_run: bool) -> Report:
        """Reclaim the expired holds and dead waiters now; sends
        ``lease_reclaimed`` for each hold. ``dry_run`` only reports them."""
        collected = primitive.collect(dry_run=dry_run)
        if not dry_run:
            for lease in collected.reclaimed:
                logger.info(
                    "reclaimed the expired hold of %r on %s %r (fence %s, resource %r)",
                    lease.holder,
                    primitive.kind,
                    primitive.name,
                    lease.fence,
                    lease.resource,
                )
                signals.send(
                    signals.lease_reclaimed, self.primitive, name=primitive.name, lease=lease
                )
        reclaimed, dropped = len(collected.reclaimed), len(collected.dropped)
        would = "would be " if dry_run else ""
        line = (
            f"{primitive.name}: {reclaimed} expired holds {would}reclaimed, {dropped} dead "
            f"waiters {would}dropped" + (" (dry run, nothing changed)" if dry_run else "")
        )
        done = collected.upkeep or {}
        upkeep = [
            f"{done[field]} {what} {would}{verb}"
            for field, what, verb in (
                ("removed", "keys past their lifetime", "removed"),
                ("healed", "keys past their cooldown", "brought back"),
                ("unbound", "expired soft bindings", "dropped"),
            )
            if done.get(field)
        ]
        if upkeep:
            line += "; " + ", ".join(upkeep)
        if not (reclaimed or dropped or upkeep):
            line = f"{primitive.name}: nothing to reclaim"
        long_hold = long_hold_note(primitive.snapshot(limit=0), self.long_hold(primitive))
        if long_hold:
            logger.warning("%s %r: %s", primitive.kind, primitive.name, long_hold)
            line += f"; {long_hold}"
        return Report(
            line,
            changed=bool(reclaimed or dropped or long_hold),
            style="warning",
            details=(
                *(f"  {_held(lease)}  fence {lease.fence}" for lease in collected.reclaimed),
                *(
                    f"  waiter {holder_words(waiter.holder)}  priority {waiter.priority}"
                    for waiter in collected.dropped
                ),
            ),
            data={"kind": primitive.kind, "name": primitive.name, **collected.as_dict()},
            counts={"reclaimed": reclaimed, "dropped": dropped, "long_holds": int(bool(long_hold))},
        )

    def gauges(self, primitive: L) -> dict[str, float | None]:
        """The counts and the oldest hold's age, in one round trip (no holder
        read). A semaphore's ``held`` is its permits in use (``size - free``
        when below the max)."""
        snap: Snapshot = primitive.snapshot(limit=0)
        oldest = None if snap.oldest_since is None else max(0.0, snap.now - snap.oldest_since)
        return {
            "size": snap.size,
            "free": snap.free,
            "held": snap.held_permits,
            "waiting": snap.waiting_count,
            "oldest_hold_seconds": oldest,
        }

    def status(self, primitive: L) -> Report:
        """Counts, holders (fence, time left) and waiters, in one round trip."""
        snap: Snapshot = primitive.snapshot()
        details = []
        for lease in snap.leases:
            left = snap.seconds_left(lease)
            permits = f"  {lease.permits} permits" if lease.permits != 1 else ""
            details.append(
                f"  {_held(lease)}  fence {lease.fence}{permits}  "
                + ("no expiry" if left is None else f"{left:.1f} s left")
            )
        for position, waiter in enumerate(snap.waiters, 1):
            permits = f"  {waiter.permits} permits" if waiter.permits != 1 else ""
            details.append(
                f"  waiting #{position}: {holder_words(waiter.holder)}  "
                f"priority {waiter.priority}{permits}  "
                f"for {max(0.0, snap.now - waiter.since):.1f} s"
            )
        long_hold = long_hold_note(snap, self.long_hold(primitive))
        if long_hold:
            details.insert(0, f"  {long_hold}")
        empty = not snap.size
        if empty:
            details.insert(0, f"  {self.empty_note(primitive)}")
        return Report(
            primitive.name,
            changed=bool(long_hold)
            or empty
            or (snap.free == 0 and bool(snap.leases or snap.waiters)),
            details=tuple(details),
            data=status_data(snap),
        )


def _held(lease: Lease) -> str:
    """A hold's ``<resource>  held by <holder>`` for people, each fact once: the
    resource left out where it is the holder (a semaphore's identity, a lock's holder),
    a request's holder name as its process and its request
    (:func:`~django_redis_pool.holder_names.holder_words`)."""
    what = "" if lease.resource == lease.holder else f"{lease.resource}  "
    return f"{what}held by {holder_words(lease.holder)}"


def status_data(snap: Snapshot) -> dict[str, Any]:
    """``pool_status --json``'s document of one primitive: the snapshot, each
    holder with the ``request`` its name tells (method, path, user; None for a
    holder that is not a request's name: see :mod:`django_redis_pool.holder_names`)."""
    data = snap.as_dict()
    for holder in data["holders"]:
        holder["request"] = request_of(holder["holder"])
    return data
