"""The admin's panels of rate limits: the overview's burst and active keys, the
chart of the requests allowed and limited, a section of the busiest keys now
(bounded) with a finder, and the reset action."""

from __future__ import annotations

import math
from typing import Any

from django import forms
from django.http import HttpRequest

from ..kinds.contract import Kind
from ..kinds.ratelimit import MAX_KEY_LENGTH
from . import Summary, action, charts, message_or_fail, section, summary

__all__ = ["BUSIEST", "KeyForm", "register_ratelimit"]

TEMPLATE = "admin/django_redis_pool/kinds/ratelimit_keys.html"
#: How many of the busiest keys the page lists.
BUSIEST = 20
#: A rate limit's chart: the requests it allowed (and, in an hour in which
#: some waited for their turn, how long they waited) and those it limited,
#: each minute.
DECISIONS = charts.Series(
    granted=("acquired",),
    refused=("refused_limited",),
    granted_word="allowed",
    refused_word="limited",
    peaks=False,  # (nothing is held: its flushes sample no holds or waiters)
    wait_if_waited=True,  # (only a TIMEOUT over 0 makes a request wait for its turn)
)


class KeyForm(forms.Form):
    """Names one key of a rate limit (as it is stored: "user:42", "ip:10.0.0.7")."""

    key = forms.CharField(max_length=MAX_KEY_LENGTH, required=False, strip=False)


def register_ratelimit(kind: Kind) -> None:
    """A rate limit's panels: its summary, the chart of its decisions, its
    busiest keys, and reset."""
    summary(kind.name)(ratelimit_summary)
    charts.register(kind.name, DECISIONS)
    section(kind.name, title="Busiest keys", template=TEMPLATE)(keys_section)
    action(
        kind.name,
        "reset",
        label="Reset",
        form=KeyForm,
        placement="row",
        question="Reset key {key!r} of rate limit {primitive.name!r}? It gets its whole "
        "burst back at once.",
    )(reset_key)


def units(remaining: float) -> int:
    """The whole units left (what the next requests may spend now)."""
    return max(0, math.floor(remaining + 1e-9))


def policy_text(limiter: Any) -> str:
    """ "100 per 60 s, burst 20"."""
    return f"{limiter.rate} per {limiter.per:g} s, burst {limiter.burst}"


def ratelimit_summary(limiter: Any) -> Summary:
    """The burst as its size, the active keys as held, and the busiest key."""
    active = limiter.active_count()
    notes = [policy_text(limiter)]
    busiest = limiter.busiest(1) if active else []
    if busiest:
        top = busiest[0]
        notes.append(f"busiest: {top.key}, {units(top.remaining)} left")
    return Summary(size=limiter.burst, held=active, note="; ".join(notes))


def _row(
    key: str, remaining: float, retry_after: float, reset_after: float | None
) -> dict[str, Any]:
    return {
        "key": key,
        "remaining": units(remaining),
        "retry_after": round(retry_after, 1),
        "reset_after": None if reset_after is None else round(reset_after, 1),
        "limited": retry_after > 0,
    }


def keys_section(limiter: Any, request: HttpRequest) -> dict[str, Any]:
    """The busiest keys now (fewest units left first), and the key looked up."""
    found = None
    key = request.GET.get("find", "")
    if key:
        if len(key) > MAX_KEY_LENGTH:
            found = {"key": key[:40], "error": f"A key has at most {MAX_KEY_LENGTH} characters."}
        else:
            remaining, retry_after = limiter.status(key)
            found = _row(key, remaining, retry_after, None)
    return {
        "policy": policy_text(limiter),
        "active": limiter.active_count(),
        "keys": [
            _row(state.key, state.remaining, state.retry_after, state.reset_after)
            for state in limiter.busiest(BUSIEST)
        ],
        "shown": BUSIEST,
        "found": found,
    }


def reset_key(limiter: Any, data: dict[str, Any]) -> str:
    """Forget what a key spent: it gets its whole burst back."""
    key = data["key"]
    return message_or_fail(
        limiter.reset(key),
        f"Key {key!r} of rate limit {limiter.name!r} has its whole burst again.",
        f"Key {key!r} of rate limit {limiter.name!r} had spent nothing (or was reset meanwhile).",
    )
