"""The management command of ``docs/background-work.md`` ("A management
command"), read from the page, with the double ``rebuild_index``: it records
each call in ``CALLS``, sets ``inside``, and returns once ``proceed`` is set
(set unless a test clears it to keep a rebuild running)."""

from __future__ import annotations

import threading

from tests.support.recipes import define
from tests.support.waiting import STARTUP

CALLS: list[str] = []
inside = threading.Event()
proceed = threading.Event()
proceed.set()


def rebuild_index() -> None:
    CALLS.append("rebuild")
    inside.set()
    assert proceed.wait(STARTUP), "the test let the rebuild finish"


define("A management command", 0, globals())
