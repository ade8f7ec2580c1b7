"""A rate limit's ``RATE`` as the setting writes it: ``"100/m"``, ``"10/5s"``,
``"1000/2h"``, ``"5000/day"`` or ``"10 per minute"``. :func:`parse_rate` reads
it into a :class:`Rate`, or raises the system check's ``E034``;
:func:`check_countable` applies the primitive's own limits to a rate and a
burst. Nothing here reads a request or Redis: the settings reader's
validators use it (the rate limit's ``RATE`` option,
:mod:`.ratelimit_options`).
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

from ..primitives.ratelimit.limiter import check_limits
from .contract import OptionError

__all__ = ["UNITS", "Rate", "check_countable", "parse_rate"]

#: Seconds in each unit of ``RATE``, by the words it may be written with.
UNITS = {
    **dict.fromkeys(("s", "sec", "second", "seconds"), 1),
    **dict.fromkeys(("m", "min", "minute", "minutes"), 60),
    **dict.fromkeys(("h", "hour", "hours"), 3600),
    **dict.fromkeys(("d", "day", "days"), 86400),
}
_RATE = re.compile(r"\s*(\d+)\s*(?:/|\s+per\s+)\s*(\d+(?:\.\d+)?)?\s*([a-z]+)\s*", re.IGNORECASE)


class Rate(NamedTuple):
    """A parsed ``RATE``: ``rate`` units per ``per`` seconds, as written."""

    rate: int
    per: float
    text: str


def parse_rate(value: Any, path: str = "RATE") -> Rate:
    """``"100/m"``, ``"10/5s"``, ``"1000/2h"``, ``"5000/day"`` (or ``"10 per
    minute"``) as a :class:`Rate`;
    raises :class:`OptionError` (E034) naming ``path`` for anything else (a bare
    number too: it would not say per what)."""
    match = _RATE.fullmatch(value) if isinstance(value, str) else None
    unit = UNITS.get(match[3].lower()) if match else None
    if match is None or unit is None:
        raise OptionError(
            f"{path} = {value!r} is not a rate",
            id="E034",
            hint='Write it as "<count>/<unit>" or "<count>/<n><unit>", the unit one of '
            's, m, h, d (or second, minute, hour, day): e.g. "100/m", "10/5s", "1000/2h".',
        )
    count, per = int(match[1]), float(match[2] or 1) * unit
    if count < 1 or per <= 0:
        raise OptionError(
            f"{path} = {value!r} allows nothing: its count and its period must be above 0",
            id="E034",
            hint='E.g. "100/m" (100 requests a minute), "10/5s".',
        )
    rate = Rate(count, per, value.strip())
    try:
        check_countable(rate, None)
    except ValueError as exc:
        raise OptionError(
            f"{path} = {value!r} cannot be counted: {exc}",
            id="E034",
            hint="Use a period of at least 1 ms and at most a million units a second, "
            'e.g. "100/m".',
        ) from exc
    return rate


def check_countable(rate: Rate, burst: int | None) -> None:
    """The primitive's own checks of ``rate`` and ``burst``: ``ValueError``
    when a :class:`RateLimiter` could not count them."""
    check_limits(rate.rate, rate.per, burst)
