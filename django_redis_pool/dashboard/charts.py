"""The admin's activity charts: what a primitive did in the last hour, minute by
minute, drawn here as inline SVG (no script, no external resource).

A primitive's page shows :func:`chart` (its :func:`activity_section`): bars of
the grants and the refusals of each of the last 60 minutes, the 95th
percentile of each minute's waits where it has grants (each minute's tooltip
also says its mean wait and the most holds and waiters seen in it), axes in
minutes ago and counts, and a ``<title>`` and an ``aria-label`` that say the
same in words ("Activity of printers over the last hour: 120 granted, 3
refused, mean wait 12 ms, p95 30 ms, peak seen: 10 held, 4 waiting"). Each
row of the overview shows a :func:`sparkline` of the same hour. Both read
``primitive.activity(minutes=60)``, one round trip, and draw with the admin's
colours (its CSS variables), so they follow its light and dark themes.

What is charted of a kind is the :class:`Series` its panels register
(:func:`register`): which counts are grants and which refusals, what they are
called, whether a wait is drawn, and whether the strip of the most holds and
waiters seen is (a kind whose decisions or tasks hold nothing has no holds
for its flushes to sample, and no strip), and whether the wait is drawn only
in an hour in which something waited (for a kind whose callers wait only when
told to). A kind without one shows no chart.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from django.http import HttpRequest
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from ..exceptions import BackendUnavailable, PoolError
from ..primitives.counts import BUCKETS
from . import section

__all__ = [
    "FIRST_BOUND_MS",
    "MINUTES",
    "SERIES",
    "TEMPLATE",
    "Hour",
    "Minute",
    "Series",
    "activity_section",
    "chart",
    "hour_of",
    "register",
    "sparkline",
    "sparkline_of",
]

logger = logging.getLogger("django_redis_pool")

#: Minutes charted: the current one and the 59 before it.
MINUTES = 60
TEMPLATE = "admin/django_redis_pool/activity.html"

# The admin's colours (light and dark themes), with its light values as fallbacks.
_TEXT = "fill:var(--body-quiet-color,#666)"
_GRID = "stroke:var(--hairline-color,#e8e8e8)"
_AXIS = "stroke:var(--border-color,#ccc)"
_GRANTED = "fill:var(--link-fg,#417893)"
_REFUSED = "fill:var(--error-fg,#ba2121)"
_WAIT = "var(--body-fg,#333)"
#: A p95 wait only known to be under the first bucket's bound: a hollow triangle.
_UNDER = f"fill:var(--body-bg,#fff);stroke:{_WAIT};stroke-width:1.2"
_HELD = "fill:var(--body-quiet-color,#666);fill-opacity:0.45"
_WAITING = "var(--error-fg,#ba2121)"


@dataclass(frozen=True)
class Series:
    """What is charted of one kind: the counts (fields of
    :data:`~django_redis_pool.primitives.counts.FIELDS`) added up as grants and
    as refusals, their words, whether the mean wait of the grants is drawn
    (from ``wait_us``), and whether the strip of the most holds and waiters
    seen each minute is (from ``held_max`` and ``waiting_max``, which the
    flushes of the kinds on the lease engine sample); ``wait_if_waited``:
    whether the wait is drawn only when some grant of the hour waited."""

    granted: tuple[str, ...] = ("acquired",)
    refused: tuple[str, ...] = ("refused_timeout", "refused_full")
    granted_word: str = "granted"
    refused_word: str = "refused"
    wait: bool = True
    peaks: bool = True
    #: Whether the wait is drawn only in an hour in which some grant waited (a
    #: kind whose callers wait only if told to, and whose chart then says
    #: nothing of waits it never had).
    wait_if_waited: bool = False


#: The series of each kind that has a chart, by kind name.
SERIES: dict[str, Series] = {}


def register(kind_name: str, series: Series | None = None) -> None:
    """Chart the kind ``kind_name`` as ``series`` says (default: grants and
    refusals, with the wait): a section of its page (added after those already
    added) and a sparkline in the overview."""
    SERIES[kind_name] = series or Series()
    section(kind_name, title="Activity in the last hour", template=TEMPLATE)(activity_section)


# ------------------------------------------------------------------ the data


@dataclass(frozen=True)
class Minute:
    """One minute of the chart."""

    ago: int  #: minutes before the current one (0: the current minute, still running)
    start: int  #: unix seconds, Redis clock
    granted: int
    refused: int
    wait_us: int  #: the grants' waits, added up
    #: The 95th percentile of the grants' waits, in ms (None: no grant or no wait
    #: charted), estimated from the buckets as Prometheus does; when it falls in
    #: the first bucket, the bucket's bound (:data:`FIRST_BOUND_MS`), and
    #: :attr:`wait_p95_under` is set: only "under 5 ms" is known of it.
    wait_p95_ms: float | None = None
    #: Whether the p95 wait falls in the first bucket ("p95 < 5 ms").
    wait_p95_under: bool = False
    #: The most holds and waiters seen in the minute (None: its kind's flushes
    #: do not sample them, or nothing was counted in it). Each flush samples
    #: them, so a hold taken and released between two flushes is never seen:
    #: a minute that counted a grant has seen at least 1 held (the grant's).
    #: Lower bounds of the minute's true peaks.
    held_max: int | None = None
    waiting_max: int | None = None

    @property
    def mean_wait_ms(self) -> float | None:
        return self.wait_us / self.granted / 1000 if self.granted else None


@dataclass(frozen=True)
class Hour:
    """A primitive's last :data:`MINUTES` minutes, oldest first."""

    name: str
    series: Series
    minutes: tuple[Minute, ...] = field(default=())
    #: The p95 wait of the whole hour's grants, as :attr:`Minute.wait_p95_ms`.
    wait_p95_ms: float | None = None
    wait_p95_under: bool = False

    @property
    def granted(self) -> int:
        return sum(m.granted for m in self.minutes)

    @property
    def refused(self) -> int:
        return sum(m.refused for m in self.minutes)

    @property
    def mean_wait_ms(self) -> float | None:
        granted = self.granted
        return sum(m.wait_us for m in self.minutes) / granted / 1000 if granted else None

    @property
    def empty(self) -> bool:
        return not (self.granted or self.refused)

    @property
    def held_max(self) -> int | None:
        return max((m.held_max for m in self.minutes if m.held_max is not None), default=None)

    @property
    def waiting_max(self) -> int | None:
        peaks = [m.waiting_max for m in self.minutes if m.waiting_max is not None]
        return max(peaks, default=None)

    def counts_in_words(self, minute: Minute | Hour | None = None) -> str:
        """ "120 granted, 3 refused, mean wait 12 ms, p95 30 ms, peak seen: 10
        held, 4 waiting" of the hour (or of one ``minute``); "p95 < 5 ms"
        when the p95 falls in the first bucket; "no activity" when nothing was
        counted."""
        of = self if minute is None else minute
        if not (of.granted or of.refused):
            return "no activity"
        words = f"{of.granted} {self.series.granted_word}, {of.refused} {self.series.refused_word}"
        if self.series.wait and of.mean_wait_ms is not None:
            words += f", mean wait {duration(of.mean_wait_ms)}"
            if of.wait_p95_ms is not None:
                words += f", p95 {p95_words(of.wait_p95_ms, of.wait_p95_under)}"
        if of.held_max is not None:
            words += f", peak seen: {of.held_max} held, {of.waiting_max or 0} waiting"
        return words

    def summary(self) -> str:
        """The chart's text alternative."""
        return f"Activity of {self.name} over the last hour: {self.counts_in_words()}"


