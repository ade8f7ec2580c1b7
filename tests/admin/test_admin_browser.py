"""The admin in a real browser: headless Chromium (Debian's), driven by Playwright.

One module, so one browser (see ``tests/support/browser.py``). ``DRP_SCREENSHOTS=docs/img``
saves the dashboard's screenshots for the documentation; otherwise they go to a
temporary folder (and are still taken, so the pages are fully rendered).
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from playwright.sync_api import Page, Response, expect

import django_redis_pool
from django_redis_pool.dashboard import charts
from django_redis_pool.holder_names import request_holder
from django_redis_pool.primitives import counts
from tests.support.browser import (
    NARROW,
    VIEWPORT,
    admin_login,
    page_overflow,
    screenshot,
    scroll_box,
    svg_text_sizes,
)
from tests.support.waiting import wait_for

pytest_plugins = ["tests.support.browser"]

ADMIN_CSS = "/static/admin/css/base.css"
# The admin header's background (var(--header-bg), #417690); unstyled it is transparent.
ADMIN_HEADER_BG = "rgb(65, 118, 144)"
# How many CSS rules each loaded stylesheet whose URL ends with ``suffix`` has.
CSS_RULE_COUNTS = """(suffix) => [...document.styleSheets]
    .filter(sheet => sheet.href && sheet.href.endsWith(suffix))
    .map(sheet => sheet.cssRules.length)"""


@pytest.mark.django_db(transaction=True)
def test_admin_login_in_a_real_browser(
    live_server: Any, page: Page, django_user_model: Any, tmp_path: Path
) -> None:
    django_user_model.objects.create_superuser("admin", "admin@example.com", "s3cret-pass")
    failed: list[str] = []

    def record_failure(response: Response) -> None:
        # Chromium asks for /favicon.ico on its own; the test URLconf has none.
        if response.status >= 400 and not response.url.endswith("/favicon.ico"):
            failed.append(f"{response.status} {response.url}")

    page.on("response", record_failure)

    admin_login(page, live_server.url, "admin", "s3cret-pass")

    assert page.locator("#content h1").inner_text() == "Site administration"
    # text_content, not inner_text: the admin's CSS shows app captions upper-cased.
    assert "Authentication and Authorization" in page.locator("#content-main").text_content()
    rule_counts = page.evaluate(CSS_RULE_COUNTS, ADMIN_CSS)
    assert len(rule_counts) == 1, f"{ADMIN_CSS} is not a loaded stylesheet"
    assert rule_counts[0] > 0, f"{ADMIN_CSS} loaded empty"
    header_bg = page.eval_on_selector("#header", "e => getComputedStyle(e).backgroundColor")
    assert header_bg == ADMIN_HEADER_BG, "the admin's CSS is not applied"
    assert failed == []

    shot = screenshot(page, tmp_path / "shots" / "admin-index.png")
    assert shot.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")


def shots_dir(tmp_path: Path) -> Path:
    return Path(os.environ.get("DRP_SCREENSHOTS") or tmp_path / "shots")


@pytest.fixture
def configured(settings: Any, redis_url: str) -> Iterator[None]:
    """A few primitives in several states: held, waited for, expired, unsynced."""
    settings.DJANGO_REDIS_POOL = {
        "CONNECTION": {"URL": redis_url},
        "POOLS": {
            "printers": {
                "RESOURCES": ["printer-1", "printer-2", "printer-3", "printer-4"],
                "LEASE_TIMEOUT": 300,
            },
            "licences": {"RESOURCES": ["licence-A"], "LEASE_TIMEOUT": 300},
            "scanners": {"RESOURCES": []},
        },
        "SEMAPHORES": {"reports": {"MAX_SIZE": 3, "LEASE_TIMEOUT": 120}},
        "LOCKS": {"nightly-import": {"LEASE_TIMEOUT": 60}},
    }
    call_command("pool_sync", verbosity=0)
    printers = django_redis_pool.get_pool("printers")
    printers.acquire(holder="web-1:4711:worker-3")
    printers.acquire(holder="web-2:815:worker-1", lease_timeout=90)
    django_redis_pool.get_semaphore("reports").acquire("user-42")
    django_redis_pool.get_lock("nightly-import").for_holder("cron@batch-1").acquire()
    licences = django_redis_pool.get_pool("licences")
    licences.acquire(holder="web-3:77:worker-2")
    # Someone waits for a licence, so the dashboard shows a waiter and a warning.
    waiter = threading.Thread(
        target=licences.acquire, kwargs={"timeout": 30, "holder": "web-4:12:worker-9"}
    )
    waiter.start()
    wait_for(lambda: licences.waiting_count() == 1, what="the licence waiter")
    assert counts.flush() == 0  # the grants so far, for the charts
    try:
        yield
    finally:
        licences.disassociate("licence-A")  # the waiter keeps waiting for nothing...
        licences.associate("licence-B")  # ...until it gets this one and returns
        waiter.join(timeout=30)


@pytest.mark.django_db(transaction=True)
def test_an_operator_force_releases_a_hold_from_the_dashboard(
    configured: None, live_server: Any, page: Page, django_user_model: Any, tmp_path: Path
) -> None:
    django_user_model.objects.create_superuser("admin", "admin@example.com", "s3cret-pass")
    shots = shots_dir(tmp_path)
    printers = django_redis_pool.get_pool("printers")
    held = {lease.resource: lease for lease in printers.leases()}
    target = held["printer-1"]

    admin_login(page, live_server.url, "admin", "s3cret-pass")
    # The admin index links the app's dashboard.
    with page.expect_navigation():
        page.locator("#content-main a", has_text="Dashboard").click()
    expect(page.locator("#content h1")).to_have_text("Redis pools")
    rows = page.locator("#primitives tbody tr")
    expect(rows).to_have_count(5)
    printers_row = page.locator("tr[data-name=printers]")
    expect(printers_row).to_contain_text("pool")
    expect(printers_row.locator("td").nth(1)).to_have_text("4")  # size
    expect(printers_row.locator("td").nth(2)).to_have_text("2")  # free
    expect(page.locator("tr[data-name=licences]")).to_contain_text("exhausted, 1 waiting")
    expect(page.locator("tr[data-name=scanners]")).to_contain_text("pool_sync")
    screenshot(page, shots / "admin-dashboard.png")

    with page.expect_navigation():
        printers_row.locator("a", has_text="printers").click()
    expect(page.locator("#content h1")).to_have_text("Pool printers")
    holder_row = page.locator(f"#holders tr[data-resource={target.resource}]")
    expect(holder_row).to_contain_text("web-1:4711:worker-3")
    expect(holder_row).to_contain_text(str(target.fence))
    expect(page.locator("#available tbody tr")).to_have_count(2)
    screenshot(page, shots / "admin-pool.png")

    with page.expect_navigation():
        holder_row.locator("a", has_text="Force-release").click()
    expect(page.locator(".drp-question")).to_contain_text(
        f"Force-release the hold on 'printer-1' (fence {target.fence}) of pool 'printers'?"
    )
    screenshot(page, shots / "admin-confirm.png")
    with page.expect_navigation():
        page.locator("#confirm-form [type=submit]").click()

    # Redirected to the pool's page: the message, and printer-1 is available.
    expect(page.locator("#content h1")).to_have_text("Pool printers")
    expect(page.locator(".messagelist .success")).to_contain_text("Released the hold on")
    expect(page.locator(f"#available tr[data-resource={target.resource}]")).to_have_count(1)
    expect(page.locator(f"#holders tr[data-resource={target.resource}]")).to_have_count(0)
    screenshot(page, shots / "admin-released.png")
    assert printers.is_available(target.resource)
    assert target.renew() is False and target.lost, "the old holder finds its lease lost"

    # A pool with someone waiting: the waiter is listed, in serving order.
    page.goto(f"{live_server.url}/admin/django_redis_pool/dashboard/licences/")
    expect(page.locator("#waiters tbody tr")).to_contain_text("web-4:12:worker-9")
    screenshot(page, shots / "admin-waiters.png")


@pytest.fixture
def admin_page(live_server: Any, page: Page, django_user_model: Any) -> Page:
    """The browser, logged in to the admin as a superuser."""
    django_user_model.objects.create_superuser("admin", "admin@example.com", "s3cret-pass")
    admin_login(page, live_server.url, "admin", "s3cret-pass")
    return page


@pytest.mark.django_db(transaction=True)
def test_an_operator_puts_an_allocator_key_back_and_unbinds_a_name(
    settings: Any, redis_url: str, live_server: Any, admin_page: Page, tmp_path: Path
) -> None:
    settings.DJANGO_REDIS_POOL = {
        "CONNECTION": {"URL": redis_url},
        "ALLOCATORS": {"proxies": {"KEYS": {"proxy-fast": 5, "proxy-a": 0, "proxy-b": 0}}},
    }
    call_command("pool_sync", verbosity=0)
    proxies = django_redis_pool.get_allocator("proxies")
    held = proxies.malloc_key(name="ann", holder="crawler-1")
    proxies.report_unhealthy("proxy-b", cooldown=600)
    shots = shots_dir(tmp_path)
    page = admin_page
    page.goto(f"{live_server.url}/admin/django_redis_pool/dashboard/")
    row = page.locator("tr[data-name=proxies]")
    expect(row).to_contain_text("allocator")
    expect(row.locator("td").nth(1)).to_have_text("3")  # keys
    expect(row.locator("td").nth(2)).to_have_text("1")  # free: one held, one out
    with page.expect_navigation():
        row.locator("a", has_text="proxies").click()
    expect(page.locator("#content h1")).to_have_text("Allocator proxies")
    expect(page.locator(f"#holders tr[data-resource={held}]")).to_contain_text("crawler-1")
    expect(page.locator("#bindings tr[data-binding=ann]")).to_contain_text(str(held))
    sick = page.locator("#unhealthy tr[data-resource=proxy-b]")
    expect(sick).to_have_count(1)
    screenshot(page, shots / "admin-allocator.png")

    with page.expect_navigation():
        sick.locator("a", has_text="Mark healthy").click()
    expect(page.locator(".drp-question")).to_contain_text("Put key 'proxy-b'")
    with page.expect_navigation():
        page.locator("#confirm-form [type=submit]").click()
    expect(page.locator(".messagelist .success")).to_contain_text("back in rotation")
    expect(page.locator("#unhealthy tr[data-resource=proxy-b]")).to_have_count(0)
    expect(page.locator("#available tr[data-resource=proxy-b]")).to_have_count(1)

    with page.expect_navigation():
        page.locator("#bindings tr[data-binding=ann] a", has_text="Unbind").click()
    with page.expect_navigation():
        page.locator("#confirm-form [type=submit]").click()
    expect(page.locator(".messagelist .success")).to_contain_text("no longer bound")
    assert proxies.get_soft_bind("ann") is None and proxies.state("proxy-b") == "free"


@pytest.mark.django_db(transaction=True)
def test_an_object_pool_page_lists_the_processes_using_it(
    settings: Any, redis_url: str, live_server: Any, admin_page: Page, tmp_path: Path
) -> None:
    settings.DJANGO_REDIS_POOL = {
        "CONNECTION": {"URL": redis_url},
        "OBJECT_POOLS": {"clients": {"FACTORY": "tests.support.pooled_objects.make", "MAX": 2}},
    }
    pool = django_redis_pool.get_object_pool("clients")  # this process uses it
    held = pool.acquire(timeout=5)
    page = admin_page
    page.goto(f"{live_server.url}/admin/django_redis_pool/dashboard/")
    row = page.locator("tr[data-name=clients]")
    expect(row).to_contain_text("object pool")
    with page.expect_navigation():
        row.locator("a", has_text="clients").click()
    expect(page.locator("#content h1")).to_have_text("Object pool clients")
    expect(page.locator(f"#processes tr[data-pid='{os.getpid()}']")).to_have_count(1)
    screenshot(page, shots_dir(tmp_path) / "admin-object-pool.png")
    pool.release(held)


@pytest.mark.django_db(transaction=True)
def test_an_operator_resets_a_rate_limited_key_from_its_page(
    settings: Any, redis_url: str, live_server: Any, admin_page: Page, tmp_path: Path
) -> None:
    settings.DJANGO_REDIS_POOL = {
        "CONNECTION": {"URL": redis_url},
        "RATE_LIMITS": {"api": {"RATE": "20/h"}},  # a unit back every 3 minutes
    }
    api = django_redis_pool.get_ratelimit("api")
    assert api.acquire("user:42", cost=20) and not api.acquire("user:42")
    assert api.acquire("ip:203.0.113.9", cost=3)
    assert counts.flush() == 0
    page = admin_page
    page.goto(f"{live_server.url}/admin/django_redis_pool/dashboard/")
    row = page.locator("tr[data-name=api]")
    expect(row).to_contain_text("rate limit")
    expect(row.locator("td").nth(1)).to_have_text("20")  # the burst
    expect(row.locator("td").nth(3)).to_have_text("2")  # active keys
    expect(row).to_contain_text("busiest: user:42, 0 left")
    with page.expect_navigation():
        row.locator("a", has_text="api").click()
    expect(page.locator("#content h1")).to_have_text("Rate limit api")
    expect(page.locator("#policy")).to_contain_text("20 per 3600 s, burst 20 · 2 active keys")
    keys = page.locator("#keys tbody tr")
    expect(keys).to_have_count(2)
    expect(keys.first).to_have_attribute("data-key", "user:42")  # fewest units left first
    limited = page.locator("#keys tr[data-key='user:42']")
    expect(limited.locator("td").nth(1)).to_have_text("0")
    expect(limited.locator("td").nth(2)).to_have_text(re.compile(r"^1[78]\d\.\d s$"))
    expect(page.get_by_role("img", name=re.compile(r"^Activity of api"))).to_have_count(1)
    # it never waits (no TIMEOUT): its chart says nothing of waits
    expect(page.locator("svg.drp-chart")).not_to_contain_text("wait")
    screenshot(page, shots_dir(tmp_path) / "admin-ratelimit.png")

    with page.expect_navigation():
        limited.locator("a", has_text="Reset").click()
    expect(page.locator(".drp-question")).to_contain_text(
        "Reset key 'user:42' of rate limit 'api'?"
    )
    with page.expect_navigation():
        page.locator("#confirm-form [type=submit]").click()
    expect(page.locator(".messagelist .success")).to_contain_text("has its whole burst again")
    expect(page.locator("#keys tr[data-key='user:42']")).to_have_count(0)
    assert api.status("user:42") == (20.0, 0.0)


@pytest.mark.django_db(transaction=True)
def test_the_activity_chart_is_drawn_and_named_in_a_real_browser(
    settings: Any, redis_url: str, live_server: Any, admin_page: Page, tmp_path: Path
) -> None:
    settings.DJANGO_REDIS_POOL = {
        "CONNECTION": {"URL": redis_url},
        "POOLS": {"printers": {"RESOURCES": ["printer-1"], "LEASE_TIMEOUT": 60}},
    }
    call_command("pool_sync", verbosity=0)
    printers = django_redis_pool.get_pool("printers")
    for _ in range(4):
        with printers.hold(timeout=1):
            pass
    held = printers.acquire(holder="web-1:4711:worker-3")
    assert held is not None and printers.acquire(timeout=0) is None  # refused
    assert held.release()
    assert counts.flush() == 0
    page = admin_page
    problems: list[str] = []
    page.on(
        "console",
        lambda message: (
            problems.append(f"console {message.type}: {message.text}")
            if message.type in ("error", "warning") and "favicon" not in message.text
            else None
        ),
    )
    page.on("pageerror", lambda error: problems.append(f"page error: {error}"))
    name = re.compile(
        r"^Activity of printers over the last hour: 5 granted, 1 refused, "
        r"mean wait \d+(\.\d)? (ms|s), p95 (< 5 ms|\d+(\.\d)? (ms|s)), "
        r"peak seen: 1 held, 0 waiting$"
    )

    # The overview: a sparkline in the row, named by what it shows.
    page.goto(f"{live_server.url}/admin/django_redis_pool/dashboard/")
    spark = page.locator("tr[data-name=printers] td.drp-spark").get_by_role("img", name=name)
    expect(spark).to_be_visible()
    box = spark.bounding_box()
    assert box is not None and box["width"] >= 100 and box["height"] >= 20

    # The pool's page: the chart, named the same, drawn at its size.
    with page.expect_navigation():
        page.locator("tr[data-name=printers] a", has_text="printers").click()
    chart = page.get_by_role("img", name=name)
    expect(chart).to_have_count(1)
    expect(chart).to_be_visible()
    box = chart.bounding_box()
    assert box is not None and box["width"] >= 600 and box["height"] >= 180
    expect(page.locator("#content-main h2", has_text="Activity in the last hour")).to_be_visible()
    screenshot(page, shots_dir(tmp_path) / "admin-activity.png")

    # Its colours are the admin's: a theme's link and error colours.
    def colours() -> tuple[str, str]:
        granted = page.eval_on_selector("svg.drp-chart .drp-granted rect", COMPUTED_FILL)
        refused = page.eval_on_selector("svg.drp-chart .drp-refused rect", COMPUTED_FILL)
        return granted, refused

    assert colours() == ("rgb(65, 120, 147)", "rgb(186, 33, 33)")  # --link-fg, --error-fg
    page.emulate_media(color_scheme="dark")
    assert colours() == ("rgb(129, 212, 250)", "rgb(227, 95, 95)")  # their dark values
    screenshot(page, shots_dir(tmp_path) / "admin-activity-dark.png")
    assert problems == []


COMPUTED_FILL = "e => getComputedStyle(e).fill"


@pytest.mark.django_db(transaction=True)
def test_at_420_px_the_pages_fit_and_tables_and_charts_scroll_in_their_boxes(
    settings: Any, redis_url: str, live_server: Any, admin_page: Page, tmp_path: Path
) -> None:
    """On a phone, no page is wider than the screen: a wide table (the
    holders') scrolls sideways inside its module, and the chart inside its
    section, at a width where its labels stay at least 10 px tall."""
    settings.DJANGO_REDIS_POOL = {
        "CONNECTION": {"URL": redis_url},
        "POOLS": {"printers": {"RESOURCES": ["printer-1", "printer-2"], "LEASE_TIMEOUT": 300}},
        "LOCKS": {"nightly-import": {"LEASE_TIMEOUT": 60}},
        "RATE_LIMITS": {"api": {"RATE": "20/h"}},
        "QUEUES": {"jobs": {}},
    }
    call_command("pool_sync", verbosity=0)
    printers = django_redis_pool.get_pool("printers")
    held = printers.acquire(holder="web-1.example.internal:4711:worker-3")
    assert held is not None
    django_redis_pool.get_lock("nightly-import").for_holder("cron@batch-1").acquire()
    assert django_redis_pool.get_ratelimit("api").acquire("user:42", cost=3)
    assert counts.flush() == 0
    page = admin_page
    page.set_viewport_size(NARROW)
    base = f"{live_server.url}/admin/django_redis_pool/dashboard"
    release = f"{base}/printers/actions/release/?resource=printer-1&fence={held.fence}"
    pages = {
        "the overview": f"{base}/",
        "a pool": f"{base}/printers/",
        "a lock": f"{base}/nightly-import/",
        "a rate limit": f"{base}/api/",
        "a queue": f"{base}/jobs/",
        "a confirmation": release,
    }

    for what, url in pages.items():
        page.goto(url)
        expect(page.locator("#content h1")).to_be_visible()
        assert page_overflow(page) == 0, f"{what} is wider than 420 px"
        if what in ("a pool", "a lock", "a rate limit", "a queue"):
            chart = scroll_box(page, ".drp-activity")
            assert chart["overflowX"] == "auto" and chart["right"] <= NARROW["width"]
            sizes = svg_text_sizes(page, "svg.drp-chart")
            assert len(sizes) >= 8  # the legend, the axes' labels
            small = [s for s in sizes if s["px"] < 10 or s["height"] < 10]
            assert small == [], f"chart labels under 10 px on {what}: {small}"
        screenshot(page, shots_dir(tmp_path) / f"admin-420-{what.split()[-1]}.png")

    # The pool's holders table: wider than the screen, it scrolls in its own box.
    page.goto(pages["a pool"])
    holders = scroll_box(page, "#holders")
    assert holders["overflowX"] == "auto"
    assert holders["scrollWidth"] > holders["clientWidth"], (
        "the holders table fits: nothing to test"
    )
    assert holders["right"] <= NARROW["width"]
    assert holders["scrolledTo"] == holders["scrollWidth"] - holders["clientWidth"] > 0
    # The last column (the actions) is off the screen, until the box is scrolled.
    force_release = page.locator("#holders tr[data-resource=printer-1] a", has_text="Force-release")
    before = force_release.bounding_box()
    assert before is not None and before["x"] + before["width"] > NARROW["width"]
    page.locator("#holders").evaluate("e => { e.scrollLeft = e.scrollWidth; }")
    after = force_release.bounding_box()
    assert after is not None and after["x"] >= 0 and after["x"] + after["width"] <= NARROW["width"]
    assert page_overflow(page) == 0
    # ...and the chart is drawn at its min-width, scrolled in its section.
    chart = scroll_box(page, ".drp-activity")
    assert chart["scrollWidth"] > chart["clientWidth"]
    width = page.eval_on_selector("svg.drp-chart", "e => e.getBoundingClientRect().width")
    assert round(width) == charts.MIN_WIDTH

    # At a desktop's width nothing scrolls: the chart is drawn at its full width.
    page.set_viewport_size(VIEWPORT)
    page.goto(pages["a pool"])
    for box in (scroll_box(page, "#holders"), scroll_box(page, ".drp-activity")):
        assert box["scrollWidth"] == box["clientWidth"]
    width = page.eval_on_selector("svg.drp-chart", "e => e.getBoundingClientRect().width")
    assert round(width) == charts.WIDTH
    sizes = svg_text_sizes(page, "svg.drp-chart")
    assert {round(s["px"]) for s in sizes} <= {charts.FONT_PX, 13}


# How far a scroll box fades out at its left and right edges (CSS px; 0: no fade).
CLIPPED_EDGES = """e => {
    const style = getComputedStyle(e);
    return [style.getPropertyValue("--drp-clip-left"), style.getPropertyValue("--drp-clip-right")]
        .map(parseFloat);
}"""
# The viewport box of the first <text> of the chart that says ``label``.
CHART_LABEL_BOX = """(svg, label) => {
    const text = [...svg.querySelectorAll("text")].find(t => t.textContent === label);
    const box = text.getBoundingClientRect();
    return {left: box.left, right: box.right};
}"""


def clipped_edges(page: Page, selector: str) -> tuple[float, float]:
    """How far the scroll box ``selector`` fades out at its (left, right) edge."""
    left, right = page.eval_on_selector(selector, CLIPPED_EDGES)
    return left, right


def box_of(page: Page, selector: str) -> dict[str, float]:
    box: dict[str, float] = page.eval_on_selector(
        selector,
        "e => { const b = e.getBoundingClientRect(); return {left: b.left, right: b.right}; }",
    )
    return box


@pytest.mark.django_db(transaction=True)
def test_at_420_px_the_chart_opens_at_now_and_clipped_tables_fade_where_they_clip(
    settings: Any, redis_url: str, live_server: Any, admin_page: Page, tmp_path: Path
) -> None:
    """On a phone the chart opens scrolled to "now", where its data is, and
    a table wider than the screen fades out at the edge where it is clipped
    (the right one, then the left one once scrolled to its end); a table or
    a chart that fits does not fade."""
    settings.DJANGO_REDIS_POOL = {
        "CONNECTION": {"URL": redis_url},
        "POOLS": {"printers": {"RESOURCES": ["printer-1", "printer-2"], "LEASE_TIMEOUT": 300}},
    }
    call_command("pool_sync", verbosity=0)
    printers = django_redis_pool.get_pool("printers")
    holder = request_holder("web-1.example.internal:4711:0123456789ab", "GET", "/print/", None)
    assert printers.acquire(holder=holder) is not None  # the minute "now" has a grant
    assert counts.flush() == 0
    page = admin_page
    page.set_viewport_size(NARROW)
    base = f"{live_server.url}/admin/django_redis_pool/dashboard"

    page.goto(f"{base}/printers/")
    chart = box_of(page, ".drp-activity")
    assert chart["right"] <= NARROW["width"]
    now = page.eval_on_selector("svg.drp-chart", CHART_LABEL_BOX, "now")
    assert chart["left"] <= now["left"] and now["right"] <= chart["right"], "'now' is off-screen"
    first = page.eval_on_selector("svg.drp-chart", CHART_LABEL_BOX, "59 min ago")
    assert first["left"] < chart["left"], "the chart opened at its left end"
    bar = page.locator("svg.drp-chart .drp-granted rect").last.bounding_box()
    assert bar is not None and chart["left"] <= bar["x"] <= chart["right"]  # the grant
    assert clipped_edges(page, ".drp-activity")[0] > 0  # more to see on the left...
    assert clipped_edges(page, ".drp-activity")[1] == 0  # ...and none on the right
    screenshot(page, shots_dir(tmp_path) / "admin-420-chart.png")

    # The holder of a request: its process, then its request, each once.
    row = page.locator("#holders tr[data-resource=printer-1]")
    expect(row.locator("td.drp-holder")).to_have_text("web-1.example.internal:4711:0123456789ab")
    expect(row.locator("td.drp-request")).to_have_text("GET /print/ · anonymous")

    # The holders table is clipped on the right: it fades there, until scrolled to its end.
    holders = scroll_box(page, "#holders")
    assert holders["scrollWidth"] > holders["clientWidth"], "the table fits: nothing to test"
    left, right = clipped_edges(page, "#holders")
    assert left == 0 and right > 0
    page.locator("#holders").evaluate("e => { e.scrollLeft = e.scrollWidth; }")
    page.wait_for_function(f"() => ({CLIPPED_EDGES})(document.querySelector('#holders'))[1] === 0")
    assert clipped_edges(page, "#holders")[0] > 0  # now the left edge clips it
    # The overview's table: its Health and Last hour columns are clipped.
    page.goto(f"{base}/")
    primitives = scroll_box(page, "#primitives")
    assert primitives["scrollWidth"] > primitives["clientWidth"]
    assert clipped_edges(page, "#primitives") == (0, pytest.approx(right))
    screenshot(page, shots_dir(tmp_path) / "admin-420-overview.png")

    # At a desktop's width nothing is clipped: no fade, and the chart sits on the left.
    page.set_viewport_size(VIEWPORT)
    page.goto(f"{base}/printers/")
    for selector in ("#holders", "#available", "#waiters", ".drp-activity"):
        box = scroll_box(page, selector)
        assert box["scrollWidth"] == box["clientWidth"], selector
        assert clipped_edges(page, selector) == (0, 0), selector
    chart, svg = box_of(page, ".drp-activity"), box_of(page, "svg.drp-chart")
    assert svg["left"] == chart["left"] and svg["right"] - svg["left"] == charts.WIDTH
    page.goto(f"{base}/")
    assert clipped_edges(page, "#primitives") == (0, 0)
