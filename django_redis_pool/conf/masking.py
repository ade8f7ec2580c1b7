"""Secrets kept out of every message: a Redis URL or any text quoting one
with its passwords replaced by asterisks (:func:`masked_url`,
:func:`masked_text`). The checks, the admin, ``pool_status`` and the log
lines that quote a URL use them."""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

__all__ = ["MASK", "masked_text", "masked_url"]

MASK = "********"


def masked_url(url: str) -> str:
    """``url`` with its passwords (in the credentials, or any query parameter
    whose name contains "password", e.g. ``ssl_password``) replaced by asterisks."""
    parts = urlsplit(url)
    if parts.password is not None:
        host = parts.netloc.rpartition("@")[2]
        parts = parts._replace(netloc=f"{parts.username or ''}:{MASK}@{host}")
    pairs = parse_qsl(parts.query, keep_blank_values=True)
    if any("password" in key.lower() for key, _ in pairs):
        masked = [(key, MASK if "password" in key.lower() else value) for key, value in pairs]
        parts = parts._replace(query=urlencode(masked, safe="*"))
    if parts == urlsplit(url):
        return url
    # urlunsplit() drops the empty host of "unix:///path": put the "//" back.
    rebuilt = urlunsplit(parts)
    if url.startswith(f"{parts.scheme}://") and not rebuilt.startswith(f"{parts.scheme}://"):
        rebuilt = f"{parts.scheme}://{rebuilt[len(parts.scheme) + 1 :]}"
    return rebuilt


def masked_text(text: str) -> str:
    """``text`` with the passwords of any URLs in it (credentials, or a query
    parameter whose name contains "password") replaced by asterisks."""
    text = re.sub(r"(://[^\s/@'\"]*:)[^\s@'\"]+@", rf"\g<1>{MASK}@", text)
    return re.sub(r"(?i)(password=)[^&\s'\"]+", rf"\g<1>{MASK}", text)
