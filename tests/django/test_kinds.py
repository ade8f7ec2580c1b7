"""The kinds: the Django layer's core names none of them, and a kind added as
one module (``tests/support/gate_kind.py``) works in the settings, the checks, the
registry, the decorator, the commands and the admin without touching the core."""

from __future__ import annotations

import ast
import importlib
import io
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.test import RequestFactory

from django_redis_pool import dashboard, registry
from django_redis_pool.checks import check_settings
from django_redis_pool.dashboard import panels
from django_redis_pool.decorators import with_resource
from django_redis_pool.kinds import Kind
from django_redis_pool.kinds.leased import LeaseKind
from tests.support import gate_kind

PACKAGE = Path(__file__).resolve().parents[2] / "django_redis_pool"
#: English that happens to contain a kind's word: the package's own name, the
#: app's label ("Redis pools") and the package of the kinds.
ALLOWED = re.compile(r"django[-_]redis[-_]pool|Redis pools|\.kinds\b|\bkinds\b")


#: Modules outside ``kinds/`` that belong to kinds: the admin's panels of each
#: family of kinds (``dashboard/*_panels.py``), and the queue's modules whose
#: place is fixed elsewhere: its Tasks backend (``settings.TASKS`` names its
#: path), the command running its handlers (Django finds commands only in
#: ``management/commands/``) and that command's runner.
OF_KINDS = ("tasks.py", "worker.py", "management/commands/pool_worker.py", "dashboard/*_panels.py")


def core_files() -> list[Path]:
    """The Django layer's core: every module and template outside the kinds and
    the primitives (the package's ``__init__`` re-exports the primitives, and
    ``exceptions`` belongs to them) and :data:`OF_KINDS`."""
    skipped = {"kinds", "primitives", "migrations"}
    return sorted(
        path
        for path in PACKAGE.rglob("*")
        if path.suffix in (".py", ".html")
        and not skipped & set(path.relative_to(PACKAGE).parts)
        and (path.parent != PACKAGE or path.name not in ("__init__.py", "exceptions.py"))
        and not any(path.relative_to(PACKAGE).match(pattern) for pattern in OF_KINDS)
    )


def words_of(kind: Kind) -> re.Pattern[str]:
    """A kind's name, label and plural (any case), setting key and class name."""
    spoken = {kind.name, kind.label, kind.plural}
    exact = {kind.setting_key}
    if kind.primitive is not None:
        exact.add(kind.primitive.__name__)
    alternatives = [f"(?i:{re.escape(w)})" for w in spoken] + [re.escape(w) for w in exact]
    return re.compile(r"(?<![\w.])(?:" + "|".join(alternatives) + r")(?!\w)")


def test_the_core_of_the_django_layer_names_no_kind() -> None:
    for pattern in OF_KINDS:  # each names files that exist
        assert list(PACKAGE.glob(pattern)), pattern
    files = core_files()
    assert len(files) > 15, files  # the scan sees the whole core
    found = []
    for kind in registry.all_kinds():
        pattern = words_of(kind)
        for path in files:
            for number, line in enumerate(path.read_text().splitlines(), 1):
                for match in pattern.finditer(ALLOWED.sub("", line)):
                    found.append(f"{path.relative_to(PACKAGE)}:{number}: {match[0]!r}: {line}")
    assert found == []


def test_every_kind_is_whole() -> None:
    import django_redis_pool

    for kind in registry.all_kinds():
        module = type(kind).__module__
        assert module == f"django_redis_pool.kinds.{kind.name}"
        assert kind.options and kind.primitive is not None
        assert kind.primitive.kind == kind.name
        assert dashboard.SUMMARIES[kind.name] and dashboard.SECTIONS[kind.name]
        if isinstance(kind, LeaseKind):
            assert {"release", "gc"} <= set(dashboard.ACTIONS[kind.name])
        accessor = getattr(django_redis_pool, f"get_{kind.name}")
        assert accessor.__module__ == "django_redis_pool.kinds.accessors"


