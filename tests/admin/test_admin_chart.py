"""The admin's activity charts (``django_redis_pool.dashboard.charts``): each
primitive's page charts its last hour minute by minute as an inline ``<svg
role="img">`` whose ``aria-label`` says it in words, and each row of the
overview has a sparkline of the same hour. Counts reach Redis when the test
flushes them (``counts.flush()``; the background thread is off in the tests).
"""

from __future__ import annotations

import html
import io
import re
from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.core.management import call_command
from django.test import Client

from django_redis_pool import get_pool, get_queue
from django_redis_pool.dashboard import charts
from django_redis_pool.exceptions import BackendUnavailable, PoolError
from django_redis_pool.primitives import counts
from django_redis_pool.primitives.counts import BUCKETS, Activity
from django_redis_pool.primitives.leased.primitive import LeasedPrimitive
from tests.support.admin_fixtures import dashboard_url, detail_url, lease_setting
from tests.support.admin_pages import dashboard_row, page_text, sparkline, table, text_of

pytestmark = pytest.mark.django_db

NA = "\N{EN DASH}"
#: The most holds and waiters seen in a minute, as the charts write them.
PEAKS = r"(, peak seen: \d+ held, \d+ waiting)?"
#: A mean wait as the charts write it, and its p95 ("< 5 ms" in the first bucket),
#: then the peaks.
#: (In the SVG's text the "<" is "&lt;".)
WAIT = r"mean wait \d+(\.\d)? (ms|s)(, p95 ((<|&lt;) 5 ms|\d+(\.\d)? (ms|s)))?" + PEAKS


@pytest.fixture
def configured(settings: Any, redis_url: str) -> None:
    """Two pools, two semaphores, two locks (the admin tests' ``lease_setting``), synced."""
    settings.DJANGO_REDIS_POOL = lease_setting(redis_url)
    call_command("pool_sync", verbosity=0)


@pytest.fixture
def viewer(django_user_model: Any) -> Client:
    """A staff user with only the view permission."""
    user = django_user_model.objects.create_user("viewer", "viewer@example.com", is_staff=True)
    user.user_permissions.add(
        Permission.objects.get(
            codename="view_dashboard", content_type__app_label="django_redis_pool"
        )
    )
    client = Client()
    client.force_login(user)
    return client


def chart_of(response: Any) -> str:
    found = re.search(r'<svg [^>]*class="drp-chart".*?</svg>', response.content.decode(), re.S)
    assert found is not None, "no chart on the page"
    return found.group(0)


def label_of(svg: str) -> str:
    """The accessible name of ``svg``, checked to be its ``<title>`` too."""
    opening = svg[: svg.index(">") + 1]
    assert 'role="img"' in opening
    label = re.search(r'aria-label="([^"]*)"', opening)
    title = re.search(r"<title>(.*?)</title>", svg, re.S)
    assert label is not None and title is not None
    assert html.unescape(title.group(1)) == html.unescape(label.group(1))
    return html.unescape(label.group(1))


def bars(svg: str, which: str) -> int:
    """How many bars the group ``drp-<which>`` of ``svg`` has."""
    found = re.search(rf'<g class="drp-{which}"[^>]*>(.*?)</g>', svg, re.S)
    assert found is not None, f"no {which} group"
    return found.group(1).count("<rect")


def flushed() -> None:
    assert counts.flush() == 0


# ---------------------------------------------------------------- a primitive's page


def test_the_page_charts_the_hours_grants_refusals_and_wait_in_words(
    configured: None, viewer: Client
) -> None:
    pool = get_pool("printers")
    for _ in range(5):
        with pool.hold(timeout=1):
            pass
    held = [pool.acquire(holder=f"h{i}") for i in range(3)]
    assert pool.acquire(timeout=0) is None  # refused: nothing free
    for lease in held:
        assert lease is not None and lease.release()
    flushed()

    response = viewer.get(detail_url("printers"))

    assert response.status_code == 200
    svg = chart_of(response)
    assert re.fullmatch(
        rf"Activity of printers over the last hour: 8 granted, 1 refused, {WAIT}", label_of(svg)
    )
    assert "Activity in the last hour" in page_text(response)  # the section's heading
    # the minute they were counted in (the page may be read in the next one)
    tooltip = rf"(this minute|1 min ago): 8 granted, 1 refused, {WAIT}</title>"
    assert re.search(tooltip, svg)
    assert bars(svg, "granted") == 1 and bars(svg, "refused") == 1
    # the minute's p95 wait: a dot, or a triangle under 5 ms (most likely: no grant queued)
    assert 'class="drp-wait"' in svg and ("<circle" in svg or 'class="drp-wait-under"' in svg)
    for label in ("59 min ago", "45", "30", "15", "now", "granted per minute"):
        assert f">{label}</text>" in svg
    # no script, nothing fetched: the chart is all there is
    content = response.content.decode()
    assert "<script" not in svg and "href" not in svg and "url(" not in svg
    assert content.count('class="drp-chart"') == 1


