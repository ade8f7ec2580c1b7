"""Real headless-browser tests: Playwright driving Debian's Chromium.

Use it from a test module of browser tests with ``pytest_plugins = ["tests.support.browser"]``
and pytest-django's ``live_server`` (which needs ``transactional_db``).

Fixtures:

``chromium_path`` (session)  ``$CHROMIUM`` (``scripts/dev.py test`` sets it), else
                             ``/usr/bin/chromium``; fails (never skips) if missing.
``browser`` (module)         a headless Chromium, one per test module.
``page``                     a fresh context (1280x800) and page; 15 s default timeout.

Helpers: :func:`admin_login` and :func:`screenshot` (which keeps the docs'
images from falling behind: ``tests/support/screenshots.py``); for narrow screens
(:data:`NARROW`, a phone's 420 px), :func:`page_overflow`,
:func:`scroll_box` and :func:`svg_text_sizes`.

Playwright's own browser download (``playwright install``) is never used: the
browser is Debian's ``chromium`` launched through ``executable_path``, with the
flags that keep it from dialing out (the network is closed here and in CI).

The event-loop gotcha. Playwright's sync API keeps an asyncio loop running in the
test thread for as long as Playwright is started (it runs the loop in a greenlet
and switches back to the test). While it is, the test thread counts as "inside an
event loop": Django's ORM raises ``SynchronousOnlyOperation`` ("You cannot call
this from an async context - use a thread or sync_to_async."), ``asyncio.run()``
and ``async_to_sync`` refuse to run. Hence:

* ``browser`` sets ``DJANGO_ALLOW_ASYNC_UNSAFE=true`` exactly while Playwright is
  started and restores the previous value after it has stopped, so browser tests
  can use the ORM in the test thread (safe: nothing else runs on that loop but
  Playwright's own I/O, and the live server has its own thread).
* ``browser`` is module-scoped, not session-scoped: a session-long Playwright
  would leave its loop running under every later test in the run. Keep browser
  tests in modules of their own; a non-browser test that runs while a browser
  module's Playwright is still started fails at setup with an explanation.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, sync_playwright

from tests.support import screenshots

DEFAULT_CHROMIUM = "/usr/bin/chromium"
DEFAULT_TIMEOUT_MS = 15_000
VIEWPORT = {"width": 1280, "height": 800}
#: A phone's viewport: ``page.set_viewport_size(NARROW)``.
NARROW = {"width": 420, "height": 800}
CHROMIUM_ARGS = [
    "--no-sandbox",  # root in CI, and containers lack the user namespaces it needs
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    # Without these Chromium dials out at start-up, and the closed network refuses it.
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

_started = {"playwright": False}  # set while a ``browser`` fixture has Playwright started


@pytest.fixture(scope="session")
def chromium_path() -> str:
    """The Chromium executable: ``$CHROMIUM`` or ``/usr/bin/chromium``."""
    configured = os.environ.get("CHROMIUM") or DEFAULT_CHROMIUM
    found = shutil.which(configured)
    if found is None:
        pytest.fail(
            f"the browser tests need Chromium: {configured!r} is not an executable file. "
            "Run them with `python3 scripts/dev.py test` (it installs Debian's chromium "
            "when run as root), or `apt-get install chromium`, or set CHROMIUM=/path/to/it.",
            pytrace=False,
        )
    return found


@pytest.fixture(scope="module")
def browser(chromium_path: str) -> Iterator[Browser]:
    """A headless Chromium for one test module (see the module docstring for why not longer)."""
    with pytest.MonkeyPatch.context() as patch:
        # Playwright's loop runs in this thread from here until it stops (module
        # docstring): let the ORM run here meanwhile, and only meanwhile.
        patch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
        with sync_playwright() as playwright:
            _started["playwright"] = True
            try:
                launched = playwright.chromium.launch(
                    executable_path=chromium_path, headless=True, args=CHROMIUM_ARGS
                )
                try:
                    yield launched
                finally:
                    launched.close()
            finally:
                _started["playwright"] = False


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    """A page in a fresh browser context (no cookies shared between tests)."""
    context = browser.new_context(viewport=VIEWPORT)
    context.set_default_timeout(DEFAULT_TIMEOUT_MS)
    try:
        yield context.new_page()
    finally:
        context.close()


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Refuse to run a non-browser test under a still-started Playwright's event loop."""
    if _started["playwright"] and "browser" not in getattr(item, "fixturenames", ()):
        pytest.fail(
            f"{item.nodeid} runs while this module's Playwright is started, i.e. inside its "
            "asyncio loop (ORM, asyncio.run and async_to_sync would misbehave): keep browser "
            "tests in modules of their own (see tests/support/browser.py)",
            pytrace=False,
        )


