"""What the kinds built on the lease engine share (resource pools, semaphores,
locks): :class:`LeaseKind`, whose commands read a :class:`Snapshot` and reclaim
expired holds, and whose dashboard panels are a summary, one page of each table
(available, holders, waiters), a finder, and the force-release and gc actions.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from django import forms
from django.http import HttpRequest

from .. import conf, registry, signals
from ..dashboard import ACTIONS, ActionFailed, Summary, action, section, summary
from ..primitives.base import Snapshot
from ..primitives.lease import Lease
from ..primitives.validators import check_lease_timeout, check_name
from .base import Held, Kind, Option, Report

__all__ = [
    "LEASE_TIMEOUT",
    "MAX_PAGE",
    "PAGE_SIZE",
    "LeaseKind",
    "ResourceForm",
    "as_datetime",
    "lease_timeout_option",
    "page_number",
    "paged_table",
]

logger = logging.getLogger("django_redis_pool")

#: Rows per table on a detail page.
PAGE_SIZE = 50
#: Pages beyond this show as empty (offsets stay within what Redis counts exactly).
MAX_PAGE = 2**52 // PAGE_SIZE
TABLES = ("available", "holders", "waiters")
CONTENTS_TEMPLATE = "admin/django_redis_pool/kinds/lease_contents.html"


def lease_timeout_option(default: float | None) -> Option:
    """The ``LEASE_TIMEOUT`` option, with ``default``."""
    return Option(
        check_lease_timeout,
        default,
        "Use a number of seconds > 0 (e.g. 30), or None for leases that never expire.",
    )


LEASE_TIMEOUT = lease_timeout_option(None)


def as_datetime(seconds: float | None) -> datetime | None:
    """Unix seconds (Redis clock) as an aware datetime, for the ``date`` filter;
    None for None, and for times beyond what a datetime holds (year 9999)."""
    if seconds is None:
        return None
    try:
        return datetime.fromtimestamp(seconds, tz=timezone.utc)
    except (ValueError, OverflowError, OSError):
        return None


class LeaseKind(Kind):
    """A kind whose primitive stands on the lease engine (a ``LeasedPrimitive``).

    Its subclasses say how a request holds one and what Redis must hold for it
    (``pool_sync``); the rest is shared. Creating the instance registers its
    dashboard panels.
    """

    #: What the overview's note says is missing when the size is 0 or unset.
    size_word = "max size"
    #: How the holders table and the finder name what is held, and whether the
    #: holders table also shows the holder (a lock's holder is what is held).
    held_label = "Holder"
    find_label = "Holder"
    holder_column = True
    #: Slots counted up to a size (the holders' caption says "of <size>"), or
    #: named resources (an available table; ids are trimmed in the finder).
    counts_slots = True
    #: The option listing an entry's members, what they are, and the method
    #: adding them at run time (None: its entries name no members). An entry
    #: whose members option is empty or absent gets W006 (``entry_warnings``).
    members: tuple[str, str, str] | None = None
    #: The option giving an entry its size or members (None: none does; by
    #: default the ``members`` option), and the slug of the dashboard action that
    #: sets them at run time (None: none). They name what fills an empty
    #: primitive in its dashboard note and in the hints; a kind sized by a number
    #: (no ``members``) says in its own ``entry_warnings`` what a missing size does.
    size_option: str | None = None
    fill_action: str | None = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "size_option" not in vars(cls) and "members" in vars(cls) and cls.members:
            cls.size_option = cls.members[0]

    def __init__(self) -> None:
        summary(self.name)(lease_summary)
        section(self.name, title="", template=CONTENTS_TEMPLATE)(lease_contents)
        action(
            self.name,
            "release",
            label="Force-release",
            form=HoldForm,
            placement="row",
            dangerous=True,
            question="Force-release the hold on {resource!r} (fence {fence}) of "
            "{primitive.kind} {primitive.name!r}? Its holder is not told until its next "
            "renewal or release.",
        )(force_release)
        self.register_actions()
        action(
            self.name,
            "gc",
            label="Run gc now",
            question="Reclaim the expired holds and drop the dead waiters of "
            "{primitive.kind} {primitive.name!r} now?",
        )(self.run_gc)

    def register_actions(self) -> None:
        """Register this kind's own dashboard actions (between force-release and gc)."""

    def entry_warnings(self, name: str, options: Mapping[str, Any]) -> list[tuple[str, str]]:
        """An entry whose ``members`` option is empty or absent (W006)."""
        if self.members is None or options[self.members[0]]:
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
        """The label of the dashboard action that gives a primitive of this kind
        its size or members (``fill_action``), if it has one."""
        chosen = ACTIONS.get(self.name, {}).get(self.fill_action or "")
        return chosen.label if chosen is not None else None

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

    def empty_note(self, name: str) -> str:
        """What the dashboard says of a primitive with no size (or no members) in
        Redis: what actually fills it, given what its entry configures."""
        entry = registry.get_config().entries.get(name)
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
        primitive: Any,
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

    # -- requests --------------------------------------------------------------

    @staticmethod
    def held(lease: Lease | None) -> Held | None:
        """A request's hold of ``lease`` (None: nothing granted)."""
        return None if lease is None else Held(lease, lease, lease.release, lease.arelease)

    # -- management commands ---------------------------------------------------

    def collect(self, primitive: Any, *, dry_run: bool) -> Report:
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
        if not (reclaimed or dropped):
            line = f"{primitive.name}: nothing to reclaim"
        long_hold = long_hold_note(primitive.snapshot(limit=0))
        if long_hold:
            logger.warning("%s %r: %s", primitive.kind, primitive.name, long_hold)
            line += f"; {long_hold}"
        return Report(
            line,
            changed=bool(reclaimed or dropped or long_hold),
            style="warning",
            details=(
                *(
                    f"  {lease.resource}  held by {lease.holder}  fence {lease.fence}"
                    for lease in collected.reclaimed
                ),
                *(
                    f"  waiter {waiter.holder}  priority {waiter.priority}"
                    for waiter in collected.dropped
                ),
            ),
            data={"kind": primitive.kind, "name": primitive.name, **collected.as_dict()},
            counts={"reclaimed": reclaimed, "dropped": dropped, "long_holds": int(bool(long_hold))},
        )

    def status(self, primitive: Any) -> Report:
        """Counts, holders (fence, time left) and waiters, in one round trip."""
        snap: Snapshot = primitive.snapshot()
        details = []
        for lease in snap.leases:
            what = "" if lease.resource == lease.holder else f"{lease.resource}  "
            left = snap.seconds_left(lease)
            details.append(
                f"  {what}held by {lease.holder}  fence {lease.fence}  "
                + ("no expiry" if left is None else f"{left:.1f} s left")
            )
        for position, waiter in enumerate(snap.waiters, 1):
            details.append(
                f"  waiting #{position}: {waiter.holder}  priority {waiter.priority}  "
                f"for {max(0.0, snap.now - waiter.since):.1f} s"
            )
        long_hold = long_hold_note(snap)
        if long_hold:
            details.insert(0, f"  {long_hold}")
        empty = not snap.size
        if empty:
            details.insert(0, f"  {self.empty_note(primitive.name)}")
        return Report(
            primitive.name,
            changed=bool(long_hold)
            or empty
            or (snap.free == 0 and bool(snap.leases or snap.waiters)),
            details=tuple(details),
            data=snap.as_dict(),
        )

    # -- dashboard -------------------------------------------------------------

    def find(self, primitive: Any, key: str) -> str:
        """The state of an unheld ``key`` for the finder."""
        return "not held"

    def run_gc(self, primitive: Any, data: dict[str, Any]) -> str:
        """What ``manage.py pool_gc --name`` does, for one primitive."""
        counts = self.collect(primitive, dry_run=False).counts
        return (
            f"gc of {primitive.kind} {primitive.name!r}: reclaimed {counts['reclaimed']} "
            f"expired hold(s), dropped {counts['dropped']} waiter(s)."
        )


