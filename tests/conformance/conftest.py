"""The conformance harness: the peers' own test suites run against ours.

Every test under this folder is marked ``conformance``. The expected outcomes
that differ from the peer's own run are in :mod:`tests.conformance.expectations`
and are applied here, at collection: not applicable (skipped, with the
reason), and expected failures (``xfail(strict=True)``), either a deliberate
difference of ours or a known bug. See docs/testing.md ("Conformance").
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from . import expectations

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the conformance tests, and apply their expected outcomes."""
    for item in items:
        if HERE not in Path(str(item.path)).resolve().parents:
            continue
        item.add_marker(pytest.mark.conformance)
        expected = expectations.lookup(item)
        if expected is not None:
            item.add_marker(expected.mark())


@pytest.fixture(autouse=True)
def django_tasks_backend(request: pytest.FixtureRequest) -> Iterator[None]:
    """For the Django Tasks suites' classes (``Adapted``): our queues on the
    harness's Redis, the immediate aliases of the class run by the worker at
    once, and the dummy backend's ``results`` and ``clear()``."""
    from .django_tasks_adapter import Adapted

    if request.cls is None or not issubclass(request.cls, Adapted):
        yield
        return
    from . import django_tasks_adapter as adapter

    settings: Any = request.getfixturevalue("settings")
    monkeypatch: pytest.MonkeyPatch = request.getfixturevalue("monkeypatch")
    settings.DJANGO_REDIS_POOL = adapter.pool_settings(request.getfixturevalue("redis_url"))
    with adapter.immediate(request.cls.immediate_aliases), adapter.dummy_api(monkeypatch):
        yield
