"""The example project's guided tour in a real browser, started as README command (a).

``python3 scripts/dev.py example 127.0.0.1:PORT`` runs exactly as a new user runs
it (an embedded Redis because ``REDIS_URL`` is unset, ``migrate``, ``pool_sync``,
the demo superuser, a ``pool_worker``, ``runserver``), except that its SQLite file
goes to a temporary folder (``EXAMPLE_DB``). Headless Chromium then does what
every "Try it" line of the home page says (``TRY_IT`` names the test of each):
walks every demo page, starts a task and watches its progress in place, builds
a long report and finds its slot in the admin, runs two imports at once, fetches
as two visitors at once to see each keep its proxy, reuses a pooled client,
exhausts the printers to see the 503 page (and the holds' expiry), opens every
primitive in the admin as the printed user (its times in UTC), spends that
user's burst of searches and resets it in the admin; no page gets a 404 (the
favicon included), and Ctrl-C stops everything.

The tests of this module run in order and share the one example (and browser).
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.support.browser import VIEWPORT, admin_login, screenshot
from tests.support.waiting import wait_for

pytest_plugins = ["tests.support.browser"]
# (one process runs them all: they share one example project)
pytestmark = [pytest.mark.release, pytest.mark.xdist_group("example-tour")]

ROOT = Path(__file__).resolve().parents[2]
#: The example's primitives (example_project/settings.py): each one has a stop
#: of the tour or is linked from one, and opens in the admin.
PRIMITIVES = {
    "printers",
    "reports",
    "import",
    "proxies",
    "default",
    "http-clients",
    "http-clients-everywhere",
    "search",
}
#: What each demo page shows once it has done its work.
DEMOS = {
    "printers": "available: 3, leased: 0, total: 3",
    "reports": "slots were in use",
    "import": "Imported with fence",
    "proxies": "Fetched for ann through proxy-fast",
    "http-clients": "client #1 fetched /status",
    "search": "1 search left now",
}
#: Each stop's "Try it" line, and the test that does what it says.
TRY_IT = {
    "printers": (
        "See who holds which printer, print, or occupy all three and watch the next "
        "request get the 503 page.",
        "test_exhausting_the_printers_shows_the_503_page",
    ),
    "reports": (
        "Build a report (it takes a second); then build a long one with the button "
        "there (30 s) and, while it runs, open the semaphore in the admin: its slot is "
        "among the holders, with the request that holds it.",
        "test_a_long_report_holds_its_slot_in_the_admin_while_it_runs",
    ),
    "import": (
        "Run an import; then run two at once with the button there: the second, "
        "started while the first holds the lock, is refused.",
        "test_of_two_imports_at_once_the_second_is_refused",
    ),
    "proxies": (
        "Fetch as ann and bob at once: while ann's fetch holds its proxy, bob's gets "
        "another one. Then fetch as each alone: each gets its own proxy again.",
        "test_two_visitors_fetching_at_once_each_keep_their_proxy",
    ),
    "default": (
        "Start a task with the form and watch its progress bar fill until its result.",
        "test_a_task_shows_its_progress_in_place_until_its_result",
    ),
    "http-clients": (
        "Borrow a client, then reload the page: the second request reuses the first client.",
        "test_a_second_request_reuses_the_first_pooled_client",
    ),
    "search": (
        "Search, then reload at once: the third search in quick succession gets the "
        "429 page, which says to retry in 12 s; see the search's row in the admin, and "
        "reset it there.",
        "test_the_third_search_in_quick_succession_gets_the_429_page_and_the_admin_resets_it",
    ),
}
#: A request the example's server answered 404, as runserver logs it.
NOT_FOUND = re.compile(r'"(GET|POST|HEAD) (\S+) HTTP/[\d.]+" 404 ')
START_TIMEOUT = 180.0  # a first run installs the embedded extra into .venv
STOP_TIMEOUT = 30.0


@dataclass
class Example:
    """The running ``scripts/dev.py example``: its process and what it printed."""

    process: subprocess.Popen[str]
    url: str
    output: list[str] = field(default_factory=list)

    def printed(self) -> str:
        return "".join(self.output)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return bool(response.status == 200)
    except (OSError, urllib.error.URLError):
        return False


def _descendants(pid: int) -> set[int]:
    """Every live process below ``pid`` (from /proc)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _interrupt_signal_default() -> None:
    # As in a terminal: a test run started as a background job ignores SIGINT,
    # which its children would inherit.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Example]:
    """README command (a), on a free port, until the module ends."""
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k not in {"REDIS_URL", "DJANGO_SETTINGS_MODULE"}}
    env["EXAMPLE_DB"] = str(tmp_path_factory.mktemp("example") / "db.sqlite3")
    env["PYTHONUNBUFFERED"] = "1"
    process = subprocess.Popen(
        [sys.executable, "scripts/dev.py", "example", f"127.0.0.1:{port}"],
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its own process group, as a terminal's job
        preexec_fn=_interrupt_signal_default,
    )
    example = Example(process, f"http://127.0.0.1:{port}")
    assert process.stdout is not None
    reader = threading.Thread(target=lambda: example.output.extend(process.stdout), daemon=True)
    reader.start()
    try:
        wait_for(
            lambda: _answers(example.url + "/") or process.poll() is not None,
            timeout=START_TIMEOUT,
            what="the example to serve its home page",
        )
        assert process.poll() is None, f"the example exited:\n{example.printed()}"
        yield example
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        reader.join(5)


