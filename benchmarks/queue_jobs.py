"""The trivial job of ``bench_queue.py``, importable by RQ's workers (RQ refuses
functions of ``__main__``)."""

from __future__ import annotations

import time
from typing import Any


def started(*_args: Any) -> float:
    """Returns when it started (unix seconds)."""
    return time.time()
