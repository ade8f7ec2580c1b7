"""Text read from Redis: decoded without ever raising (:func:`text`), checked
where it is used (:func:`is_text`), and shown safely in messages, log lines
and on terminals (:func:`printable`, :func:`escaped`): data someone else
wrote can neither crash a reader nor forge a line. Nothing here imports Django.
"""

from __future__ import annotations

from typing import Any

__all__ = ["escaped", "is_text", "printable", "text"]


def text(value: Any) -> Any:
    """Decode bytes returned by a client built without ``decode_responses``
    (lists of them too, nested). Bytes that are not UTF-8 (written by someone
    else) never raise here: each such byte becomes a lone surrogate
    (``surrogateescape``), which :func:`is_text` finds where the text is used."""
    kind = type(value)
    if kind is bytes:
        return value.decode("utf-8", "surrogateescape")
    if kind is list:
        return [
            v.decode("utf-8", "surrogateescape") if type(v) is bytes else text(v) for v in value
        ]
    return value


def printable(value: str, limit: int = 80) -> str:
    """``value`` quoted for a message, log line or terminal: at most ``limit``
    characters, every control or non-printable character (and every byte that
    was not UTF-8) escaped, so that data from Redis can neither forge a line
    nor move a terminal's cursor."""
    shown = value if len(value) <= limit else value[:limit] + "..."
    return ascii(shown) if not shown.isprintable() else repr(shown)


def escaped(text: str) -> str:
    """``text`` with every control or non-printable character (and every byte
    that was not UTF-8) written as its escape (``\\x1b``, ``\\n``): data from Redis
    on a terminal or in a log line can neither move the cursor nor forge a line."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text)


def is_text(value: str) -> bool:
    """Whether ``value`` (as :func:`text` decoded it) was UTF-8 text in Redis."""
    try:
        value.encode()
    except UnicodeEncodeError:
        return False
    return True
