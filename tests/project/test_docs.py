"""The documentation site: it builds without a warning, and its reference pages
say what the code does.

* ``mkdocs build --strict`` of ``mkdocs.yml`` (every link, anchor and
  ``::: django_redis_pool...`` API block resolves; a warning fails the build);
* ``docs/settings.md`` lists every top-level key, every per-kind option, every
  ``CONNECTION`` key and every ``MIDDLEWARE`` rule key, with the code's default;
* ``docs/checks.md`` lists every check id the package can emit;
* ``docs/commands.md`` lists every option of every management command;
* ``docs/performance.md``'s tables are what ``benchmarks/results/`` renders;
* no page (nor the README) names the internal design documents ("seed 000");
* the home page links every page; a message or hint of the package points at
  the published site (:func:`django_redis_pool.exceptions.docs_url`, at a
  heading that exists), never at a path of the repository.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from django_redis_pool import conf, registry

pytestmark = pytest.mark.release

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
PACKAGE = ROOT / "django_redis_pool"


def test_mkdocs_build_strict(tmp_path: Path) -> None:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    elapsed = time.monotonic() - started
    output = result.stdout + result.stderr
    assert result.returncode == 0, f"mkdocs build --strict failed:\n{output}"
    warnings = [line for line in output.splitlines() if re.match(r"\s*(WARNING|ERROR)\b", line)]
    assert not warnings, "\n".join(warnings)
    assert (tmp_path / "index.html").is_file()
    assert (tmp_path / "api" / "index.html").is_file()
    print(f"mkdocs build --strict: {elapsed:.1f} s")


# ------------------------------------------------------------------ settings page


def _sections(text: str) -> dict[str, str]:
    """The page's ``## `` sections by heading."""
    parts = re.split(r"^## (.+)$", text, flags=re.M)
    return {parts[i].strip(): parts[i + 1] for i in range(1, len(parts), 2)}


def _section(text: str, key: str) -> str:
    """The section whose heading names ``key`` in backticks (or says it)."""
    for heading, body in _sections(text).items():
        if f"`{key}`" in heading or heading == key:
            return body
    raise AssertionError(f"docs/settings.md has no section for {key}")


def _rows(body: str) -> dict[str, str]:
    """``{key: default cell}`` of the tables in a section (first column a key)."""
    rows = {}
    for line in body.splitlines():
        m = re.match(r"\|\s*`([A-Z][A-Z0-9_]*)`\s*\|\s*(.+?)\s*\|", line)
        if m:
            rows[m.group(1)] = m.group(2)
    return rows


def _normalise(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return [_normalise(v) for v in value]
    if isinstance(value, dict):
        return {k: _normalise(v) for k, v in value.items()}
    return value


def _assert_default(where: str, cell: str, expected: Any, required: bool = False) -> None:
    text = cell.strip().strip("`")
    if required:
        assert text == "required", f"{where}: the page says {cell}, the code requires it"
        return
    try:
        stated = ast.literal_eval(text)
    except (ValueError, SyntaxError) as exc:
        raise AssertionError(f"{where}: default {cell} is not a Python literal") from exc
    assert _normalise(stated) == _normalise(expected), (
        f"{where}: the page says the default is {cell}, the code's is {expected!r}"
    )


SETTINGS = (DOCS / "settings.md").read_text()


def test_settings_page_lists_every_top_level_key_with_its_default() -> None:
    rows = _rows(_section(SETTINGS, "Top-level keys"))
    defaults = conf.valid_config({}, registry.KINDS, caches={})
    by_setting_key = registry.by_setting_key()
    for key in conf.top_level_keys(registry.KINDS):
        assert key in rows, f"docs/settings.md lacks the top-level key {key}"
        if key in by_setting_key:
            expected: Any = {}
        else:
            expected = getattr(defaults, key.lower())
            if key == "MIDDLEWARE":
                expected = list(expected)
        _assert_default(f"top-level {key}", rows[key], expected)


def test_settings_page_lists_every_option_of_every_kind_with_its_default() -> None:
    for kind in registry.all_kinds():
        rows = _rows(_section(SETTINGS, kind.setting_key))
        for key, option in kind.options.items():
            assert key in rows, f"docs/settings.md lacks {kind.setting_key} option {key}"
            _assert_default(
                f"{kind.setting_key}[...][{key!r}]",
                rows[key],
                option.default,
                required=key in kind.required,
            )
        extra = set(rows) - set(kind.options)
        assert not extra, f"docs/settings.md lists unknown {kind.setting_key} options: {extra}"


def test_settings_page_lists_every_connection_and_rule_key() -> None:
    connection = _rows(_section(SETTINGS, "CONNECTION"))
    for key in conf.CONNECTION_KEYS:
        assert key in connection, f"docs/settings.md lacks CONNECTION key {key}"
    assert connection["POOL_TIMEOUT"].strip("`") == f"{conf.DEFAULT_POOL_TIMEOUT:g}"
    _assert_default("CONNECTION URL", connection["URL"], conf.DEFAULT_CONNECTION["URL"])
    rules = _rows(_section(SETTINGS, "MIDDLEWARE"))
    for key in conf.RULE_KEYS:
        assert key in rules, f"docs/settings.md lacks MIDDLEWARE rule key {key}"
    assert set(rules) == set(conf.RULE_KEYS)
    _assert_default("rule PATH", rules["PATH"], None, required=True)
    _assert_default("rule RESOURCE", rules["RESOURCE"], None, required=True)
    _assert_default("rule STATUS", rules["STATUS"], None)


# -------------------------------------------------------------------- checks page


def _emitted_check_ids() -> set[str]:
    """Every check id the package's code can emit, read from the code alone (no
    docstring or comment counts): the ids in ``id=...`` arguments
    (``id=f"{conf.CHECK_PREFIX}.E099"``, ``id="django_redis_pool.E030"``) and the
    codes that findings are made with (``found.add("E018", ...)``,
    ``Finding("E099", ...)``; an ``OptionError``'s ``id="E039"``)."""
    ids: set[str] = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.Call):
                continue
            for keyword in node.keywords:
                if keyword.arg == "id":
                    for part in ast.walk(keyword.value):
                        if isinstance(part, ast.Constant) and isinstance(part.value, str):
                            ids.update(re.findall(r"\b([EW]\d\d\d)$", part.value))
            func, args = node.func, node.args
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if (
                name in ("add", "Finding")
                and args
                and isinstance(args[0], ast.Constant)
                and isinstance(args[0].value, str)
                and re.fullmatch(r"[EW]\d\d\d", args[0].value)
            ):
                ids.add(args[0].value)
    return ids


