"""redis-allocator 0.7.0's ``RedisAllocator`` API on our ``Allocator``.

redis-allocator's tests are written against its API (``RedisAllocator(redis,
prefix, suffix, shared=...)``, ``malloc_key``, ``malloc``, ``free_keys``...)
and against its data in Redis: a doubly-linked free list in a hash
(``"prev||next||expiry"`` per key, ``#ALLOCATED`` for a held one), head and
tail pointers, one lock key per held key, one key per soft binding. Here:

* :class:`RedisAllocator` maps the peer's calls onto our ``Allocator`` (its
  timeouts of ``<= 0`` meaning "for ever" become ours, None), built with the
  peer's ``prefix`` and ``suffix`` as its name; what ``malloc`` hands out is
  our ``AllocatorObject`` (:class:`RedisAllocatorObject` only reorders the
  arguments of its constructor), since docs/allocator.md says it works where
  the peer's object did;
* :class:`ViewClient` is the suite's Redis client (the harness's server): it
  answers reads of the peer's key names (``_pool_str()``, ``_key_str(key)``,
  ``_soft_bind_name(name)``...) with a projection of our state, read in one
  transaction (:func:`read_state`): the free list in the order our
  allocator hands keys out, every other key as ``#ALLOCATED``, a lock key
  per live lease, a binding per live soft binding. Every other call goes to
  Redis as it is;
* :func:`snapshot` is the same projection for the suite's invariant checker
  (its own reads the peer's hash with a Lua script).

The peer's policy and health-check pool have no counterpart (their tests are
listed as not applicable); their names exist so that the suite imports.
"""

from __future__ import annotations

import datetime
import itertools
import math
import weakref
from dataclasses import dataclass, field
from typing import Any

from django_redis_pool import DEFAULT
from django_redis_pool.primitives.leased.allocator import Allocator, AllocatorObject
from tests.support.primitive_helpers import ops

__all__ = [
    "ALLOCATED_SENTINEL",
    "POOL_VALUE_SEP",
    "DefaultRedisAllocatorPolicy",
    "RedisAllocatableClass",
    "RedisAllocator",
    "RedisAllocatorObject",
    "RedisAllocatorUpdater",
    "RedisLock",
    "RedisLockPool",
    "RedisThreadHealthCheckPool",
    "ThreadLock",
    "ThreadLockPool",
    "ViewClient",
    "read_state",
]

ALLOCATED_SENTINEL = "#ALLOCATED"
POOL_VALUE_SEP = "||"
_VIEW = "conformance-view"
_views: weakref.WeakValueDictionary[str, RedisAllocator] = weakref.WeakValueDictionary()
_ids = itertools.count(1)


def _seconds(timeout: Any) -> float:
    """The peer's ``Timeout``: seconds, or a ``timedelta``."""
    if isinstance(timeout, datetime.timedelta):
        return timeout.total_seconds()
    return float(timeout)


def _forever(timeout: Any) -> float | None:
    """The peer's "<= 0: for ever" as ours (None)."""
    seconds = _seconds(timeout)
    return None if seconds <= 0 else seconds


# -- our state, as the peer's data ------------------------------------------------


@dataclass
class State:
    """One consistent reading of an allocator (times in ms on the Redis clock)."""

    now_ms: int
    free: list[str]  #: in the order they are handed out
    keys: dict[str, int]  #: key -> end of its lifetime in ms (-1: none)
    leases: dict[str, float]  #: held key -> end of its lease in ms (inf: none), live ones
    binds: dict[str, tuple[str, float]] = field(default_factory=dict)  #: name -> (key, end ms)

    def entry(self, key: str) -> str:
        """The peer's hash value of ``key``: ``prev||next||expiry``."""
        ends = self.keys[key]
        expiry = -1 if ends < 0 else ends // 1000
        if key not in self.free:
            return POOL_VALUE_SEP.join((ALLOCATED_SENTINEL, ALLOCATED_SENTINEL, str(expiry)))
        at = self.free.index(key)
        prev = self.free[at - 1] if at > 0 else ""
        following = self.free[at + 1] if at + 1 < len(self.free) else ""
        return POOL_VALUE_SEP.join((prev, following, str(expiry)))

    def pool(self) -> dict[str, str]:
        return {key: self.entry(key) for key in self.keys}

    def ttl(self, end_ms: float) -> int:
        """What Redis's TTL would say of something that ends at ``end_ms``."""
        if math.isinf(end_ms):
            return -1
        return max(0, math.floor((end_ms - self.now_ms) / 1000 + 0.5))