def test_a_kind_module_holds_what_the_kind_is_and_nothing_of_the_admin() -> None:
    """No forms, requests, templates or HTML in a kind's module, and no import
    of the dashboard when it is loaded: the admin's panels are the dashboard's,
    registered by the app config (the label of a kind's fill action, which
    ``LeaseKind.fill_label`` reads, is registered by the dashboard for the
    kind's class)."""
    for path in sorted((PACKAGE / "kinds").glob("*.py")):
        text = path.read_text()
        loaded = set()
        for node in ast.parse(text).body:
            if isinstance(node, ast.Import):
                loaded |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom):
                module = "." * node.level + (node.module or "")
                loaded |= {module} | {f"{module}.{alias.name}" for alias in node.names}
        admin = {
            module
            for module in loaded
            if module.startswith(("django.forms", "django.http", "django.template"))
            or "dashboard" in module
        }
        assert admin == set(), f"{path.name} imports {sorted(admin)}"
        assert ".html" not in text and "</" not in text, path.name


def test_every_kind_of_this_release_is_listed() -> None:
    assert registry.plurals() == (
        "pools, semaphores, locks, allocators, queues, object pools or rate limits"
    )


@pytest.fixture
def gates(settings: Any, redis_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The gate kind added to the kinds, and one gate configured beside a pool."""
    registries = (dashboard.SUMMARIES, dashboard.SECTIONS, dashboard.ACTIONS, panels.PANELS)
    saved = [dict(r) for r in registries]
    importlib.reload(gate_kind)  # a fresh KIND, whose panels are registered again
    monkeypatch.setattr(registry, "KINDS", (*registry.KINDS, gate_kind.KIND))
    # What the app config does when Django starts, for the kinds loaded later.
    panels.register_panels(registry.all_kinds())
    settings.DJANGO_REDIS_POOL = {
        "CONNECTION": {"URL": redis_url},
        "POOLS": {"printers": {"RESOURCES": ["p1"]}},
        "GATES": {"front-door": {"LEASE_TIMEOUT": 5}},
    }
    yield
    for registry_, before in zip(registries, saved, strict=True):
        registry_.clear()
        registry_.update(before)  # type: ignore[attr-defined]
    registry.clear_caches()


def run(command: str, *args: str) -> str:
    out = io.StringIO()
    call_command(command, *args, stdout=out, no_color=True)
    return out.getvalue()


@pytest.mark.django_db  # closing a response closes old database connections
def test_a_kind_added_as_one_module_is_checked_built_and_held(gates: None) -> None:
    from tests.support.gate_kind import Gate, get_gate

    assert [m for m in check_settings() if m.is_serious()] == []
    gate = get_gate("front-door")
    assert isinstance(gate, Gate) and registry.get_resource("front-door") is gate

    @with_resource("front-door", timeout=0)
    def view(request: Any) -> Any:
        from django.http import HttpResponse

        hold = request.resources["front-door"]
        return HttpResponse(f"{type(hold).__name__} {hold.locked()}")

    response = view(RequestFactory().get("/"))
    assert response.content == b"Gate True"
    response.close()
    assert gate.locked() is False


def test_a_kind_added_as_one_module_has_its_options_checked(gates: None, settings: Any) -> None:
    settings.DJANGO_REDIS_POOL["GATES"]["front-door"] = {"LEASE_TIMOUT": 5}
    messages = check_settings()
    assert [m.id for m in messages] == ["django_redis_pool.E017"]
    assert 'DJANGO_REDIS_POOL["GATES"]["front-door"]["LEASE_TIMOUT"]' in messages[0].msg
    assert "Did you mean 'LEASE_TIMEOUT'?" in messages[0].hint


def test_a_kind_added_as_one_module_is_run_by_the_commands(gates: None) -> None:
    from tests.support.gate_kind import get_gate

    assert "front-door: a gate, nothing to sync" in run("pool_sync")
    get_gate("front-door").for_holder("night-shift").acquire()
    status = run("pool_status")
    assert re.search(r"front-door\s+gate\s+1\s+0\s+0\s+1", status), status
    assert "held by night-shift" in status
    data = json.loads(run("pool_status", "--json"))
    assert {p["name"]: p["kind"] for p in data["primitives"]} == {
        "front-door": "gate",
        "printers": "pool",
    }
    assert "front-door: nothing to reclaim" in run("pool_gc")


def test_a_kind_added_as_one_module_has_its_admin_panels(gates: None) -> None:
    from tests.support.gate_kind import get_gate

    gate = get_gate("front-door")
    assert dashboard.SUMMARIES["gate"](gate).size == 1
    assert list(dashboard.ACTIONS["gate"]) == ["release", "open-wide", "gc"]
    assert (
        dashboard.ACTIONS["gate"]["open-wide"].run(gate, {}) == "gate 'front-door' stays as it is"
    )


def test_every_option_of_every_kind_is_documented() -> None:
    pages = [p for p in (PACKAGE.parent / "docs").glob("*.md") if p.name != "adding-a-kind.md"]
    text = "\n".join(page.read_text() for page in pages)
    missing = [
        f"{kind.setting_key}.{key}"
        for kind in registry.all_kinds()
        for key in kind.options
        if f'"{key}"' not in text and f"`{key}`" not in text
    ]
    assert missing == []


@pytest.fixture
def own_panels() -> Iterator[None]:
    """The dashboard's registries as they were, after the test's kinds registered theirs."""
    registries = (dashboard.SUMMARIES, dashboard.SECTIONS, dashboard.ACTIONS)
    saved = [dict(r) for r in registries]
    yield
    for registry_, before in zip(registries, saved, strict=True):
        registry_.clear()
        registry_.update(before)  # type: ignore[attr-defined]


def test_size_option_defaults_to_the_members_option() -> None:
    from django_redis_pool.kinds.pool import PoolKind

    class Shelves(PoolKind):
        members = ("SHELVES", "shelves", "shelve()")

    class Sized(PoolKind):
        members = ("SHELVES", "shelves", "shelve()")
        size_option = "CAPACITY"

    class Unsized(LeaseKind):
        pass

    assert Shelves.size_option == "SHELVES"
    assert Sized.size_option == "CAPACITY"
    assert Unsized.size_option is None
    assert registry.by_name()["pool"].size_option == "RESOURCES"
    assert registry.by_name()["allocator"].size_option == "KEYS"


def test_w006_names_the_kinds_own_fill_action(own_panels: None) -> None:
    """The hints name the action registered as filling the kind's class
    (``fill_label()``), not a label written into the message."""
    from django_redis_pool.dashboard import action
    from django_redis_pool.dashboard.lease_panels import set_max_size
    from django_redis_pool.kinds.pool import PoolKind
    from django_redis_pool.kinds.semaphore import SemaphoreKind

    class Turnstile(SemaphoreKind):
        name = "turnstile"
        setting_key = "TURNSTILES"

    class Shelf(PoolKind):
        name = "shelf"
        setting_key = "SHELVES"

    action("turnstile", "resize", fills=Turnstile, label="Resize")(set_max_size)
    action("shelf", "stock", fills=Shelf, label="Stock a shelf")(lambda primitive, data: "")

    [(_, hint)] = Turnstile().entry_warnings("t", {"MAX_SIZE": None})
    assert "from the admin ('Resize' on its page) or with set_max_size()" in hint
    assert "Set max size" not in hint and "django_redis_pool.W006" in hint
    [(_, hint)] = Shelf().entry_warnings("s", {"RESOURCES": ()})
    assert "from the admin ('Stock a shelf' on its page) or with associate()" in hint
