"""What the lease engine writes into Redis, read back: holders, leases, waiters.

A lease record is ``token|fence|acquired|expires|lease ms|provisional|count|
request|permits|holder`` (``engine.lua``'s ``REC_FORMAT``), a waiter's
``token|lease ms|priority|since|deadline|alive until|shares|permits|holder``; a grant
is answered (and pushed to a waiter) as ``"resource\nrecord"``. Nothing here
imports Django.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from dataclasses import dataclass
from typing import Any

from ...exceptions import CorruptRecord
from ..text import printable
from .lease import Lease, LeaseOwner

logger = logging.getLogger("django_redis_pool")


__all__ = [
    "Waiter",
    "default_holder",
    "ended_leases",
    "generation",
    "lease_of",
    "leases",
    "waiters",
]

_HOSTNAME = socket.gethostname()


def default_holder() -> str:
    """``host:pid:thread`` of the caller: who holds a lease when no holder is given."""
    try:
        return _this_thread.holder  # type: ignore[no-any-return]
    except AttributeError:
        holder = _this_thread.holder = f"{_HOSTNAME}:{os.getpid()}:{threading.get_ident()}"
        return holder


#: What is known of the calling thread (its default holder); new in a forked child.
_this_thread = threading.local()
#: This process: a new object in a forked child (for holders kept elsewhere,
#: e.g. a lock's per-thread default, to know they are their parent's).
generation = object()


def _new_process() -> None:
    global _this_thread, generation
    _this_thread = threading.local()
    generation = object()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_new_process)


@dataclass(frozen=True)
class Waiter:
    """A caller blocked in ``acquire``, as stored in Redis."""

    holder: str
    priority: int
    since: float
    deadline: float | None
    #: The permits it asks for (a semaphore's; 1 for every other kind).
    permits: int = 1


def lease_of(
    owner: LeaseOwner, resource: str, raw: str, sent: float | None = None
) -> tuple[Lease, bool]:
    """(the lease on ``resource`` of ``owner``'s primitive, whether it is a
    provisional grant) from its record ``raw``; ``sent``: when the call that
    granted it to us was sent (monotonic), where its term and hold start. A
    record that is not one (written by someone else) raises :class:`CorruptRecord`."""
    try:
        token, fence, acquired, expires, lease_ms, provisional, _, _, permits, holder = raw.split(
            "|", 9
        )
        lease = Lease(
            owner,
            resource=resource,
            holder=holder,
            fence=int(fence),
            expires_at=None if expires == "-1" else int(expires) / 1000,
            lease_timeout=None if lease_ms == "-1" else int(lease_ms) / 1000,
            token=token,
            acquired_at=int(acquired) / 1000 or None,
            permits=int(permits),
            sent=sent,
        )
    except ValueError:
        raise CorruptRecord(
            f"the lease record of {printable(resource)} of {owner.channel.label} cannot be read: "
            f"{printable(raw)}"
        ) from None
    return lease, provisional == "1"


def _readable(owner: LeaseOwner, resource: str, raw: str) -> Lease:
    """The lease of a listing (:func:`leases`): one whose record cannot be read
    is logged and shown as held by ``UNREADABLE``, so that the others are."""
    try:
        return lease_of(owner, resource, raw)[0]
    except CorruptRecord as exc:
        logger.warning("%s", exc)
        lease = Lease.unrecorded(owner, resource)
        lease.holder = UNREADABLE
        return lease


#: The holder shown for a lease whose record cannot be read.
UNREADABLE = "(unreadable record)"


def leases(owner: LeaseOwner, pairs: list[Any]) -> list[Lease]:
    """Leases from a flat ``[resource, record, ...]`` list (missing records skipped)."""
    return [
        _readable(owner, resource, raw)
        for resource, raw in zip(pairs[0::2], pairs[1::2], strict=True)
        if raw
    ]


def ended_leases(owner: LeaseOwner, pairs: list[Any]) -> list[Lease]:
    """Like :func:`leases`, but a lease whose record was missing is kept
    with only its resource (:meth:`.Lease.unrecorded`)."""
    return [
        _readable(owner, resource, raw) if raw else Lease.unrecorded(owner, resource)
        for resource, raw in zip(pairs[0::2], pairs[1::2], strict=True)
    ]


def waiters(raws: list[Any]) -> list[Waiter]:
    """Waiters from their stored records, in the order they will be served."""
    found = []
    for raw in raws:
        if not raw:
            continue
        try:
            _, _, priority, since, deadline, _, _, permits, holder = raw.split("|", 8)
            waiter = Waiter(
                holder=holder,
                priority=int(priority),
                since=int(since) / 1000,
                deadline=None if deadline == "-1" else int(deadline) / 1000,
                permits=int(permits),
            )
        except ValueError:  # (written by someone else: left out, said once)
            logger.warning("a waiter record cannot be read: %s", printable(raw))
            continue
        found.append(waiter)
    return found
