"""What a request counts against under a configured rate limit: its key, as
the limit's :class:`Policy` finds it (its ``KEY``: the user, the client's
address, a header, or a function of the request), and what one request
spends and waits. The kind (:mod:`.ratelimit`) attaches a policy to each
limiter it builds (:func:`attach_policy`) and reads it on each request
(:func:`policy_of`)."""

from __future__ import annotations

import hashlib
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from asgiref.sync import sync_to_async

from .. import conf
from ..client_address import client_ip
from ..primitives.ratelimit.limiter import MAX_KEY_LENGTH, RateLimiter
from .quota_headers import policy_headers

__all__ = ["KEY_SOURCES", "Policy", "attach_policy", "hashed", "policy_of"]

#: The built-in ``KEY`` sources (besides ``header:<Name>`` and a dotted path).
KEY_SOURCES = ("user", "ip")


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


def attach_policy(limiter: RateLimiter, policy: Policy) -> None:
    """Count the requests of the configured ``limiter`` as ``policy`` says."""
    _POLICIES[limiter] = policy


def policy_of(limiter: RateLimiter) -> Policy:
    """How the configured ``limiter`` counts requests."""
    policy = _POLICIES.get(limiter)
    if policy is None:  # (built outside the registry: counted by the client's address)
        policy = _POLICIES[limiter] = Policy(
            source="ip",
            ip_header=None,
            trusted_proxies=1,
            ipv6_prefix=64,
            cost=1,
            timeout=0,
            headers=policy_headers(limiter),
        )
    return policy
