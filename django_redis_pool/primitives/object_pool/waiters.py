"""The callers waiting for an object of an :class:`.pool.ObjectPool`.

A :class:`WaitLine` orders them by priority (larger first), then by arrival;
each :class:`Waiter` is served once (an object, or an error) or gives up. The
line is not locked itself: its pool calls it with the pool's lock held.
Nothing here imports Django.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["WaitLine", "Waiter"]


@dataclass(order=True)
class Waiter:
    """One caller waiting for an object."""

    key: tuple[int, int]  #: (-priority, arrival): the line's order
    since: float = field(default_factory=time.monotonic, compare=False)
    ready: threading.Event = field(default_factory=threading.Event, compare=False)
    item: Any = field(default=None, compare=False)
    error: BaseException | None = field(default=None, compare=False)
    gone: bool = field(default=False, compare=False)  #: served, refused or gave up
    #: Called (with the pool's lock held) once it is served: wakes an async waiter.
    on_ready: Callable[[], object] | None = field(default=None, compare=False)

    def serve(self) -> None:
        self.ready.set()
        if self.on_ready is not None:
            self.on_ready()

    def outcome(self) -> Any:
        """What it was served: the item, or the error raised."""
        if self.error is not None:
            raise self.error
        return self.item


class WaitLine:
    """The waiters of one pool, by priority then arrival."""

    def __init__(self) -> None:
        self._heap: list[Waiter] = []
        self._arrivals = itertools.count()
        #: Waiters still waiting (the heap may still hold some that gave up).
        self.pending = 0

    def join(self, priority: int, on_ready: Callable[[], object] | None = None) -> Waiter:
        """A new waiter at its place in the line."""
        waiter = Waiter((-priority, next(self._arrivals)), on_ready=on_ready)
        heapq.heappush(self._heap, waiter)
        self.pending += 1
        return waiter

    def leave(self, waiter: Waiter) -> bool:
        """``waiter`` gives up: True, unless it was served already."""
        if waiter.ready.is_set():
            return False
        waiter.gone = True
        self.pending -= 1
        self._prune()
        return True

    def serve_next(self, item: Callable[[], Any]) -> bool:
        """Serve the first waiter with ``item()`` (called only when there is
        one); False when nobody waits."""
        self._prune()
        if not self._heap:
            return False
        waiter = heapq.heappop(self._heap)
        waiter.item = item()
        self.pending -= 1
        waiter.serve()
        self._prune()
        return True

    def refuse_all(self, error: Callable[[], BaseException]) -> None:
        """Serve every waiter an ``error()`` instead (the line is then empty)."""
        for waiter in self._heap:
            if not waiter.gone:
                waiter.error, waiter.gone = error(), True
                waiter.serve()
        self._heap.clear()
        self.pending = 0

    def _prune(self) -> None:
        while self._heap and self._heap[0].gone:
            heapq.heappop(self._heap)
