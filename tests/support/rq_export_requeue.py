"""The second RQ recipe of ``docs/background-work.md`` (re-enqueued with
``enqueue_in`` after the refusal's ``retry_after``), read from the page: the
first block's imports (which the second one continues), then its
``export_report``, with the double ``build_export``."""

from __future__ import annotations

from tests.support.recipes import define
from tests.support.rq_exports import build_export  # noqa: F401 (the recipe's placeholder)

define("RQ", 0, globals(), only_imports=True)
define("RQ", 1, globals())
