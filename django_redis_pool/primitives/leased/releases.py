"""Releases that could not finish within their deadline, finished in the background.

A lease's release (:meth:`.Lease.release`, a :class:`.Lock`'s) waits at most
``DEADLINE_SLACK`` for Redis. When its call fails in a way that may pass (no
reply within the deadline, a refused or dropped connection, a failover), it
may or may not have reached Redis: the caller returns then, and the release
goes on here, with the same request id, until Redis answers it or the lease
has ended by its own expiry (there is nothing left to release then). A retry
is safe (``release.lua``): a request that already ran answers as it did, and
one that finds the lease gone (expired, force-released, taken by another
holder since: its token is not the lease's) ends nothing and answers 0.

The releases of blocking clients are retried by one daemon thread of the
process, started when the first one comes and ending once none is left; an
primitive built on a ``redis.asyncio`` client has no blocking client, so its
releases are retried by a task of the event loop they were made on (they end
with it). Each attempt waits for Redis at most the release's deadline; the
pauses between attempts grow from :data:`FIRST_PAUSE` to :data:`LONGEST_PAUSE`.
:func:`pending_releases` counts the releases still going on; a forked child
starts with none (its parent's are its parent's). Each release that goes on
here is logged once when it starts, and once when it ends.
Nothing here imports Django.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
import os
import threading
import time
from typing import TYPE_CHECKING, Any, Protocol

from ...exceptions import BackendUnavailable
from ..clients.deadlines import deadline
from ..wire.steps import Steps

if TYPE_CHECKING:
    from ..wire.channel import Channel

__all__ = ["Released", "Releaser", "continue_in_background", "pending_releases"]

logger = logging.getLogger("django_redis_pool")
WARNING, ERROR = logging.WARNING, logging.ERROR

#: The pause before the second attempt, in seconds; each next one doubles it.
FIRST_PAUSE = 0.05
#: The longest pause between two attempts, in seconds.
LONGEST_PAUSE = 1.0
#: How long after the lease's expiry (on this host's clock) attempts go on,
#: in seconds: room for this host's clock being ahead of Redis's.
CLOCK_MARGIN = 1.0


class Released(Protocol):
    """What a release going on in the background reads of its lease."""

    resource: str
    token: str
    holder: str
    fence: int
    expires_at: float | None


class Releaser(Protocol):
    """What a release going on in the background needs of the lease's owner."""

    channel: Channel

    def release_steps(
        self, resource: str, token: str = "", request: str | None = None
    ) -> Steps[int]:
        """End the lease on ``resource`` held by ``token``, answering a retry
        of ``request`` as it answered it."""
        ...


class _Late:
    """One release going on in the background."""

    __slots__ = ("attempts", "ends", "lease", "owner", "request", "seconds", "since")

    def __init__(self, owner: Releaser, lease: Released, request: str, seconds: float) -> None:
        self.owner = owner
        self.lease = lease
        self.request = request
        self.seconds = seconds  #: the deadline of each attempt
        self.attempts = 1  #: (the caller's included)
        self.since = time.monotonic()
        #: When the lease has surely ended (monotonic; None: it never ends by itself).
        self.ends: float | None = None
        if lease.expires_at is not None:
            self.ends = self.since + lease.expires_at - time.time() + CLOCK_MARGIN

    def describe(self) -> str:
        lease = self.lease
        return (
            f"the release of {lease.resource!r} of {self.owner.channel.label} (holder "
            f"{lease.holder!r}, fence {lease.fence})"
        )


def continue_in_background(
    owner: Releaser, lease: Released, request: str, error: Exception, seconds: float
) -> None:
    """Retry the release ``request`` of ``lease`` (granted by ``owner``),
    whose first attempt failed with ``error``, in the background (each
    attempt within ``seconds``)."""
    if _pid != os.getpid():  # (a child forked by other means than os.fork)
        _forget()
    late = _Late(owner, lease, request, seconds)
    logger.warning(
        "%s could not finish within %.2f s (%s); it goes on in the background "
        "until Redis answers it or the lease ends",
        late.describe(),
        seconds,
        error,
    )
    _pending.add(late)
    if owner.channel.is_async:  # (no blocking client: on the loop the release ran on)
        task = asyncio.get_running_loop().create_task(_on_loop(late))
        _tasks.add(task)
        task.add_done_callback(_tasks.discard)
    else:
        _worker_schedule(late, FIRST_PAUSE)


def raise_if_in_flight(channel: Channel, holder: str) -> None:
    """Raise :class:`BackendUnavailable` if a release of a hold of ``holder``
    on ``channel``'s primitive goes on in the background in this process (an
    acquire found the primitive still held by ``holder``)."""
    base = channel.base
    if any(late.owner.channel.base == base and late.lease.holder == holder for late in _pending):
        raise BackendUnavailable(
            f"{channel.label} is still held by {holder!r}: its own release of it did not "
            "finish in time and goes on in the background until Redis answers it; try "
            "again once it is done"
        )