def _listed_on_checks_page() -> set[str]:
    page = (DOCS / "checks.md").read_text()
    return set(re.findall(r"^\|\s*`([EW]\d\d\d)`\s*\|", page, flags=re.M))


def test_checks_page_lists_every_check_id() -> None:
    """docs/checks.md is the one table of check ids: it lists every id the code
    can emit, and no other."""
    ids = _emitted_check_ids()
    # each form of emission is read: found.add, Finding(...), OptionError(id=...),
    # id=f"...", id="..."
    assert {"E001", "W002", "E099", "E030", "E023", "W003", "E039"} <= ids, sorted(ids)
    listed = _listed_on_checks_page()
    missing = sorted(ids - listed)
    assert not missing, f"docs/checks.md lacks the check ids {missing}"
    unknown = sorted(listed - ids)
    assert not unknown, f"docs/checks.md lists ids the code never emits: {unknown}"


def test_checks_page_gives_each_id_its_trigger_and_fix() -> None:
    page = (DOCS / "checks.md").read_text()
    rows = re.findall(r"^\|\s*`([EW]\d\d\d)`\s*\|(.*)\|\s*$", page, flags=re.M)
    assert len(rows) == len({check_id for check_id, _ in rows}), "each id has one row"
    for check_id, rest in rows:
        cells = [cell.strip() for cell in rest.split(" | ")]
        assert len(cells) == 2 and all(cells), f"{check_id}: its trigger and its fix"


# ------------------------------------------------------------------ commands page


def test_commands_page_lists_every_option_of_every_command() -> None:
    from django.core.management import load_command_class
    from django.core.management.base import BaseCommand

    common = {
        opt
        for action in BaseCommand().create_parser("manage.py", "x")._actions
        for opt in action.option_strings
    }
    page = (DOCS / "commands.md").read_text()
    commands = sorted(
        p.stem
        for p in (PACKAGE / "management" / "commands").glob("*.py")
        if not p.stem.startswith("_")
    )
    assert commands == ["pool_gc", "pool_status", "pool_sync", "pool_worker"]
    for name in commands:
        parser = load_command_class("django_redis_pool", name).create_parser("manage.py", name)
        options = {
            opt
            for action in parser._actions
            for opt in action.option_strings
            if opt.startswith("--")
        } - common
        assert options, name
        for option in sorted(options):
            assert re.search(rf"\|\s*(`{name}`)?\s*\|\s*`{re.escape(option)}\b", page), (
                f"docs/commands.md lacks {name}'s option {option}"
            )


# ------------------------------------------------------------ internal references


def test_no_page_names_the_internal_design_documents() -> None:
    pages = [*DOCS.glob("*.md"), ROOT / "README.md"]
    sources = list(PACKAGE.rglob("*.py"))
    for path in pages + sources:
        text = path.read_text()
        found = re.findall(r"\bseeds?\b[^\n]{0,20}", text, flags=re.I)
        assert not found, f"{path.relative_to(ROOT)} names internal design documents: {found}"


def test_the_performance_page_shows_what_the_results_files_render() -> None:
    """Every generated section of docs/performance.md is what ``python -m
    benchmarks report --write-docs`` renders from the committed results."""
    from benchmarks import results
    from benchmarks.suites import report

    found = [(path, results.read(path)) for path in sorted(results.RESULTS.glob("*.json"))]
    page = (DOCS / "performance.md").read_text()
    rendered, missing = report.write_sections(page, report.by_benchmark(found))
    assert missing == [], f"sections with no results: {missing}"
    assert rendered == page, (
        "docs/performance.md differs from its results: run python -m benchmarks report --write-docs"
    )