def hour_of(name: str, activity: Any, series: Series) -> Hour:
    """The last hour of ``activity`` (a
    :class:`~django_redis_pool.primitives.counts.Activity` read with
    ``minutes=60``) as ``series`` counts it."""
    read = list(activity.minutes)[-MINUTES:]
    if read:  # (fewer minutes than asked: pad the hour before them)
        first = read[0][0]
        read = [(first - 60 * (i + 1), {}) for i in range(MINUTES - len(read))][::-1] + read
    if series.wait_if_waited and not any(counts.get("wait_us", 0) > 0 for _, counts in read):
        series = replace(series, wait=False)  # (no grant waited: nothing to say of waits)
    minutes = tuple(
        Minute(
            ago=MINUTES - 1 - index,
            start=int(start),
            granted=sum(counts.get(f, 0) for f in series.granted),
            refused=sum(counts.get(f, 0) for f in series.refused),
            wait_us=counts.get("wait_us", 0) if series.wait else 0,
            held_max=_held_seen(counts, series) if series.peaks else None,
            waiting_max=counts.get("waiting_max") if series.peaks else None,
            **(_p95(activity, counts) if series.wait else {}),
        )
        for index, (start, counts) in enumerate(read)
    )
    hour_waits: dict[str, int] = {}
    for _, counts in read:
        for bucket in _WAIT_BUCKETS:
            hour_waits[bucket] = hour_waits.get(bucket, 0) + counts.get(bucket, 0)
    return Hour(
        name=name,
        series=series,
        minutes=minutes,
        **(_p95(activity, hour_waits) if series.wait else {}),
    )


