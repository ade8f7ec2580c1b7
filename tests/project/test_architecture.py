"""Pin the package's shape as docs/architecture.md draws it: its layers, no
import circle and no import back up the layers (not even one made inside a
function), no module over 600 lines (Lua files included), no Django in the
primitives, primitives/ grouped by layer then by family (at most 12 entries at
its top, each family a package that declares its operations, its Lua beside
its Python), kind modules free of presentation, Django's settings read by the
registry and the checks only, and no private name crossing a module boundary (none imported
from another module; none of another module's objects used by the Django
layer, but the few of Django's that are named below). And the test suite's,
as docs/testing.md draws it ("The layout of tests/"): its folders, each test
module in a group, none over 1,000 lines.

Read from the source (the ``import`` statements), so a test run imports nothing
it checks. An import made inside a function counts as any other: it may not
run up the layers, nor close a circle. An import under ``if TYPE_CHECKING:``
is a type's name, not a dependency at load time: the layers leave it out, but
no circle may run through one either. The same holds for ``benchmarks/``: no
circle among its modules.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "django_redis_pool"

#: The layers, lowest first, by module name (a package's name covers its
#: modules unless one of them is named itself). A module imports at load time
#: only from its own layer or lower ones (docs/architecture.md).
LAYERS: dict[str, int] = {
    # 0: usable without Django
    "primitives": 0,
    "exceptions": 0,
    "testing": 0,
    # 1: what every kind of the Django layer is (the contract), the signals it
    # sends, the holder names and client addresses of requests, and the rates
    # the setting writes; the span of a hold (OpenTelemetry)
    "signals": 1,
    "kinds": 1,
    "kinds.contract": 1,
    "kinds.rates": 1,
    "holder_names": 1,
    "client_address": 1,
    "tracing": 1,
    # 2: the setting's parser: the values and the kinds it is given, validated
    # once (no Django settings read)
    "conf": 2,
    # 3: the kinds: what each one is, told what it needs of the setting; the
    # list of the built-in ones
    "kinds.allocator": 3,
    "kinds.leased": 3,
    "kinds.lock": 3,
    "kinds.object_pool": 3,
    "kinds.pool": 3,
    "kinds.queue": 3,
    "kinds.quota_headers": 3,
    "kinds.ratelimit": 3,
    "kinds.ratelimit_keys": 3,
    "kinds.ratelimit_options": 3,
    "kinds.semaphore": 3,
    "kinds.builtin": 3,
    # 4: the reader of Django's settings, which hands out the kinds and builds
    # configured primitives by name; the kinds' typed accessors; the response
    # to a refused request
    "registry": 4,
    "kinds.accessors": 4,
    "refusals": 4,
    # 5: what uses the kinds: holding one for a request (what its outcomes log
    # and signal, its crossings between the event loop and threads), the Django
    # Tasks backend and the worker, the checks, the admin's panels
    "guard": 5,
    "holds": 5,
    "outcomes": 5,
    "event_loop": 5,
    "tasks": 5,
    "worker": 5,
    "checks": 5,
    "deploy_checks": 5,
    "url_checks": 5,
    "dashboard": 5,
    # 6: Django's entry points
    "decorators": 6,
    "middleware": 6,
    "metrics": 6,
    "admin": 6,
    "models": 6,
    "migrations": 6,
    "management": 6,
    "apps": 6,
    "": 6,  # django_redis_pool/__init__.py: the public names
}

#: The modules that read Django's settings (``django.conf.settings``): the
#: registry at run time, the checks for theirs. Every other module is given
#: what it needs.
SETTINGS_READERS = {"registry", "checks"}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(path): path for path in PACKAGE.rglob("*.py")}


def layer_key(module: str) -> str:
    """The name in :data:`LAYERS` that covers ``module``."""
    while module not in LAYERS:
        module = module.rpartition(".")[0]
    return module


def layer_of(module: str) -> int:
    return LAYERS[layer_key(module)]


def imports_of(module: str, *, type_only: bool = False) -> list[tuple[str, bool]]:
    """``(imported module, made at load time)`` for each of the package's
    modules that ``module`` imports (type-only imports left out, unless
    ``type_only``: then they count, as made at load time)."""
    path = MODULES[module]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    checking = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
    ]
    skipped = set() if type_only else {id(inner) for node in checking for inner in ast.walk(node)}
    at_load = {id(node) for node in tree.body}
    at_load |= {id(inner) for node in checking for inner in node.body}
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        targets: list[str] = []
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".") if package else []
                base = base[: len(base) - (node.level - 1)]
                target = ".".join([*base, *([node.module] if node.module else [])])
            elif node.module and node.module.startswith("django_redis_pool"):
                target = node.module.removeprefix("django_redis_pool").lstrip(".")
            else:
                continue
            for alias in node.names:
                candidate = f"{target}.{alias.name}".lstrip(".")
                targets.append(candidate if candidate in MODULES else target)
        elif isinstance(node, ast.Import):
            targets = [
                alias.name.removeprefix("django_redis_pool").lstrip(".")
                for alias in node.names
                if alias.name.startswith("django_redis_pool")
            ]
        for target in targets:
            while target not in MODULES:
                target = target.rpartition(".")[0]
            if target != module:
                found.append((target, id(node) in at_load))
    return found


GRAPH = {module: imports_of(module) for module in MODULES}
#: With the type-only imports: what the circle test reads.
GRAPH_WITH_TYPES = {module: imports_of(module, type_only=True) for module in MODULES}


def test_every_module_has_a_layer():
    for module in MODULES:
        layer_of(module)  # raises KeyError for a module no layer covers


def test_a_module_imports_only_from_its_layer_or_lower_ones_even_inside_a_function():
    upward = [
        f"{module} (layer {layer_of(module)}) imports {target} (layer {layer_of(target)})"
        f"{'' if at_load else ' inside a function'}"
        for module, imports in GRAPH.items()
        for target, at_load in imports
        if layer_of(target) > layer_of(module)
    ]
    assert upward == []


def circles_of(graph: dict[str, list[str]]) -> list[str]:
    """``a -> b -> ... -> a`` for each edge ``a -> b`` of ``graph`` from which
    ``a`` can be reached again."""

    def reaches(start: str, goal: str) -> bool:
        seen, todo = set(), [start]
        while todo:
            module = todo.pop()
            for target in graph.get(module, []):
                if target == goal:
                    return True
                if target not in seen:
                    seen.add(target)
                    todo.append(target)
        return False

    return sorted(
        f"{module} -> {target} -> ... -> {module}"
        for module, targets in graph.items()
        for target in targets
        if reaches(target, module)
    )


def test_no_two_modules_import_each_other_even_through_others_inside_functions_or_for_types():
    """No circle, counting the imports made inside functions and the
    type-only ones too: no exception."""
    graph = {
        module: [target for target, _ in imports] for module, imports in GRAPH_WITH_TYPES.items()
    }
    assert circles_of(graph) == []


def test_only_the_registry_and_the_checks_read_djangos_settings():
    """``from django.conf import settings`` (or ``django.conf.settings``) in
    :data:`SETTINGS_READERS` only: conf parses what it is given, the kinds are
    told what they need, the Tasks backend asks the framework."""
    readers = set()
    for module, tree in TREES.items():
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.ImportFrom)
                and node.module == "django.conf"
                and any(alias.name == "settings" for alias in node.names)
            ) or (
                isinstance(node, ast.Import) and any(a.name == "django.conf" for a in node.names)
            ):
                readers.add(module)
    assert readers == SETTINGS_READERS


def test_the_primitives_and_the_test_servers_import_no_django():
    offenders = []
    for module, path in MODULES.items():
        if layer_of(module) != 0:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = (
                [node.module or ""]
                if isinstance(node, ast.ImportFrom) and not node.level
                else [alias.name for alias in node.names]
                if isinstance(node, ast.Import)
                else []
            )
            offenders += [f"{module}: {name}" for name in names if name.split(".")[0] == "django"]
        offenders += [f"{module}: {target}" for target, _ in GRAPH[module] if layer_of(target) != 0]
    assert offenders == []


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_module_is_over_600_lines(module):
    lines = MODULES[module].read_text(encoding="utf-8").count("\n")
    assert lines <= 600, f"{module} has {lines} lines: split it along a seam"


PRIMITIVES = PACKAGE / "primitives"
LUA = sorted(PRIMITIVES.rglob("*.lua"))


@pytest.mark.parametrize("script", LUA, ids=[path.name for path in LUA])
def test_no_lua_file_is_over_600_lines(script):
    lines = script.read_text(encoding="utf-8").count("\n")
    assert lines <= 600, f"{script.name} has {lines} lines: split it by family"


# -- primitives/: by layer, then by family -------------------------------------

#: What primitives/ holds at its top (docs/architecture.md, "Layer 0"): the
#: shared checks and text, the wire and the clients, then one package per
#: family of primitives.
PRIMITIVES_TOP = {
    "__init__.py",
    "validators.py",
    "text.py",
    "wire",
    "clients",
    "counts",
    "leased",
    "queue",
    "ratelimit",
    "object_pool",
}


def test_primitives_holds_at_most_12_entries_each_folder_a_package_and_no_lua():
    entries = {path.name for path in PRIMITIVES.iterdir() if path.name != "__pycache__"}
    assert len(entries) <= 12, f"{len(entries)} entries at the top of primitives/: {entries}"
    assert entries == PRIMITIVES_TOP
    folders = [PRIMITIVES / name for name in entries if (PRIMITIVES / name).is_dir()]
    assert [path.name for path in folders if not (path / "__init__.py").exists()] == []
    nested = [
        f"{path.name}/{inner.name}"
        for path in folders
        for inner in path.iterdir()
        if inner.is_dir() and inner.name != "__pycache__"
    ]
    assert nested == [], "one level of families"
    assert sorted(path.name for path in PRIMITIVES.glob("*.lua")) == []


def declared(package: Path) -> dict[str, object]:
    """``OPERATIONS``, ``FAST`` and ``HELPERS`` as ``package/__init__.py``
    assigns them (literals), those it assigns."""
    names = {}
    for node in ast.parse((package / "__init__.py").read_text(encoding="utf-8")).body:
        target = node.targets[0] if isinstance(node, ast.Assign) else getattr(node, "target", None)
        if isinstance(target, ast.Name) and target.id in ("OPERATIONS", "FAST", "HELPERS"):
            names[target.id] = ast.literal_eval(node.value)  # type: ignore[union-attr, arg-type]
    return names


def families_run() -> list[str]:
    """The families the script loader reads (``FAMILIES`` of ``wire/scripts.py``)."""
    tree = ast.parse((PRIMITIVES / "wire" / "scripts.py").read_text(encoding="utf-8"))
    [value] = [
        node.value
        for node in tree.body
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "FAMILIES"
    ]
    return [element.id for element in value.elts]  # type: ignore[attr-defined]


def test_each_family_declares_its_operations_and_holds_their_lua_beside_its_python():
    """A family's Lua is the files its package declares (``OPERATIONS``, their
    ``FAST`` scripts, its ``HELPERS``), in its own folder, each declared once
    in the whole package; the script loader reads every family that has Lua."""
    seen: dict[str, str] = {}
    with_lua = set()
    for package in sorted(path for path in PRIMITIVES.iterdir() if path.is_dir()):
        if not (package / "__init__.py").exists():
            continue
        lua = {path.stem for path in package.glob("*.lua")}
        names = declared(package)
        if lua:
            with_lua.add(package.name)
            assert set(names) == {"OPERATIONS", "FAST", "HELPERS"}, package.name
        files = [
            *names.get("HELPERS", ()),  # type: ignore[misc]
            *names.get("OPERATIONS", ()),  # type: ignore[misc]
            *names.get("FAST", {}).values(),  # type: ignore[attr-defined]
        ]
        assert sorted(files) == sorted(lua), f"{package.name}: declared {files}, has {lua}"
        for name in files:
            assert name not in seen, f"{name}.lua in {package.name} and {seen[name]}"
            seen[name] = package.name
    assert with_lua and set(families_run()) == with_lua


PRESENTATION = ("django.forms", "django.template", "django.utils.html", "format_html", "mark_safe")


@pytest.mark.parametrize(
    "module", sorted(m for m in MODULES if m.startswith("kinds.") and m != "kinds.contract")
)
def test_a_kind_module_holds_no_forms_templates_or_html(module):
    source = MODULES[module].read_text(encoding="utf-8")
    found = [word for word in PRESENTATION if word in source]
    found += ["an HTML tag"] if "</" in source or "<br" in source else []
    assert found == [], f"{module} holds presentation ({found}): it belongs in dashboard/"


# -- private names ------------------------------------------------------------


def is_private(name: str) -> bool:
    """``_name``, not ``__dunder__``."""
    return name.startswith("_") and not name.endswith("__")


TREES = {module: ast.parse(path.read_text(encoding="utf-8")) for module, path in MODULES.items()}


def test_no_module_imports_a_private_name_of_another():
    """``from .x import _name`` would make ``_name`` part of two modules: give
    it a public name, or move the code that needs it (anywhere in the package)."""
    found = [
        f"{module}:{node.lineno}: from {'.' * node.level}{node.module or ''} import {alias.name}"
        for module, tree in TREES.items()
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        and (node.level or (node.module or "").startswith("django_redis_pool"))
        for alias in node.names
        if is_private(alias.name)
    ]
    assert found == []


#: Private names of Django (and of the standard library) that the Django layer
#: uses on purpose, by module: each is the one way to do its job.
FOREIGN_PRIVATE = {
    ("admin", "_meta"): "a model's options, which the admin's templates read",
    ("conf.masking", "_replace"): "a named tuple's copy with a field changed (its own API)",
    ("guard", "_resource_closers"): "what Django runs when the response is closed",
    ("holder_names", "_wrapped"): "whether Django's lazy request.user was read yet",
    ("refusals", "_has_been_logged"): "tells django.request the refusal was logged already",
    ("registry", "_cache"): "the client of Django's own Redis cache backend",
}


def private_uses(module: str) -> list[tuple[str, str, int]]:
    """``(module, name, line)`` of each private attribute of an object
    ``module`` does not own that it reads or writes: ``obj._name``, and
    ``getattr(obj, "_name")`` (``setattr``, ``hasattr``). Its own are on
    ``self`` or ``cls``, or on a class or function it defines."""
    tree = TREES[module]
    own = {"self", "cls"} | {
        node.name
        for node in tree.body
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
    }
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and is_private(node.attr):
            base, name = node.value, node.attr
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "setattr", "hasattr")
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
            and is_private(node.args[1].value)
        ):
            base, name = node.args[0], node.args[1].value
        else:
            continue
        if not (isinstance(base, ast.Name) and base.id in own):
            found.append((module, name, node.lineno))
    return found


DJANGO_LAYER = sorted(module for module in MODULES if layer_of(module) > 0)


def test_the_django_layer_uses_no_private_name_of_another_module():
    """Not a primitive's, not another module's of the Django layer: only the
    named ones of Django and those awaiting a public name in the primitives."""
    allowed = set(FOREIGN_PRIVATE)
    found = [
        f"{module}:{line}: {name}"
        for module in DJANGO_LAYER
        for module_, name, line in private_uses(module)
        if (module_, name) not in allowed
    ]
    assert found == []


def test_the_named_private_names_are_used_and_whose_they_say():
    """Each name allowed above is still used where it says (else it goes), and
    is defined nowhere in the package."""
    used = {(module, name) for module in DJANGO_LAYER for module, name, _ in private_uses(module)}
    assert set(FOREIGN_PRIVATE) <= used

    def defined(modules: list[str]) -> set[str]:
        names = set()
        for module in modules:
            for node in ast.walk(TREES[module]):
                if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                    names.add(node.name)
                elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                    names.add(node.id)
                elif (
                    isinstance(node, ast.Attribute)
                    and isinstance(node.ctx, ast.Store)
                    and isinstance(node.value, ast.Name)
                    and node.value.id in ("self", "cls")
                ):
                    names.add(node.attr)
        return {name for name in names if is_private(name)}

    ours = defined(list(MODULES))
    assert {name for _, name in FOREIGN_PRIVATE} & ours == set()


# ---------------------------------------------------------------- tests/

TESTS = Path(__file__).resolve().parents[1]
#: The folders of tests/ that hold test modules, each named for what they test.
TEST_GROUPS = {
    "admin",
    "conformance",
    "django",
    "example",
    "models",
    "primitives",
    "project",
    "reliability",
}
#: The folders of tests/ that hold no test module: what the tests share, and
#: the Django tests' URLconfs.
TEST_HELPERS = {"support", "urlconfs"}


def test_the_top_of_tests_holds_at_most_15_modules_and_only_the_named_folders():
    modules = sorted(path.name for path in TESTS.glob("*.py"))
    assert len(modules) <= 15, f"{len(modules)} modules at the top of tests/: {modules}"
    folders = {
        path.name
        for path in TESTS.iterdir()
        if path.is_dir() and not path.name.startswith((".", "__"))
    }
    assert folders == TEST_GROUPS | TEST_HELPERS
    assert [name for name in sorted(folders) if not (TESTS / name / "__init__.py").exists()] == []


def test_every_test_module_is_in_a_group_folder():
    tests = [*TESTS.rglob("test_*.py"), *TESTS.rglob("*_test.py")]
    assert tests
    misplaced = sorted(
        path.relative_to(TESTS).as_posix()
        for path in tests
        if len(path.relative_to(TESTS).parts) == 1
        or path.relative_to(TESTS).parts[0] not in TEST_GROUPS
    )
    assert misplaced == [], f"test modules outside {sorted(TEST_GROUPS)}: {misplaced}"


def test_no_module_of_tests_is_over_1000_lines():
    long = {
        path.relative_to(TESTS).as_posix(): lines
        for path in TESTS.rglob("*.py")
        if (lines := path.read_text(encoding="utf-8").count("\n")) > 1000
    }
    assert long == {}, f"split them by what their parts pin: {long}"


# ----------------------------------------------------------- benchmarks/

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def test_benchmarks_is_one_tool_with_at_most_8_files_at_its_top():
    files = sorted(path.name for path in BENCHMARKS.iterdir() if path.is_file())
    assert "__main__.py" in files and "servers.py" in files, files
    assert len(files) <= 8, f"{len(files)} files at the top of benchmarks/: {files}"
    folders = {path.name for path in BENCHMARKS.iterdir() if path.is_dir()}
    assert folders - {"__pycache__"} == {"assets", "results", "suites"}


def test_every_subcommand_is_a_suite_module_and_none_is_over_600_lines():
    tree = ast.parse((BENCHMARKS / "suites" / "__init__.py").read_text(encoding="utf-8"))
    [registry] = [
        node.value
        for node in tree.body
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "SUBCOMMANDS"
    ]
    modules = {value.value for value in registry.values}  # type: ignore[attr-defined]
    present = {path.stem for path in (BENCHMARKS / "suites").glob("*.py")} - {"__init__"}
    assert modules <= present, modules - present
    for path in BENCHMARKS.rglob("*.py"):
        lines = path.read_text(encoding="utf-8").count("\n")
        assert lines <= 600, f"{path.relative_to(BENCHMARKS)} has {lines} lines: split it"


def benchmark_modules() -> dict[str, Path]:
    """``benchmarks.suites.views`` -> its path, for every module of benchmarks/."""
    modules = {}
    for path in BENCHMARKS.rglob("*.py"):
        parts = list(path.relative_to(BENCHMARKS.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def benchmark_imports(modules: dict[str, Path]) -> dict[str, list[str]]:
    """Each module of benchmarks/ -> the modules of benchmarks/ it imports,
    inside functions too."""
    graph = {}
    for module, path in modules.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        found = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets = []
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")
                    base = ".".join(
                        [*parts[: len(parts) - (node.level - 1)], *filter(None, [base])]
                    )
                targets = [
                    f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                    for alias in node.names
                ]
            elif isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            for target in targets:
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target and target != module:
                    found.add(target)
        graph[module] = sorted(found)
    return graph


def test_no_circle_among_the_benchmarks_modules_even_inside_functions():
    graph = benchmark_imports(benchmark_modules())
    assert "benchmarks.workers" in graph["benchmarks.suites.async_path"]  # (read at all)
    assert circles_of(graph) == []
