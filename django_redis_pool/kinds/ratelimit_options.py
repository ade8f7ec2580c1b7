"""The options of a ``RATE_LIMITS`` entry (:data:`OPTIONS`): each one's
validator, default and hint. ``RATE`` is read by :mod:`.rates`; ``KEY`` names
what a request counts against (:mod:`.ratelimit_keys`), ``IP_HEADER``,
``TRUSTED_PROXIES`` and ``IPV6_PREFIX`` where its client's address is found
(:mod:`django_redis_pool.client_address`)."""

from __future__ import annotations

import difflib
import re
from typing import Any

from .. import conf
from ..client_address import check_ipv6_prefix
from ..primitives.validators import check_count, check_timeout
from .contract import Option, OptionError
from .ratelimit_keys import KEY_SOURCES
from .rates import Rate, parse_rate

__all__ = ["OPTIONS"]

#: A header name (RFC 9110 token characters).
_HEADER = re.compile(r"[A-Za-z0-9!#$%&'*+.^_`|~-]+")


def _validate_rate(value: Any, path: str) -> Rate | None:
    return None if value is None else parse_rate(value, path)


def _validate_burst(value: Any, path: str) -> int | None:
    return None if value is None else check_count(value, path, minimum=1)


def _validate_key(value: Any, path: str) -> Any:
    """``"user"``, ``"ip"``, ``"header:<Name>"``, a dotted path of a function of
    the request (imported now), or that function itself."""
    if callable(value):
        return value
    if not isinstance(value, str):
        raise OptionError(f"{path} = {value!r} is not a key source", id="E035")
    if value in KEY_SOURCES:
        return value
    if value.lower().startswith("header:"):
        header = value.partition(":")[2].strip()
        if not _HEADER.fullmatch(header):
            raise OptionError(
                f"{path} = {value!r} names no valid header",
                id="E035",
                hint='Name the header after "header:", e.g. "header:X-Api-Key".',
            )
        return f"header:{header}"
    if "." in value.strip("."):
        try:
            conf.import_callable(value, path)
        except ValueError as exc:
            raise OptionError(
                str(exc),
                id="E036",
                hint="Give the full dotted path of a function taking the request and "
                "returning a str (or None: not limited), e.g. 'myapp.limits.tenant_of'.",
            ) from exc
        return value
    close = difflib.get_close_matches(value.lower(), [*KEY_SOURCES, "header:"], n=1, cutoff=0.5)
    suggestion = f"Did you mean {close[0]!r}? " if close else ""
    raise OptionError(
        f"{path} = {value!r} is not a key source",
        id="E035",
        hint=f'{suggestion}Use "user", "ip", "header:<Name>" (e.g. "header:X-Api-Key"), or '
        "the dotted path of a function of the request.",
    )


def _validate_ip_header(value: Any, path: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not _HEADER.fullmatch(value.strip()):
        raise OptionError(
            f"{path} = {value!r} is not a header name",
            id="E037",
            hint='Name the header your proxy sets, e.g. "X-Forwarded-For" or "X-Real-IP", '
            "or None to use REMOTE_ADDR.",
        )
    return value.strip()


def _validate_trusted_proxies(value: Any, path: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise OptionError(
            f"{path} must be an int >= 1, got {value!r}",
            id="E037",
            hint="Use how many proxies in front of Django add an address to IP_HEADER, e.g. "
            "1 (one load balancer): the address that many from the right is the client's.",
        )
    return value


#: The options of a ``RATE_LIMITS`` entry, by setting key.
OPTIONS: dict[str, Option] = {
    "RATE": Option(
        _validate_rate,
        None,
        'Use "<count>/<unit>", e.g. "100/m", "10/5s" or "1000/2h".',
    ),
    "BURST": Option(
        _validate_burst,
        None,
        "Use how many units a key may spend at once, an int >= 1, or None for the count of RATE.",
    ),
    "KEY": Option(
        _validate_key,
        "user",
        'Use "user", "ip", "header:<Name>" or the dotted path of a function of the request.',
    ),
    "COST": Option(
        lambda value, path: check_count(value, path, minimum=1),
        1,
        "Use how many units one request spends, an int >= 1 (and <= BURST).",
    ),
    "TIMEOUT": Option(
        check_timeout,
        0,
        "Use how many seconds a request may wait for its turn, a number >= 0 (0: "
        "refused at once), or None to wait as long as it takes.",
    ),
    "IP_HEADER": Option(
        _validate_ip_header,
        None,
        'Use the header your proxy sets, e.g. "X-Forwarded-For", or None.',
    ),
    "TRUSTED_PROXIES": Option(
        _validate_trusted_proxies,
        1,
        "Use how many proxies in front of Django add an address to IP_HEADER, e.g. 1.",
    ),
    "IPV6_PREFIX": Option(
        check_ipv6_prefix,
        64,
        "Use how many leading bits of an IPv6 address name one client, an int from 1 "
        "to 128, e.g. 64 (one site's network); 128 counts each address alone.",
    ),
}
