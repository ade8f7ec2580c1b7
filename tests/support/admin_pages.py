"""Reading the admin dashboard's pages (their HTML, as Django's test client gets
it): text, tables, rows, sparklines, pagers, forms, messages, health icons,
and an operator's confirmation of an action.

They rely on the dashboard templates' structure: each table lives in a
``<div class="module drp-module" id="...">`` with no nested ``div``.
"""

from __future__ import annotations

import html
import re
from typing import Any

from django.test import Client

_TAG = re.compile(r"<[^>]+>")
_SPACE = re.compile(r"\s+")


def text_of(fragment: str) -> str:
    """The visible text of an HTML fragment: tags dropped, entities decoded,
    whitespace collapsed."""
    return _SPACE.sub(" ", html.unescape(_TAG.sub(" ", fragment))).strip()


def page_text(response: Any) -> str:
    """The visible text of a whole response."""
    return text_of(response.content.decode())


def module(response: Any, module_id: str) -> str:
    """The HTML of the dashboard module ``<div ... id="module_id">``."""
    found = re.search(
        rf'<div class="module drp-module" id="{re.escape(module_id)}">(.*?)</div>',
        response.content.decode(),
        re.S,
    )
    assert found is not None, f"no module #{module_id} on the page"
    return found.group(1)


def has_module(response: Any, module_id: str) -> bool:
    return f'id="{module_id}"' in response.content.decode()


def body_rows(fragment: str) -> list[str]:
    """The ``<tr>`` elements (whole, with their attributes) of the ``tbody``."""
    body = re.search(r"<tbody>(.*?)</tbody>", fragment, re.S)
    assert body is not None, "no tbody"
    return re.findall(r"<tr\b.*?</tr>", body.group(1), re.S)


def cells(row: str) -> list[str]:
    """The visible text of each ``th``/``td`` of one row."""
    return [text_of(cell) for cell in re.findall(r"<t[hd]\b[^>]*>(.*?)</t[hd]>", row, re.S)]


def table(response: Any, module_id: str) -> list[list[str]]:
    """The rows of the table in module ``module_id``, as lists of cell texts
    (the "Nothing is held." placeholder row included)."""
    return [cells(row) for row in body_rows(module(response, module_id))]


def data_rows(response: Any, module_id: str) -> list[str]:
    """The ``data-resource`` of every real row of the table in ``module_id``."""
    return [
        html.unescape(value)
        for value in re.findall(r'<tr data-resource="([^"]*)"', module(response, module_id))
    ]


def _overview_row(response: Any, name: str) -> str:
    found = re.search(
        rf'<tr class="drp-row" data-name="{re.escape(name)}">(.*?)</tr>',
        response.content.decode(),
        re.S,
    )
    assert found is not None, f"no dashboard row for {name!r}"
    return found.group(0)


_SPARK_CELL = re.compile(r'<td class="drp-spark">(.*?)</td>', re.S)


def dashboard_row(response: Any, name: str) -> list[str]:
    """The cell texts of the overview row of primitive ``name``, without its
    last hour's cell (see :func:`sparkline`)."""
    return cells(_SPARK_CELL.sub("", _overview_row(response, name)))


def sparkline(response: Any, name: str) -> str:
    """The HTML of the overview row's last hour (its ``<svg>``, or a dash)."""
    found = _SPARK_CELL.search(_overview_row(response, name))
    assert found is not None, f"no last hour cell in the row of {name!r}"
    return found.group(1)


def health_icons(response: Any) -> dict[str, str]:
    """Primitive name -> the alt text of its health icon."""
    return dict(
        re.findall(
            r'<tr class="drp-row" data-name="([^"]+)">.*?'
            r'<td class="drp-health">\s*<img [^>]*alt="(\w+)"',
            response.content.decode(),
            re.S,
        )
    )


def pager(response: Any, table_name: str) -> str | None:
    """The text of the paginator of ``table_name`` (None: not paginated)."""
    found = re.search(
        rf'<p class="paginator" data-table="{table_name}">(.*?)</p>',
        response.content.decode(),
        re.S,
    )
    return None if found is None else text_of(found.group(1))


def form_inputs(response: Any, form_id: str) -> dict[str, str]:
    """Name -> value of every ``input`` with a name in form ``form_id``."""
    found = re.search(
        rf'<form[^>]*id="{form_id}"[^>]*>(.*?)</form>', response.content.decode(), re.S
    )
    assert found is not None, f"no form #{form_id} on the page"
    values = {}
    for tag in re.findall(r"<input\b[^>]*>", found.group(1)):
        name = re.search(r'\bname="([^"]*)"', tag)
        value = re.search(r'\bvalue="([^"]*)"', tag)
        if name is not None:
            values[html.unescape(name.group(1))] = html.unescape(value.group(1) if value else "")
    return values


def messages_of(response: Any) -> list[tuple[str, str]]:
    """(level tag, text) of the messages shown by a rendered response."""
    return [(m.level_tag, m.message) for m in response.context["messages"]]


def confirm(client: Client, url: str, params: dict[str, Any] | None = None) -> Any:
    """What an operator does: open the action's confirmation page (its
    parameters in the query string, as a row's link passes them), check it asks,
    then submit its form as it is (hidden fields and CSRF token included).
    Returns the followed response of the POST."""
    page = client.get(url, params or {})
    assert page.status_code == 200, page.status_code
    assert page.context["question"], f"no question asked: {page_text(page)}"
    return client.post(url, form_inputs(page, "confirm-form"), follow=True)


__all__ = [
    "body_rows",
    "cells",
    "confirm",
    "dashboard_row",
    "data_rows",
    "form_inputs",
    "has_module",
    "health_icons",
    "messages_of",
    "module",
    "page_text",
    "pager",
    "sparkline",
    "table",
    "text_of",
]