#: Reads an allocator's whole state in one step (its layout: docs/allocator.md):
#: the Redis time, the free keys in hand-out order (each priority's :order, the
#: highest priority first), :keys, :leases, :bind and :bindexp.
_READ_STATE = """
local base = KEYS[1]
local free, above = {}, '-inf'
while true do
  local top = redis.call('ZRANGEBYSCORE', base .. ':avail', above, '+inf', 'WITHSCORES',
    'LIMIT', 0, 1)
  if not top[1] then
    break
  end
  above = '(' .. top[2]
  local order = base .. ':order:' .. string.format('%d', 0 - tonumber(top[2]))
  for _, key in ipairs(redis.call('ZRANGE', order, 0, -1)) do
    free[#free + 1] = key
  end
end
return {redis.call('TIME'), free, redis.call('HGETALL', base .. ':keys'),
  redis.call('ZRANGE', base .. ':leases', 0, -1, 'WITHSCORES'),
  redis.call('HGETALL', base .. ':bind'),
  redis.call('ZRANGE', base .. ':bindexp', 0, -1, 'WITHSCORES')}
"""


def read_state(allocator: Allocator) -> State:
    """Our allocator's state, read in one script from its keys."""
    base = ops(allocator).base
    (seconds, micros), free, metas, leases, binds, bind_ends = (
        _pairs(reply) if i > 1 else reply
        for i, reply in enumerate(allocator.client.eval(_READ_STATE, 1, base))
    )
    now_ms = int(seconds) * 1000 + int(micros) // 1000
    keys = {_text(k): int(_text(v).split("|")[1]) for k, v in metas}
    binds_by_name = {_text(k): _text(v) for k, v in binds}
    return State(
        now_ms=now_ms,
        free=[_text(key) for key in free],
        keys=keys,
        leases={_text(k): float(s) for k, s in leases if float(s) > now_ms},
        binds={
            _text(name): (binds_by_name.get(_text(name), ""), float(end))
            for name, end in bind_ends
            if float(end) > now_ms
        },
    )


def _pairs(flat: list[Any]) -> list[tuple[Any, Any]]:
    return list(zip(flat[0::2], flat[1::2], strict=True))


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def snapshot(helpers: Any) -> Any:
    """The suite's ``snapshot(allocator)`` (its module ``helpers`` gives the
    classes), reading our state instead of the peer's hash."""

    def take(allocator: RedisAllocator) -> Any:
        state = read_state(allocator.ours)
        entries = {}
        for key, raw in state.pool().items():
            prev, following, expiry = raw.split(POOL_VALUE_SEP)
            entries[key] = helpers.PoolEntry(prev=prev, next=following, expiry=int(expiry))
        return helpers.PoolSnapshot(
            head=state.free[0] if state.free else "",
            tail=state.free[-1] if state.free else "",
            entries=entries,
            lock_keys={key: key in state.leases for key in state.keys},
            soft_bindings={name: key for name, (key, _) in state.binds.items()},
        )

    return take


