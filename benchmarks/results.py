"""The results of a run: one JSON file per subcommand, and the helpers that
turn them into Markdown.

``python -m benchmarks <subcommand>`` writes ``benchmarks/results/<subcommand>.json``
(``--quick`` runs: ``benchmarks/results/quick/<subcommand>.json``, not kept in
git; ``--out`` elsewhere)::

    {
      "schema": 1,
      "benchmark": "engine",                 # the subcommand
      "title": "...",                        # its one-line description
      "command": "python -m benchmarks engine --quick",
      "quick": true,                         # a smoke run: the numbers mean little
      "started": "2026-11-28T09:30:00+00:00",
      "seconds": 21.4,                       # the whole run
      "environment": {
        "python": "CPython 3.11.7", "platform": "Linux-...", "cpu": "AMD EPYC",
        "cores": 2, "usable_cores": 2, "load_average": [0.4, 0.5, 0.6],
        "packages": {"django-redis-pool": "...", "redis": "8.1.0", ...},
        "git": "a06bd10-dirty", "package": ".../django_redis_pool",
        "servers": [{"label": "6.2", "version": "6.2.14", "binary": "..."}],
        "servers_skipped": ["7"]
      },
      "settings": {...},                     # the options the run used
      "results": {...},                      # the numbers: raw, per round
      "skipped": [{"case": "...", "reason": "..."}]
    }

``results`` holds what was measured, every round of it (medians, spreads and
ratios are computed when rendered: ``python -m benchmarks report``); each
subcommand's module says what its ``results`` hold and renders them
(``render(doc)``).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import platform
import statistics
import subprocess
import sys
from datetime import datetime, timezone
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import redis

SCHEMA = 1
HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results"

#: The packages whose versions every result records (those not installed: "not installed").
PACKAGES = (
    "django-redis-pool",
    "redis",
    "hiredis",
    "django",
    "redis-allocator",
    "python-redis-lock",
    "limits",
    "django-ratelimit",
    "rq",
    "uvicorn",
    "gunicorn",
    "matplotlib",
)


def say(*parts: Any) -> None:
    """Progress, on stderr (stdout gets the tables)."""
    print(*parts, file=sys.stderr, flush=True)


# -- options ----------------------------------------------------------------------------


def choose(args: Any, full: dict[str, Any], quick: dict[str, Any]) -> dict[str, Any]:
    """Each option of ``full``: what the command line gave, else its ``--quick``
    default (with ``--quick``), else its full-run default."""
    chosen = {}
    for name, default in full.items():
        given = getattr(args, name, None)
        if given is not None:
            chosen[name] = given
        elif args.quick and name in quick:
            chosen[name] = quick[name]
        else:
            chosen[name] = default
    return chosen


def ints(text: str | list[int]) -> list[int]:
    """``"2,4,8"`` -> [2, 4, 8]."""
    if isinstance(text, list):
        return text
    return [int(x) for x in str(text).split(",") if x.strip()]


# -- the environment ---------------------------------------------------------------------


def package_version(name: str) -> str:
    try:
        return version(name)
    except PackageNotFoundError:
        return "not installed"


def git_revision() -> str:
    try:
        rev = subprocess.run(
            ["git", "-C", str(ROOT), "describe", "--always", "--dirty"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "?"
    return rev or "?"


def source_digest() -> str:
    """A digest of the imported package's Python and Lua sources (to tell, at the
    end, whether they were edited during the run: processes started later load
    them anew)."""
    import django_redis_pool

    root = Path(django_redis_pool.__file__).resolve().parent
    digest = hashlib.sha1()
    for path in sorted([*root.rglob("*.py"), *root.rglob("*.lua")]):
        digest.update(str(path.relative_to(root)).encode())
        with contextlib.suppress(OSError):
            digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "?"


def environment() -> dict[str, Any]:
    """The machine and the software a run measures (its servers are added at the end)."""
    import django_redis_pool

    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    load = [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else []
    packages = {name: package_version(name) for name in PACKAGES}
    packages["redis"] = redis.__version__
    return {
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "platform": platform.platform(),
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "usable_cores": usable,
        "load_average": load,
        "packages": packages,
        "git": git_revision(),
        "package": str(Path(django_redis_pool.__file__).resolve().parent),
        "source_digest": source_digest(),
    }


# -- reading and writing ------------------------------------------------------------------


def default_path(name: str, quick: bool) -> Path:
    return RESULTS / "quick" / f"{name}.json" if quick else RESULTS / f"{name}.json"


def dumps(value: Any, indent: str = "") -> str:
    """JSON, indented, with each list or object of plain values (numbers,
    strings) on one line: a round's figures read across, not down."""
    inner = indent + " "
    if isinstance(value, dict) and value:
        if all(not isinstance(v, (dict, list)) for v in value.values()):
            return json.dumps(value, ensure_ascii=False)
        items = [f"{inner}{json.dumps(str(k))}: {dumps(v, inner)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + f"\n{indent}}}"
    if isinstance(value, (list, tuple)) and value:
        if all(not isinstance(v, (dict, list, tuple)) for v in value):
            return json.dumps(value, ensure_ascii=False)
        items = [f"{inner}{dumps(v, inner)}" for v in value]
        return "[\n" + ",\n".join(items) + f"\n{indent}]"
    return json.dumps(value, ensure_ascii=False)


