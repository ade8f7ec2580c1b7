"""Rebuild a test client in another process (multiprocessing children get a
picklable description of the Redis the parent's test uses, not the client)."""

from __future__ import annotations

from typing import Any

import redis
from redis.cluster import RedisCluster


def spec_of(client: Any) -> tuple[str, str, int]:
    """A picklable description of ``client``: (kind, host, port)."""
    if isinstance(client, RedisCluster):
        node = client.get_default_node()
        return ("cluster", node.host, int(node.port))
    kwargs = client.connection_pool.connection_kwargs
    return ("redis", kwargs["host"], int(kwargs["port"]))


def client_from(spec: tuple[str, str, int], **options: Any) -> Any:
    """A new client for the Redis described by :func:`spec_of` (``options``:
    more arguments of its constructor, e.g. ``socket_timeout``)."""
    kind, host, port = spec
    if kind == "cluster":
        return RedisCluster(host=host, port=port, **options)
    return redis.Redis(host=host, port=port, **options)
