"""Rate limits in Django: the ``RATE_LIMITS`` setting, ``get_ratelimit``, what a
request counts against (its ``KEY``: the user, the client's address, a header,
or a function of the request), the ``RateLimit-*`` headers of every answer, and
what ``pool_status`` and the metrics read (the rate, the active keys, the
busiest ones). The admin's panels are in
:mod:`django_redis_pool.dashboard.ratelimit_panels`.

A rate limit holds nothing: a request is allowed (its cost is counted against
its key at once) or refused with a 429, and there is nothing to give back.
"""

from __future__ import annotations

import difflib
import hashlib
import math
import re
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from asgiref.sync import sync_to_async

from .. import conf, registry
from ..client_address import check_ipv6_prefix, client_ip
from ..exceptions import ResourceUnavailable
from ..primitives.ratelimit import MAX_KEY_LENGTH, Decision, RateLimiter, check_limits
from ..primitives.validators import check_count, check_timeout
from .contract import Ask, EntryWarning, Held, Kind, Option, OptionError, Report

__all__ = [
    "KEY_SOURCES",
    "KIND",
    "MAX_KEY_LENGTH",
    "QuotaHeaders",
    "Rate",
    "RateLimitKind",
    "get_ratelimit",
    "hashed",
    "parse_rate",
]

#: The built-in ``KEY`` sources (besides ``header:<Name>`` and a dotted path).
KEY_SOURCES = ("user", "ip")
#: How many of the busiest keys ``pool_status`` lists.
STATUS_BUSIEST = 5

#: Seconds in each unit of ``RATE``, by the words it may be written with.
UNITS = {
    **dict.fromkeys(("s", "sec", "second", "seconds"), 1),
    **dict.fromkeys(("m", "min", "minute", "minutes"), 60),
    **dict.fromkeys(("h", "hour", "hours"), 3600),
    **dict.fromkeys(("d", "day", "days"), 86400),
}
_RATE = re.compile(r"\s*(\d+)\s*(?:/|\s+per\s+)\s*(\d+(?:\.\d+)?)?\s*([a-z]+)\s*", re.IGNORECASE)
#: A header name (RFC 9110 token characters).
_HEADER = re.compile(r"[A-Za-z0-9!#$%&'*+.^_`|~-]+")
#: Django settings that say a proxy stands in front of the site.
_PROXY_SETTINGS = ("USE_X_FORWARDED_HOST", "USE_X_FORWARDED_PORT", "SECURE_PROXY_SSL_HEADER")


class Rate(NamedTuple):
    """A parsed ``RATE``: ``rate`` units per ``per`` seconds, as written."""

    rate: int
    per: float
    text: str


def parse_rate(value: Any, path: str = "RATE") -> Rate:
    """``"100/m"``, ``"10/5s"``, ``"1000/2h"``, ``"5000/day"`` (or ``"10 per
    minute"``) as a :class:`Rate`;
    raises :class:`OptionError` (E034) naming ``path`` for anything else (a bare
    number too: it would not say per what)."""
    match = _RATE.fullmatch(value) if isinstance(value, str) else None
    unit = UNITS.get(match[3].lower()) if match else None
    if match is None or unit is None:
        raise OptionError(
            f"{path} = {value!r} is not a rate",
            id="E034",
            hint='Write it as "<count>/<unit>" or "<count>/<n><unit>", the unit one of '
            's, m, h, d (or second, minute, hour, day): e.g. "100/m", "10/5s", "1000/2h".',
        )
    count, per = int(match[1]), float(match[2] or 1) * unit
    if count < 1 or per <= 0:
        raise OptionError(
            f"{path} = {value!r} allows nothing: its count and its period must be above 0",
            id="E034",
            hint='E.g. "100/m" (100 requests a minute), "10/5s".',
        )
    rate = Rate(count, per, value.strip())
    try:
        probe(rate, None)
    except ValueError as exc:
        raise OptionError(
            f"{path} = {value!r} cannot be counted: {exc}",
            id="E034",
            hint="Use a period of at least 1 ms and at most a million units a second, "
            'e.g. "100/m".',
        ) from exc
    return rate


def probe(rate: Rate, burst: int | None) -> None:
    """The primitive's own checks of ``rate`` and ``burst``: ``ValueError``."""
    check_limits(rate.rate, rate.per, burst)


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


# ------------------------------------------------------------ what a request counts


def hashed(value: str) -> str:
    """What a secret (an API key) is counted as: the first 32 hex digits of its
    SHA-256, so that Redis never holds it in clear."""
    return hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()[:32]