def _held_seen(counts: dict[str, int], series: Series) -> int | None:
    """The most holds seen in a minute: its flushes' samples (``held_max``),
    and at least 1 if it counted a grant (held then, if only between two
    flushes); None if its kind's flushes sample no holds."""
    sampled = counts.get("held_max")
    if sampled is None:
        return None
    granted = any(counts.get(f, 0) for f in series.granted)
    return max(sampled, 1) if granted else sampled


#: The upper bound of the first wait bucket, in ms: a p95 in it is only known
#: to be under it.
FIRST_BOUND_MS = BUCKETS[0] * 1000
_WAIT_BUCKETS = tuple(f"wait_{i}" for i in range(len(BUCKETS) + 1))


def _p95(activity: Any, counts: dict[str, int]) -> dict[str, Any]:
    """``wait_p95_ms`` and ``wait_p95_under`` of ``counts``: the estimate of
    :meth:`Activity.quantile <django_redis_pool.primitives.counts.Activity.quantile>`,
    except in the first bucket, where it would be interpolated between 0 and
    its bound (4.75 ms for any minute whose waits are all shorter): there it is
    the bound, said as "< 5 ms"."""
    cumulative = activity.histogram("wait", counts)
    if cumulative[-1] and cumulative[0] >= 0.95 * cumulative[-1]:
        return {"wait_p95_ms": FIRST_BOUND_MS, "wait_p95_under": True}
    p95 = activity.quantile("wait", 0.95, counts)
    return {"wait_p95_ms": None if p95 is None else p95 * 1000, "wait_p95_under": False}


def p95_words(ms: float, under: bool = False) -> str:
    """A p95 wait for people: "30 ms", or "< 5 ms" (``under``: it falls in the
    first bucket, whose bound ``ms`` is)."""
    return f"< {ms:g} ms" if under else duration(ms)


def duration(ms: float) -> str:
    """A wait for people: "0.4 ms", "12 ms", "2.5 s"."""
    if ms < 10:
        return f"{ms:.1f} ms"
    if ms < 1000:
        return f"{ms:.0f} ms"
    return f"{ms / 1000:.1f} s" if ms < 10_000 else f"{ms / 1000:.0f} s"


def nice_ceiling(value: float) -> float:
    """The smallest 1, 2 or 5 times a power of ten that is >= ``value`` (> 0)."""
    if value <= 0:
        return 1
    power = 10 ** math.floor(math.log10(value))
    for step in (1, 2, 5, 10):
        if step * power >= value:
            return step * power
    return 10 * power  # (not reached)


def _tick(value: float) -> str:
    return f"{value:g}" if value < 1e6 else f"{value:.3g}"


# ------------------------------------------------------------------ the chart

WIDTH, HEIGHT = 720, 300
#: The size of the chart's labels (at its full width), and the smallest it
#: may be drawn at: the chart is scaled to the page's width down to
#: :data:`MIN_WIDTH`, below which its section scrolls sideways.
FONT_PX, MIN_FONT_PX = 11, 10
MIN_WIDTH = math.ceil(WIDTH * MIN_FONT_PX / FONT_PX)
_TOP, _BOTTOM, _LEFT = 34, 200, 48
#: The strip under the time axis: the most holds and waiters of each minute.
_PEAK_TOP, _PEAK_BOTTOM = 236, HEIGHT - 8
#: The height of a chart without that strip (a series without ``peaks``).
HEIGHT_WITHOUT_PEAKS = _BOTTOM + 28


