"""The docs' screenshots cannot fall behind the pages they show.

A screenshot (:func:`tests.support.browser.screenshot`) also takes the page's
*fingerprint*: the visible text of its content (the admin's ``#content``, else
the ``<body>``; not the charts' SVG text, which is data), with what changes
from run to run made constant (hex ids, numbers, hence times and dates; see
:func:`normalised`).

* ``DRP_SCREENSHOTS=docs/img`` set, a screenshot that the docs show is saved
  there, and its fingerprint goes into ``MANIFEST`` beside it
  (``docs/img/screenshots.json``: file name → the fingerprint's lines),
  :func:`record`; the others are not saved there.
* Unset, a test's screenshot goes to a temporary folder; if ``docs/img`` has
  an image of that name, the page's fingerprint must be the one its manifest
  records, else the test fails, saying how to take the image again
  (:func:`check`).

``tests/project/test_docs.py`` checks that every ``docs/img`` image the docs
show has a fingerprint (but the benchmark plots, ``bench-*.png``, which
``python -m benchmarks report --write-docs`` renders).
"""

from __future__ import annotations

import difflib
import fcntl
import json
import os
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: The docs' images, and the manifest of their fingerprints.
DOCS_IMG = ROOT / "docs" / "img"
MANIFEST = "screenshots.json"
#: Set to a folder: tests save their screenshots there, and record them.
ENV = "DRP_SCREENSHOTS"
#: A page's fingerprint: the visible text of the admin's content, else of the
#: body, but the charts' (an SVG's text is data: its values, and notes that
#: come and go with them, as "p95 < 5 ms").
FINGERPRINT_JS = """() => {
    const content = document.getElementById("content") || document.body;
    const charts = [...content.querySelectorAll("svg")].map(svg => [svg, svg.style.display]);
    charts.forEach(([svg]) => { svg.style.display = "none"; });
    try {
        return content.innerText;
    } finally {
        charts.forEach(([svg, display]) => { svg.style.display = display; });
    }
}"""

_VOLATILE = (
    # A hex id (a task's, a holder's): 8 or more hex digits, one at least a digit.
    (re.compile(r"\b(?=[0-9a-f]*[0-9])[0-9a-f]{8,}\b"), "<hex>"),
    # Any number (hence times, dates, counts, fences, durations).
    (re.compile(r"\d+(?:[.,]\d+)*"), "0"),
)


def normalised(text: str) -> list[str]:
    """The lines of a page's visible ``text``, their volatile parts made
    constant (a hex id: ``<hex>``, a number, a time or a date: its digits
    ``0``), spaces collapsed, blank lines dropped."""
    lines = []
    for line in text.splitlines():
        for pattern, constant in _VOLATILE:
            line = pattern.sub(constant, line)
        line = " ".join(line.split())
        if line:
            lines.append(line)
    return lines


def shown_by_docs() -> set[str]:
    """The names of the ``docs/img`` images that a page of the docs shows."""
    return {
        name
        for page in DOCS_IMG.parent.glob("*.md")
        for name in re.findall(r"\]\(img/([\w.-]+\.png)\)", page.read_text(encoding="utf-8"))
    }


def read_manifest(folder: Path) -> dict[str, list[str]]:
    """The fingerprints recorded in ``folder`` (empty if none are)."""
    try:
        text = (folder / MANIFEST).read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    recorded: dict[str, list[str]] = json.loads(text)
    return recorded


def record(image: Path, shown: list[str]) -> None:
    """Write ``shown``, the fingerprint of the page the screenshot ``image``
    shows, into the manifest of its folder (under a lock: two test processes
    may record at once); entries of images no longer there are dropped."""
    with open(image.parent / MANIFEST, "a+", encoding="utf-8") as manifest:
        fcntl.flock(manifest, fcntl.LOCK_EX)
        manifest.seek(0)
        text = manifest.read()
        recorded = json.loads(text) if text.strip() else {}
        recorded[image.name] = shown
        kept = {name: recorded[name] for name in sorted(recorded) if (image.parent / name).exists()}
        manifest.seek(0)
        manifest.truncate()
        manifest.write(json.dumps(kept, indent=1, ensure_ascii=False) + "\n")


def regenerate_command() -> str:
    """How to take the running test module's screenshots again."""
    current = os.environ.get("PYTEST_CURRENT_TEST", "")
    module = current.split("::", 1)[0] or "<the test module>"
    return f"DRP_SCREENSHOTS=docs/img .venv/bin/python -m pytest {module}"


def check(name: str, shown: list[str], folder: Path = DOCS_IMG) -> str | None:
    """Why the docs' image ``name`` (in ``folder``) no longer shows the page
    whose fingerprint is ``shown`` (None if it does, or if the docs have no
    image of that name)."""
    if not (folder / name).exists() or (folder == DOCS_IMG and name not in shown_by_docs()):
        return None
    recorded = read_manifest(folder).get(name)
    again = f"take it again: {regenerate_command()}"
    if recorded is None:
        return f"docs/img/{name} has no fingerprint in docs/img/{MANIFEST}: {again}"
    if recorded == shown:
        return None
    diff = "\n".join(
        list(difflib.unified_diff(recorded, shown, "as recorded", "as shown now", lineterm=""))[:40]
    )
    return f"docs/img/{name} shows an older page than this one: {again}\n{diff}"