@dataclass(frozen=True)
class Policy:
    """How one configured rate limit counts a request."""

    source: Any  #: "user", "ip", "header:<Name>", or a function of the request
    ip_header: str | None
    trusted_proxies: int
    ipv6_prefix: int  #: an IPv6 client counts as its network of this many bits
    cost: int
    timeout: float | None
    headers: Mapping[str, str]  #: the headers every answer gets (RateLimit-Policy)

    @property
    def blocks(self) -> bool:
        """Whether finding the key may block: it reads the user (the database)
        or runs the project's function."""
        return self.source == "user" or not isinstance(self.source, str)

    def ip_key(self, request: Any) -> str:
        return f"ip:{client_ip(request, self.ip_header, self.trusted_proxies, self.ipv6_prefix)}"

    def key_of(self, request: Any) -> str | None:
        """What ``request`` counts against; None: it is not limited."""
        source = self.source
        if source == "ip":
            return self.ip_key(request)
        if source == "user":
            user = getattr(request, "user", None)
            if user is not None and user.is_authenticated:
                return f"user:{user.pk}"
            return self.ip_key(request)
        if isinstance(source, str) and source.startswith("header:"):
            value = request.headers.get(source[7:])
            return f"header:{hashed(value)}" if value else self.ip_key(request)
        if isinstance(source, str):
            source = conf.import_callable(source, "KEY")
        key = source(request)
        if key is not None and not isinstance(key, str):
            raise TypeError(f"the KEY function {source!r} returned {key!r}, not a str or None")
        return key if key is None or len(key) <= MAX_KEY_LENGTH else f"sha256:{hashed(key)}"

    async def akey_of(self, request: Any) -> str | None:
        """:meth:`key_of` from the event loop: the user read with ``auser()``
        where Django provides it, a KEY function in a thread."""
        if self.source == "user" and hasattr(request, "auser"):
            user = await request.auser()
            if user.is_authenticated:
                return f"user:{user.pk}"
            return self.ip_key(request)
        if self.blocks:
            key: str | None = await sync_to_async(self.key_of)(request)
            return key
        return self.key_of(request)


#: Each built rate limit's policy (forgotten with it).
_POLICIES: weakref.WeakKeyDictionary[RateLimiter, Policy] = weakref.WeakKeyDictionary()


def policy_of(limiter: RateLimiter) -> Policy:
    """How the configured ``limiter`` counts requests."""
    policy = _POLICIES.get(limiter)
    if policy is None:  # (built outside the registry: counted by the client's address)
        policy = _POLICIES[limiter] = Policy("ip", None, 1, 1, 0, _policy_headers(limiter))
    return policy


def _policy_headers(limiter: RateLimiter) -> dict[str, str]:
    return {"RateLimit-Policy": f"{limiter.rate};w={limiter.per:g};burst={limiter.burst}"}


class QuotaHeaders(dict[str, str]):
    """The IETF draft's headers of one decision. Two rate limits on one
    request (stacked decorators, or a rule and a decorator) each add theirs to
    the answer, the inner one first: the answer then tells the quota with the
    fewest units left, and ``RateLimit-Policy`` lists every policy. A header
    the view set itself is kept."""

    QUOTA = ("RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset")
    POLICY = "RateLimit-Policy"

    def add_to(self, response: Any) -> None:
        """Add these headers to ``response`` (see the class)."""
        if not getattr(response, "_drp_quota", False):
            if "RateLimit-Remaining" not in response:  # (else the view set its own)
                response._drp_quota = True
            for header, value in self.items():
                if header not in response:
                    response[header] = value
            return
        # An inner limit's are there: the fewest units left, and every policy.
        if int(self["RateLimit-Remaining"]) < int(response["RateLimit-Remaining"]):
            for header in self.QUOTA:
                response[header] = self[header]
        policies = response[self.POLICY].split(", ") if self.POLICY in response else []
        if self.get(self.POLICY) and self[self.POLICY] not in policies:
            response[self.POLICY] = ", ".join([*policies, self[self.POLICY]])


def headers_of(policy: Policy, decision: Decision) -> QuotaHeaders:
    """The IETF draft's headers of one decision."""
    return QuotaHeaders(
        {
            "RateLimit-Limit": str(decision.limit),
            "RateLimit-Remaining": str(max(0, int(decision.remaining))),
            "RateLimit-Reset": str(max(0, math.ceil(decision.reset_after))),
            **policy.headers,
        }
    )