@pytest.fixture(scope="module")
def tab(browser: Browser) -> Iterator[Page]:
    """One browser tab for the whole tour (its admin login carries over)."""
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    context.set_default_timeout(20_000)
    try:
        yield context.new_page()
    finally:
        context.close()


@pytest.fixture
def fresh_tab(browser: Browser) -> Iterator[Page]:
    """A tab of a browser context of its own (no cookies, no cache), for one test."""
    context = browser.new_context(viewport=VIEWPORT)
    context.set_default_timeout(20_000)
    try:
        yield context.new_page()
    finally:
        context.close()


def _log_in_here(page: Page, username: str = "admin", password: str = "admin") -> None:
    """Fill the admin's login form this page shows, and wait for where it leads."""
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    with page.expect_navigation():
        page.click("#login-form [type=submit]")


def test_the_example_prints_how_to_reach_it_and_its_admin_user(
    example: Example, browser: Browser
) -> None:
    printed = example.printed()
    assert "started an embedded redis-server" in printed
    assert "manage.py migrate" in printed and "manage.py pool_sync" in printed
    assert "printers: 3 added" in printed
    assert "user admin, password admin" in printed
    assert "manage.py pool_worker" in printed, "the example has a queue: a worker runs"
    wait_for(
        lambda: "queue default: 1 handler: count" in example.printed(),
        timeout=30,
        what="the worker to say what it runs",
    )
    assert f"serving the example project at {example.url}/" in printed


def test_the_home_page_explains_every_primitive_and_links_its_demo_and_admin_page(
    example: Example, tab: Page, tmp_path: Path
) -> None:
    tab.goto(example.url + "/")
    expect(tab.locator("h1")).to_have_text("django-redis-pool: a guided tour")
    stops = tab.locator("section[id^=tour-]")
    names = {section.get_attribute("id").removeprefix("tour-") for section in stops.all()}
    linked = {
        re.sub(r"^.*/dashboard/([^/]+)/$", r"\1", link.get_attribute("href"))
        for link in tab.locator("section a.admin").all()
    }
    assert names | linked == PRIMITIVES
    assert linked == PRIMITIVES, "every primitive has a link to its admin page"
    for section in stops.all():
        assert section.locator("a.demo").count() == 1
        assert len(section.locator("p").first.inner_text()) > 80, "each stop explains"
    # Every "Try it" line is one that a test of this module does.
    said = {name: tab.locator(f"#tour-{name} .try-it").inner_text() for name in names}
    assert said == {name: line for name, (line, _) in TRY_IT.items()}
    assert {test for _, test in TRY_IT.values()} <= set(globals()), "a test for each"
    screenshot(tab, Path(os.environ.get("DRP_SCREENSHOTS") or tmp_path) / "example-tour.png")


def test_every_demo_page_of_the_tour_works(example: Example, tab: Page) -> None:
    for name, shows in DEMOS.items():
        tab.goto(example.url + "/")
        with tab.expect_navigation():
            tab.click(f"#tour-{name} a.demo")
        expect(tab.locator("body")).to_contain_text(shows)
    tab.goto(example.url + "/")
    with tab.expect_navigation():
        tab.click("#tour-default a.demo")
    assert tab.url == example.url + "/task/", "a GET shows the form, and starts nothing"
    expect(tab.locator("#recent")).to_contain_text("None yet")