def chart(hour: Hour) -> SafeString:
    """The page's chart of ``hour``: an ``<svg role="img">`` with its summary
    as ``aria-label`` and ``<title>``; each minute's counts in a ``<title>``
    of its own (a tooltip)."""
    series = hour.series
    right = WIDTH - (52 if series.wait else 16)
    slot = (right - _LEFT) / MINUTES
    bar = max(1.0, slot * 0.7)
    height = _BOTTOM - _TOP
    top = nice_ceiling(max((m.granted + m.refused for m in hour.minutes), default=0))
    waits = [m.wait_p95_ms for m in hour.minutes if m.wait_p95_ms is not None]
    wait_top = nice_ceiling(max(waits)) if series.wait and waits else 0
    summary = escape(hour.summary())
    tall = HEIGHT if series.peaks else HEIGHT_WITHOUT_PEAKS
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="drp-chart" role="img" '
        f'aria-label="{summary}" viewBox="0 0 {WIDTH} {tall}" width="{WIDTH}" '
        f'height="{tall}" style="width:100%;min-width:{MIN_WIDTH}px;max-width:{WIDTH}px;'
        'height:auto" '
        f'data-granted="{hour.granted}" data-refused="{hour.refused}">',
        f"<title>{summary}</title>",
        f'<g style="{_TEXT};font-size:{FONT_PX}px">',
    ]
    # legend
    x = _LEFT
    for style, word in ((_GRANTED, series.granted_word), (_REFUSED, series.refused_word)):
        label = f"{word} per minute"
        out.append(f'<rect x="{x}" y="8" width="10" height="10" style="{style}"/>')
        out.append(f'<text x="{x + 14}" y="17">{escape(label)}</text>')
        x += 14 + round(6.5 * len(label)) + 18
    if series.wait:
        out.append(
            f'<line x1="{x}" y1="13" x2="{x + 16}" y2="13" '
            f'style="stroke:{_WAIT};stroke-width:1.5;stroke-dasharray:4 2"/>'
        )
        label = "p95 wait (ms, right axis)"
        out.append(f'<text x="{x + 20}" y="17">{label}</text>')
        if any(m.wait_p95_under for m in hour.minutes):
            x += 20 + round(6.5 * len(label)) + 18
            out.append(f'<path d="{_under_mark(x + 5, 9)}" style="{_UNDER}"/>')
            out.append(f'<text x="{x + 14}" y="17">p95 &lt; {FIRST_BOUND_MS:g} ms</text>')
    # the count axis (left) and its grid
    ticks = [0, top / 2, top] if top >= 2 and top % 2 == 0 else [0, top]
    for value in ticks:
        y = _BOTTOM - height * value / top
        out.append(f'<line x1="{_LEFT}" y1="{y:.1f}" x2="{right}" y2="{y:.1f}" style="{_GRID}"/>')
        out.append(f'<text x="{_LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{_tick(value)}</text>')
    if wait_top:
        for value in (0, wait_top / 2, wait_top):
            y = _BOTTOM - height * value / wait_top
            unit = " ms" if value == wait_top else ""
            out.append(f'<text x="{right + 6}" y="{y + 4:.1f}">{_tick(value)}{unit}</text>')
    # the time axis (bottom): minutes ago
    out.append(f'<line x1="{_LEFT}" y1="{_BOTTOM}" x2="{right}" y2="{_BOTTOM}" style="{_AXIS}"/>')
    for ago, label in ((MINUTES - 1, "59 min ago"), (45, "45"), (30, "30"), (15, "15"), (0, "now")):
        centre = _LEFT + slot * (MINUTES - 1 - ago + 0.5)
        anchor = "start" if ago == MINUTES - 1 else "end" if ago == 0 else "middle"
        if anchor != "middle":
            centre += -slot / 2 if anchor == "start" else slot / 2
        out.append(
            f'<text x="{centre:.1f}" y="{_BOTTOM + 16}" text-anchor="{anchor}">{label}</text>'
        )
    if hour.empty:
        out.append(
            f'<text x="{(_LEFT + right) / 2:.1f}" y="{(_TOP + _BOTTOM) / 2:.1f}" '
            'text-anchor="middle" class="drp-no-activity" style="font-size:13px">'
            "No activity in the last hour</text>"
        )
    out.append("</g>")
    # the bars: grants from the axis up, refusals on top of them
    granted, refused, hover = [], [], []
    for index, minute in enumerate(hour.minutes):
        x0 = _LEFT + slot * index
        left = x0 + (slot - bar) / 2
        g_height = height * minute.granted / top
        r_height = height * minute.refused / top
        if minute.granted:
            granted.append(_rect(left, _BOTTOM - g_height, bar, g_height))
        if minute.refused:
            refused.append(_rect(left, _BOTTOM - g_height - r_height, bar, r_height))
        when = "this minute" if minute.ago == 0 else f"{minute.ago} min ago"
        hover.append(
            f'<rect x="{x0:.1f}" y="{_TOP}" width="{slot:.1f}" height="{height}">'
            f"<title>{when}: {escape(hour.counts_in_words(minute))}</title></rect>"
        )
    out.append(f'<g class="drp-granted" style="{_GRANTED}">{"".join(granted)}</g>')
    out.append(f'<g class="drp-refused" style="{_REFUSED}">{"".join(refused)}</g>')
    if wait_top:
        out.append(_wait_line(hour.minutes, slot, height, wait_top))
    if series.peaks:
        out.append(_peaks(hour, slot, bar, right))
    out.append(f'<g style="fill:transparent">{"".join(hover)}</g>')
    out.append("</svg>")
    return mark_safe("".join(out))  # (every text in it is escaped above)