def admin_login(page: Page, live_server_url: str, username: str, password: str) -> None:
    """Log in through the Django admin's login form and wait for the admin index."""
    base = str(live_server_url).rstrip("/")
    page.goto(f"{base}/admin/login/?next=/admin/")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    with page.expect_navigation():
        page.click("#login-form [type=submit]")
    if page.url != f"{base}/admin/":
        error = page.locator(".errornote, .errorlist").all_inner_texts()
        raise AssertionError(f"admin login as {username!r} failed at {page.url}: {error}")
    page.wait_for_selector("body.dashboard")


def screenshot(page: Page, path: str | os.PathLike[str]) -> Path:
    """Save a full-page PNG of ``page`` at ``path`` (parent folders created); return it.

    It keeps the docs' images from falling behind (``tests/support/screenshots.py``):
    saved into ``$DRP_SCREENSHOTS`` (only an image the docs show), the page's
    fingerprint is recorded in that folder's manifest; with ``DRP_SCREENSHOTS``
    unset, a page whose name is an image of ``docs/img`` must be what that
    image's fingerprint says, or the test fails, saying to take it again with
    ``DRP_SCREENSHOTS=docs/img``."""
    target = Path(path)
    into = os.environ.get(screenshots.ENV)
    recording = bool(into) and target.resolve().parent == Path(str(into)).resolve()
    if recording and target.name not in screenshots.shown_by_docs():
        recording = False  # (no page shows it: not saved among the docs' images)
        target = Path(tempfile.mkdtemp(prefix="drp-shot-")) / target.name
    target.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(target), full_page=True)
    shown = screenshots.normalised(page.evaluate(screenshots.FINGERPRINT_JS))
    if recording:
        screenshots.record(target, shown)
    elif not into and (stale := screenshots.check(target.name, shown)) is not None:
        pytest.fail(stale, pytrace=False)
    return target


def page_overflow(page: Page) -> int:
    """How many CSS px the page is wider than the viewport (0: it fits, no
    sideways scrolling of the page itself)."""
    return int(page.evaluate("() => document.documentElement.scrollWidth - window.innerWidth"))


_SCROLL_BOX = """e => {
    const style = getComputedStyle(e);
    const box = {scrollWidth: e.scrollWidth, clientWidth: e.clientWidth,
                 overflowX: style.overflowX, right: e.getBoundingClientRect().right};
    e.scrollLeft = e.scrollWidth;  // as far right as it goes
    box.scrolledTo = e.scrollLeft;
    e.scrollLeft = 0;
    return box;
}"""


def scroll_box(page: Page, selector: str) -> dict[str, Any]:
    """How the element ``selector`` scrolls sideways: its ``scrollWidth`` and
    ``clientWidth``, its computed ``overflowX``, its right edge in the
    viewport, and ``scrolledTo``: how far it scrolled when asked to go to its
    end (then back to 0)."""
    box: dict[str, Any] = page.eval_on_selector(selector, _SCROLL_BOX)
    return box


_SVG_TEXT_SIZES = """svgs => svgs.flatMap(svg => [...svg.querySelectorAll("text")].map(t => ({
    text: t.textContent,
    // CSS px per user unit as drawn (the SVG is scaled to its box), times the font size
    px: t.getScreenCTM().a * parseFloat(getComputedStyle(t).fontSize),
    height: t.getBoundingClientRect().height,
})))"""


def svg_text_sizes(page: Page, selector: str) -> list[dict[str, Any]]:
    """Every ``<text>`` of the SVGs matching ``selector`` as drawn: its text,
    its font size in CSS px (computed size times the SVG's scale), and the
    height of its box."""
    sizes: list[dict[str, Any]] = page.eval_on_selector_all(selector, _SVG_TEXT_SIZES)
    return sizes
