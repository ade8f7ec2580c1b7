"""The holder name of a request: made by the guard, read back by ``pool_status``
and the admin.

A request held without an ``identity`` holds under a name of its own::

    <host>:<pid>:<12 hex digits> <METHOD> <path> <user>

e.g. ``web-3:4242:9f2c61d0a1b3 GET /print/ alice``. The method, the path and
the user are percent-quoted (:func:`urllib.parse.quote`), so none has a space
and the name reads back unambiguously (:func:`request_of`); the user is ``-``
for an anonymous request, or where ``request.user`` is not set (a user named
"-" is written ``%2D``). The whole stays within 200 characters, a holder's
limit: a long path (or user) is shortened and ends with "…" once read back;
the format is never broken.

A hold taken outside a request (``holding()`` in a task, a command, a script)
without an ``identity`` holds under::

    <host>:<pid>:<12 hex digits> task <caller>

e.g. ``worker-1:77:0c1d2e3f4a5b task myapp.tasks.send_invoice`` (the caller is
the decorated function, or the function whose ``with holding(...)`` took it;
:func:`task_holder`). It, and a holder chosen otherwise (an ``identity`` of
the view, a holder named in code), reads back as None from :func:`request_of`:
it is shown as itself.

The admin and ``pool_status`` say each fact of a request's holder once: its
process part (:func:`process_of`) where the holder is named, and its method,
path and user beside it (:func:`holder_words` puts both in one line, an
anonymous user as "anonymous").
"""

from __future__ import annotations

import logging
import re
from typing import Any
from urllib.parse import quote, unquote

from django.utils.functional import LazyObject, empty

from .primitives.validators import MAX_NAME_LENGTH

__all__ = [
    "ANONYMOUS",
    "ANONYMOUS_WORD",
    "holder_words",
    "process_of",
    "request_holder",
    "request_of",
    "task_holder",
    "user_unread",
    "username_of",
]

logger = logging.getLogger("django_redis_pool")

#: The user of an anonymous request, in a holder name.
ANONYMOUS = "-"
#: How an anonymous request's user is shown to people (never a bare "-").
ANONYMOUS_WORD = "anonymous"
#: What a shortened part ends with ("…", quoted).
_SHORTENED = quote("\N{HORIZONTAL ELLIPSIS}")
#: Most characters of the process part, the method and the user (quoted): what
#: is left, at least 30, is the path's.
_PROCESS_MAX, _METHOD_MAX, _USER_MAX = 80, 16, 64
#: Characters a path keeps unquoted (besides letters, digits and ``_.-~``).
_PATH_SAFE = "/!$&'()*+,;=:@"
_USER_SAFE = "@+"

_REQUEST = re.compile(
    r"(?P<process>\S+:\d+:[0-9a-f]{12}) (?P<method>\S+) (?P<path>/\S*) (?P<user>\S+)"
)


def _quoted(text: str, limit: int, safe: str) -> str:
    """``text`` percent-quoted in at most ``limit`` characters: cut between two
    characters (never inside an escape), then marked "…", if it is longer."""
    whole = quote(text, safe=safe, errors="replace")
    if len(whole) <= limit:
        return whole
    room, kept = limit - len(_SHORTENED), []
    for char in text:
        piece = quote(char, safe=safe, errors="replace")
        room -= len(piece)
        if room < 0:
            break
        kept.append(piece)
    return "".join(kept) + _SHORTENED


def request_holder(process: str, method: str | None, path: str, user: str | None) -> str:
    """The holder name of a request: ``process`` (``host:pid:12 hex digits``),
    its ``method`` and ``path``, and the name of its ``user`` (None or "":
    anonymous or unknown), within 200 characters."""
    process = re.sub(r"\s", "-", process)[-_PROCESS_MAX:]
    method_part = _quoted(method or "-", _METHOD_MAX, "")
    if not user:
        user_part = ANONYMOUS
    elif user == ANONYMOUS:
        user_part = "%2D"
    else:
        user_part = _quoted(user, _USER_MAX, _USER_SAFE)
    room = MAX_NAME_LENGTH - len(process) - len(method_part) - len(user_part) - 3
    if not path.startswith("/"):
        path = f"/{path}"
    path_part = _quoted(path, room, _PATH_SAFE)
    return f"{process} {method_part} {path_part} {user_part}"


def task_holder(process: str, caller: str) -> str:
    """The holder name of a hold outside a request: ``process`` (``host:pid:12
    hex digits``) and the ``caller`` holding (a function's dotted name),
    within 200 characters."""
    process = re.sub(r"\s", "-", process)[-_PROCESS_MAX:]
    room = MAX_NAME_LENGTH - len(process) - len(" task ")
    return f"{process} task {_quoted(caller.lstrip('/') or '-', room, _PATH_SAFE)}"


def request_of(holder: str) -> dict[str, str | None] | None:
    """What :func:`request_holder` wrote in ``holder``: ``{"method", "path",
    "user"}`` (``user`` None for an anonymous request), or None for a holder
    that is not a request's name."""
    found = _REQUEST.fullmatch(holder)
    if found is None:
        return None
    user = found["user"]
    return {
        "method": unquote(found["method"]),
        "path": unquote(found["path"]),
        "user": None if user == ANONYMOUS else unquote(user),
    }


def process_of(holder: str) -> str | None:
    """The process part (``host:pid:12 hex digits``) of a request's holder
    name, or None for a holder that is not one (:func:`request_of`)."""
    found = _REQUEST.fullmatch(holder)
    return None if found is None else found["process"]


def holder_words(holder: str) -> str:
    """``holder`` for people, each fact once: a request's holder name as its
    process part and its request, ``web-3:4242:9f2c61d0a1b3 (GET /print/,
    user alice)`` (an anonymous user: ``anonymous``, so that a user named
    "anonymous" still reads as one); any other holder as it is."""
    request = request_of(holder)
    if request is None:
        return holder
    user = ANONYMOUS_WORD if request["user"] is None else f"user {request['user']}"
    return f"{process_of(holder)} ({request['method']} {request['path']}, {user})"


def user_unread(request: Any) -> bool:
    """Whether ``request.user`` is set but not read yet (Django's
    ``AuthenticationMiddleware`` sets it lazily: reading it loads the session's
    user from the database)."""
    user = request.__dict__.get("user")
    return isinstance(user, LazyObject) and user._wrapped is empty


def username_of(request: Any) -> str | None:
    """The username of the request's user, if it is authenticated; None for an
    anonymous request, or without ``request.user`` (no
    ``AuthenticationMiddleware``, or a ``ResourceMiddleware`` placed before it).
    Reads ``request.user`` as the view would: it is loaded once, then the view
    finds it loaded."""
    user = getattr(request, "user", None)
    if user is None:
        return None
    try:
        if not user.is_authenticated:
            return None
        return str(user.get_username())
    except Exception as exc:  # a broken auth backend must not fail the request here
        logger.warning("%s %s: its user could not be read: %s", request.method, request.path, exc)
        return None
