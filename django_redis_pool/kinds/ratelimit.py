"""Rate limits in Django: the ``RATE_LIMITS`` setting, ``get_ratelimit``, a
request's decision (counted against its key, refused with a 429 when
limited, its ``RateLimit-*`` headers on every answer), and what
``pool_status`` and the metrics read (the rate, the active keys, the busiest
ones). What else a rate limit is has its own module: its options
(:mod:`.ratelimit_options`, ``RATE`` read by :mod:`.rates`), what a request
counts against (:mod:`.ratelimit_keys`), its answer headers
(:mod:`.quota_headers`). The admin's panels are in
:mod:`django_redis_pool.dashboard.ratelimit_panels`.

A rate limit holds nothing: a request is allowed (its cost is counted against
its key at once) or refused with a 429, and there is nothing to give back.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from .. import conf
from ..exceptions import ResourceUnavailable
from ..primitives.ratelimit.limiter import MAX_KEY_LENGTH, Decision, RateLimiter
from .contract import Ask, EntryWarning, Grant, Kind, OptionError, Report
from .quota_headers import QuotaHeaders, headers_of, policy_headers
from .ratelimit_keys import KEY_SOURCES, Policy, attach_policy, hashed, policy_of
from .ratelimit_options import OPTIONS
from .rates import Rate, check_countable, parse_rate

__all__ = [
    "KEY_SOURCES",
    "KIND",
    "MAX_KEY_LENGTH",
    "QuotaHeaders",
    "Rate",
    "RateLimitKind",
    "hashed",
    "parse_rate",
]

#: How many of the busiest keys ``pool_status`` lists.
STATUS_BUSIEST = 5


def _nothing_to_release() -> bool:
    return True  # a rate limit holds nothing


async def _anothing_to_release() -> bool:
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
    options = OPTIONS
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
        attach_policy(
            limiter,
            Policy(
                source=options["KEY"],
                ip_header=options["IP_HEADER"],
                trusted_proxies=options["TRUSTED_PROXIES"],
                ipv6_prefix=options["IPV6_PREFIX"],
                cost=options["COST"],
                timeout=options["TIMEOUT"],
                headers=policy_headers(limiter),
            ),
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
            check_countable(options["RATE"], options["BURST"])
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

    def entry_warnings(
        self, name: str, options: Mapping[str, Any], *, proxied: Sequence[str] = ()
    ) -> list[EntryWarning]:
        """W009: a key read from the client's address, while the settings say a
        proxy stands in front of Django (``proxied``: those of
        ``conf.PROXY_SETTINGS`` that are set) and no ``IP_HEADER`` says where
        the client's address is: every client would share the proxy's. W010: a
        key the client chooses (a header's value)."""
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

    def grant(self, primitive: RateLimiter, ask: Ask) -> Grant | None:
        """The :class:`Decision` for the request's key (``identity(request)`` if
        the view names one, else its ``KEY``); refused (429) when limited."""
        policy = policy_of(primitive)
        key = ask.identity
        if key is None:  # outside a request (holding()), the key "" unless one is named
            key = "" if ask.request is None else policy.key_of(ask.request)
        if key is None:
            return Grant(None, None, _nothing_to_release, _anothing_to_release)
        cost = policy.cost if ask.permits is None else ask.permits
        decision = primitive.decide(key, cost=cost, timeout=ask.timeout)
        return self._held(primitive, policy, key, decision)

    async def agrant(self, primitive: RateLimiter, ask: Ask) -> Grant | None:
        """:meth:`grant` on the event loop."""
        policy = policy_of(primitive)
        key = ask.identity
        if key is None:
            key = "" if ask.request is None else await policy.akey_of(ask.request)
        if key is None:
            return Grant(None, None, _nothing_to_release, _anothing_to_release)
        cost = policy.cost if ask.permits is None else ask.permits
        decision = await primitive.adecide(key, cost=cost, timeout=ask.timeout)
        return self._held(primitive, policy, key, decision)

    @staticmethod
    def _held(primitive: RateLimiter, policy: Policy, key: str, decision: Decision) -> Grant:
        headers = headers_of(decision, policy.headers)
        if not decision.allowed:
            retry_after = decision.retry_after
            # The next turn, to the millisecond: the guard rounds it up to whole
            # seconds for a request's Retry-After; holding() raises it as it is.
            error = ResourceUnavailable(
                f"rate limit {primitive.name!r}: {key!r} is limited (next turn in "
                f"{retry_after:.3f} s)",
                reason=ResourceUnavailable.LIMITED,
                retry_after=retry_after if math.isfinite(retry_after) else None,
            )
            error.headers = headers  # type: ignore[attr-defined]
            error.decision = decision  # type: ignore[attr-defined]
            raise error
        return Grant(decision, None, _nothing_to_release, _anothing_to_release, headers=headers)

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
