"""The rate limit's answer headers (the IETF draft's ``RateLimit-*``): what is
left of a key's quota after one decision (:func:`headers_of`), the policy of a
limiter (:func:`policy_headers`), and how the headers of two limits on one
request combine on its response (:class:`QuotaHeaders`)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from ..primitives.ratelimit.limiter import Decision, RateLimiter

__all__ = ["QuotaHeaders", "headers_of", "policy_headers"]


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
        # ``drp_quota`` marks a response whose quota headers a limit set: the
        # next limit's combine with them.
        if not getattr(response, "drp_quota", False):
            if "RateLimit-Remaining" not in response:  # (else the view set its own)
                response.drp_quota = True
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


def headers_of(decision: Decision, policy: Mapping[str, str]) -> QuotaHeaders:
    """The IETF draft's headers of one decision, with those of its limiter's
    ``policy`` (:func:`policy_headers`)."""
    return QuotaHeaders(
        {
            "RateLimit-Limit": str(decision.limit),
            "RateLimit-Remaining": str(max(0, int(decision.remaining))),
            "RateLimit-Reset": str(max(0, math.ceil(decision.reset_after))),
            **policy,
        }
    )


def policy_headers(limiter: RateLimiter) -> dict[str, str]:
    """The headers every answer of ``limiter`` gets: ``RateLimit-Policy``."""
    return {"RateLimit-Policy": f"{limiter.rate};w={limiter.per:g};burst={limiter.burst}"}
