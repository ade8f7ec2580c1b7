"""Waiting in tests for something another thread or process does."""

from __future__ import annotations

import time
from collections.abc import Callable

#: How long a test waits for a Python process it started (``manage.py`` or
#: ``python -m django``) to show it is running: only a failure detector (a
#: passing test waits as long as the start takes), long enough for Django to
#: import on a machine whose CPUs are busy, which takes several times as long
#: as on an idle one. (pytest-timeout bounds the whole test at 120 s.)
STARTUP = 60.0


def wait_for(predicate: Callable[[], object], timeout: float = 10.0, what: str = "it") -> None:
    """Return once ``predicate()`` is true; fail the test after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)
