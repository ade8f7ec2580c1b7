"""One module per subcommand of ``python -m benchmarks``.

Each has ``NAME`` (the subcommand), ``HELP`` (its one line in ``--help``), a
docstring (its ``--help`` text: what it measures, against what),
``add_arguments(parser)``, ``run(args)`` returning ``{"settings": ...,
"results": ..., "skipped": [...]}`` (None if nothing could be measured here),
and ``render(doc)``: the Markdown of a results document (``results.py``).
A module that is no subcommand holds part of one (``engine_tables``: the
engine's tables and its sections of docs/performance.md).
"""

from __future__ import annotations

import importlib
from types import ModuleType

#: Subcommand -> its module here, in ``--help``'s order.
SUBCOMMANDS = {
    "engine": "engine",
    "allocator": "allocator",
    "calls": "calls",
    "cpu": "cpu",
    "async": "async_path",
    "redis-cost": "redis_cost",
    "ratelimit": "ratelimit",
    "objectpool": "objectpool",
    "queue": "taskqueue",
    "views": "views",
    "admin": "admin",
    "asgi": "asgi",
    "overload": "overload",
    "reshard": "reshard",
    "report": "report",
}


def load(subcommand: str) -> ModuleType:
    """The module of ``subcommand``."""
    return importlib.import_module(f"benchmarks.suites.{SUBCOMMANDS[subcommand]}")
