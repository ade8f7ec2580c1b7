"""The admin's panels of the kinds on the lease engine (pools, semaphores,
locks; allocators add theirs in :mod:`.allocator_panels`): the overview's
summary, the chart of the last hour, the contents section (one page of each
table, available, holders and waiters, read in one round trip, and a finder),
the force-release and gc actions, and each kind's own: a pool's add and remove,
a semaphore's set max size. :data:`DISPLAYS` says how each kind's holds are
shown."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from django import forms
from django.http import HttpRequest
from django.template.defaultfilters import pluralize

from .. import registry
from ..holder_names import process_of, request_of
from ..kinds.leased import LeaseKind, long_hold_note
from ..primitives.leased.lease import Lease
from ..primitives.leased.primitive import Snapshot
from ..primitives.validators import check_name
from . import ActionFailed, Summary, action, charts, message_or_fail, section, summary
from .tables import PAGE_SIZE, as_datetime, page_number, paged_table

__all__ = [
    "ANY",
    "DISPLAYS",
    "LOCK",
    "POOL",
    "SEMAPHORE",
    "HoldForm",
    "LeaseDisplay",
    "MaxSizeForm",
    "ResourceForm",
    "register",
    "register_lock",
    "register_pool",
    "register_semaphore",
]

TABLES = ("available", "holders", "waiters")
CONTENTS_TEMPLATE = "admin/django_redis_pool/kinds/lease_contents.html"


@dataclass(frozen=True)
class LeaseDisplay:
    """How the contents section shows the holds of one kind."""

    #: How the holders table and the finder name what is held.
    held_label: str = "Holder"
    find_label: str = "Holder"
    #: Whether the holders table also shows the holder (a lock's holder is
    #: what is held, and a semaphore's identity is its holder: one column).
    holder_column: bool = True
    #: Slots counted up to a size (the holders' caption says "of <size>"), or
    #: named resources (an available table; ids are trimmed in the finder).
    counts_slots: bool = True
    #: Whether holds and waiters take several permits each (a semaphore's):
    #: the holders and waiters tables show a Permits column, and the holders'
    #: caption counts the permits held.
    permits_column: bool = False
    #: The finder's state of a key that is not held, ``(primitive, key) -> str``.
    find: Callable[[Any, str], str] = lambda primitive, key: "not held"


#: The display of each registered kind, by kind name.
DISPLAYS: dict[str, LeaseDisplay] = {}

POOL = LeaseDisplay(
    held_label="Resource",
    find_label="Resource id",
    counts_slots=False,
    find=lambda pool, key: "available" if pool.has(key) else "not in the pool",
)
SEMAPHORE = LeaseDisplay(
    held_label="Identity", find_label="Identity", holder_column=False, permits_column=True
)
LOCK = LeaseDisplay(holder_column=False)
#: A kind on the lease engine that says nothing else: holders and slots.
ANY = LeaseDisplay()


def register(
    kind: LeaseKind,
    display: LeaseDisplay = ANY,
    actions: Iterable[Callable[[LeaseKind], None]] = (),
) -> None:
    """Register the panels of ``kind``: the summary, the chart of its grants
    and refusals (:mod:`.charts`), the contents section shown as ``display``
    says, force-release, then each of ``actions`` (a function registering one
    of the kind's own actions), then gc."""
    DISPLAYS[kind.name] = display
    summary(kind.name)(lease_summary)
    charts.register(kind.name)
    section(kind.name, title="", template=CONTENTS_TEMPLATE)(lease_contents)
    action(
        kind.name,
        "release",
        label="Force-release",
        form=HoldForm,
        placement="row",
        dangerous=True,
        question="Force-release the hold on {resource!r} (fence {fence}) of "
        "{primitive.kind} {primitive.name!r}? Its holder is not told until its next "
        "renewal or release.",
    )(force_release)
    for register_own in actions:
        register_own(kind)
    action(
        kind.name,
        "gc",
        label="Run gc now",
        question="Reclaim the expired holds and drop the dead waiters of "
        "{primitive.kind} {primitive.name!r} now?",
    )(run_gc)


def kind_of(primitive: Any) -> LeaseKind:
    """The kind of ``primitive``."""
    kind = registry.by_name()[primitive.kind]
    assert isinstance(kind, LeaseKind)
    return kind


# ------------------------------------------------------------------ overview


def lease_summary(primitive: Any) -> Summary:
    """Counts and health from one counts-only snapshot."""
    snap = primitive.snapshot(limit=0)
    notes = []
    health = "ok"
    note = long_hold_note(snap, kind_of(primitive).long_hold(primitive))
    if note:
        health = "warning"
        notes.append(note)
    if snap.size is None or snap.size == 0:
        health = "warning"
        notes.append(kind_of(primitive).empty_note(primitive))
    elif snap.free == 0 and snap.waiting_count:
        health = "warning"
        notes.append(f"exhausted, {snap.waiting_count} waiting")
    if snap.expired_count:
        notes.append(f"{snap.expired_count} expired awaiting gc")
    return Summary(
        size=snap.size,
        free=snap.free,
        held=snap.held_permits,
        waiting=snap.waiting_count,
        health=health,
        note="; ".join(notes),
    )


# ------------------------------------------------------------------ detail page


def _named(holder: str) -> dict[str, Any]:
    """How a holder is shown, each fact once: a request's holder name by its
    process part (``shown``), its method, path and user in the Request
    column (``request``); any other holder as it is."""
    process = process_of(holder)
    return {
        "holder": holder,
        "shown": holder if process is None else process,
        "request": request_of(holder),  # the method, path and user of a request's hold
    }


def _holder_row(lease: Lease, snap: Snapshot) -> dict[str, Any]:
    named = _named(lease.holder)
    return {
        **named,
        "resource": lease.resource,
        # what is held, as the holder is shown when it is the holder (a lock's, a semaphore's)
        "resource_shown": named["shown"] if lease.resource == lease.holder else lease.resource,
        "fence": lease.fence,
        "permits": lease.permits,
        "acquired_at": as_datetime(lease.acquired_at),
        "seconds_left": snap.seconds_left(lease),
    }


def _waiter_rows(snap: Snapshot) -> list[dict[str, Any]]:
    return [
        {
            **_named(waiter.holder),
            "priority": waiter.priority,
            "permits": waiter.permits,
            "since": as_datetime(waiter.since),
            "waited": round(max(0.0, snap.now - waiter.since), 1),
            "deadline": as_datetime(waiter.deadline),
        }
        for waiter in snap.waiters
    ]


def lease_contents(primitive: Any, request: HttpRequest) -> dict[str, Any]:
    """One page of each table (available, holders, waiters) in one round trip."""
    display = DISPLAYS[primitive.kind]
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
    if not display.counts_slots:
        rows = [{"resource": resource} for resource in snap.available]
        available = paged_table(
            request, "available", rows, snap.available_count, numbers["available"]
        )
        tables.insert(0, available)
    return {
        "display": display,
        "snapshot": snap,
        "read_at": as_datetime(snap.now),
        "tables": {table.name: table for table in tables},
        "found": _find(display, primitive, request.GET.get("find", ""), snap),
        "empty_note": kind_of(primitive).empty_note(primitive) if not snap.size else "",
    }


def _find(display: LeaseDisplay, primitive: Any, key: str, snap: Snapshot) -> dict[str, Any] | None:
    """What one resource (identity, holder) is now: found among any number of
    them in one or two reads. A resource id has no whitespace, so it is
    trimmed; an identity or a holder is looked up as typed."""
    if not display.counts_slots:
        key = key.strip()
    if not key:
        return None
    found: dict[str, Any] = {"key": key, "holder": None, "state": "not held"}
    try:
        lease = primitive.lease_of(key)
        if lease is not None:
            found.update(state="held", holder=_holder_row(lease, snap))
        else:
            found["state"] = display.find(primitive, key)
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


def run_gc(primitive: Any, data: dict[str, Any]) -> str:
    """What ``manage.py pool_gc --name`` does, for one primitive."""
    counts = kind_of(primitive).collect(primitive, dry_run=False).counts
    reclaimed, dropped = counts["reclaimed"], counts["dropped"]
    return (
        f"gc of {primitive.kind} {primitive.name!r}: reclaimed {reclaimed} expired "
        f"hold{pluralize(reclaimed)}, dropped {dropped} waiter{pluralize(dropped)}."
    )


def register_lock(kind: LeaseKind, actions: Iterable[Callable[[LeaseKind], None]] = ()) -> None:
    """A lock's panels: the shared ones, without a holder column (its holder is
    what it holds); ``actions`` as for :func:`register`."""
    register(kind, LOCK, actions)


# -- a pool's ---------------------------------------------------------------------


def register_pool(kind: LeaseKind) -> None:
    """A pool's panels: the shared ones, with add and remove."""
    register(kind, POOL, [pool_actions])


def pool_actions(kind: LeaseKind) -> None:
    action(
        kind.name,
        "add",
        fills=type(kind),
        label="Add a resource",
        form=ResourceForm,
        question="Add {resource!r} to pool {primitive.name!r}?",
    )(add_resource)
    action(
        kind.name,
        "remove",
        label="Remove",
        form=ResourceForm,
        placement="row",
        dangerous=True,
        question="Remove {resource!r} from pool {primitive.name!r}? If it is held, the "
        "hold ends now and its holder finds its lease lost at its next renewal or "
        "release. Resources listed in the settings come back with the next manage.py "
        "pool_sync (all of them at once if the pool is left with none).",
    )(remove_resource)


def add_resource(pool: Any, data: dict[str, Any]) -> str:
    """Associate a resource with the pool (a waiter gets it at once)."""
    r = data["resource"]
    return message_or_fail(
        pool.associate(r),
        f"Added {r!r} to pool {pool.name!r}.",
        f"{r!r} is already in pool {pool.name!r}.",
    )


def remove_resource(pool: Any, data: dict[str, Any]) -> str:
    """Disassociate a resource, available or held."""
    r = data["resource"]
    return message_or_fail(
        pool.disassociate(r),
        f"Removed {r!r} from pool {pool.name!r}.",
        f"{r!r} is not in pool {pool.name!r}.",
    )


# -- a semaphore's ----------------------------------------------------------------


class MaxSizeForm(forms.Form):
    """A semaphore's new number of slots."""

    max_size = forms.IntegerField(
        min_value=0,
        max_value=2**52,
        help_text="Holders beyond it keep their slots; new ones wait until enough are freed.",
    )


def register_semaphore(kind: LeaseKind) -> None:
    """A semaphore's panels: the shared ones, with set max size."""
    register(kind, SEMAPHORE, [semaphore_actions])


def semaphore_actions(kind: LeaseKind) -> None:
    action(
        kind.name,
        "max-size",
        fills=type(kind),
        label="Set max size",
        form=MaxSizeForm,
        initial=current_max_size,
        question="Set the max size of semaphore {primitive.name!r} to {max_size}?",
    )(set_max_size)


def current_max_size(semaphore: Any) -> dict[str, Any]:
    """The form's first value: the max size stored now (none if unset)."""
    size = semaphore.snapshot(limit=0).size
    return {} if size is None else {"max_size": size}


def set_max_size(semaphore: Any, data: dict[str, Any]) -> str:
    """Store a new number of slots (waiters are served at once if it grew)."""
    semaphore.set_max_size(data["max_size"])
    return f"The max size of semaphore {semaphore.name!r} is now {data['max_size']}."