def test_a_task_shows_its_progress_in_place_until_its_result(example: Example, tab: Page) -> None:
    """The form starts a task (a POST); its page shows "queued" or "running"
    (never "0 of 0"), then its progress and its result, updated in place: no
    reload, no navigation. The form's page lists it then."""
    tab.goto(example.url + "/task/")
    tab.fill("input[name=to]", "25")  # (5 s: a step every 0.2 s)
    with tab.expect_navigation() as navigation:
        tab.click("#start")
    response = navigation.value
    assert response is not None and response.request.method == "GET"
    assert response.request.redirected_from is not None
    assert response.request.redirected_from.method == "POST"
    assert response.headers.get("refresh") is None, "the page does not reload itself"
    assert re.search(r"/task/[0-9a-f-]+/$", tab.url), tab.url
    task_url = tab.url
    navigated: list[str] = []
    tab.on("framenavigated", lambda frame: navigated.append(frame.url))
    tab.evaluate("() => { window.samePage = true; }")
    assert tab.locator("#status").inner_text() in ("queued", "running")
    assert "0 of 0" not in tab.locator("body").inner_text()
    # Part of the way: the bar and the count, as the worker reports them.
    midway = re.compile(r"^([1-9]|1\d|2[0-4]) of 25$")
    expect(tab.locator("#count")).to_have_text(midway, timeout=30_000)
    expect(tab.locator("#status")).to_have_text("running")
    assert 0 < float(tab.locator("#progress").evaluate("bar => bar.value")) < 25
    expect(tab.locator("#status")).to_have_text("done", timeout=30_000)
    expect(tab.locator("#count")).to_have_text("25 of 25")
    expect(tab.locator("#result")).to_have_text('result: {"counted": 25}')
    assert tab.locator("#progress").evaluate("bar => [bar.value, bar.max]") == [25, 25]
    assert tab.evaluate("() => window.samePage") is True and navigated == [], navigated
    tab.goto(example.url + "/task/")
    link = tab.locator(f"a[href='{task_url.removeprefix(example.url)}']")
    cells = tab.locator("#recent tr", has=link).locator("td")
    expect(cells.nth(1)).to_have_text("done")
    expect(cells.nth(2)).to_have_text('{"counted": 25}')


def _reload_until_shown(page: Page, selector: str, what: str) -> None:
    """Reload ``page`` until ``selector`` matches (an admin page shows what it
    read when it loaded)."""

    def shown() -> bool:
        if page.locator(selector).count():
            return True
        page.reload()
        return False

    wait_for(shown, timeout=20, what=what)


def test_a_long_report_holds_its_slot_in_the_admin_while_it_runs(
    example: Example, fresh_tab: Page
) -> None:
    page = fresh_tab
    page.goto(example.url + "/")
    with page.expect_navigation():
        page.click("#tour-reports a.demo")
    expect(page.locator("#built")).to_contain_text("slots were in use")  # (a 1 s report)
    page.click("#long-report")
    expect(page.locator("#long-report-state")).to_have_text("building (30 s)")
    # The admin in a tab of its own (this page stays, to say when the report is
    # built); a new visitor logs in first.
    with page.context.expect_page() as opened:
        page.click("#report-admin")
    admin = opened.value
    admin.wait_for_load_state()
    _log_in_here(admin)
    expect(admin.locator("#content h1")).to_contain_text("reports")
    _reload_until_shown(admin, "#holders tbody tr:has-text('/report/')", "the report's slot")
    expect(page.locator("#long-report-state")).to_have_text("building (30 s)")  # (still)


def test_of_two_imports_at_once_the_second_is_refused(example: Example, tab: Page) -> None:
    tab.goto(example.url + "/")
    with tab.expect_navigation():
        tab.click("#tour-import a.demo")
    expect(tab.locator("#imported")).to_contain_text("Imported with fence")
    tab.click("#two-imports")
    results = tab.locator(".import-result")
    expect(results).to_have_count(2)
    first = tab.locator(".import-result", has_text="The first:")
    second = tab.locator(".import-result", has_text="The second")
    expect(first).to_have_attribute("data-status", "200")
    expect(first).to_contain_text("Imported with fence")
    expect(second).to_have_attribute("data-status", "503")
    expect(second).to_contain_text("An import is already running")


