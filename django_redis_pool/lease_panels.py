"""The dashboard's summary, sections and actions of the lease-engine kinds:
resource pools, semaphores and locks (see :mod:`.dashboard`)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from django import forms
from django.http import HttpRequest

from . import maintenance
from .dashboard import ActionFailed, Summary, action, section, summary
from .primitives._common import check_name
from .primitives.base import Snapshot
from .primitives.lease import Lease

LEASE_KINDS = ("pool", "semaphore", "lock")
#: Rows per table on a detail page.
PAGE_SIZE = 50
#: Pages beyond this show as empty (offsets stay within what Redis counts exactly).
MAX_PAGE = 2**52 // PAGE_SIZE
TABLES = ("available", "holders", "waiters")


def as_datetime(seconds: float | None) -> datetime | None:
    """Unix seconds (Redis clock) as an aware datetime, for the ``date`` filter;
    None for None, and for times beyond what a datetime holds (year 9999)."""
    if seconds is None:
        return None
    try:
        return datetime.fromtimestamp(seconds, tz=timezone.utc)
    except (ValueError, OverflowError, OSError):
        return None


# ------------------------------------------------------------------ overview


@summary(*LEASE_KINDS)
def lease_summary(primitive: Any) -> Summary:
    """Counts and health from one counts-only snapshot."""
    snap = primitive.snapshot(limit=0)
    notes = []
    health = "ok"
    if snap.size is None or snap.size == 0:
        health = "warning"
        what = "resources" if snap.kind == "pool" else "max size"
        notes.append(f"no {what}: run manage.py pool_sync")
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


def _page_number(request: HttpRequest, table: str) -> int:
    try:
        return min(max(1, int(request.GET.get(f"{table}_page", "1"))), MAX_PAGE)
    except ValueError:
        return 1


def _table(
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


@section(*LEASE_KINDS, title="", template="admin/django_redis_pool/lease_contents.html")
def lease_contents(primitive: Any, request: HttpRequest) -> dict[str, Any]:
    """One page of each table (available, holders, waiters) in one round trip."""
    numbers = {table: _page_number(request, table) for table in TABLES}
    snap = primitive.snapshot(
        limit=PAGE_SIZE,
        **{f"{table}_offset": (numbers[table] - 1) * PAGE_SIZE for table in TABLES},
    )
    tables = [
        _table(
            request,
            "holders",
            [_holder_row(lease, snap) for lease in snap.leases],
            snap.held_count,
            numbers["holders"],
        ),
        _table(request, "waiters", _waiter_rows(snap), snap.waiting_count, numbers["waiters"]),
    ]
    if snap.kind == "pool":
        rows = [{"resource": resource} for resource in snap.available]
        available = _table(request, "available", rows, snap.available_count, numbers["available"])
        tables.insert(0, available)
    return {
        "snapshot": snap,
        "read_at": as_datetime(snap.now),
        "tables": {table.name: table for table in tables},
        "found": _find(primitive, request.GET.get("find", ""), snap),
    }


def _find(primitive: Any, key: str, snap: Snapshot) -> dict[str, Any] | None:
    """What one resource (identity, holder) is now: found among any number of
    them in one or two reads. A pool's ids have no whitespace, so it is trimmed;
    a semaphore's identity or a lock's holder is looked up as typed."""
    if primitive.kind == "pool":
        key = key.strip()
    if not key:
        return None
    found: dict[str, Any] = {"key": key, "holder": None, "state": "not held"}
    try:
        lease = primitive.lease_of(key)
        if lease is not None:
            found.update(state="held", holder=_holder_row(lease, snap))
        elif primitive.kind == "pool":
            found["state"] = "available" if primitive.has(key) else "not in the pool"
    except ValueError as exc:
        return {**found, "state": "invalid", "error": str(exc)}
    return found


# ------------------------------------------------------------------ actions


class HoldForm(forms.Form):
    """Names one hold: what is held, and the fence the operator saw."""

    resource = forms.CharField(max_length=200, strip=False)  # identities may have spaces
    fence = forms.IntegerField(min_value=0)


class ResourceForm(forms.Form):
    """Names one resource of a pool."""

    resource = forms.CharField(
        max_length=200,
        help_text="Up to 200 characters, without braces or whitespace.",
    )

    def clean_resource(self) -> str:
        try:
            return check_name(self.cleaned_data["resource"], "resource")
        except ValueError as exc:
            raise forms.ValidationError(str(exc)) from exc


class MaxSizeForm(forms.Form):
    """A semaphore's new number of slots."""

    max_size = forms.IntegerField(
        min_value=0,
        max_value=2**52,
        help_text="Holders beyond it keep their slots; new ones wait until enough are freed.",
    )


@action(
    LEASE_KINDS,
    "release",
    label="Force-release",
    form=HoldForm,
    placement="row",
    dangerous=True,
    question="Force-release the hold on {resource!r} (fence {fence}) of {primitive.kind} "
    "{primitive.name!r}? Its holder is not told until its next renewal or release.",
)
def force_release(primitive: Any, data: dict[str, Any]) -> str:
    """End one hold, only if it still has the fence the operator saw."""
    if not primitive.force_release(data["resource"], fence=data["fence"]):
        raise ActionFailed(
            f"Nothing released: {data['resource']!r} no longer has a hold with fence "
            f"{data['fence']} (it was released, expired or granted again)."
        )
    return f"Released the hold on {data['resource']!r} (fence {data['fence']})."


@action(
    "pool",
    "add",
    label="Add a resource",
    form=ResourceForm,
    question="Add {resource!r} to pool {primitive.name!r}?",
)
def add_resource(pool: Any, data: dict[str, Any]) -> str:
    """Associate a resource with the pool (a waiter gets it at once)."""
    if not pool.associate(data["resource"]):
        raise ActionFailed(f"{data['resource']!r} is already in pool {pool.name!r}.")
    return f"Added {data['resource']!r} to pool {pool.name!r}."


@action(
    "pool",
    "remove",
    label="Remove",
    form=ResourceForm,
    placement="row",
    dangerous=True,
    question="Remove {resource!r} from pool {primitive.name!r}? If it is held, the hold ends "
    "now and its holder finds its lease lost at its next renewal or release. Resources "
    "listed in the settings come back with the next manage.py pool_sync.",
)
def remove_resource(pool: Any, data: dict[str, Any]) -> str:
    """Disassociate a resource, available or held."""
    if not pool.disassociate(data["resource"]):
        raise ActionFailed(f"{data['resource']!r} is not in pool {pool.name!r}.")
    return f"Removed {data['resource']!r} from pool {pool.name!r}."


@action(
    "semaphore",
    "max-size",
    label="Set max size",
    form=MaxSizeForm,
    question="Set the max size of semaphore {primitive.name!r} to {max_size}?",
)
def set_max_size(semaphore: Any, data: dict[str, Any]) -> str:
    """Store a new number of slots (waiters are served at once if it grew)."""
    semaphore.set_max_size(data["max_size"])
    return f"The max size of semaphore {semaphore.name!r} is now {data['max_size']}."


@action(
    LEASE_KINDS,
    "gc",
    label="Run gc now",
    question="Reclaim the expired holds and drop the dead waiters of {primitive.kind} "
    "{primitive.name!r} now?",
)
def run_gc(primitive: Any, data: dict[str, Any]) -> str:
    """What ``manage.py pool_gc --name`` does, for one primitive."""
    collected = maintenance.collect(primitive)
    return (
        f"gc of {primitive.kind} {primitive.name!r}: reclaimed {len(collected.reclaimed)} "
        f"expired hold(s), dropped {len(collected.dropped)} waiter(s)."
    )
