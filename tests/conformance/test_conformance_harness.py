"""The conformance harness itself: a peer that cannot be fetched fails the
run, saying so; every expected outcome names a test of its suite."""

from __future__ import annotations

import inspect
import os
import unittest
from pathlib import Path

import pytest

from . import expectations, peers

pytestmark = pytest.mark.conformance


def test_a_peer_suite_that_cannot_be_fetched_fails_saying_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(peers, "CACHE", tmp_path)
    monkeypatch.setattr(peers, "_RUN", "this-test")
    # (no pip configuration, and an index that refuses: what "offline" looks like)
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")
    monkeypatch.delenv("PIP_FIND_LINKS", raising=False)
    monkeypatch.delenv("PIP_EXTRA_INDEX_URL", raising=False)
    expected = "could not fetch the sdist of redis-allocator==0.7.0 from PyPI"
    with pytest.raises(peers.PeerUnavailable, match=expected) as first:
        peers.fetch(peers.REDIS_ALLOCATOR)
    assert "pip said" in str(first.value)
    # the run's other modules (and xdist workers) get the same failure at once
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:1/never-asked")
    with pytest.raises(peers.PeerUnavailable, match=expected):
        peers.fetch(peers.REDIS_ALLOCATOR)
    assert not peers.REDIS_ALLOCATOR.fetched


def _tests_of(module_name: str) -> set[str]:
    """The ``Class::test`` and ``test`` names a suite's module collects."""
    module = __import__(f"tests.conformance.{module_name}", fromlist=["_"])
    if hasattr(module, "problem"):
        pytest.fail(module.problem, pytrace=False)
    names = set()
    for name, value in vars(module).items():
        if inspect.isclass(value) and (
            issubclass(value, unittest.TestCase) or name.startswith("Test")
        ):
            names |= {f"{name}::{attr}" for attr in dir(value) if attr.startswith("test")}
        elif name.startswith("test_") and callable(value):
            names.add(name)
    return names


@pytest.mark.parametrize(("suite", "module"), [(s, m[:-3]) for m, s in expectations.SUITES.items()])
def test_every_expected_outcome_names_a_test_of_its_suite(suite: str, module: str) -> None:
    known = _tests_of(module)
    stale = [key for key in expectations.EXPECTED[suite] if key.split("[", 1)[0] not in known]
    assert not stale, f"expectations.py lists tests that {suite} does not have: {stale}"
