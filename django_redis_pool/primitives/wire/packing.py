"""The packed arguments: every encoder of an operation that takes its
arguments packed into one, beside the name of the Lua that parses it.

The operations run on every acquire, release and decision take their own
arguments joined by "|" into one (``args[2]`` of the scripts; the last field
may hold "|"): one argument to send and one pattern match to read, instead of
one per value. Those of a primitive's own keys carry its mode in front of
them (``"mode|..."``, split back by ``begin()`` in ``engine.lua``): the
``head`` each encoder takes is :attr:`.channel.Channel.packed_mode`. Nothing
else in the package builds a packed argument (``tests/primitives/test_wire.py``
checks it), so the Python side and the Lua side of each one are read side by
side here and in the file each comment names.

A wait is sent one way for every operation (:meth:`.waits.Wait.wire_ms`):
-1 for "forever", 0 for "do not wait", n > 0 for the milliseconds left.
Nothing here imports Django.
"""

from __future__ import annotations

import time
from typing import Any, Protocol

__all__ = [
    "ENCODERS",
    "RELEASE",
    "Waiting",
    "acquire",
    "alloc_malloc",
    "ratelimit_decide",
    "ratelimit_head",
    "release",
    "renew",
    "wait",
    "wait_ms",
    "withdraw",
]


class Waiting(Protocol):
    """A wait as the encoders read it (a :class:`.waits.Wait`): ``seconds``
    (None: forever; 0: do not wait) ending at ``until`` (monotonic)."""

    seconds: float | None
    until: float | None


def wait_ms(wait: Waiting) -> int:
    """What every operation is sent for ``wait``: -1 forever, 0 do not wait
    (or no time left), else the milliseconds left, at least 1."""
    until = wait.until
    if until is None:
        return -1
    if wait.seconds == 0:
        return 0
    left = until - time.monotonic()
    return 0 if left <= 0 else max(1, int(left * 1000 + 0.5))


# Parsed by ``acquire_request`` in lua/engine_lease.lua (for acquire.lua and
# acquire_fast.lua). ``wait`` sent as :func:`wait_ms` says (an int: that
# value already); ``max_waiting`` -1 for no limit; the holder last.
def acquire(
    head: str,
    token: str,
    lease_ms: int,
    priority: int,
    wait: Waiting | int,
    max_waiting: int,
    alive_ms: int,
    restore: str,
    permits: int,
    holder: str,
) -> bytes:
    """The acquire operation's packed argument."""
    # (:func:`wait_ms`, written out: on every acquire)
    if type(wait) is int:
        wait_ms = wait
    elif (until := wait.until) is None:  # type: ignore[union-attr]
        wait_ms = -1
    elif wait.seconds == 0:  # type: ignore[union-attr]
        wait_ms = 0
    else:
        left = until - time.monotonic()
        wait_ms = 0 if left <= 0 else max(1, int(left * 1000 + 0.5))
    return (
        f"{head}{token}|{lease_ms}|{priority}|{wait_ms}|{max_waiting}|"
        f"{alive_ms}|{restore}|{permits}|{holder}"
    ).encode()


# Parsed by the first line of leased/release.lua (and of leased/release_fast.lua).
# ``fence``: '' for any; ``force``: 1 for an operator's force-release; the
# resource last. A template, formatted with ``%`` in place where a release is
# sent on every cycle (no call more than packing it there).
RELEASE = "%s%s|%s|%s|%s|%s"


def release(
    head: str, token: str, request: str, fence: int | str, force: int, resource: str
) -> bytes:
    """The release operation's packed argument (:data:`RELEASE`)."""
    return (RELEASE % (head, token, request, fence, force, resource)).encode()


# Parsed by ``renew_request`` in leased/engine_lease.lua (for leased/renew.lua).
# ``lease_ms``: -1 no expiry, -2 the lease's own duration; the resource last.
def renew(head: str, token: str, lease_ms: int, resource: str) -> bytes:
    """The renew operation's packed argument."""
    return f"{head}{token}|{lease_ms}|{resource}".encode()


# Parsed by the first line of leased/wait.lua: the waiter's token | its liveness
# window in ms.
def wait(head: str, token: str, alive_ms: int) -> bytes:
    """The wait (check-in) operation's packed argument."""
    return f"{head}{token}|{alive_ms}".encode()


# Read whole by leased/withdraw.lua: the waiter's token.
def withdraw(head: str, token: str) -> bytes:
    """The withdraw operation's packed argument."""
    return f"{head}{token}".encode()


# Parsed by ``malloc_args`` in leased/engine_alloc.lua (for leased/alloc_malloc.lua
# and leased/alloc_malloc_fast.lua); ``tail`` is "heal\nbinding name\nholder".
def alloc_malloc(head: str, token: str, lease_ms: int, bind_ms: int, tail: str) -> bytes:
    """The malloc operation's packed argument."""
    return f"{head}{token}|{lease_ms}|{bind_ms}|{tail}".encode()


# Parsed by the first line of ratelimit/ratelimit_decide.lua. ``head`` is
# "ratelimit|interval µs|burst|" (:func:`ratelimit_head`); ``wait_ms``: the
# wait's wire value (-1 forever, 0 do not wait, n > 0 ms left).
def ratelimit_decide(head: str, cost: int, wait_ms: int) -> bytes:
    """A rate limiter's decision's packed argument."""
    return f"{head}{cost}|{wait_ms}".encode()


def ratelimit_head(mode: str, interval_us: int, burst: int) -> str:
    """What every decision of one rate limiter starts with (see :func:`ratelimit_decide`)."""
    return f"{mode}|{interval_us}|{burst}|"


#: The encoder of each operation whose arguments are sent packed, by name
#: (:meth:`.channel.Channel.op` sends those through it).
ENCODERS: dict[str, Any] = {
    "acquire": acquire,
    "release": release,
    "renew": renew,
    "wait": wait,
    "withdraw": withdraw,
    "alloc_malloc": alloc_malloc,
}