class ViewClient:
    """A real client whose reads of the peer's key names see our state (see
    the module's docs); anything else is passed to Redis."""

    def __init__(self, client: Any) -> None:
        self.real = client

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)

    def _view(self, name: str) -> tuple[State, str, str] | None:
        parts = str(name).split("|", 3)
        if len(parts) != 4 or parts[0] != _VIEW or parts[1] not in _views:
            return None
        return read_state(_views[parts[1]].ours), parts[2], parts[3]

    def _out(self, value: str) -> Any:
        return value if self.real.get_encoder().decode_responses else value.encode()

    def get(self, name: Any) -> Any:
        view = self._view(name)
        if view is None:
            return self.real.get(name)
        state, what, rest = view
        if what == "pool" and rest in ("head", "tail"):
            return self._out((state.free[0 if rest == "head" else -1]) if state.free else "")
        if what == "bind" and rest in state.binds:
            return self._out(state.binds[rest][0])
        return None

    def exists(self, *names: Any) -> int:
        return sum(self._exists(name) for name in names)

    def _exists(self, name: Any) -> int:
        view = self._view(name)
        if view is None:
            return int(self.real.exists(name))
        state, what, rest = view
        return int(
            (what == "lock" and rest in state.leases) or (what == "bind" and rest in state.binds)
        )

    def ttl(self, name: Any) -> int:
        view = self._view(name)
        if view is None:
            return int(self.real.ttl(name))
        state, what, rest = view
        if what == "lock" and rest in state.leases:
            return state.ttl(state.leases[rest])
        if what == "bind" and rest in state.binds:
            return state.ttl(state.binds[rest][1])
        return -2

    def hgetall(self, name: Any) -> Any:
        view = self._view(name)
        if view is None:
            return self.real.hgetall(name)
        return {self._out(k): self._out(v) for k, v in view[0].pool().items()}


# -- the peer's API -----------------------------------------------------------------


class RedisAllocatableClass:
    """The peer's base class of allocated objects (configured with their key)."""

    def set_config(self, key: str, params: Any) -> None:
        """Called with the key and params of each allocation."""

    def open(self) -> Any:
        return self

    def close(self) -> None:
        """Close the object."""

    def is_healthy(self) -> bool:
        return True

    @property
    def name(self) -> str | None:
        return None

    @property
    def unique_id(self) -> str:
        return "default"


class RedisAllocatorUpdater:
    """The peer's source of keys for its policy (no counterpart here)."""

    def __init__(self, params: Any) -> None:
        self.params = params
        self.index = 0

    def fetch(self, param: Any) -> Any:
        raise NotImplementedError

    def __call__(self) -> Any:
        keys = self.fetch(self.params[self.index])
        self.index = (self.index + 1) % len(self.params)
        return keys


class DefaultRedisAllocatorPolicy:
    """The peer's policy (pool refresh from an updater, gc per malloc): no
    counterpart here; kept so that the suite's fixtures build."""

    def __init__(
        self,
        gc_count: int = 5,
        update_interval: int = 300,
        expiry_duration: int = 300,
        updater: Any = None,
        **kwargs: Any,
    ) -> None:
        self.gc_count, self.update_interval = gc_count, update_interval
        self.expiry_duration, self.updater = expiry_duration, updater


class _NoCounterpart:
    """A class of the peer's that ours has no counterpart of."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise NotImplementedError(
            f"redis-allocator's {type(self).__name__} has no counterpart in the adapter"
        )


class RedisThreadHealthCheckPool(_NoCounterpart):
    """The peer's thread health-check pool."""


class RedisLock(_NoCounterpart):
    """The peer's lock (its own suite, test_lock.py, is not run)."""


class RedisLockPool(_NoCounterpart):
    """The peer's lock pool."""


class ThreadLock(_NoCounterpart):
    """The peer's in-process lock."""


class ThreadLockPool(_NoCounterpart):
    """The peer's in-process lock pool."""


