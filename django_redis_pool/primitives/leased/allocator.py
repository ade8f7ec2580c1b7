"""Allocator: named keys handed out at once, exclusively or in turn (redis-allocator's
RedisAllocator API, on the lease engine)."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from types import TracebackType
from typing import Any

from .. import counts
from ..validators import (
    DEFAULT,
    Seconds,
    check_count,
    check_duration,
    check_holder,
    check_lease_timeout,
    check_name,
    renamed,
)
from ..wire.keys import new_token, to_ms
from ..wire.protocol import Mode, Reply
from ..wire.steps import Steps
from . import records
from .lease import Lease, release_lease_steps
from .primitive import DEFAULT_KEY_PREFIX, AsyncHold, Collected, Hold, LeasedPrimitive
from .records import default_holder

__all__ = ["MAX_KEY_PRIORITY", "AllocatedKey", "Allocator", "AllocatorObject"]

logger = logging.getLogger("django_redis_pool")

#: Key priorities range from -MAX_KEY_PRIORITY to MAX_KEY_PRIORITY.
MAX_KEY_PRIORITY = 2**20
#: Keys sent per script call by extend, shrink and assign.
CHUNK = 1000
#: A deprecated keyword argument not given.
_UNSET: Any = object()


class AllocatedKey(str):
    """A key handed out by :meth:`Allocator.malloc_key`: a ``str`` (it compares
    and hashes as the key) that also carries this allocation's ``fence`` and
    ``holder``. Freeing it frees the key only while this allocation holds it."""

    fence: int
    holder: str
    lease: Lease | None  #: the exclusive lock behind it (None in a shared allocator)

    def __new__(cls, key: str, *, fence: int, holder: str, lease: Lease | None) -> AllocatedKey:
        allocated = super().__new__(cls, key)
        allocated.fence, allocated.holder, allocated.lease = fence, holder, lease
        return allocated

    def __repr__(self) -> str:
        return f"AllocatedKey({str(self)!r}, fence={self.fence}, holder={self.holder!r})"


class AllocatorObject:
    """What :meth:`Allocator.malloc` hands out: ``key`` (an :class:`AllocatedKey`)
    with the ``params`` it was configured with, and the object it was made for.
    ``update(lease_timeout)`` extends the key's lock; ``close()`` (or leaving a
    ``with`` block) frees the key."""

    def __init__(
        self, allocator: Allocator, key: AllocatedKey, params: Any = None, obj: Any = None
    ) -> None:
        self.allocator = allocator
        self.key = key
        self.params = params
        self.obj = obj
        self.closed = False

    def update(self, lease_timeout: Seconds = DEFAULT, *, timeout: Any = _UNSET) -> bool:
        """Extend the key's lock by ``lease_timeout`` seconds from now (DEFAULT:
        the lock's own duration; None: until freed). False once the lock is
        lost (or shared). (``timeout=`` is its deprecated name.)"""
        if timeout is not _UNSET:
            lease_timeout = _renamed_timeout("AllocatorObject.update", timeout)
        lease = self.key.lease
        return lease is not None and not self.closed and lease.renew(lease_timeout)

    def close(self) -> bool:
        """Free the key (once); False if this allocation no longer held it."""
        if self.closed:
            return False
        self.closed = True
        return self.allocator.free_keys(self.key) == 1

    def __enter__(self) -> AllocatorObject:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<AllocatorObject {str(self.key)!r} of {self.allocator.name!r}>"


class Allocator(LeasedPrimitive):
    """Named keys (proxies, accounts, API tokens...) handed out at once, never
    waited for, shared by every process on the same Redis, ``name`` and
    ``key_prefix``.

    Exclusive (default): a key handed out is locked to its holder for
    ``lease_timeout`` seconds (the allocator's by default; None: until freed), and
    comes back when freed or when the lock expires. ``shared=True``: keys are
    handed out in turn and never locked. Higher-priority keys go first, and
    within one priority the key free the longest; keys reported unhealthy sit
    out their cooldown. A soft binding remembers which key a name got, so that
    the name gets it again while it is free.

    ``keys`` (optional): the keys it is meant to hold, a list or a dict of key
    -> priority. A malloc that finds it holding no key at all (Redis lost its
    data: a restart without persistence, an eviction, a ``FLUSHDB``) adds them
    again first. Building one does no I/O.
    """

    kind = "allocator"
    named_resources = True

    def __init__(
        self,
        client: Any,
        name: str,
        *,
        shared: bool = False,
        lease_timeout: float | None = 120,
        soft_bind_timeout: float = 3600,
        keys: Iterable[str] | Mapping[str, int] | None = None,
        key_prefix: str = DEFAULT_KEY_PREFIX,
    ) -> None:
        if not isinstance(shared, bool):
            raise ValueError(f"shared must be True or False, got {shared!r}")
        super().__init__(
            client, name, key_prefix=key_prefix, mode=Mode.SHARED if shared else Mode.ALLOC
        )
        self.shared = shared
        self.lease_timeout = lease_timeout
        self.soft_bind_timeout = check_duration(soft_bind_timeout, "soft_bind_timeout")
        #: The keys (key -> priority) a malloc restores when it holds none.
        self.configured_keys: dict[str, int] = (
            {check_name(k, "key"): _check_priority(p) for k, p in keys.items()}
            if isinstance(keys, Mapping)
            else dict.fromkeys(_check_keys(keys or ()), 0)
        )

    def _heal(self) -> Steps[None]:
        yield from self._extend_many(self.configured_keys)
        logger.warning(
            "allocator %r held no key at all (never synced, or Redis lost its keys): "
            "added its %d configured keys",
            self.name,
            len(self.configured_keys),
        )

    def __repr__(self) -> str:
        mode = "shared" if self.shared else f"lease_timeout={self.lease_timeout}"
        return f"<Allocator {self.name!r} {mode}>"

    # -- keys ---------------------------------------------------------------------

    def extend(
        self,
        keys: Iterable[str],
        *,
        lease_timeout: Seconds = DEFAULT,
        priority: int = 0,
        timeout: Any = _UNSET,
    ) -> int:
        """Add ``keys`` (or update them): each stays in the allocator for
        ``lease_timeout`` seconds (DEFAULT or None: for ever) and is handed out
        by ``priority`` (larger first). A held key keeps its holder's lock.
        Returns how many keys were new. (``timeout=`` is its deprecated name.)"""
        if timeout is not _UNSET:
            lease_timeout = _renamed_timeout("Allocator.extend", timeout)
        lifetime = None if lease_timeout is DEFAULT else check_lease_timeout(lease_timeout)
        steps = self._extend(_check_keys(keys), to_ms(lifetime), _check_priority(priority))
        return self._channel.run(steps)

    def _extend(self, keys: list[str], lifetime_ms: int, priority: int) -> Steps[int]:
        added = 0
        for chunk in _chunks(keys):
            added += int((yield self._channel.op("alloc_extend", lifetime_ms, priority, *chunk)))
        return added

    def extend_many(self, keys: Mapping[str, int]) -> int:
        """Add (or update) ``keys``, each with its own priority (key -> priority),
        one atomic step per priority and 1,000 keys; returns how many were new."""
        keys = {check_name(k, "key"): _check_priority(p) for k, p in keys.items()}
        return self._channel.run(self._extend_many(keys))

    def _extend_many(self, keys: Mapping[str, int]) -> Steps[int]:
        added = 0
        for priority in sorted(set(keys.values())):
            chosen = [k for k, p in keys.items() if p == priority]
            added += yield from self._extend(chosen, -1, priority)
        return added

    def shrink(self, keys: Iterable[str]) -> int:
        """Remove ``keys``, free or held (a holder then finds its key gone at its
        next update or free). Returns how many were keys."""
        removed = 0
        for chunk in _chunks(_check_keys(keys)):
            removed += int(self._channel.run(self._channel.op("alloc_shrink", *chunk)))
        return removed

    def assign(
        self,
        keys: Iterable[str],
        *,
        lease_timeout: Seconds = DEFAULT,
        priority: int = 0,
        timeout: Any = _UNSET,
    ) -> None:
        """Make ``keys`` the whole set: the others are removed (held or not),
        these added or updated as by :meth:`extend`. Done in chunks of
        ``CHUNK`` keys, each one atomic step. (``timeout=`` is the deprecated
        name of ``lease_timeout``.)"""
        if timeout is not _UNSET:
            lease_timeout = _renamed_timeout("Allocator.assign", timeout)
        wanted = _check_keys(keys)
        self.extend(wanted, lease_timeout=lease_timeout, priority=priority)
        self.shrink(set(self.keys()) - set(wanted))

    def keys(self) -> list[str]:
        """Every key, free, held or out of rotation (read in pages)."""
        found: list[str] = []
        cursor = "0"
        while True:
            cursor, page = self._channel.run(self._channel.op("alloc_read", "keys", cursor, CHUNK))
            found += page
            if str(cursor) == "0":
                return sorted(set(found))

    def __len__(self) -> int:
        return int(self._channel.run(self._channel.op("alloc_read", "len")))

    def __contains__(self, key: object) -> bool:
        return (
            isinstance(key, str)
            and int(self._channel.run(self._channel.op("alloc_read", "has", key))) == 1
        )

    def state(self, key: str) -> str:
        """What ``key`` is now: "held", "free", "unhealthy" (out of rotation)
        or "absent" (not a key)."""
        meta, sick, raw = self._channel.run(
            self._channel.op("alloc_read", "key", check_name(key, "key"))
        )
        if not meta:
            return "absent"
        return "held" if raw else "unhealthy" if sick else "free"

    def is_locked(self, key: str) -> bool:
        """Whether ``key`` is held by a live lock now."""
        return self.lease_of(check_name(key, "key")) is not None

    # -- handing out --------------------------------------------------------------

    def malloc_key(
        self,
        *,
        lease_timeout: Seconds = DEFAULT,
        name: str | None = None,
        cache_timeout: float | None = None,
        holder: str | None = None,
        timeout: Any = _UNSET,
    ) -> AllocatedKey | None:
        """A key now, or None if none is free (it never waits, and never raises
        for a refusal: :meth:`hold` does).

        Exclusive: the key is locked to ``holder`` (default ``host:pid:thread``)
        for ``lease_timeout`` seconds (DEFAULT: the allocator's
        ``lease_timeout``; None: until freed). (``timeout=`` is its deprecated
        name.)
        Shared: the next key in turn, not locked. With ``name``: the key last
        bound to it if that key is free, else another, and ``name`` is bound to
        the key handed out for ``cache_timeout`` seconds (None:
        ``soft_bind_timeout``).
        """
        if timeout is not _UNSET:
            lease_timeout = _renamed_timeout("Allocator.malloc_key", timeout)
        return self._channel.run(self._malloc_key(lease_timeout, name, cache_timeout, holder))

    async def amalloc_key(
        self,
        *,
        lease_timeout: Seconds = DEFAULT,
        name: str | None = None,
        cache_timeout: float | None = None,
        holder: str | None = None,
        timeout: Any = _UNSET,
    ) -> AllocatedKey | None:
        """:meth:`malloc_key` on the event loop."""
        if timeout is not _UNSET:
            lease_timeout = _renamed_timeout("Allocator.amalloc_key", timeout)
        return await self._channel.arun(
            self._malloc_key(lease_timeout, name, cache_timeout, holder)
        )

    def _malloc_key(
        self,
        lease_timeout: Seconds,
        name: str | None,
        cache_timeout: float | None,
        holder: str | None,
    ) -> Steps[AllocatedKey | None]:
        if lease_timeout is DEFAULT:
            lease_ms = self._lease_ms
        else:
            lease_ms = to_ms(check_lease_timeout(lease_timeout))
        bind = "" if name is None else check_holder(name, "name")
        bind_timeout = self._bind_timeout(cache_timeout)
        holder = default_holder() if holder is None else check_holder(holder)
        ask = (new_token(), lease_ms, to_ms(bind_timeout))
        heal = 1 if self.configured_keys else 0
        # (packed: the binding name and the holder hold no control character)
        reply = yield self._channel.op("alloc_malloc", *ask, f"{heal}\n{bind}\n{holder}")
        while reply in (Reply.MORE, Reply.EMPTY):
            if reply == Reply.EMPTY:  # (once: the next call restores nothing)
                yield from self._heal()
                heal = 0
            reply = yield self._channel.op("alloc_malloc", *ask, f"{heal}\n{bind}\n{holder}")
        if "\n" not in reply:  # (not "key\ndetail")
            self._channel.counts.add(counts.REFUSED_TIMEOUT)
            return None
        self._channel.counts.granted(0.0)
        key, detail = reply.split("\n", 1)
        if self.shared:
            return AllocatedKey(key, fence=int(detail), holder=holder, lease=None)
        lease = records.lease_of(self._engine, key, detail)[0]
        return AllocatedKey(key, fence=lease.fence, holder=lease.holder, lease=lease)

    def malloc(
        self,
        *,
        lease_timeout: Seconds = DEFAULT,
        obj: Any = None,
        params: Any = None,
        cache_timeout: float | None = None,
        timeout: Any = _UNSET,
    ) -> AllocatorObject | None:
        """:meth:`malloc_key` wrapped in an :class:`AllocatorObject`. ``obj``'s
        ``name`` attribute (if any) is the soft-binding name, and its
        ``set_config(key, params)`` (if any) is called with the key.
        (``timeout=`` is the deprecated name of ``lease_timeout``.)"""
        if timeout is not _UNSET:
            lease_timeout = _renamed_timeout("Allocator.malloc", timeout)
        name = getattr(obj, "name", None)
        key = self.malloc_key(lease_timeout=lease_timeout, name=name, cache_timeout=cache_timeout)
        if key is None:
            return None
        configure = getattr(obj, "set_config", None)
        if callable(configure):
            configure(key, params)
        return AllocatorObject(self, key, params, obj)

    def free_keys(self, *keys: str) -> int:
        """Free ``keys``. An :class:`AllocatedKey` is freed only while its own
        allocation holds it (a holder whose lock expired never frees the next
        holder's key); a plain ``str`` is freed whoever holds it (an operator's
        action). Returns how many were freed (always 0 when shared)."""
        return self._channel.run(self._free_keys(keys, self._channel.sync_bounded))

    async def afree_keys(self, *keys: str) -> int:
        """:meth:`free_keys` on the event loop."""
        return await self._channel.arun(self._free_keys(keys))

    def _free_keys(self, keys: tuple[str, ...], bounded: bool = True) -> Steps[int]:
        """``bounded``: see :func:`.lease.release_lease_steps`."""
        freed = 0
        for key in keys:
            if isinstance(key, AllocatedKey):
                lease = key.lease
                freed += lease is not None and (
                    (yield from release_lease_steps(lease, ends=True, bounded=bounded)) != 0
                )
            elif not self.shared:
                name = check_name(key, "key")
                freed += (yield from self._engine.release_steps(name, force=True)) != 0
        return freed

    def free(self, obj: AllocatorObject | AllocatedKey | str) -> bool:
        """Free what :meth:`malloc` (or :meth:`malloc_key`) handed out."""
        if isinstance(obj, AllocatorObject):
            return obj.close()
        return self.free_keys(obj) == 1

    def hold(
        self,
        *,
        lease_timeout: Seconds = DEFAULT,
        name: str | None = None,
        holder: str | None = None,
    ) -> Hold:
        """Context manager: a key for the ``with`` block (a :class:`Hold`,
        yielding the :class:`AllocatedKey` that :meth:`malloc_key` would hand
        out), freed on exit. Raises :class:`ResourceUnavailable` at once when
        no key is free (it never waits; ``retry_after`` when a turn is
        expected: :meth:`turn_estimate`)."""
        return Hold(
            self,
            lambda: self.malloc_key(lease_timeout=lease_timeout, name=name, holder=holder),
            f"no key of allocator {self.name!r} is free",
            release=self.free_keys,
        )

    def ahold(
        self,
        *,
        lease_timeout: Seconds = DEFAULT,
        name: str | None = None,
        holder: str | None = None,
    ) -> AsyncHold:
        """:meth:`hold` as an async context manager (``async with``)."""
        return AsyncHold(
            self,
            lambda: self.amalloc_key(lease_timeout=lease_timeout, name=name, holder=holder),
            f"no key of allocator {self.name!r} is free",
            release=self.afree_keys,
        )

    # -- soft bindings ------------------------------------------------------------

    def update_soft_bind(
        self, name: str, key: str, *, cache_timeout: float | None = None, timeout: Any = _UNSET
    ) -> None:
        """Bind ``name`` to ``key`` for ``cache_timeout`` seconds (None:
        ``soft_bind_timeout``), as :meth:`malloc_key` binds. (``timeout=`` is
        its deprecated name.)"""
        if timeout is not _UNSET:
            renamed("Allocator.update_soft_bind(timeout=)", "cache_timeout=")
            cache_timeout = timeout
        name, key = check_holder(name, "name"), check_name(key, "key")
        ms = to_ms(self._bind_timeout(cache_timeout))
        self._channel.run(self._channel.op("alloc_bind", "set", name, key, ms))

    def unbind_soft_bind(self, name: str) -> bool:
        """Forget ``name``'s binding; False if it had none."""
        return (
            int(
                self._channel.run(
                    self._channel.op("alloc_bind", "unset", check_holder(name, "name"))
                )
            )
            == 1
        )

    def get_soft_bind(self, name: str) -> str | None:
        """The key bound to ``name`` (None if none, or its binding expired)."""
        key = self._channel.run(self._channel.op("alloc_bind", "get", check_holder(name, "name")))
        return None if key is None else str(key)

    def soft_binds(
        self, *, offset: int = 0, limit: int = 50
    ) -> tuple[int, list[tuple[str, str, float]]]:
        """(how many live bindings, one page of (name, key, expiry in unix
        seconds on the Redis clock)), the longest-lived first."""
        _, total, flat = self._channel.run(
            self._channel.op(
                "alloc_read", "binds", check_count(offset, "offset"), check_count(limit, "limit")
            )
        )
        rows = [
            (str(name), str(key), int(expiry) / 1000)
            for name, key, expiry in zip(flat[0::3], flat[1::3], flat[2::3], strict=True)
        ]
        return int(total), rows

    # -- health -------------------------------------------------------------------

    def report_unhealthy(self, key: str, *, cooldown: float) -> bool:
        """Take ``key`` out of rotation for ``cooldown`` seconds (a holder keeps
        it until freed). False if it is not a key."""
        seconds = check_duration(cooldown, "cooldown")
        return (
            int(
                self._channel.run(
                    self._channel.op("alloc_health", check_name(key, "key"), to_ms(seconds))
                )
            )
            == 1
        )

    def report_healthy(self, key: str) -> bool:
        """End ``key``'s cooldown now. False if it is not a key."""
        return (
            int(self._channel.run(self._channel.op("alloc_health", check_name(key, "key"), 0))) == 1
        )

    def unhealthy(self, *, offset: int = 0, limit: int = 50) -> tuple[int, list[tuple[str, float]]]:
        """(how many keys are out of rotation, one page of (key, end of its
        cooldown in unix seconds)), the soonest back first."""
        total, flat = self._channel.run(
            self._channel.op(
                "alloc_read", "sick", check_count(offset, "offset"), check_count(limit, "limit")
            )
        )
        rows = [(str(k), int(u) / 1000) for k, u in zip(flat[0::2], flat[1::2], strict=True)]
        return int(total), rows

    # -- upkeep -------------------------------------------------------------------

    def gc(self, count: int = 10) -> int:  # type: ignore[override]
        """Reclaim expired locks and remove keys whose lifetime ended, checking
        at most ``count`` of each (also done lazily by malloc); returns how
        many it reclaimed. Also brings back keys whose cooldown ended and drops
        expired bindings."""
        reclaimed, expired, _, _ = self._gc(check_count(count, "count", minimum=1))
        return len(reclaimed) + expired

    def _gc(self, count: int) -> tuple[list[Lease], int, int, int]:
        reclaimed, expired, healed, unbound = self._channel.run(self._channel.op("alloc_gc", count))
        self._channel.counts.add(counts.RECLAIMED, len(reclaimed) // 2)
        return (
            records.ended_leases(self._engine, reclaimed),
            int(expired),
            int(healed),
            int(unbound),
        )

    def collect(self, *, dry_run: bool = False) -> Collected:
        """Everything :meth:`gc` does, until nothing is left (in bounded steps);
        returns the reclaimed locks. Also adds the configured ``keys`` again if
        it holds none at all."""
        if dry_run:
            return super().collect(dry_run=True)
        leases: list[Lease] = []
        removed = healed = unbound = 0
        while True:
            reclaimed, *rest = self._gc(CHUNK)
            leases += reclaimed
            removed, healed, unbound = removed + rest[0], healed + rest[1], unbound + rest[2]
            if len(reclaimed) < CHUNK and max(rest) < CHUNK:
                break
        if self.configured_keys and len(self) == 0:
            self._channel.run(self._heal())
        upkeep = {"removed": removed, "healed": healed, "unbound": unbound}
        return Collected(reclaimed=leases, dropped=[], upkeep=upkeep)

    def _bind_timeout(self, seconds: float | None) -> float:
        if seconds is None:
            return self.soft_bind_timeout
        return check_duration(seconds, "cache_timeout")


def _renamed_timeout(method: str, timeout: Any) -> Seconds:
    """A deprecated ``timeout=`` of ``method``: its ``lease_timeout`` (warned;
    None keeps its old meaning, the default)."""
    renamed(f"{method}(timeout=)", "lease_timeout=", stacklevel=4)
    return DEFAULT if timeout is None else timeout


def _check_priority(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or abs(value) > MAX_KEY_PRIORITY:
        raise ValueError(
            f"priority must be an int from -{MAX_KEY_PRIORITY} to {MAX_KEY_PRIORITY}, got {value!r}"
        )
    return value


def _check_keys(keys: Iterable[str]) -> list[str]:
    if isinstance(keys, (str, bytes)):
        raise ValueError(f"keys must be a list of keys, not one str: use [{keys!r}]")
    checked = [check_name(key, "key") for key in keys]
    return list(dict.fromkeys(checked))


def _chunks(keys: list[str]) -> Iterable[list[str]]:
    for start in range(0, len(keys), CHUNK):
        yield keys[start : start + CHUNK]