def write(doc: dict[str, Any], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dumps(doc) + "\n")
    return path


def read(path: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(path.read_text())
    if doc.get("schema") != SCHEMA:
        raise ValueError(f"{path}: schema {doc.get('schema')!r}, not {SCHEMA}")
    return doc


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


# -- numbers --------------------------------------------------------------------------------


def median(values: Any) -> float:
    values = list(values)
    return statistics.median(values) if values else math.nan


def pct(values: list[float], q: float) -> float:
    """Nearest-rank percentile (``q`` in %)."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)] if ordered else math.nan


def quantile(values: list[float], q: float) -> float:
    """The value at index ``int(q * n)`` of the sorted values (``q`` in 0-1; the
    HTTP and queue benchmarks' percentile)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else math.nan


# -- Markdown --------------------------------------------------------------------------------


def num(value: float | None, digits: int = 0) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:,.{digits}f}"


def spread(values: list[float], fmt: str = ",.0f") -> str:
    """``min-max``."""
    return f"{min(values):{fmt}}-{max(values):{fmt}}" if values else "-"


def span(values: list[float], fmt: str = ",.0f") -> str:
    """``median (min-max)``."""
    if not values:
        return "-"
    return f"{median(values):{fmt}} ({spread(values, fmt)})"


def ratio(value: float, base: float) -> str:
    if math.isnan(value) or math.isnan(base) or not base:
        return "-"
    return f"{value / base:.2f}x"


def table(header: list[str], rows: list[list[str]], right_from: int = 1) -> str:
    """A Markdown table; columns from ``right_from`` on are right-aligned."""
    align = ["---" if i < right_from else "---:" for i in range(len(header))]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(align) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def heading(doc: dict[str, Any]) -> str:
    """The first lines of a rendered result: what, when, on what."""
    env = doc.get("environment", {})
    packages = env.get("packages", {})
    servers = ", ".join(
        f"Redis {s['version']}" + (" cluster" if s.get("cluster") else "")
        for s in env.get("servers", [])
    )
    facts = [
        env.get("python"),
        f"redis-py {packages['redis']}" if packages.get("redis") else None,
        f"{env['cores']} cores" if env.get("cores") else None,
        servers or None,
        f"git {env['git']}" if env.get("git") else None,
    ]
    lines = [f"## {doc.get('title', doc['benchmark'])}", ""]
    lines.append(
        f"`{doc.get('command', '')}`, {doc.get('started', '?')}: "
        + ", ".join(f for f in facts if f)
    )
    if env.get("note"):
        lines += ["", env["note"]]
    if doc.get("quick"):
        lines += ["", "**A `--quick` run: too few rounds for the numbers to mean much.**"]
    if env.get("warning"):
        lines += ["", f"**WARNING: {env['warning']}**"]
    return "\n".join(lines)


def skipped(doc: dict[str, Any]) -> str:
    """The cases a run skipped and why, as a list (empty if none)."""
    items = doc.get("skipped", [])
    return "\n".join(f"* skipped {s['case']}: {s['reason']}" for s in items)


# -- docs/performance.md -------------------------------------------------------------------


def docs_note(doc: dict[str, Any]) -> str:
    """A warning line for a generated section of the docs page ("" when none is due)."""
    notes = []
    if doc.get("quick"):
        notes.append("a `--quick` run: too few rounds for the numbers to mean much")
    if doc.get("environment", {}).get("warning"):
        notes.append(doc["environment"]["warning"])
    return "".join(f"**Note: {note}.**\n\n" for note in notes)


def cell(values: list[float], fmt: str = ",.0f") -> str:
    """``median (min-max)`` for a docs table; ``-`` when nothing was measured."""
    return span(values, fmt) if values else "-"


def plural(n: int, word: str = "round") -> str:
    """``"1 round"``, ``"3 rounds"``."""
    return f"{n:,} {word}" + ("" if n == 1 else "s")


def lua_paths(runs: list[dict[str, Any]]) -> str:
    """How our Lua ran on each server, as a sentence."""
    return (
        "Our Lua ran as "
        + " and as ".join(f"{r['path']} on Redis {r['version']}" for r in runs)
        + "."
    )