def test_a_minute_with_only_refusals_is_charted(configured: None, viewer: Client) -> None:
    empty = get_pool("empty")  # a pool with no resources: every acquire is refused
    assert empty.acquire(timeout=0) is None
    assert empty.acquire(timeout=0) is None
    flushed()

    svg = chart_of(viewer.get(detail_url("empty")))

    assert re.fullmatch(
        "Activity of empty over the last hour: 0 granted, 2 refused" + PEAKS, label_of(svg)
    )
    assert bars(svg, "granted") == 0 and bars(svg, "refused") == 1
    assert "<circle" not in svg  # no grant, no wait to draw
    assert "No activity" not in svg


def test_an_empty_hour_is_an_empty_chart_that_says_so(configured: None, viewer: Client) -> None:
    response = viewer.get(detail_url("reports"))

    svg = chart_of(response)
    assert label_of(svg) == "Activity of reports over the last hour: no activity"
    assert "No activity in the last hour" in svg
    assert bars(svg, "granted") == bars(svg, "refused") == 0
    assert table(response, "holders") == [["Nothing is held."]]  # the page is all there


def test_a_lock_held_and_released_between_two_flushes_is_seen_held(
    configured: None, viewer: Client
) -> None:
    """The flush samples the holds: a lock held and released before it sees
    none held, yet a grant was counted; the minute says 1 held, not 0."""
    from django_redis_pool import get_lock

    lock = get_lock("plain")
    assert lock.acquire(holder="one", blocking=False)
    lock.release()
    assert not lock.locked()
    flushed()  # (it sampled 0 held: the hold has ended)

    svg = chart_of(viewer.get(detail_url("plain")))

    label = label_of(svg)
    assert re.fullmatch(
        rf"Activity of plain over the last hour: 1 granted, 0 refused, {WAIT}", label
    )
    assert label.endswith(", peak seen: 1 held, 0 waiting")
    assert "at most 0 held" not in svg and "peak seen: 0 held" not in svg
    assert bars(svg, "held") == 1


def test_the_peaks_seen_are_at_least_what_the_minutes_counts_tell() -> None:
    hour = charts.hour_of(
        "p",
        minutes(
            {"acquired": 2, "wait_0": 2, "held_max": 0, "waiting_max": 0},  # between flushes
            {"acquired": 1, "wait_0": 1, "held_max": 3, "waiting_max": 1},
            {"refused_full": 2, "held_max": 0, "waiting_max": 2},  # refusals only
        ),
        charts.Series(),
    )

    between, sampled, refusals = hour.minutes[-3:]
    assert [(m.held_max, m.waiting_max) for m in (between, sampled, refusals)] == [
        (1, 0),
        (3, 1),
        (0, 2),
    ]
    assert hour.counts_in_words(between).endswith("p95 < 5 ms, peak seen: 1 held, 0 waiting")
    assert hour.counts_in_words(refusals) == "0 granted, 2 refused, peak seen: 0 held, 2 waiting"
    assert hour.summary().endswith(", peak seen: 3 held, 2 waiting")