def test_the_home_page_links_every_page() -> None:
    linked = set(re.findall(r"\]\(([\w-]+\.md)(?:#[\w-]*)?\)", (DOCS / "index.md").read_text()))
    pages = {page.name for page in DOCS.glob("*.md")} - {"index.md"}
    assert pages - linked == set(), "docs/index.md does not link these pages"


def _anchors(page: Path) -> set[str]:
    """The anchors of ``page``'s headings, as MkDocs' toc makes them."""
    headings = re.findall(r"^#+ (.+)$", page.read_text(), re.M)
    return {re.sub(r"[-\s]+", "-", re.sub(r"[^\w\s-]", "", h.lower())).strip("-") for h in headings}


def test_messages_and_hints_point_at_the_published_docs_not_at_the_repository() -> None:
    repository_paths, links = [], []
    for module in PACKAGE.rglob("*.py"):
        tree = ast.parse(module.read_text())
        docstrings = {
            id(node.body[0].value)
            for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and node.body
            and isinstance(node.body[0], ast.Expr)
            and isinstance(node.body[0].value, ast.Constant)
        }
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and id(node) not in docstrings
                and re.search(r"docs/[\w-]+\.md", node.value)
            ):
                repository_paths.append(f"{module.relative_to(ROOT)}:{node.lineno}")
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "docs_url":
                links.append((module, [arg.value for arg in node.args]))  # type: ignore[attr-defined]
    assert repository_paths == [], "name the page with docs_url() instead"
    assert links, "no message links the docs: the test reads the calls wrongly"
    for module, (page, *section) in links:
        assert (DOCS / f"{page}.md").exists(), f"{module.name}: no page {page!r}"
        if section:
            assert section[0] in _anchors(DOCS / f"{page}.md"), f"{module.name}: {section[0]!r}"


# ------------------------------------------------------------------ screenshots


def test_every_screenshot_the_docs_show_has_a_fingerprint() -> None:
    """An image of docs/img that a page shows (but the benchmarks' plots) was
    taken by a test's ``screenshot()``, which recorded the page's fingerprint:
    the tests that take it fail once the page no longer matches it
    (tests/support/screenshots.py)."""
    from tests.support import screenshots

    shown = screenshots.shown_by_docs()
    assert "example-tour.png" in shown, shown
    recorded = screenshots.read_manifest(screenshots.DOCS_IMG)
    missing = sorted(
        name for name in shown if not name.startswith("bench-") and name not in recorded
    )
    assert missing == [], (
        f"docs/img/{screenshots.MANIFEST} has no fingerprint of {missing}: take them again "
        "with DRP_SCREENSHOTS=docs/img and the test module that takes them (docs/testing.md)"
    )
    for name in shown:
        assert (screenshots.DOCS_IMG / name).exists(), f"the docs show docs/img/{name}: missing"
    unshown = {image.name for image in screenshots.DOCS_IMG.glob("*.png")} - shown
    assert unshown == set(), "no page shows these images: delete them"


def test_a_fingerprint_makes_what_changes_between_runs_constant() -> None:
    from tests.support.screenshots import normalised

    assert normalised(
        "Task count\n\n  running   5 of 10 \nRead at 2026-11-29 03:23:27 UTC\n"
        "task 0a2409bc9c214ca4aca3df6ad3cecc9a, holder vm:11877:92a67b8e4f14\n"
    ) == [
        "Task count",
        "running 0 of 0",
        "Read at 0-0-0 0:0:0 UTC",
        "task <hex>, holder vm:0:<hex>",
    ]
    assert normalised("1.5 s, 1,024 keys; proxy-fast") == ["0 s, 0 keys; proxy-fast"]


def test_a_screenshot_whose_page_changed_fails_saying_how_to_take_it_again(
    tmp_path: Path,
) -> None:
    from tests.support import screenshots

    (tmp_path / "tour.png").write_bytes(b"png")
    assert screenshots.check("tour.png", ["A tour"], tmp_path) is not None, "no fingerprint"
    screenshots.record(tmp_path / "tour.png", ["A tour", "Try it: print"])
    assert screenshots.check("tour.png", ["A tour", "Try it: print"], tmp_path) is None
    stale = screenshots.check("tour.png", ["A tour", "Try it: print twice"], tmp_path)
    assert stale is not None and "DRP_SCREENSHOTS=docs/img" in stale, stale
    assert "-Try it: print\n+Try it: print twice" in stale, stale
    assert screenshots.check("other.png", ["Anything"], tmp_path) is None, "not in the docs"
    # Recording drops the fingerprints of images no longer there.
    (tmp_path / "gone.png").write_bytes(b"png")
    screenshots.record(tmp_path / "gone.png", ["Gone"])
    (tmp_path / "gone.png").unlink()
    screenshots.record(tmp_path / "tour.png", ["A tour"])
    assert screenshots.read_manifest(tmp_path) == {"tour.png": ["A tour"]}
