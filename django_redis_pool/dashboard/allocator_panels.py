"""The admin's panels of allocators: those of every kind on the lease engine
(:mod:`.lease_panels`; the available table lists the free keys), a section of
the keys out of rotation and the soft bindings, and the key actions (add,
remove, mark unhealthy or healthy, unbind)."""

from __future__ import annotations

from typing import Any

from django import forms

from ..kinds.leased import LeaseKind
from ..primitives.leased.allocator import MAX_KEY_PRIORITY
from . import action, message_or_fail, section
from .lease_panels import LeaseDisplay, ResourceForm, register
from .tables import PAGE_SIZE, as_datetime, page_number, paged_table

__all__ = ["ALLOCATOR", "BindingForm", "CooldownForm", "KeyForm", "register_allocator"]

TEMPLATE = "admin/django_redis_pool/kinds/allocator_health.html"

ALLOCATOR = LeaseDisplay(
    held_label="Key",
    find_label="Key",
    counts_slots=False,
    find=lambda allocator, key: {"free": "available", "unhealthy": "out of rotation"}.get(
        allocator.state(key), "not a key"
    ),
)


def register_allocator(kind: LeaseKind) -> None:
    """An allocator's panels: the shared ones with its key actions, then its
    health and soft bindings."""
    register(kind, ALLOCATOR, [allocator_actions])
    section(kind.name, title="Health and soft bindings", template=TEMPLATE)(health_section)


def allocator_actions(kind: LeaseKind) -> None:
    action(
        kind.name,
        "add",
        fills=type(kind),
        label="Add a key",
        form=KeyForm,
        question="Add key {resource!r} (priority {priority}) to allocator {primitive.name!r}?",
    )(add_key)
    action(
        kind.name,
        "remove",
        label="Remove",
        form=ResourceForm,
        placement="row",
        dangerous=True,
        question="Remove key {resource!r} from allocator {primitive.name!r}? If it is "
        "held, its holder finds it gone at its next update or free. Keys listed in the "
        "settings come back with the next manage.py pool_sync (all of them at once if "
        "the allocator is left with none).",
    )(remove_key)
    action(
        kind.name,
        "unhealthy",
        label="Mark unhealthy",
        form=CooldownForm,
        question="Take key {resource!r} of allocator {primitive.name!r} out of rotation "
        "for {cooldown} s?",
    )(mark_unhealthy)
    action(
        kind.name,
        "healthy",
        label="Mark healthy",
        form=ResourceForm,
        placement="row",
        question="Put key {resource!r} of allocator {primitive.name!r} back in rotation now?",
    )(mark_healthy)
    action(
        kind.name,
        "unbind",
        label="Unbind",
        form=BindingForm,
        placement="row",
        question="Forget that {binding!r} is bound to a key of allocator {primitive.name!r}?",
    )(unbind)


def health_section(allocator: Any, request: Any) -> dict[str, Any]:
    """One page of the keys out of rotation and one of the soft bindings."""
    sick_page, binds_page = page_number(request, "unhealthy"), page_number(request, "bindings")
    sick_total, sick = allocator.unhealthy(offset=(sick_page - 1) * PAGE_SIZE, limit=PAGE_SIZE)
    binds_total, binds = allocator.soft_binds(offset=(binds_page - 1) * PAGE_SIZE, limit=PAGE_SIZE)
    return {
        "unhealthy": paged_table(
            request,
            "unhealthy",
            [{"resource": key, "until": as_datetime(until)} for key, until in sick],
            sick_total,
            sick_page,
        ),
        "bindings": paged_table(
            request,
            "bindings",
            [
                {"binding": name, "resource": key, "expires": as_datetime(expiry)}
                for name, key, expiry in binds
            ],
            binds_total,
            binds_page,
        ),
    }


class KeyForm(ResourceForm):
    """A key to add, with its priority."""

    priority = forms.IntegerField(
        min_value=-MAX_KEY_PRIORITY, max_value=MAX_KEY_PRIORITY, initial=0
    )


class CooldownForm(ResourceForm):
    """A key to take out of rotation, and for how long."""

    cooldown = forms.FloatField(min_value=0.001, initial=60, help_text="Seconds.")


class BindingForm(forms.Form):
    """A soft binding's name."""

    binding = forms.CharField(max_length=200, strip=False)


def add_key(allocator: Any, data: dict[str, Any]) -> str:
    """Add a key (free at once)."""
    key, name = data["resource"], allocator.name
    added = allocator.extend([key], priority=data["priority"])
    return message_or_fail(
        added, f"Added key {key!r} to allocator {name!r}.", f"{key!r} is already a key of {name!r}."
    )


def remove_key(allocator: Any, data: dict[str, Any]) -> str:
    """Remove a key, free or held."""
    key, name = data["resource"], allocator.name
    removed = allocator.shrink([key])
    return message_or_fail(
        removed,
        f"Removed key {key!r} from allocator {name!r}.",
        f"{key!r} is not a key of {name!r}.",
    )


def mark_unhealthy(allocator: Any, data: dict[str, Any]) -> str:
    """Take a key out of rotation for a cooldown."""
    key, cooldown = data["resource"], data["cooldown"]
    marked = allocator.report_unhealthy(key, cooldown=cooldown)
    return message_or_fail(
        marked,
        f"Key {key!r} is out of rotation for {cooldown:g} s.",
        f"{key!r} is not a key of {allocator.name!r}.",
    )


def mark_healthy(allocator: Any, data: dict[str, Any]) -> str:
    """End a key's cooldown now."""
    key = data["resource"]
    healed = allocator.report_healthy(key)
    return message_or_fail(
        healed, f"Key {key!r} is back in rotation.", f"{key!r} is not a key of {allocator.name!r}."
    )


def unbind(allocator: Any, data: dict[str, Any]) -> str:
    """Forget one soft binding."""
    name = data["binding"]
    unbound = allocator.unbind_soft_bind(name)
    return message_or_fail(
        unbound, f"{name!r} is no longer bound to a key.", f"{name!r} is not bound (any more)."
    )
