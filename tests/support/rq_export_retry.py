"""The first RQ recipe of ``docs/background-work.md`` (RQ's ``Retry``), read
from the page: ``export_report`` as the page defines it, with the double
``build_export``. ``CALLS`` is the page's ``queue.enqueue(...)``, for the test
to run with its ``queue``."""

from __future__ import annotations

from tests.support.recipes import define
from tests.support.rq_exports import build_export  # noqa: F401 (the recipe's placeholder)

CALLS = define("RQ", 0, globals())