def kind_of(primitive: Any) -> LeaseKind:
    """The kind of ``primitive``."""
    from . import by_name

    kind = by_name()[primitive.kind]
    assert isinstance(kind, LeaseKind)
    return kind


# ------------------------------------------------------------------ overview


def long_hold_note(snap: Snapshot) -> str:
    """A note when the oldest live hold of ``snap`` is older than ``LONG_HOLD``
    (a stuck holder that keeps renewing?), else ''."""
    limit = registry.get_config().long_hold
    if limit is None or snap.oldest_since is None or snap.now - snap.oldest_since <= limit:
        return ""
    hours = (snap.now - snap.oldest_since) / 3600
    return f"a hold began {hours:.1f} h ago (over LONG_HOLD, {limit:g} s): stuck?"


def lease_summary(primitive: Any) -> Summary:
    """Counts and health from one counts-only snapshot."""
    snap = primitive.snapshot(limit=0)
    notes = []
    health = "ok"
    note = long_hold_note(snap)
    if note:
        health = "warning"
        notes.append(note)
    if snap.size is None or snap.size == 0:
        health = "warning"
        notes.append(kind_of(primitive).empty_note(primitive.name))
    elif snap.free == 0 and snap.waiting_count:
        health = "warning"
        notes.append(f"exhausted, {snap.waiting_count} waiting")
    if snap.expired_count:
        notes.append(f"{snap.expired_count} expired awaiting gc")
    return Summary(
        size=snap.size,
        free=snap.free,
        held=snap.held_count,
        waiting=snap.waiting_count,
        health=health,
        note="; ".join(notes),
    )


# ------------------------------------------------------------------ detail page