def _proxy_of(fetched: str) -> str:
    """The proxy in "Fetched for ann through proxy-fast (fence ...)"."""
    match = re.search(r"Fetched for (\w+) through (proxy-\w+)", fetched)
    assert match is not None, fetched
    return match.group(2)


def test_two_visitors_fetching_at_once_each_keep_their_proxy(example: Example, tab: Page) -> None:
    tab.goto(example.url + "/fetch/?visitor=ann")
    tab.click("#together")
    expect(tab.locator("#fetch-alone")).to_be_visible()
    got = {}
    for text in tab.locator(".together-result").all_inner_texts():
        got[text.split()[2]] = _proxy_of(text)
    assert set(got) == {"ann", "bob"} and got["ann"] != got["bob"], got
    expect(tab.locator("#fetched")).to_contain_text("Fetched for ann")  # (the page stayed)
    bound = f"Soft bindings now: ann → {got['ann']}, bob → {got['bob']}."
    expect(tab.locator("#bindings")).to_have_text(bound)  # (as the two fetches left them)
    # Alone now, each gets the proxy it is bound to, though another is free.
    for visitor in ("bob", "ann", "bob"):
        with tab.expect_navigation():
            tab.click(f"#alone a[href='?visitor={visitor}']")
        assert _proxy_of(tab.locator("#fetched").inner_text()) == got[visitor], (visitor, got)
        expect(tab.locator("#bindings")).to_have_text(bound)


def test_a_second_request_reuses_the_first_pooled_client(example: Example, tab: Page) -> None:
    said = re.compile(r"^client #(\d+) fetched /status \(its request #(\d+)\)$")
    tab.goto(example.url + "/")
    with tab.expect_navigation():
        tab.click("#tour-http-clients a.demo")
    first = said.match(tab.locator("#client").inner_text())
    assert first is not None
    tab.reload()
    again = said.match(tab.locator("#client").inner_text())
    assert again is not None
    assert again.group(1) == first.group(1), "the same client"
    assert int(again.group(2)) == int(first.group(2)) + 1, "its next request"


def test_exhausting_the_printers_shows_the_503_page(example: Example, tab: Page) -> None:
    tab.goto(example.url + "/printers/")
    with tab.expect_navigation():
        tab.click("a[href='/print/']")
    expect(tab.locator("body")).to_contain_text("Printed on printer-")
    tab.goto(example.url + "/printers/")
    tab.click("#occupy")
    expect(tab.locator("#print-now")).to_be_visible()

    def all_printers_held() -> bool:
        with urllib.request.urlopen(example.url + "/printers/", timeout=5) as response:
            return b"available: 0, leased: 3" in response.read()

    wait_for(all_printers_held, timeout=10, what="the three long print jobs to hold")
    started = time.monotonic()
    with tab.expect_navigation() as navigation:
        tab.click("#print-now")
    response = navigation.value
    assert response is not None and response.status == 503
    assert response.headers.get("retry-after", "").isdigit()
    expect(tab.locator("h1")).to_have_text("All printers are busy")
    assert time.monotonic() - started >= 2, "it waited the view's timeout=2 first"
    # Who holds which printer, and each hold's expiry: a time of TIME_ZONE
    # (UTC), and how far off it is.
    tab.goto(example.url + "/printers/")
    printers = tab.locator("table tr td:nth-child(1)").all_inner_texts()
    assert sorted(printers) == ["printer-1", "printer-2", "printer-3"], printers
    expiry = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC, in \d{1,2} s$")
    cells = tab.locator("table tr td:nth-child(4)")
    expect(cells).to_have_count(3)
    for cell in cells.all():
        expect(cell).to_have_text(expiry)
    for holder in tab.locator("table tr td:nth-child(2)").all_inner_texts():
        assert "/print/" in holder, holder