def test_the_chart_of_a_lock_and_of_an_allocator(
    settings: Any, redis_url: str, viewer: Client
) -> None:
    settings.DJANGO_REDIS_POOL = {
        **lease_setting(redis_url),
        "ALLOCATORS": {"proxies": {"KEYS": ["a", "b"]}},
    }
    call_command("pool_sync", verbosity=0)
    from django_redis_pool import get_allocator, get_lock

    lock = get_lock("imports")
    assert lock.acquire(holder="one", blocking=False)
    assert not get_lock("imports").for_holder("two").acquire(blocking=False)
    assert get_allocator("proxies").malloc_key() is not None
    flushed()

    lock_label = label_of(chart_of(viewer.get(detail_url("imports"))))
    proxies_label = label_of(chart_of(viewer.get(detail_url("proxies"))))

    assert re.fullmatch(
        rf"Activity of imports over the last hour: 1 granted, 1 refused, {WAIT}", lock_label
    )
    assert re.fullmatch(
        rf"Activity of proxies over the last hour: 1 granted, 0 refused, {WAIT}", proxies_label
    )


def test_a_queue_charts_its_completed_and_failed_tasks(
    settings: Any, redis_url: str, viewer: Client
) -> None:
    settings.DJANGO_REDIS_POOL = {
        "CONNECTION": {"URL": redis_url},
        "QUEUES": {"jobs": {"MAX_ATTEMPTS": 1}},
    }
    jobs = get_queue("jobs")
    jobs.enqueue("add", {"a": 1, "b": 2})
    jobs.enqueue("add", {"a": 1})  # KeyError: "b"
    call_command("pool_worker", "--queue", "jobs", "--burst", stdout=io.StringIO())
    flushed()
    totals = jobs.activity().totals

    response = viewer.get(detail_url("jobs"))

    assert (totals.get("completed"), totals.get("failed")) == (1, 1)
    svg = chart_of(response)
    assert label_of(svg) == "Activity of jobs over the last hour: 1 completed, 1 failed"
    assert ">completed per minute</text>" in svg and ">failed per minute</text>" in svg
    assert 'class="drp-wait"' not in svg  # a task's wait is not charted
    assert_no_peaks_strip(svg)  # nothing is held: no strip of holds and waiters
    row = sparkline(viewer.get(dashboard_url()), "jobs")
    assert label_of(row) == "Activity of jobs over the last hour: 1 completed, 1 failed"


def assert_no_peaks_strip(svg: str) -> None:
    """``svg`` has no strip of the most holds and waiters seen, and is no
    taller than its time axis and labels."""
    assert "drp-held" not in svg and "drp-waiting" not in svg and "peak seen" not in svg
    assert f'viewBox="0 0 {charts.WIDTH} {charts.HEIGHT_WITHOUT_PEAKS}"' in svg
    assert charts.HEIGHT_WITHOUT_PEAKS < charts.HEIGHT


def test_a_rate_limit_that_never_waits_charts_its_decisions_without_waits_or_holds(
    settings: Any, redis_url: str, viewer: Client
) -> None:
    from django_redis_pool import get_ratelimit

    settings.DJANGO_REDIS_POOL = {
        "CONNECTION": {"URL": redis_url},
        "RATE_LIMITS": {"api": {"RATE": "2/m"}},  # no TIMEOUT: a request never waits
    }
    api = get_ratelimit("api")
    assert api.acquire("user:1") and api.acquire("user:1") and not api.acquire("user:1")
    flushed()

    svg = chart_of(viewer.get(detail_url("api")))

    assert label_of(svg) == "Activity of api over the last hour: 2 allowed, 1 limited"
    assert ">allowed per minute</text>" in svg and ">limited per minute</text>" in svg
    assert bars(svg, "granted") == 1 and bars(svg, "refused") == 1
    # no wait: no legend, no line, no axis for it
    assert "wait" not in svg and "p95" not in svg and " ms</text>" not in svg
    assert_no_peaks_strip(svg)


def test_a_rate_limit_charts_the_wait_of_an_hour_in_which_requests_waited() -> None:
    from django_redis_pool.dashboard.ratelimit_panels import DECISIONS

    slow = BUCKETS.index(0.5)
    waited = charts.hour_of(
        "api", minutes({"acquired": 2, "wait_us": 600_000, f"wait_{slow}": 2}), DECISIONS
    )
    never = charts.hour_of("api", minutes({"acquired": 2, "wait_0": 2}), DECISIONS)

    assert waited.summary().startswith(
        "Activity of api over the last hour: 2 allowed, 0 limited, mean wait 300 ms, p95 "
    )
    assert "p95 wait (ms, right axis)" in charts.chart(waited)
    assert never.summary() == "Activity of api over the last hour: 2 allowed, 0 limited"
    assert "wait" not in charts.chart(never)