def _peaks(hour: Hour, slot: float, bar: float, right: float) -> str:
    """The strip of the most holds (bars) and waiters (a line) seen each
    minute (:attr:`Minute.held_max`), on a scale of its own; minutes with none
    seen are blank."""
    top = nice_ceiling(max(hour.held_max or 0, hour.waiting_max or 0, 1))
    height = _PEAK_BOTTOM - _PEAK_TOP
    held, waiting = [], []
    for index, minute in enumerate(hour.minutes):
        if minute.held_max:
            tall = height * minute.held_max / top
            held.append(
                _rect(_LEFT + slot * index + (slot - bar) / 2, _PEAK_BOTTOM - tall, bar, tall)
            )
        if minute.waiting_max is not None:
            y = _PEAK_BOTTOM - height * minute.waiting_max / top
            waiting.append(f"M{_LEFT + slot * index:.1f} {y:.1f} h{slot:.1f}")
    return (
        f'<g style="{_TEXT};font-size:{FONT_PX}px"><text x="{_LEFT}" y="{_PEAK_TOP - 6}">peak '
        f"seen each minute: held (bars) and waiting (line), up to {_tick(top)}</text>"
        f'<line x1="{_LEFT}" y1="{_PEAK_BOTTOM}" x2="{right}" y2="{_PEAK_BOTTOM}" '
        f'style="{_AXIS}"/></g>'
        f'<g class="drp-held" style="{_HELD}">{"".join(held)}</g>'
        f'<path class="drp-waiting" d="{" ".join(waiting)}" '
        f'style="fill:none;stroke:{_WAITING};stroke-width:2"/>'
    )


def _rect(x: float, y: float, width: float, height: float) -> str:
    return f'<rect x="{x:.1f}" y="{y:.1f}" width="{width:.1f}" height="{height:.1f}"/>'


_UNDER_TALL = 7


def _under_mark(x: float, y: float) -> str:
    """A triangle pointing down from ``y``: "somewhere under this"."""
    return f"M{x - 4:.1f} {y:.1f} h8 l-4 {_UNDER_TALL} z"


