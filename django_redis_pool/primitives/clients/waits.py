"""One wait, from the caller to the wire: :class:`Wait`.

A caller's ``timeout`` (seconds; 0: do not wait; None: forever) is checked
once, by :meth:`Wait.of`, and becomes one value that carries it down: its
deadline on the monotonic clock, taken once when the wait began; the bound
on the Redis calls made for it (:meth:`Wait.bound`, its timeout plus
:data:`.deadlines.DEADLINE_SLACK`, counting only time spent waiting: a
:class:`Wait` is the :class:`.stopwatch.Stopwatch` of its own wait); and the
one encoding every operation sends (:meth:`Wait.wire_ms`): -1 for forever, 0
for "do not wait" (or no time left), n > 0 for the milliseconds left. Nothing
here imports Django.
"""

from __future__ import annotations

import time

from ..validators import MAX_SECONDS, check_timeout
from ..wire import packing
from .deadlines import DEADLINE_SLACK, deadline
from .stopwatch import Stopwatch

__all__ = ["FOREVER", "Wait", "checked"]

_NUMBERS = (int, float)


class Wait(Stopwatch):
    """A validated wait: ``seconds`` (None: forever; 0.0: do not wait) from
    when it was made (``started``, monotonic), until ``until`` (None: never).
    Made by :meth:`of`; not changed once made."""

    __slots__ = ()

    @classmethod
    def of(cls, timeout: object, what: str = "timeout") -> Wait:
        """The wait of ``timeout``: ``timeout`` itself if it is a :class:`Wait`,
        else checked (``ValueError`` naming ``what``): seconds >= 0 (0: do not
        wait), None or infinity for forever."""
        if type(timeout) is cls:
            return timeout  # type: ignore[return-value]
        if type(timeout) in _NUMBERS and 0 <= timeout <= MAX_SECONDS:  # type: ignore[operator]
            seconds: float | None = float(timeout)  # type: ignore[arg-type]
        elif timeout is None or (seconds := check_timeout(timeout, what)) is None:
            return FOREVER
        return cls(seconds)

    def passed(self) -> bool:
        """Whether its deadline has passed (never, for forever)."""
        return self.until is not None and self.until <= time.monotonic()

    def wire_ms(self) -> int:
        """What every operation is sent for it (:func:`..wire.packing.wait_ms`): -1
        forever, 0 do not wait (or no time left), else the milliseconds left."""
        return packing.wait_ms(self)

    def bound(self, slack: float = DEADLINE_SLACK) -> deadline:
        """The deadline that bounds the Redis calls made for this wait: its
        timeout plus ``slack`` of waiting, counted from when it began (for
        ever: none, a deadline that arms nothing). Whoever made the wait arms
        it, once: a :class:`Wait` handed to a primitive is bounded by its
        caller (the request guard), a number by the primitive."""
        return deadline(None if self.seconds is None else self.seconds + slack, self)

    def __repr__(self) -> str:
        return f"<Wait {'forever' if self.seconds is None else f'{self.seconds:g} s'}>"


def checked(timeout: object, what: str = "timeout") -> float | Wait | None:
    """``timeout`` as a primitive's verb takes it: a :class:`Wait` handed down
    as it is (checked when it was made), else checked (:func:`check_timeout`)."""
    if type(timeout) is Wait:
        return timeout
    return check_timeout(timeout, what)


#: The wait that never ends (its ``started`` is when this module was loaded;
#: nothing reads it).
FOREVER = Wait()
