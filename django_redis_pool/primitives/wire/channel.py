"""The channel: how a primitive runs its named operations on its Redis keys.

Every primitive talks to Redis through one :class:`Channel`: it names the
primitive's keys (one base under the hash tag ``{kind:name}``), makes the step
of a named operation (``<family>/<op>.lua``, run as a Redis 7 function or by
EVALSHA: :mod:`.scripts`), runs an operation written as a generator of steps
(:mod:`.runner`) on the blocking client or on the event loop, and keeps the
counts of what the primitive did (:mod:`.counts`). What is leased and how
(grants, renewals, releases) is the lease engine's (:mod:`.leased.engine`),
used by the leased primitives only; the task queue and the rate limiter use a
channel alone. Nothing here imports Django.
"""

from __future__ import annotations

import functools
from collections.abc import Coroutine
from typing import Any, TypeVar

from .. import counts
from ..clients.async_clients import async_client_for
from ..clients.connections import keeps_deadlines, socket_timeout
from . import packing
from .keys import key_prefix, to_ms
from .runner import arun, is_async_client, run
from .steps import Op, Steps, new_op

__all__ = ["MIN_BLOCK", "PACKED", "Channel"]

T = TypeVar("T")

#: The operations whose arguments are sent packed into one, each by its
#: encoder in :mod:`.packing` (see ``engine.lua``).
PACKED = frozenset(packing.ENCODERS)

#: The shortest blocking read sent to Redis, in seconds: Redis < 7.0.8 reads a
#: timeout under about 1 ms as 0, which means "block forever".
MIN_BLOCK = 0.01


class Channel:
    """Runs the named operations of one primitive on its client.

    ``kind``/``name``/``prefix`` build the keys (all under the hash tag
    ``{kind:name}``); ``mode`` is sent with every operation (what a leased
    primitive leases, :class:`.protocol.Mode`; the queue's and the rate
    limiter's own mode for theirs).

    :meth:`run` runs an operation (a generator of steps, or one step of
    :meth:`op`) blocking; :meth:`arun` on the event loop. A channel of a
    ``redis.asyncio`` client runs only on the loop.
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
        #: The one key every operation declares (the base; the scripts name
        #: the others from it), encoded once.
        self.key = self.base.encode()
        self.encoded_mode = mode.encode()
        #: What a packed argument (:data:`PACKED`) starts with.
        self.packed_mode = f"{mode}|"
        #: Per operation, how often in a row it ran slowly (:class:`.scripts.ScriptRunner`).
        self.streaks: dict[str, int] = {}
        #: Whether ``client`` is a redis.asyncio client (only :meth:`arun` works).
        self.is_async = is_async_client(client)
        #: What this process counted and has not added into Redis yet (:mod:`.counts`).
        self.counts = counts.NO_COUNTS if self.is_async else counts.Counts(self)
        #: :meth:`read_chunk`'s answer once read (None until then).
        self.chunk: tuple[float, int] | None = None
        if not self.is_async:  # (:meth:`run`, bound: one call less per operation)
            self.run = functools.partial(run, client)  # type: ignore[method-assign]

    @functools.cached_property
    def sync_bounded(self) -> bool:
        """Whether a deadline bounds the blocking client's calls (its connections
        keep deadlines, or its retries back off within them): if not, a
        blocking operation arms none, as nothing would read it. (Found on first
        use, then an attribute: a constructor does no I/O and reads no client.)"""
        return self.is_async or keeps_deadlines(self.client)

    def op(self, op: str, *args: Any) -> Op:
        """The step (``reply = yield channel.op(...)``) that runs operation
        ``op`` (``<family>/<op>.lua``) with its own ``args``; those of the
        operations in :data:`PACKED` are sent as one argument, behind the
        mode, by their encoder (:mod:`.packing`). Its reply comes back decoded, a
        Redis error of it translated (:func:`.runner.run`)."""
        if op in PACKED:  # (with the mode: "mode|arg|arg...", split by engine.lua)
            args = (self.key, packing.ENCODERS[op](self.packed_mode, *args))
        else:
            args = (self.key, self.encoded_mode, *args)
        return new_op(Op, (op, args, self.streaks))

    def run(self, steps: Steps[T] | Op) -> T:
        """Run the operation ``steps`` (a generator of steps, or one step) on
        the blocking client (a channel of a blocking client has this bound to
        it when it is made)."""
        raise TypeError(
            f"{self.label} was built on a redis.asyncio client, so only its async "
            "methods (aacquire, arelease...) work; build it on a redis.Redis client "
            "to use both"
        )

    def arun(self, steps: Steps[T] | Op) -> Coroutine[Any, Any, T]:
        """Run the operation ``steps`` on this event loop's asyncio client: the
        client itself if it is one, else the twin of the blocking client
        (:func:`.async_clients.async_client_for`). (Not a coroutine function
        itself: the coroutine it returns is :func:`.runner.arun`'s, one frame
        less on every resumption of an awaited call.)"""
        return arun(self.client if self.is_async else async_client_for(self.client), steps)

    def read_chunk(self) -> tuple[float, int]:
        """The longest single blocking read, in seconds and in milliseconds:
        :attr:`wait_chunk`, within the client's socket timeout."""
        if self.chunk is None:
            timeout = socket_timeout(self.client)
            chunk = self.wait_chunk
            if timeout:
                chunk = min(chunk, max(timeout - 1.0, timeout / 2))
            chunk = max(chunk, 0.05)
            self.chunk = (chunk, to_ms(chunk))
        return self.chunk
