"""A request's client address (:func:`client_ip`): ``REMOTE_ADDR``, or the
address a trusted proxy recorded (an ``X-Forwarded-For``-style header); an
IPv6 client as its network, since one client holds a whole /64."""

from __future__ import annotations

import ipaddress
from typing import Any

__all__ = ["check_ipv6_prefix", "client_ip"]


def _address(value: str) -> str | None:
    """``value`` as a normalised IP address (a port or brackets dropped), or None."""
    value = value.strip()
    for candidate in (value, value.rpartition(":")[0], value.strip("[]")):
        if candidate.startswith("[") and "]" in candidate:
            candidate = candidate[1 : candidate.index("]")]
        try:
            return str(ipaddress.ip_address(candidate))
        except ValueError:
            continue
    return None


def client_ip(
    request: Any, header: str | None = None, trusted_proxies: int = 1, ipv6_prefix: int = 128
) -> str:
    """The client's address: with ``header`` (a list of addresses, each proxy
    appending the one it got the request from, as ``X-Forwarded-For``), the
    ``trusted_proxies``-th from the right (the left-most if it lists fewer);
    else, or if that is no address, ``REMOTE_ADDR``; "unknown" if neither is.
    An IPv6 address is its network of ``ipv6_prefix`` bits (``2001:db8::/64``:
    one client holds a whole /64), unless the prefix is 128."""
    found = None
    if header:
        hops = [hop for hop in (request.headers.get(header) or "").split(",") if hop.strip()]
        if hops:
            found = _address(hops[-min(trusted_proxies, len(hops))])
    found = found or _address(request.META.get("REMOTE_ADDR") or "")
    if found is None:
        return "unknown"
    if ipv6_prefix < 128 and ":" in found:
        return str(ipaddress.ip_network(f"{found}/{ipv6_prefix}", strict=False))
    return found


def check_ipv6_prefix(value: Any, path: str) -> int:
    """An IPv6 prefix length: an int from 1 to 128 (``IPV6_PREFIX``)."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 128:
        raise ValueError(f"{path} must be an int from 1 to 128 (bits), got {value!r}")
    return value