def _wait_line(minutes: Iterable[Minute], slot: float, height: float, top: float) -> str:
    """The p95 wait of each minute with grants: a dashed line through the
    minutes in a row that have one, a dot on each; a minute whose p95 falls
    in the first bucket (only known to be under its bound) has a hollow
    triangle pointing down from the bound instead, and breaks the line."""
    runs: list[list[tuple[float, float]]] = [[]]
    under = []
    for index, minute in enumerate(minutes):
        wait = minute.wait_p95_ms
        if wait is None or minute.wait_p95_under:
            if runs[-1]:
                runs.append([])
            if wait is not None:
                x = _LEFT + slot * (index + 0.5)
                # (its tip on the axis at most: above it, on a scale of seconds)
                y = min(_BOTTOM - height * wait / top, _BOTTOM - _UNDER_TALL)
                under.append(_under_mark(x, y))
            continue
        runs[-1].append((_LEFT + slot * (index + 0.5), _BOTTOM - height * wait / top))
    paths = ["M" + " L".join(f"{x:.1f} {y:.1f}" for x, y in run) for run in runs if len(run) > 1]
    dots = "".join(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="2"/>' for run in runs for x, y in run)
    line = (
        f'<path d="{" ".join(paths)}" style="fill:none;stroke:{_WAIT};stroke-width:1.5;'
        'stroke-dasharray:4 2"/>'
        if paths
        else ""
    )
    marks = (
        f'<path class="drp-wait-under" d="{" ".join(under)}" style="{_UNDER}"/>' if under else ""
    )
    return f'<g class="drp-wait">{line}<g style="fill:{_WAIT}">{dots}</g>{marks}</g>'


# ------------------------------------------------------------------ the sparkline

SPARK_WIDTH, SPARK_HEIGHT = 120, 24


def sparkline(hour: Hour) -> SafeString:
    """The overview's small chart of ``hour``: its bars only, with the same
    text alternative as :func:`chart`."""
    slot = SPARK_WIDTH / MINUTES
    top = max((m.granted + m.refused for m in hour.minutes), default=0) or 1
    summary = escape(hour.summary())
    granted, refused = [], []
    for index, minute in enumerate(hour.minutes):
        g_height = (SPARK_HEIGHT - 2) * minute.granted / top
        r_height = (SPARK_HEIGHT - 2) * minute.refused / top
        x = slot * index
        if minute.granted:
            granted.append(_rect(x, SPARK_HEIGHT - 1 - g_height, slot * 0.8, g_height))
        if minute.refused:
            refused.append(_rect(x, SPARK_HEIGHT - 1 - g_height - r_height, slot * 0.8, r_height))
    return mark_safe(  # (the summary is escaped)
        f'<svg xmlns="http://www.w3.org/2000/svg" class="drp-sparkline" role="img" '
        f'aria-label="{summary}" viewBox="0 0 {SPARK_WIDTH} {SPARK_HEIGHT}" '
        f'width="{SPARK_WIDTH}" height="{SPARK_HEIGHT}" data-granted="{hour.granted}" '
        f'data-refused="{hour.refused}"><title>{summary}</title>'
        f'<line x1="0" y1="{SPARK_HEIGHT - 0.5}" x2="{SPARK_WIDTH}" y2="{SPARK_HEIGHT - 0.5}" '
        f'style="{_AXIS}"/>'
        f'<g class="drp-granted" style="{_GRANTED}">{"".join(granted)}</g>'
        f'<g class="drp-refused" style="{_REFUSED}">{"".join(refused)}</g></svg>'
    )


# ------------------------------------------------------------------ reading


def read_hour(primitive: Any) -> Hour | None:
    """``primitive``'s last hour, in one round trip (None: its kind has no
    chart). Raises :class:`PoolError` if Redis could not be read."""
    series = SERIES.get(getattr(primitive, "kind", ""))
    if series is None or not hasattr(primitive, "activity"):
        return None
    return hour_of(primitive.name, primitive.activity(minutes=MINUTES), series)


def sparkline_of(primitive: Any) -> SafeString | None:
    """The overview's sparkline of ``primitive`` (None: its kind has no chart,
    or its counts could not be read; the row still shows what was read)."""
    try:
        hour = read_hour(primitive)
    except PoolError as exc:
        logger.warning("admin: the activity of %r could not be read: %s", primitive.name, exc)
        return None
    return None if hour is None else sparkline(hour)


def activity_section(primitive: Any, request: HttpRequest) -> dict[str, Any]:
    """The chart of a primitive's page. Redis unreachable fails the page as
    every section does; any other error reading the counts is said in place
    of the chart, and the rest of the page is shown."""
    try:
        hour = read_hour(primitive)
    except BackendUnavailable:
        raise
    except PoolError as exc:
        return {"chart": None, "chart_error": f"The activity could not be read: {exc}"}
    return {"chart": None if hour is None else chart(hour), "hour": hour, "chart_error": ""}