class RedisAllocator:
    """The peer's ``RedisAllocator`` on our ``Allocator`` (see the module's docs)."""

    def __init__(
        self,
        redis: Any,
        prefix: str,
        suffix: str = "allocator",
        eps: float = 1e-6,
        shared: bool = False,
        policy: Any = None,
    ) -> None:
        self.redis, self.prefix, self.suffix = redis, prefix, suffix
        self.shared, self.policy = shared, policy or DefaultRedisAllocatorPolicy()
        client = getattr(redis, "real", redis)
        self.ours = Allocator(client, f"{prefix}.{suffix}", shared=shared, lease_timeout=None)
        self._view_id = str(next(_ids))
        _views[self._view_id] = self

    @property
    def name(self) -> str:
        return self.ours.name

    # the peer's key names (read through ViewClient)
    def _name(self, what: str, rest: str) -> str:
        return f"{_VIEW}|{self._view_id}|{what}|{rest}"

    def _pool_str(self) -> str:
        return self._name("pool", "")

    def _pool_pointer_str(self, head: bool = True) -> str:
        return self._name("pool", "head" if head else "tail")

    def _key_str(self, key: str) -> str:
        return self._name("lock", key)

    def _soft_bind_name(self, name: str) -> str:
        return self._name("bind", name)

    # keys
    def extend(self, keys: Any = None, timeout: Any = -1) -> None:
        self.ours.extend(list(keys or []), lease_timeout=_forever(timeout))

    def shrink(self, keys: Any = None) -> None:
        self.ours.shrink(list(keys or []))

    def assign(self, keys: Any = None, timeout: Any = -1) -> None:
        self.ours.assign(list(keys or []), lease_timeout=_forever(timeout))

    def keys(self) -> list[str]:
        return self.ours.keys()

    def __contains__(self, key: object) -> bool:
        return key in self.ours

    def __len__(self) -> int:
        return len(self.ours)

    def is_locked(self, key: str) -> bool:
        return self.ours.is_locked(key)

    def items_locked_status(self) -> list[tuple[str, bool]]:
        return [(key, self.is_locked(key)) for key in self.keys()]

    def get_free_list(self) -> list[str]:
        return read_state(self.ours).free

    # handing out
    def malloc_key(
        self, timeout: Any = 120, name: str | None = None, cache_timeout: Any = 3600
    ) -> str | None:
        return self.ours.malloc_key(
            lease_timeout=_forever(timeout),
            name=name or None,
            cache_timeout=_seconds(cache_timeout),
        )

    def malloc(
        self, timeout: Any = 120, obj: Any = None, params: Any = None, cache_timeout: Any = 3600
    ) -> AllocatorObject | None:
        made = self.ours.malloc(
            lease_timeout=_forever(timeout),
            obj=obj,
            params=params,
            cache_timeout=_seconds(cache_timeout),
        )
        if made is not None:  # (the same object, under the peer's class name)
            made.__class__, made.allocator = RedisAllocatorObject, self
        return made

    def free_keys(self, *keys: str, timeout: int = -1) -> int:
        return self.ours.free_keys(*keys)

    def free(self, obj: AllocatorObject, timeout: int = -1) -> bool:
        return self.ours.free(obj)

    def gc(self, count: int = 10) -> None:
        assert count > 0, "count should be positive"
        self.ours.gc(count)

    # soft bindings
    def update_soft_bind(self, name: str, key: str, timeout: Any = 3600) -> None:
        self.ours.update_soft_bind(name, key, cache_timeout=_seconds(timeout))

    def unbind_soft_bind(self, name: str) -> None:
        self.ours.unbind_soft_bind(name)

    def get_soft_bind(self, name: str) -> str | None:
        return self.ours.get_soft_bind(name)


class RedisAllocatorObject(AllocatorObject):
    """Our ``AllocatorObject`` (what ``malloc`` hands out), built with the
    peer's order of arguments: ``(allocator, key, obj, params)``; its
    allocator is the adapter (whose ``free_keys`` is ours). Nothing else is
    added but the peer's name of ``update``'s argument (``timeout``, ours
    ``lease_timeout``): where the peer's object has more (``open``,
    ``release``, ``refresh``; ``close`` that closes the object but keeps the
    key), the suite meets ours as it is."""

    def __init__(self, allocator: Any, key: str, obj: Any = None, params: Any = None) -> None:
        super().__init__(allocator, key, params, obj)

    def update(self, timeout: Any = DEFAULT, **kwargs: Any) -> bool:  # type: ignore[override]
        """The peer's ``update(timeout)``: ours with ``lease_timeout``."""
        seconds = timeout if timeout is DEFAULT or timeout is None else _seconds(timeout)
        return super().update(seconds, **kwargs)