def test_a_kind_on_the_lease_engine_keeps_its_strip(configured: None, viewer: Client) -> None:
    svg = chart_of(viewer.get(detail_url("printers")))

    assert f'viewBox="0 0 {charts.WIDTH} {charts.HEIGHT}"' in svg
    assert 'class="drp-held"' in svg and 'class="drp-waiting"' in svg
    assert ">peak seen each minute: held (bars) and waiting (line), up to 1</text>" in svg


def test_an_object_pool_has_no_chart(settings: Any, redis_url: str, viewer: Client) -> None:
    settings.DJANGO_REDIS_POOL = {
        "CONNECTION": {"URL": redis_url},
        "OBJECT_POOLS": {"clients": {"FACTORY": "tests.support.pooled_objects.make", "MAX": 2}},
    }

    page = viewer.get(detail_url("clients"))
    overview = viewer.get(dashboard_url())

    assert page.status_code == 200 and 'class="drp-chart"' not in page.content.decode()
    assert "Activity in the last hour" not in page_text(page)
    assert text_of(sparkline(overview, "clients")) == NA


# ---------------------------------------------------------------- the overview


def test_each_row_of_the_overview_has_a_sparkline_of_its_hour(
    configured: None, viewer: Client
) -> None:
    pool = get_pool("printers")
    for _ in range(2):
        with pool.hold(timeout=1):
            pass
    flushed()

    response = viewer.get(dashboard_url())

    assert response.status_code == 200
    assert '<th scope="col">Last hour</th>' in response.content.decode()
    for name in ("printers", "empty", "reports", "unsized", "imports", "plain"):
        svg = sparkline(response, name)
        assert svg.startswith('<svg xmlns="http://www.w3.org/2000/svg" class="drp-sparkline"')
        label = label_of(svg)
        if name == "printers":
            assert re.fullmatch(
                rf"Activity of printers over the last hour: 2 granted, 0 refused, {WAIT}", label
            )
            assert bars(svg, "granted") == 1
        else:
            assert label == f"Activity of {name} over the last hour: no activity"
    assert dashboard_row(response, "printers")[:3] == ["printers", "pool", "3"]


# ---------------------------------------------------------------- escaping and errors


def test_a_name_is_escaped_in_the_chart_and_the_sparkline(
    settings: Any, redis_url: str, viewer: Client
) -> None:
    name = "<b>&\"x'"
    settings.DJANGO_REDIS_POOL = {
        "CONNECTION": {"URL": redis_url},
        "POOLS": {name: {"RESOURCES": ["p1"]}},
    }
    call_command("pool_sync", verbosity=0)

    page = viewer.get(detail_url(name))
    overview = viewer.get(dashboard_url())

    assert page.status_code == overview.status_code == 200
    for response in (page, overview):
        assert name not in response.content.decode()
        assert "<b>" not in response.content.decode()
    expected = f"Activity of {name} over the last hour: no activity"
    assert label_of(chart_of(page)) == expected
    assert label_of(sparkline(overview, html.escape(name))) == expected  # (its data-name)
    assert 'aria-label="Activity of &lt;b&gt;&amp;&quot;x&#x27; over' in chart_of(page)