def test_every_primitive_opens_in_the_admin_as_the_printed_user(
    example: Example, tab: Page
) -> None:
    admin_login(tab, example.url, "admin", "admin")
    tab.goto(example.url + "/admin/django_redis_pool/dashboard/")
    for name in sorted(PRIMITIVES):
        expect(tab.locator("#content-main")).to_contain_text(name)
    for name in sorted(PRIMITIVES):
        tab.goto(example.url + "/")
        with tab.expect_navigation() as navigation:
            tab.click(f"section a.admin[href$='/dashboard/{name}/']")
        assert navigation.value is not None and navigation.value.status == 200
        expect(tab.locator("#content h1")).to_contain_text(name)
        assert tab.locator(".errornote").count() == 0, tab.locator(".errornote").all_inner_texts()
        if name == "printers":  # (TIME_ZONE: UTC, not Django's default America/Chicago)
            expect(tab.locator("#content-main")).to_contain_text(re.compile(r"\d\d:\d\d:\d\d UTC"))


def test_the_third_search_in_quick_succession_gets_the_429_page_and_the_admin_resets_it(
    example: Example, fresh_tab: Page
) -> None:
    """As the tour says: a burst of 2, then the 429 page until a spent search is
    back; the admin lists the visitor's key and resets it. (As the admin user,
    in a context of its own: a key that nothing spent.)"""
    tab = fresh_tab
    admin_login(tab, example.url, "admin", "admin")
    statuses = []
    for _ in range(3):
        response = tab.goto(example.url + "/search/")
        assert response is not None
        statuses.append(response.status)
    assert statuses == [200, 200, 429], statuses
    assert response.headers["retry-after"] in ("11", "12"), response.headers
    expect(tab.locator("h1")).to_have_text("Too many searches: slow down")
    expect(tab.locator("body")).to_contain_text(
        f"try again in {response.headers['retry-after']} s, when a spent one is back"
    )
    # The search's row in the admin: this visitor's key, limited; reset it there.
    tab.goto(example.url + "/")
    with tab.expect_navigation():
        tab.click("section a.admin[href$='/dashboard/search/']")
    limited = tab.locator("#keys tbody tr.drp-limited")
    expect(limited).to_have_count(1)
    expect(limited.locator("td").nth(1)).to_have_text("0")
    with tab.expect_navigation():
        limited.locator("a", has_text="Reset").click()
    with tab.expect_navigation():
        tab.locator("#confirm-form [type=submit]").click()
    expect(tab.locator("#keys tbody tr.drp-limited")).to_have_count(0)
    response = tab.goto(example.url + "/search/")
    assert response is not None and response.status == 200
    expect(tab.locator("#left")).to_have_text("1 search left now.")


def test_no_page_of_the_tour_gets_a_404(example: Example, fresh_tab: Page) -> None:
    """Every page the tour links (its demos, the navigation, each primitive in
    the admin) and what each loads, the browser's own /favicon.ico included:
    nothing the example's server answered in this module's tests was a 404,
    and no page logged one."""
    page = fresh_tab
    logged: list[str] = []
    page.on("console", lambda message: logged.append(message.text))
    since = len(example.printed())
    page.goto(example.url + "/")
    wait_for(
        lambda: '"GET /favicon.ico HTTP/1.1" 200 ' in example.printed()[since:],
        timeout=20,
        what="the browser to fetch the site's icon",
    )
    links = page.eval_on_selector_all(
        "section a.demo, section a.admin, nav a", "links => links.map(a => a.href)"
    )
    admin_login(page, example.url, "admin", "admin")
    for url in dict.fromkeys(links):
        response = page.goto(url)  # (a print may get the 503 page: the printers are busy)
        assert response is not None and response.status != 404, url
        page.wait_for_load_state("load")
    assert [text for text in logged if "404" in text] == []
    assert NOT_FOUND.findall(example.printed()) == []


def test_ctrl_c_stops_the_server_the_worker_and_the_embedded_redis(
    example: Example, browser: Browser
) -> None:
    processes = _descendants(example.process.pid)
    commands = [Path(f"/proc/{pid}/cmdline").read_bytes() for pid in processes]
    for part in (b"runserver", b"pool_worker", b"redis-server"):
        assert sum(part in command for command in commands) == 1, (part, commands)
    os.killpg(example.process.pid, signal.SIGINT)  # what Ctrl-C sends to the job
    example.process.wait(STOP_TIMEOUT)
    wait_for(lambda: not any(map(_alive, processes)), timeout=5, what="every child to end")
    assert "embedded redis-server stopped" in example.printed()
    assert not _answers(example.url + "/")
