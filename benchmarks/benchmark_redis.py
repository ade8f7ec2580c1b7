"""The Redis a benchmark runs against: ``REDIS_URL`` if set (it is flushed!),
else a private embedded redis-server that is stopped afterwards."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import redis

from django_redis_pool.testing import EmbeddedRedis


@contextlib.contextmanager
def benchmark_redis() -> Iterator[tuple[str, redis.Redis]]:
    """Yield ``(url, client)`` for a flushed Redis."""
    url = os.environ.get("REDIS_URL")
    with contextlib.ExitStack() as stack:
        if not url:
            url = stack.enter_context(EmbeddedRedis()).url
        client = redis.Redis.from_url(url)
        client.flushall()
        yield url, client