def test_counts_that_cannot_be_read_leave_the_rest_of_the_page(
    configured: None, viewer: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refused(self: Any, minutes: int = 0) -> Activity:
        raise PoolError("Redis answered with an error: NOPERM this user has no permissions")

    monkeypatch.setattr(LeasedPrimitive, "activity", refused)

    page = viewer.get(detail_url("printers"))
    overview = viewer.get(dashboard_url())

    assert page.status_code == 200
    assert 'class="drp-chart"' not in page.content.decode()
    assert "The activity could not be read: Redis answered with an error: NOPERM" in page_text(page)
    assert len(table(page, "holders")) == 1  # the rest of the page is there
    assert overview.status_code == 200
    assert text_of(sparkline(overview, "printers")) == NA
    assert dashboard_row(overview, "printers") == ["printers", "pool", "3", "3", "0", "0", "OK"]


def test_redis_unreachable_while_reading_the_counts_is_the_pages_error(
    configured: None, viewer: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    def unreachable(self: Any, minutes: int = 0) -> Activity:
        raise BackendUnavailable("Redis could not be reached: Connection refused")

    monkeypatch.setattr(LeasedPrimitive, "activity", unreachable)

    page = viewer.get(detail_url("printers"))

    assert page.status_code == 503  # as when any section cannot reach Redis
    assert page.content.decode().count('class="errornote"') == 1
    assert "Redis could not be reached: Connection refused" in page_text(page)
    assert 'class="drp-chart"' not in page.content.decode()


# ---------------------------------------------------------------- the charts alone


def minutes(*counted: dict[str, int]) -> Activity:
    """An hour whose last minutes counted ``counted`` (the rest nothing)."""
    start = 29_000_000 * 60
    padded = [{}] * (charts.MINUTES - len(counted)) + list(counted)
    return Activity(minutes=[(start + 60 * i, c) for i, c in enumerate(padded)])


def test_an_hour_adds_up_grants_refusals_and_waits() -> None:
    hour = charts.hour_of(
        "p",
        minutes(
            {"acquired": 2, "wait_us": 3000, "refused_full": 1},
            {"acquired": 1, "wait_us": 27000, "refused_timeout": 2, "lost": 5},
        ),
        charts.Series(),
    )

    assert len(hour.minutes) == charts.MINUTES
    assert [m.ago for m in hour.minutes[-2:]] == [1, 0]
    assert (hour.granted, hour.refused) == (3, 3)
    assert hour.mean_wait_ms == pytest.approx(10.0)
    assert hour.minutes[-2].mean_wait_ms == pytest.approx(1.5)
    assert (
        hour.summary() == "Activity of p over the last hour: 3 granted, 3 refused, mean wait 10 ms"
    )


def test_a_minute_says_its_p95_wait_and_the_peaks_its_flushes_saw() -> None:
    fast, slow = BUCKETS.index(0.005), BUCKETS.index(0.5)
    hour = charts.hour_of(
        "p",
        minutes(
            {
                "acquired": 20,
                "wait_us": 2_000_000,
                f"wait_{fast}": 18,
                f"wait_{slow}": 2,
                "held_max": 10,
                "waiting_max": 4,
            }
        ),
        charts.Series(),
    )

    minute = hour.minutes[-1]
    assert minute.wait_p95_ms == pytest.approx(250 + 250 * 0.5, rel=0.01)  # in (0.25, 0.5]
    assert (hour.held_max, hour.waiting_max) == (10, 4)
    assert hour.counts_in_words(minute) == (
        "20 granted, 0 refused, mean wait 100 ms, p95 375 ms, peak seen: 10 held, 4 waiting"
    )
    svg = charts.chart(hour)
    assert "p95 wait (ms, right axis)" in svg and "<circle" in svg
    assert "peak seen each minute: held (bars) and waiting (line), up to 10" in svg
    held = re.search(r'<g class="drp-held"[^>]*>(.*?)</g>', svg)
    assert held is not None and held[1].count("<rect") == 1  # the one minute with holds
    assert re.search(r'class="drp-waiting" d="M[\d.]+ [\d.]+ h[\d.]+"', svg)


def test_a_p95_in_the_first_bucket_is_said_and_drawn_as_under_its_bound() -> None:
    """Waits all under 5 ms: the p95 is not interpolated inside the first
    bucket (4.75 ms, whatever the waits were) but said "< 5 ms", and drawn as
    a hollow triangle under the bound, out of the dashed line."""
    fast, slow = BUCKETS.index(0.005), BUCKETS.index(0.5)
    hour = charts.hour_of(
        "p",
        minutes(
            {"acquired": 3, "wait_us": 3000, f"wait_{fast}": 3},
            {"acquired": 20, "wait_us": 2_000_000, f"wait_{fast}": 18, f"wait_{slow}": 2},
            {"acquired": 4, "wait_us": 400, f"wait_{fast}": 4},
        ),
        charts.Series(),
    )

    under, measured, after = hour.minutes[-3:]
    assert (under.wait_p95_ms, under.wait_p95_under) == (charts.FIRST_BOUND_MS, True) == (5, True)
    assert hour.counts_in_words(under) == "3 granted, 0 refused, mean wait 1.0 ms, p95 < 5 ms"
    assert measured.wait_p95_under is False and measured.wait_p95_ms == pytest.approx(375)
    assert "4.8 ms" not in hour.counts_in_words(after)
    # the hour's p95, from its 27 waits: 25 under 5 ms are not 95 %
    assert not hour.wait_p95_under and hour.summary() == (
        "Activity of p over the last hour: 27 granted, 0 refused, mean wait 74 ms, p95 331 ms"
    )
    svg = charts.chart(hour)
    marks = re.search(r'<path class="drp-wait-under" d="([^"]*)"', svg)
    assert marks is not None and marks[1].count("M") == 2  # the two minutes under 5 ms
    assert svg.count("<circle") == 1  # the one measured p95
    assert ">p95 &lt; 5 ms</text>" in svg  # in the legend
    assert "p95 &lt; 5 ms</title>" in svg and "p95 375 ms</title>" in svg  # the tooltips
    assert not re.search(r"p95 4\.\d ms", svg)


@pytest.mark.parametrize(
    ("under_5_ms", "says"),
    [(20, "p95 < 5 ms"), (19, "p95 < 5 ms"), (18, "p95 7.5 ms")],  # 19 of 20 is 95 %
)
def test_the_p95_is_under_the_bound_only_when_95_percent_are_in_the_first_bucket(
    under_5_ms: int, says: str
) -> None:
    hour = charts.hour_of(
        "p",
        minutes({"acquired": 20, "wait_0": under_5_ms, "wait_1": 20 - under_5_ms}),
        charts.Series(),
    )

    assert hour.counts_in_words(hour.minutes[-1]).endswith(says)


def test_a_rate_limits_p95_in_the_first_bucket_is_under_its_bound_too() -> None:
    from django_redis_pool.dashboard.ratelimit_panels import DECISIONS

    hour = charts.hour_of("api", minutes({"acquired": 2, "wait_us": 300, "wait_0": 2}), DECISIONS)

    assert hour.summary() == (
        "Activity of api over the last hour: 2 allowed, 0 limited, mean wait 0.1 ms, p95 < 5 ms"
    )


@pytest.mark.parametrize(
    ("ms", "words"),
    [
        (0.04, "0.0 ms"),
        (1.25, "1.2 ms"),
        (12.4, "12 ms"),
        (999, "999 ms"),
        (2500, "2.5 s"),
        (61e3, "61 s"),
    ],
)
def test_a_wait_is_said_in_its_unit(ms: float, words: str) -> None:
    assert charts.duration(ms) == words


def test_a_chart_escapes_every_name_and_holds_no_script() -> None:
    hour = charts.hour_of(
        "</title><script>alert(1)</script>", minutes({"acquired": 1}), charts.Series()
    )

    for svg in (charts.chart(hour), charts.sparkline(hour)):
        assert "<script" not in svg
        assert "&lt;/title&gt;&lt;script&gt;alert(1)&lt;/script&gt;" in svg


def test_the_count_axis_ends_on_a_round_number() -> None:
    assert [charts.nice_ceiling(v) for v in (0, 1, 3, 7, 10, 11, 260)] == [1, 1, 5, 10, 10, 20, 500]
    svg = charts.chart(charts.hour_of("p", minutes({"acquired": 7}), charts.Series()))
    assert ">10</text>" in svg and ">5</text>" in svg and ">0</text>" in svg


def test_the_chart_keeps_a_min_width_where_its_labels_are_10_px() -> None:
    """The chart is scaled to the page's width, but not below MIN_WIDTH (its
    section scrolls instead: the browser test measures it at 420 px)."""
    svg = charts.chart(charts.hour_of("p", minutes({"acquired": 1}), charts.Series()))

    style = re.search(r'<svg [^>]*style="([^"]*)"', svg)
    assert style is not None
    assert f"min-width:{charts.MIN_WIDTH}px" in style[1] and "width:100%" in style[1]
    assert charts.FONT_PX * charts.MIN_WIDTH / charts.WIDTH >= 10
    sizes = {int(size) for size in re.findall(r"font-size:(\d+)px", svg)}
    assert min(sizes) == charts.FONT_PX