def _given_back() -> bool:
    return True  # a rate limit holds nothing


async def _agiven_back() -> bool:
    return True


class RateLimitKind(Kind[RateLimiter]):
    """A :class:`RateLimiter`: at most ``RATE`` per key, ``BURST`` at once."""

    name = "ratelimit"
    setting_key = "RATE_LIMITS"
    primitive = RateLimiter
    refusal_status = 429
    #: A request's ``PERMITS`` (a rule's, ``@with_resource(permits=)``) is the
    #: units it spends, instead of the entry's ``COST``.
    takes_permits = True
    size_option = "BURST"  #: what a request's permits are checked against (E039)
    counted = ("acquired", "refused", "wait_seconds")
    options = {
        "RATE": Option(
            _validate_rate,
            None,
            'Use "<count>/<unit>", e.g. "100/m", "10/5s" or "1000/2h".',
        ),
        "BURST": Option(
            _validate_burst,
            None,
            "Use how many units a key may spend at once, an int >= 1, or None for the "
            "count of RATE.",
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
    required = ("RATE",)

    @property
    def label(self) -> str:
        return "rate limit"

    # -- settings --------------------------------------------------------------

    def build(
        self, client: Any, name: str, key_prefix: str, options: Mapping[str, Any]
    ) -> RateLimiter:
        rate: Rate = options["RATE"]
        limiter = RateLimiter(
            client,
            name,
            rate=rate.rate,
            per=rate.per,
            burst=options["BURST"],
            key_prefix=key_prefix,
        )
        _POLICIES[limiter] = Policy(
            source=options["KEY"],
            ip_header=options["IP_HEADER"],
            trusted_proxies=options["TRUSTED_PROXIES"],
            ipv6_prefix=options["IPV6_PREFIX"],
            cost=options["COST"],
            timeout=options["TIMEOUT"],
            headers=_policy_headers(limiter),
        )
        return limiter

    def max_permits(self, options: Mapping[str, Any]) -> int | None:
        """The burst: a request's cost (a rule's ``PERMITS``, ``@with_resource(
        permits=)``) above it could never pass (E039)."""
        return options["BURST"] if options["BURST"] is not None else options["RATE"].rate

    def check_entry(self, options: Mapping[str, Any], path: str) -> None:
        burst = self.max_permits(options)
        assert burst is not None
        try:
            probe(options["RATE"], options["BURST"])
        except ValueError as exc:
            raise OptionError(
                f"{path} cannot be counted with BURST {options['BURST']!r}: {exc}",
                hint="Lower BURST, or the period of RATE.",
            ) from exc
        if options["COST"] > burst:
            raise OptionError(
                f"{path} has COST {options['COST']} above its burst {burst}: no request "
                "could ever pass",
                hint="Lower COST, or raise BURST (its default is the count of RATE).",
            )

    def entry_warnings(self, name: str, options: Mapping[str, Any]) -> list[EntryWarning]:
        """W009: a key read from the client's address, while the settings say a
        proxy stands in front of Django and no ``IP_HEADER`` says where the
        client's address is: every client would share the proxy's."""
        from django.conf import settings

        source = options["KEY"]
        path = conf.setting_path(self.setting_key, name)
        warnings = []
        if str(source).startswith("header:"):
            header = str(source)[7:]
            warnings.append(
                EntryWarning(
                    f'{path}["KEY"] = {source!r} gives every value of the {header} header '
                    "a bucket of its own, and the client chooses that value: a client that "
                    "sends a new one with each request is never limited (nothing checks "
                    "that the value is a real key).",
                    "Key by something verified: a KEY function that looks the header's "
                    "value up (e.g. the account of a valid API key) and returns None for "
                    'an unknown one, or "user" once authentication has run; or silence '
                    'this with SILENCED_SYSTEM_CHECKS = ["django_redis_pool.W010"] if a '
                    "proxy in front of Django rejects unknown values.",
                    id="W010",
                )
            )
        by_address = source in KEY_SOURCES or str(source).startswith("header:")
        proxied = [setting for setting in _PROXY_SETTINGS if getattr(settings, setting, None)]
        if not by_address or options["IP_HEADER"] is not None or not proxied:
            return warnings
        fallback = "" if source == "ip" else " (as it does for the requests it cannot tell apart)"
        return [
            EntryWarning(
                f'{path}["KEY"] = {source!r} counts requests by the client\'s address'
                f"{fallback}, but settings.{proxied[0]} says a proxy stands in front of "
                "Django: REMOTE_ADDR is then the proxy's, and every client shares one limit.",
                f'Set {path}["IP_HEADER"] to the header your proxy sets (e.g. '
                '"X-Forwarded-For") and ["TRUSTED_PROXIES"] to how many proxies append to '
                "it; or silence this with SILENCED_SYSTEM_CHECKS = "
                '["django_redis_pool.W009"] if REMOTE_ADDR is the client\'s.',
                id="W009",
            ),
            *warnings,
        ]

    # -- requests --------------------------------------------------------------

    def request_timeout(self, primitive: RateLimiter) -> float | None:
        """The entry's ``TIMEOUT`` (0 by default: not waiting)."""
        return policy_of(primitive).timeout

    def hold(self, primitive: RateLimiter, ask: Ask) -> Held | None:
        """The :class:`Decision` for the request's key (``identity(request)`` if
        the view names one, else its ``KEY``); refused (429) when limited."""
        policy = policy_of(primitive)
        key = ask.identity if ask.identity is not None else policy.key_of(ask.request)
        if key is None:
            return Held(None, None, _given_back, _agiven_back)
        cost = policy.cost if ask.permits is None else ask.permits
        decision = primitive.decide(key, cost=cost, timeout=ask.timeout)
        return self._held(primitive, policy, key, decision)

    async def ahold(self, primitive: RateLimiter, ask: Ask) -> Held | None:
        """:meth:`hold` on the event loop."""
        policy = policy_of(primitive)
        key = ask.identity if ask.identity is not None else await policy.akey_of(ask.request)
        if key is None:
            return Held(None, None, _given_back, _agiven_back)
        cost = policy.cost if ask.permits is None else ask.permits
        decision = await primitive.adecide(key, cost=cost, timeout=ask.timeout)
        return self._held(primitive, policy, key, decision)

    @staticmethod
    def _held(primitive: RateLimiter, policy: Policy, key: str, decision: Decision) -> Held:
        headers = headers_of(policy, decision)
        if not decision.allowed:
            retry_after = decision.retry_after
            error = ResourceUnavailable(
                f"rate limit {primitive.name!r}: {key!r} is limited (next turn in "
                f"{retry_after:.3f} s)",
                reason=ResourceUnavailable.LIMITED,
            )
            if math.isfinite(retry_after):
                error.retry_after = max(1, math.ceil(retry_after))  # type: ignore[attr-defined]
            error.headers = headers  # type: ignore[attr-defined]
            error.decision = decision  # type: ignore[attr-defined]
            raise error
        return Held(decision, None, _given_back, _agiven_back, headers=headers)

    # -- management commands ---------------------------------------------------

    def status(self, primitive: RateLimiter) -> Report:
        """The rate, the active keys and the busiest few (two reads)."""
        active = primitive.active_count()
        busiest = primitive.busiest(STATUS_BUSIEST)
        rows: list[dict[str, Any]] = [
            {
                "key": state.key,
                "remaining": state.remaining,
                "retry_after": state.retry_after,
                "reset_after": state.reset_after,
            }
            for state in busiest
        ]
        details = [
            f"  {primitive.rate} per {primitive.per:g} s, burst {primitive.burst}; "
            f"{active} active key{'s' if active != 1 else ''}"
        ]
        for row in rows:
            turn = f"next in {row['retry_after']:.1f} s" if row["retry_after"] > 0 else "passes now"
            details.append(
                f"  {row['key']}  {max(0, math.floor(row['remaining'] + 1e-9))} left  {turn}  "
                f"full in {row['reset_after']:.1f} s"
            )
        return Report(
            primitive.name,
            changed=any(row["retry_after"] > 0 for row in rows),
            details=tuple(details),
            data={
                "kind": self.name,
                "name": primitive.name,
                "held": active,
                "free": None,
                "waiting": None,
                "size": primitive.burst,
                "rate": primitive.rate,
                "per": primitive.per,
                "burst": primitive.burst,
                "active_keys": active,
                "busiest": rows,
            },
        )

    def gauges(self, primitive: RateLimiter) -> dict[str, float | None]:
        """``size``: the burst; ``held``: the active keys (one read)."""
        return {"size": primitive.burst, "held": primitive.active_count()}


KIND = RateLimitKind()


def get_ratelimit(name: str) -> RateLimiter:
    """The :class:`RateLimiter` configured in ``DJANGO_REDIS_POOL["RATE_LIMITS"][name]``."""
    return registry.get(KIND, name)
