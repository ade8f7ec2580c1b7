"""What the admin dashboard shows and does for each kind of primitive.

The dashboard's views (:mod:`django_redis_pool.admin`) know no kind: each kind has

- one **summary** (``@summary(kind_name)``): the counts and health of one row
  of the overview, read in one round trip;
- **sections** of its detail page (``@section(kind_name, title=...,
  template=...)``): a function ``(primitive, request) -> context`` and the
  template that renders it;
- **actions** (``@action(kind_name, "add", label=..., form=...)``): a function
  ``(primitive, data) -> message`` run by a POST from a confirmation page, for
  operators with the change permission. The action that gives a primitive its
  size or members is registered with its kind's class (``fills=kind_class``):
  the kind's hints and notes name it.

The panels of the built-in kinds are this package's modules, one per family
of kinds (``lease_panels`` for the kinds on the lease engine,
``allocator_panels``, ``queue_panels``, ``object_pool_panels``; their tables
are paged by ``tables``). Which kind gets which is :data:`.panels.PANELS` (by
kind class), and the app config registers them for every kind when Django
starts (:func:`.panels.register_panels`). A project adds a section or an
action to a kind from a module imported by an ``AppConfig.ready()``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal

from django import forms
from django.http import HttpRequest

from ..kinds.contract import Kind
from ..kinds.leased import FILL_LABELS

__all__ = [
    "ACTIONS",
    "SECTIONS",
    "SUMMARIES",
    "Action",
    "ActionFailed",
    "Section",
    "Summary",
    "action",
    "message_or_fail",
    "section",
    "summary",
]

Health = Literal["ok", "warning", "error"]


@dataclass(frozen=True)
class Summary:
    """One row of the overview: counts (None: not applicable) and health."""

    size: int | None = None
    free: int | None = None
    held: int | None = None
    waiting: int | None = None
    health: Health = "ok"
    note: str = ""  #: says why the health is not "ok", or anything worth a glance


@dataclass(frozen=True)
class Section:
    """One part of a primitive's detail page."""

    title: str  #: its heading on the page ("": none)
    #: Rendered with the context it returns, plus the page's (``primitive``,
    #: ``can_change``, ``row_actions``, ``action_urls``) and ``section``.
    template: str
    context: Callable[[Any, HttpRequest], dict[str, Any]]  #: reads what it shows


class ActionFailed(Exception):
    """Raised by an action that found nothing to do; its message is shown as a
    warning (e.g. the hold was released meanwhile)."""


def message_or_fail(done: bool, success: str, failure: str) -> str:
    """What an action returns: ``success`` if it ``done`` something, else it
    raises :class:`ActionFailed` with ``failure``."""
    if not done:
        raise ActionFailed(failure)
    return success


@dataclass(frozen=True)
class Action:
    """An operator action on one primitive, behind a confirmation page."""

    name: str  #: its URL slug
    label: str  #: button and page title, e.g. "Force-release"
    run: Callable[[Any, dict[str, Any]], str]  #: (primitive, cleaned data) -> message
    #: Its parameters: edited on the confirmation page (or passed in the query
    #: string by a row's link), then carried by the confirming POST.
    form: type[forms.Form] = forms.Form
    #: What the confirmation page asks, formatted with the primitive and the
    #: cleaned data, e.g. "Remove {resource} from {primitive.name}?".
    question: str = "{label} {primitive.kind} {primitive.name!r}?"
    #: "page": a button at the top of the detail page; "row": linked from the
    #: rows of a section (its template builds the link with the parameters).
    placement: Literal["page", "row"] = "page"
    dangerous: bool = False  #: shown in red
    #: What the form shows first when opened without parameters, read from the
    #: primitive: ``(primitive) -> {field: value}`` (None: the form's own
    #: initial values), e.g. the current size of what the action resizes. Read
    #: when the page is opened; a Redis error there leaves the form as it is.
    initial: Callable[[Any], dict[str, Any]] | None = None


#: Registries, by kind: its summary, its sections in order, its actions by slug.
SUMMARIES: dict[str, Callable[[Any], Summary]] = {}
SECTIONS: dict[str, list[Section]] = {}
ACTIONS: dict[str, dict[str, Action]] = {}


def summary(*kinds: str) -> Callable[[Callable[[Any], Summary]], Callable[[Any], Summary]]:
    """Register the decorated ``(primitive) -> Summary`` for ``kinds``."""

    def register(function: Callable[[Any], Summary]) -> Callable[[Any], Summary]:
        for kind in kinds:
            SUMMARIES[kind] = function
        return function

    return register


def section(
    *kinds: str, title: str, template: str
) -> Callable[[Callable[..., dict[str, Any]]], Callable[..., dict[str, Any]]]:
    """Add the decorated ``(primitive, request) -> context`` as a section of the
    detail page of ``kinds``, after those already added."""

    def register(function: Callable[..., dict[str, Any]]) -> Callable[..., dict[str, Any]]:
        for kind in kinds:
            sections = SECTIONS.setdefault(kind, [])
            sections[:] = [s for s in sections if s.context is not function]
            sections.append(Section(title=title, template=template, context=function))
        return function

    return register


def action(
    kinds: str | Iterable[str],
    name: str,
    *,
    fills: type[Kind[Any]] | None = None,
    **options: Any,
) -> Callable[[Callable[[Any, dict[str, Any]], str]], Callable[[Any, dict[str, Any]], str]]:
    """Register the decorated ``(primitive, data) -> message`` as action ``name``
    of ``kinds``; ``options`` are the other fields of :class:`Action`.
    ``fills``: the kind class whose primitives this action gives their size or
    members ("Add a resource"): the kind's hints and notes name its
    label (:meth:`LeaseKind.fill_label <..kinds.leased.LeaseKind.fill_label>`)."""
    kinds = (kinds,) if isinstance(kinds, str) else tuple(kinds)
    if not re.fullmatch(r"[-\w]+", name, re.ASCII):
        raise ValueError(f"action name {name!r} must be a slug (letters, digits, - and _)")
    clashing = {"primitive", "label"} & set(options.get("form", forms.Form).base_fields)
    if clashing:
        raise ValueError(
            f"the form of action {name!r} has fields named {sorted(clashing)}, which its "
            "question uses for the primitive and the label: rename them"
        )

    def register(function: Callable[[Any, dict[str, Any]], str]) -> Callable[..., str]:
        for kind in kinds:
            ACTIONS.setdefault(kind, {})[name] = Action(name=name, run=function, **options)
        if fills is not None:
            FILL_LABELS[fills] = options["label"]
        return function

    return register
