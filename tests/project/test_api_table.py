"""docs/api.md's table of every public name of every primitive (its verb, what
it returns, what it raises) is the code's: no name missing, none extra, each
return type as annotated, each deprecated name marked as the code marks it."""

from __future__ import annotations

import inspect
import re
from pathlib import Path
from typing import Any

import pytest

import django_redis_pool

API_PAGE = Path(__file__).resolve().parents[2] / "docs" / "api.md"
#: The primitives the table covers, by the name its first column gives them.
PRIMITIVES = (
    "ResourcePool",
    "Semaphore",
    "Lock",
    "Allocator",
    "AllocatorObject",
    "ObjectPool",
    "TaskQueue",
    "RateLimiter",
    "Lease",
)
VERBS = {
    "acquire",
    "hold",
    "release",
    "renew",
    "read",
    "configure",
    "maintain",
    "enqueue",
    "run",
    "decide",
}
#: The holding primitives: exactly these take a hold in the two forms.
HOLDING = ("ResourcePool", "Semaphore", "Lock", "Allocator", "ObjectPool")


def table() -> dict[tuple[str, str], dict[str, str]]:
    """(primitive, name) -> its row's verb, returns and raises."""
    text = API_PAGE.read_text()
    section = text.split("## Every public name, its verb", 1)[1].split("\n## ", 1)[0]
    rows: dict[tuple[str, str], dict[str, str]] = {}
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if not line.startswith("| ") or cells[0] in ("Primitive", "---"):
            continue
        primitive, name, verb, returns, raises = cells
        key = (primitive, name.strip("`"))
        assert key not in rows, f"{key} is in the table twice"
        rows[key] = {"verb": verb, "returns": returns, "raises": raises}
    return rows


def public_names(cls: type) -> dict[str, Any]:
    """The public methods and properties of ``cls`` (inherited ones too)."""
    return {
        name: value
        for name, value in inspect.getmembers(cls)
        if not name.startswith("_") and (inspect.isfunction(value) or isinstance(value, property))
    }


def code() -> dict[tuple[str, str], Any]:
    return {
        (primitive, name): value
        for primitive in PRIMITIVES
        for name, value in public_names(getattr(django_redis_pool, primitive)).items()
    }


def test_the_table_lists_every_public_name_of_every_primitive_and_no_other() -> None:
    listed, names = set(table()), set(code())
    assert not names - listed, f"missing from docs/api.md's table: {sorted(names - listed)}"
    assert not listed - names, f"not in the code: {sorted(listed - names)}"


def test_each_row_gives_a_known_verb_and_marks_exactly_the_deprecated_names() -> None:
    names = code()
    for key, row in table().items():
        value = names[key]
        doc = inspect.getdoc(value.fget if isinstance(value, property) else value) or ""
        deprecated = row["verb"].startswith("deprecated")
        assert deprecated == doc.startswith("Deprecated"), f"{key}: {row['verb']!r}"
        assert deprecated or row["verb"] in VERBS, f"{key}: unknown verb {row['verb']!r}"


def annotation(value: Any) -> str:
    function = value.fget if isinstance(value, property) else value
    return str(inspect.signature(function).return_annotation).replace(" | ", " or ")


def test_each_return_is_the_annotated_one_and_each_hold_is_a_context_manager() -> None:
    names = code()
    for key, row in table().items():
        if row["returns"] == f"`{annotation(names[key])}`":
            continue
        # else a context manager (a hold), whose annotation says less than the row
        assert row["verb"] == "hold" or row["verb"].startswith("deprecated: `"), key
        assert re.search(r"context manager|Hold`|what `fn` returns", row["returns"]), key


@pytest.mark.parametrize("primitive", HOLDING)
def test_every_holding_primitive_has_the_two_forms_and_their_twins(primitive: str) -> None:
    verbs: dict[str, set[str]] = {}
    for (owner, name), row in table().items():
        if owner == primitive:
            verbs.setdefault(row["verb"], set()).add(name)
    assert {"hold", "ahold"} <= verbs["hold"], primitive
    acquire = verbs["acquire"]
    assert {"acquire", "aacquire"} <= acquire or {"malloc_key", "amalloc_key"} <= acquire


def test_the_hold_forms_raise_resource_unavailable() -> None:
    for (primitive, name), row in table().items():
        if name in ("hold", "ahold"):
            assert "`ResourceUnavailable`" in row["raises"], (primitive, name)


def test_no_removed_synonym_is_left_on_a_primitive() -> None:
    for primitive in ("ResourcePool", "Semaphore", "Lock"):
        names = public_names(getattr(django_redis_pool, primitive))
        assert not {"take", "atake"} & set(names), primitive
    assert re.search(r"`DEFAULT`", API_PAGE.read_text())
