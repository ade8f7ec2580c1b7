"""The lease engine: atomic grants, renewals and fair hand-off, in Lua.

One :class:`LeaseEngine` drives the keys of one primitive. Every state change is
one Lua script (``lua/engine.lua`` is prepended to each), run with EVALSHA and
re-loaded on NOSCRIPT by redis-py. Time is the Redis server's ``TIME``.

Blocking acquires queue in Redis, ordered by priority then arrival. A release
hands the resource straight to the head waiter and pushes the lease onto that
waiter's own wake list, on which the waiter blocks with BLPOP: no polling. A
blocked waiter also wakes when the earliest lease is due to expire (to reclaim
it) and at least every ``wait_chunk`` seconds to prove it is alive; a waiter
that stops checking in is skipped by the next hand-off.

Every script is safe to run twice (redis-py retries commands on connection
errors): an acquire carries a request token, so running it again returns the
same lease or queue place, never a second lease or a second fence.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import socket
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any

from redis.exceptions import NoScriptError

from ..exceptions import BackendUnavailable, NotConfigured, PoolError
from ._common import backend_errors, key_prefix, load_lua, text, to_ms
from .lease import Lease

__all__ = ["LeaseEngine", "Waiter", "default_holder"]

_HOSTNAME = socket.gethostname()


def default_holder() -> str:
    """``host:pid:thread`` of the caller: who holds a lease when no holder is given."""
    return f"{_HOSTNAME}:{os.getpid()}:{threading.get_ident()}"


@dataclass(frozen=True)
class Waiter:
    """A caller blocked in ``acquire``, as stored in Redis."""

    holder: str
    priority: int
    since: float
    deadline: float | None


class LeaseEngine:
    """Runs the lease-engine scripts against the keys of one primitive.

    ``kind``/``name``/``prefix`` build the keys (all under the hash tag
    ``{kind:name}``). ``mode`` says what is leased: for a pool, the order in
    which named resources are picked (``fifo``, ``lifo`` or ``random``); else
    slots whose lease is named after the holder: ``sem`` (as many as the stored
    max size), ``lock`` (one) or ``rlock`` (one, reentrant).
    """

    #: Longest single blocking read, in seconds (also bounded by the client's
    #: socket timeout, so redis-py never times out a read we meant to block on).
    wait_chunk = 2.0

    def __init__(self, client: Any, *, kind: str, name: str, mode: str, prefix: str) -> None:
        self.client = client
        self.kind = kind
        self.name = name
        self.label = f"{kind} {name!r}"
        #: Every key of the primitive is this base plus a suffix (see engine.lua).
        self.base = key_prefix(prefix, kind, name)
        self.wake_prefix = f"{self.base}:wake:"
        self.mode = mode
        self._shas: dict[str, str] = {}
        self._chunk: float | None = None
        #: Semaphores: the max size an acquire stores if Redis has none ("": none).
        self.default_max = ""

    # -- running scripts -------------------------------------------------------

    def run(self, script: str, *args: Any) -> Any:
        """Run lease-engine script ``script`` with its own ``args`` (EVALSHA,
        loading the script on NOSCRIPT)."""
        sha = self._shas.get(script) or self._sha(script)
        with backend_errors():
            try:
                reply = self.client.evalsha(sha, 1, self.base, self.mode, *args)
            except NoScriptError:
                self.client.script_load(load_lua("engine", script))
                reply = self.client.evalsha(sha, 1, self.base, self.mode, *args)
        return text(reply)

    def _sha(self, script: str) -> str:
        sha = hashlib.sha1(load_lua("engine", script).encode()).hexdigest()
        self._shas[script] = sha
        return sha

    # -- acquiring -------------------------------------------------------------

    def acquire(
        self, *, timeout: float | None, lease_ms: int, holder: str, priority: int
    ) -> Lease | None:
        """Grant a lease now, or wait up to ``timeout`` seconds (None: forever;
        0: do not wait) for one, fairly. Returns None if nothing was granted."""
        token = uuid.uuid4().hex
        deadline = None if timeout is None else time.monotonic() + timeout
        chunk = self._wait_chunk()
        args = (holder, lease_ms, priority)
        wait_ms = -2 if timeout == 0 else _remaining_ms(deadline)
        try:
            reply = self._check(
                self.run("acquire", token, *args, wait_ms, to_ms(chunk), self.default_max),
                holder,
                timeout != 0,
            )
            if reply[0] == "granted":
                return self._lease(reply[1])
            if reply[0] in ("none", "held"):
                return None
            return self._wait(token, args, deadline, chunk, int(reply[1]))
        except BackendUnavailable:
            # Redis is unreachable: a queue place is dropped by the next hand-off
            # once our liveness window has passed; a grant expires with its lease.
            raise
        except BaseException:
            # Interrupted (even between the script's run and its reply): give up
            # our place, and anything granted or handed to us meanwhile.
            with contextlib.suppress(Exception):
                self.run("withdraw", token)
            raise

    def _wait(
        self,
        token: str,
        args: tuple[str, int, int],
        deadline: float | None,
        chunk: float,
        next_expiry_ms: int,
    ) -> Lease | None:
        wake_key = self.wake_prefix + token
        alive_ms = to_ms(chunk)
        while True:
            block = chunk
            if deadline is not None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    self.run("withdraw", token)
                    return None
                block = min(block, remaining)
            if next_expiry_ms >= 0:
                block = min(block, next_expiry_ms / 1000 + 0.001)
            with backend_errors():
                popped = self.client.blpop([wake_key], timeout=max(block, 0.001))
            if popped:
                lease = self._lease(text(popped[1]))
                if lease is not None:
                    return lease
                reply = ["gone"]
            else:
                reply = self.run("wait", token, alive_ms)
            if reply[0] == "granted":
                lease = self._lease(reply[1])
                if lease is not None:
                    return lease
                reply = ["gone"]
            if reply[0] == "gone":
                # Our place was dropped: our deadline passed on the Redis clock
                # (a blocking read can return up to one server tick, 1/hz s,
                # late), we were presumed dead after a long pause, or a
                # provisional grant lapsed. Queue again only if time is left.
                if deadline is not None and deadline <= time.monotonic():
                    return None
                reply = self._check(
                    self.run(
                        "acquire", token, *args, _remaining_ms(deadline), alive_ms, self.default_max
                    ),
                    args[0],
                )
                if reply[0] == "granted":
                    lease = self._lease(reply[1])
                    if lease is not None:
                        return lease
                    continue
            next_expiry_ms = int(reply[1])

    def _check(self, reply: list[Any], holder: str, wait: bool = True) -> list[Any]:
        """Raise for the replies that mean the acquire cannot be served (a
        non-reentrant lock already held by ``holder`` is just "not granted" when
        the caller does not ``wait``)."""
        if reply[0] == "unconfigured":
            raise NotConfigured(
                f"{self.label} has no max size; call set_max_size(n) first "
                "(or set MAX_SIZE in its settings)"
            )
        if reply[0] == "held" and wait:
            raise PoolError(
                f"{self.label} is already held by {holder!r} and is not reentrant: waiting "
                "for it would wait for ourselves. Release it first, or use reentrant=True."
            )
        return reply

    def lease_from_record(self, raw: str | bytes) -> Lease:
        """The :class:`Lease` described by a JSON lease record."""
        return self._lease_of(json.loads(raw))

    def _lease_of(self, rec: dict[str, Any]) -> Lease:
        return Lease(
            self,
            resource=str(rec["r"]),
            holder=str(rec["h"]),
            fence=int(rec["f"]),
            expires_at=None if rec["e"] == -1 else rec["e"] / 1000,
            lease_timeout=None if rec["l"] == -1 else rec["l"] / 1000,
            token=str(rec["t"]),
            acquired_at=rec["a"] / 1000 if "a" in rec else None,
        )

    def _lease(self, raw: str) -> Lease | None:
        """Lease granted to us; a provisional (unconfirmed no-expiry) grant is
        confirmed first. None if the grant was lost before it could be."""
        rec = json.loads(raw)
        lease = self._lease_of(rec)
        if rec.get("p") and not self.renew(lease, None):
            return None
        return lease

    def _wait_chunk(self) -> float:
        if self._chunk is None:
            timeout = _socket_timeout(self.client)
            chunk = self.wait_chunk
            if timeout:
                chunk = min(chunk, max(timeout - 1.0, timeout / 2))
            self._chunk = max(chunk, 0.05)
        return self._chunk

    # -- holding ----------------------------------------------------------------

    def renew(self, lease: Lease, lease_timeout: float | None) -> bool:
        """Extend ``lease`` (None keeps its duration); False if it is lost."""
        expires = self.renew_resource(lease.resource, lease.token, lease_timeout)
        if expires is False:
            return False
        lease.expires_at = expires
        if lease_timeout is not None:
            lease.lease_timeout = lease_timeout
        return True

    def renew_resource(
        self, resource: str, token: str, lease_timeout: float | None
    ) -> float | bool | None:
        """Extend the lease on ``resource`` held by ``token`` ('' = whoever holds
        it); None keeps its duration. Returns the new expiry (unix seconds, None
        for none), or False if there is no such live lease."""
        lease_ms = -2 if lease_timeout is None else to_ms(lease_timeout)
        reply = self.run("renew", resource, token, lease_ms)
        if int(reply[0]) != 1:
            return False
        return None if int(reply[1]) == -1 else int(reply[1]) / 1000

    def release(
        self,
        resource: str,
        token: str = "",
        request: str | None = None,
        *,
        fence: int | None = None,
        force: bool = False,
    ) -> int:
        """End the lease on ``resource`` held by ``token`` ('' = whoever holds it).

        Returns 1 if a live lease was ended, 2 if a reentrant lock's count went
        down but it is still held, 0 if there was no such live lease. ``request``
        identifies the call, so that a retried run answers the same. With a
        ``fence``, only a lease with that fence is ended; ``force`` (an
        operator's force-release) ends a reentrant lock's hold entirely.
        """
        request = request or uuid.uuid4().hex
        fence_arg = "" if fence is None else fence
        return int(self.run("release", resource, token, request, fence_arg, int(force)))

    def gc(self, batch: int = 1000) -> tuple[list[Lease], list[Waiter]]:
        """Reclaim every expired lease and drop dead waiters; returns the
        reclaimed leases and the dropped waiters."""
        leases: list[Lease] = []
        waiters: list[Waiter] = []
        offset = 0
        while True:
            reclaimed, dropped, next_offset = self.run("gc", batch, offset)
            leases += self.ended_leases(reclaimed)
            waiters += self.waiters(dropped)
            if len(reclaimed) < batch and int(next_offset) == -1:
                return leases, waiters
            offset = max(int(next_offset), 0)

    def expired(self) -> tuple[list[Lease], list[Waiter]]:
        """What :meth:`gc` would reclaim and drop now, changing nothing."""
        leases, waiters = self.run("read", "expired", "")
        return self.ended_leases(leases), self.waiters(waiters)

    def ended_leases(self, raws: list[Any]) -> list[Lease]:
        """Leases from the records of expired leases (a lease whose record was
        missing has only its resource)."""
        return [
            self._lease_of({"h": "", "f": 0, "e": -1, "l": -1, "t": "", **rec})
            for rec in self.records(raws)
        ]

    def records(self, raws: list[Any]) -> list[dict[str, Any]]:
        """Decode JSON records returned by a read script (missing ones skipped)."""
        return [json.loads(raw) for raw in raws if raw]

    def waiters(self, raws: list[Any]) -> list[Waiter]:
        """Waiters from their stored records, in the order they will be served."""
        return [
            Waiter(
                holder=str(w["h"]),
                priority=int(w["p"]),
                since=w["s"] / 1000,
                deadline=None if w["dl"] == -1 else w["dl"] / 1000,
            )
            for w in self.records(raws)
        ]


def _remaining_ms(deadline: float | None) -> int:
    """Milliseconds left until ``deadline`` (a monotonic time), at least 1;
    -1 for no deadline."""
    if deadline is None:
        return -1
    return max(1, to_ms(deadline - time.monotonic()))


def _socket_timeout(client: Any) -> float | None:
    """The read timeout of ``client``'s connections (redis.Redis or RedisCluster)."""
    for owner in (getattr(client, "connection_pool", None), getattr(client, "nodes_manager", None)):
        kwargs = getattr(owner, "connection_kwargs", None)
        if isinstance(kwargs, dict):
            value = kwargs.get("socket_timeout")
            return float(value) if value else None
    return None