@dataclass(frozen=True)
class Table:
    """One paginated table of a detail page."""

    name: str  #: its query parameter is ``<name>_page``
    rows: list[dict[str, Any]]
    count: int
    number: int  #: 1-based page number
    num_pages: int
    previous_query: str | None  #: query strings of the neighbour pages (None: none)
    next_query: str | None


def page_number(request: HttpRequest, table: str) -> int:
    try:
        return min(max(1, int(request.GET.get(f"{table}_page", "1"))), MAX_PAGE)
    except ValueError:
        return 1


def paged_table(
    request: HttpRequest, name: str, rows: list[dict[str, Any]], count: int, number: int
) -> Table:
    num_pages = max(1, math.ceil(count / PAGE_SIZE))

    def query(page: int) -> str | None:
        if not 1 <= page <= num_pages:
            return None
        params = request.GET.copy()
        params[f"{name}_page"] = str(page)
        return "?" + params.urlencode()

    return Table(
        name=name,
        rows=rows,
        count=count,
        number=number,
        num_pages=num_pages,
        previous_query=query(min(number - 1, num_pages)),
        next_query=query(number + 1),
    )


def _holder_row(lease: Lease, snap: Snapshot) -> dict[str, Any]:
    return {
        "resource": lease.resource,
        "holder": lease.holder,
        "fence": lease.fence,
        "acquired_at": as_datetime(lease.acquired_at),
        "seconds_left": snap.seconds_left(lease),
    }


def _waiter_rows(snap: Snapshot) -> list[dict[str, Any]]:
    return [
        {
            "holder": waiter.holder,
            "priority": waiter.priority,
            "since": as_datetime(waiter.since),
            "waited": round(max(0.0, snap.now - waiter.since), 1),
            "deadline": as_datetime(waiter.deadline),
        }
        for waiter in snap.waiters
    ]


def lease_contents(primitive: Any, request: HttpRequest) -> dict[str, Any]:
    """One page of each table (available, holders, waiters) in one round trip."""
    kind = kind_of(primitive)
    numbers = {table: page_number(request, table) for table in TABLES}
    snap = primitive.snapshot(
        limit=PAGE_SIZE,
        **{f"{table}_offset": (numbers[table] - 1) * PAGE_SIZE for table in TABLES},
    )
    tables = [
        paged_table(
            request,
            "holders",
            [_holder_row(lease, snap) for lease in snap.leases],
            snap.held_count,
            numbers["holders"],
        ),
        paged_table(request, "waiters", _waiter_rows(snap), snap.waiting_count, numbers["waiters"]),
    ]
    if not kind.counts_slots:
        rows = [{"resource": resource} for resource in snap.available]
        available = paged_table(
            request, "available", rows, snap.available_count, numbers["available"]
        )
        tables.insert(0, available)
    return {
        "kind": kind,
        "snapshot": snap,
        "read_at": as_datetime(snap.now),
        "tables": {table.name: table for table in tables},
        "found": _find(kind, primitive, request.GET.get("find", ""), snap),
        "empty_note": kind.empty_note(primitive.name) if not snap.size else "",
    }


def _find(kind: LeaseKind, primitive: Any, key: str, snap: Snapshot) -> dict[str, Any] | None:
    """What one resource (identity, holder) is now: found among any number of
    them in one or two reads. A resource id has no whitespace, so it is
    trimmed; an identity or a holder is looked up as typed."""
    if not kind.counts_slots:
        key = key.strip()
    if not key:
        return None
    found: dict[str, Any] = {"key": key, "holder": None, "state": "not held"}
    try:
        lease = primitive.lease_of(key)
        if lease is not None:
            found.update(state="held", holder=_holder_row(lease, snap))
        else:
            found["state"] = kind.find(primitive, key)
    except ValueError as exc:
        return {**found, "state": "invalid", "error": str(exc)}
    return found


# ------------------------------------------------------------------ actions


class HoldForm(forms.Form):
    """Names one hold: what is held, and the fence the operator saw."""

    resource = forms.CharField(max_length=200, strip=False)  # identities may have spaces
    fence = forms.IntegerField(min_value=0)


class ResourceForm(forms.Form):
    """Names one resource (or key) of the primitive."""

    resource = forms.CharField(
        max_length=200,
        help_text="Up to 200 characters, without braces or whitespace.",
    )

    def clean_resource(self) -> str:
        try:
            return check_name(self.cleaned_data["resource"], "resource")
        except ValueError as exc:
            raise forms.ValidationError(str(exc)) from exc


def force_release(primitive: Any, data: dict[str, Any]) -> str:
    """End one hold, only if it still has the fence the operator saw."""
    if not primitive.force_release(data["resource"], fence=data["fence"]):
        raise ActionFailed(
            f"Nothing released: {data['resource']!r} no longer has a hold with fence "
            f"{data['fence']} (it was released, expired or granted again)."
        )
    return f"Released the hold on {data['resource']!r} (fence {data['fence']})."
