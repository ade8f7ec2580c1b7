"""The tables of the detail pages: one page of rows at a time
(``?<table>_page=``), and times on the Redis clock as datetimes."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from django.http import HttpRequest

__all__ = ["MAX_PAGE", "PAGE_SIZE", "Table", "as_datetime", "page_number", "paged_table"]

#: Rows per table on a detail page.
PAGE_SIZE = 50
#: Pages beyond this show as empty (offsets stay within what Redis counts exactly).
MAX_PAGE = 2**52 // PAGE_SIZE


def as_datetime(seconds: float | None) -> datetime | None:
    """Unix seconds (Redis clock) as an aware datetime, for the ``date`` filter;
    None for None, and for times beyond what a datetime holds (year 9999)."""
    if seconds is None:
        return None
    try:
        return datetime.fromtimestamp(seconds, tz=timezone.utc)
    except (ValueError, OverflowError, OSError):
        return None


@dataclass(frozen=True)
class Table:
    """One paginated table of a detail page (``pager.html`` shows its pages)."""

    name: str  #: its query parameter is ``<name>_page``
    rows: list[dict[str, Any]]
    count: int
    number: int  #: 1-based page number
    num_pages: int
    previous_query: str | None  #: query strings of the neighbour pages (None: none)
    next_query: str | None


def page_number(request: HttpRequest, table: str) -> int:
    """The page of ``table`` that ``request`` asks for (1 if none, or not a number)."""
    try:
        return min(max(1, int(request.GET.get(f"{table}_page", "1"))), MAX_PAGE)
    except ValueError:
        return 1


def paged_table(
    request: HttpRequest, name: str, rows: list[dict[str, Any]], count: int, number: int
) -> Table:
    """Page ``number`` of table ``name``: its ``rows`` of ``count`` in all."""
    num_pages = max(1, math.ceil(count / PAGE_SIZE))

    def query(page: int) -> str | None:
        if not 1 <= page <= num_pages:
            return None
        params = request.GET.copy()
        params[f"{name}_page"] = str(page)
        return "?" + params.urlencode()

    return Table(
        name=name,
        rows=rows,
        count=count,
        number=number,
        num_pages=num_pages,
        previous_query=query(min(number - 1, num_pages)),
        next_query=query(number + 1),
    )
