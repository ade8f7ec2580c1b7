"""MkDocs hooks of the docs site (``hooks:`` in mkdocs.yml).

The docstrings use Sphinx roles (``:class:`Lease```, ``:meth:`~.Lock.acquire```),
which the API pages would show literally: keep only the name, in code.
"""

from __future__ import annotations

import re
from typing import Any

_ROLE = re.compile(r":(?:class|meth|func|data|mod|attr|exc|obj):<code>([^<]*)</code>")
_TARGET = re.compile(r"^(.*?)\s*&lt;[^&]*&gt;$")


def _name(match: re.Match[str]) -> str:
    text = match.group(1)
    explicit = _TARGET.match(text)
    if explicit:  # :meth:`title <target>`: the title
        text = explicit.group(1)
    elif text.startswith("~"):  # :class:`~a.b.C`: C
        text = text.rsplit(".", 1)[-1]
    else:
        text = text.lstrip(".")
    return f"<code>{text}</code>"


def on_page_content(html: str, **kwargs: Any) -> str:
    """Strip the Sphinx roles from a rendered page."""
    return _ROLE.sub(_name, html)