def pending_releases() -> int:
    """How many releases of this process are going on in the background (see
    the module): each ends once Redis answers it, or once its lease has ended."""
    if _pid != os.getpid():  # (a child forked by other means than os.fork)
        _forget()
    return len(_pending)


def _attempt(late: _Late) -> Steps[float | None]:
    """Try ``late`` once: the pause before the next attempt, or None once it
    has ended (logged)."""
    lease = late.lease
    if late.ends is not None and time.monotonic() >= late.ends:
        _end(late, "given up: its lease has ended (nothing is left to release)", level=WARNING)
        return None
    late.attempts += 1
    try:
        with deadline(late.seconds):
            reply = yield from late.owner.release_steps(lease.resource, lease.token, late.request)
    except BackendUnavailable:
        return min(LONGEST_PAUSE, FIRST_PAUSE * 2 ** (late.attempts - 1))
    except Exception as exc:  # Redis refused it (not a matter of time): it stays held
        _end(late, f"failed; it stays held until its lease expires: {exc}", level=ERROR)
        return None
    # (a lease found gone is not reported lost: its holder had let go of it
    # before it ended, so no other holder can have overlapped with it)
    if reply == 0:
        _end(late, "done: the lease had ended already (expired, or force-released)")
    else:
        _end(late, "done")
    return None


def _end(late: _Late, outcome: str, *, level: int = logging.INFO) -> None:
    logger.log(
        level,
        "%s, which went on in the background, ended after %.2f s and %d attempts: %s",
        late.describe(),
        time.monotonic() - late.since,
        late.attempts,
        outcome,
    )
    # (after the log line: whoever sees pending_releases() drop finds it logged)
    _pending.discard(late)


async def _on_loop(late: _Late) -> None:
    """Retry ``late`` as a task of the running loop (an asyncio client's)."""
    try:
        while (pause := await late.owner.channel.arun(_attempt(late))) is not None:
            await asyncio.sleep(pause)
    except asyncio.CancelledError:
        _end(
            late,
            "given up: its event loop ended; it stays held until its lease expires",
            level=WARNING,
        )
        raise
    except Exception as exc:
        _end(late, f"failed; it stays held until its lease expires: {exc}", level=ERROR)


class _Worker(threading.Thread):
    """The thread that retries the releases of blocking clients; it ends once
    none is left (the next one starts another)."""

    def __init__(self) -> None:
        super().__init__(name="drp-late-release", daemon=True)

    def run(self) -> None:
        while (late := _next_due(self)) is not None:
            try:
                pause = late.owner.channel.run(_attempt(late))
            except Exception as exc:
                _end(late, f"failed; it stays held until its lease expires: {exc}", level=ERROR)
                pause = None
            if pause is not None:
                _worker_schedule(late, pause)
            del late


def _worker_schedule(late: _Late, pause: float) -> None:
    """Have the worker thread try ``late`` in ``pause`` seconds (starting it if
    there is none)."""
    global _worker
    with _changed:
        heapq.heappush(_due, (time.monotonic() + pause, next(_order), late))
        if _worker is None or not _worker.is_alive():
            _worker = _Worker()
            _worker.start()
        _changed.notify()


def _next_due(worker: _Worker) -> _Late | None:
    """The next release to try, once it is due; None (the thread ends) once
    there is none left."""
    global _worker
    with _changed:
        while True:
            if not _due:
                if _worker is worker:
                    _worker = None
                return None
            wait = _due[0][0] - time.monotonic()
            if wait <= 0:
                return heapq.heappop(_due)[2]
            _changed.wait(wait)


#: Every release going on in the background (the thread's and the loops').
_pending: set[_Late] = set()
#: The worker thread's releases, by when they are due next.
_due: list[tuple[float, int, _Late]] = []
_order = itertools.count()
_changed = threading.Condition()
_worker: _Worker | None = None
#: The loops' tasks (a loop keeps only weak references to its tasks).
_tasks: set[asyncio.Task[Any]] = set()
#: The process all of the above belong to.
_pid = os.getpid()


def _forget() -> None:
    """In a forked child: nothing pending (the releases were the parent's, and
    the parent finishes them), no thread, and a lock no thread of the parent
    may have held at the fork."""
    global _changed, _worker, _pid
    _pending.clear()
    _due.clear()
    _tasks.clear()
    _changed = threading.Condition()
    _worker = None
    _pid = os.getpid()


os.register_at_fork(after_in_child=_forget)
