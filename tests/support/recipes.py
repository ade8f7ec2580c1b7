"""The code of ``docs/background-work.md``'s recipes, read from the page itself
(so that the page and the tests of its recipes cannot drift apart).

A recipe is found by its position: the ``index``-th ```` ```python ```` block
under the ``## heading`` of the page. :func:`define` runs its definitions
(imports, functions, classes) in a module's namespace, where the test has put
doubles for the recipe's placeholders (``build_export``, ``deliver_report``,
``rebuild_index``); the rest, the calls a reader makes (``queue.enqueue(...)``),
is given back for the test to run with its own ``queue`` (:func:`run`)."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

import django
import redis

PAGE = Path(__file__).resolve().parents[2] / "docs" / "background-work.md"

#: ``X  # Django 5.2: Y``: on Django 5.2, the page says to write Y instead of X.
ON_DJANGO_5 = re.compile(r"^(?P<indent>\s*)\S.*?\s+#\s*Django 5\.2:\s*(?P<instead>\S.*?)\s*$")


def code_block(heading: str, index: int) -> str:
    """The ``index``-th python block under ``## heading`` of the page."""
    text = PAGE.read_text(encoding="utf-8")
    sections = re.split(r"^## ", text, flags=re.MULTILINE)
    matching = [s for s in sections if s.splitlines()[0].strip() == heading]
    assert len(matching) == 1, f"the page has one '## {heading}' section"
    blocks = re.findall(r"^```python\n(.*?)^```", matching[0], flags=re.MULTILINE | re.DOTALL)
    assert len(blocks) > index, f"'## {heading}' has {len(blocks)} python blocks"
    return blocks[index]


def for_this_django(source: str) -> str:
    """``source`` with each line that the page says to write differently on
    Django 5.2 (``# Django 5.2: ...``) written so, when this is Django 5.2."""
    if django.VERSION >= (6,):
        return source
    lines = []
    for line in source.splitlines():
        instead = ON_DJANGO_5.match(line)
        lines.append(f"{instead['indent']}{instead['instead']}" if instead else line)
    return "\n".join(lines) + "\n"


def define(
    heading: str, index: int, namespace: dict[str, Any], *, only_imports: bool = False
) -> list[ast.stmt]:
    """Run the definitions of the recipe (``index``-th block under ``heading``)
    in ``namespace`` (a module's ``globals()``: its functions are that
    module's); only its imports with ``only_imports``. Returns its other
    top-level statements (the calls), for :func:`run`."""
    where = f"{PAGE.name}, ## {heading}, block {index + 1}"
    tree = ast.parse(for_this_django(code_block(heading, index)), filename=where)
    imports = (ast.Import, ast.ImportFrom)
    defs = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    kinds = imports if only_imports else (*imports, *defs)
    definitions = [node for node in tree.body if isinstance(node, kinds)]
    calls = [node for node in tree.body if not isinstance(node, kinds)]
    exec(compile(ast.Module(body=definitions, type_ignores=[]), where, "exec"), namespace)
    return [] if only_imports else calls


def run(calls: list[ast.stmt], namespace: dict[str, Any]) -> list[Any]:
    """Run a recipe's calls (from :func:`define`) in ``namespace``; the value
    of each that is an expression (``queue.enqueue(...)``: the job)."""
    values = []
    for node in calls:
        if isinstance(node, ast.Expr):
            values.append(eval(compile(ast.Expression(node.value), PAGE.name, "eval"), namespace))
        else:
            exec(compile(ast.Module(body=[node], type_ignores=[]), PAGE.name, "exec"), namespace)
    return values


#: What the recipes' doubles run as a body begins: counts the bodies running at
#: once ("inside") and the most ever seen ("most"), atomically.
ENTER = """
local now = redis.call('INCR', KEYS[1])
if now > tonumber(redis.call('GET', KEYS[2]) or '0') then redis.call('SET', KEYS[2], now) end
return now
"""


def witness() -> redis.Redis:
    """A client of the settings' Redis, where the doubles keep their counts."""
    from django.conf import settings

    return redis.Redis.from_url(settings.DJANGO_REDIS_POOL["CONNECTION"]["URL"])
