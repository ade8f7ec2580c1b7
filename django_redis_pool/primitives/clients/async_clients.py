"""The ``redis.asyncio`` twin of a blocking redis-py client, one per event loop.

A primitive is built on a blocking client (``redis.Redis``, a Sentinel master's
client, ``redis.cluster.RedisCluster``); its async methods run on the twin that
:func:`async_client_for` builds from the same connection settings: address,
database, credentials, TLS, timeouts, retries. asyncio connections belong to
the loop that opened them, so each running loop gets twins of its own. They
are closed when their loop shuts down its async generators (``asyncio.run``,
``asyncio.Runner``, uvicorn and asgiref all do), or at once by
:func:`aclose_async_clients`.

The twin's pool is unbounded (:data:`.connections.MAX_CONNECTIONS`; redis-py 8's
default is 100), like the waits client of a bounded Django connection: each
waiting caller blocks on a connection of its own.
Nothing here imports Django.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import weakref
from collections.abc import AsyncGenerator
from functools import cache
from typing import Any

from ..wire.scripts import share_path
from .connections import MAX_CONNECTIONS

__all__ = ["aclose_async_clients", "async_client_for"]

logger = logging.getLogger("django_redis_pool")


class _LoopClients:
    """The twins made on one event loop, and the async generator whose
    finalisation (at the loop's shutdown) closes them."""

    def __init__(self) -> None:
        self.twins: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()
        self.closer: AsyncGenerator[None, None] | None = None


_loops: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopClients] = (
    weakref.WeakKeyDictionary()
)


def async_client_for(client: Any) -> Any:
    """The asyncio twin of the blocking ``client`` on the running event loop
    (made on first use)."""
    loop = asyncio.get_running_loop()
    clients = _loops.get(loop)
    if clients is None:
        clients = _loops[loop] = _LoopClients()
        clients.closer = _close_at_shutdown(clients)
        # Run it to its yield now: the loop knows it from then on, and
        # finalises it (closing the twins) in shutdown_asyncgens().
        with contextlib.suppress(StopIteration):
            clients.closer.asend(None).send(None)
    twin = clients.twins.get(client)
    if twin is None:
        twin = clients.twins[client] = _twin(client)
        share_path(client, twin)  # (FCALL or EVALSHA: the same server)
    return twin


async def aclose_async_clients() -> None:
    """Close the twins made on the running event loop now (later calls make new ones)."""
    clients = _loops.pop(asyncio.get_running_loop(), None)
    if clients is not None:
        await _close(clients)
        if clients.closer is not None:
            await clients.closer.aclose()


async def _close_at_shutdown(clients: _LoopClients) -> AsyncGenerator[None, None]:
    try:
        yield
    finally:
        await _close(clients)


async def _close(clients: _LoopClients) -> None:
    twins = list(clients.twins.values())
    clients.twins.clear()
    for twin in twins:
        try:
            close = getattr(twin, "aclose", None) or twin.close  # (redis-py 5.0.0: close)
            await close()
            pool = getattr(twin, "connection_pool", None)
            if pool is not None:
                await pool.disconnect()
        except Exception:  # closing at shutdown: a broken connection is no news
            logger.debug("closing %r failed", twin, exc_info=True)


# -------------------------------------------------------------- building a twin


def _twin(client: Any) -> Any:
    if hasattr(client, "nodes_manager"):
        return _cluster_twin(client)
    pool = client.connection_pool
    kwargs = dict(pool.connection_kwargs)
    manager = getattr(pool, "sentinel_manager", None)
    if manager is not None:
        return _sentinel_twin(pool, manager, kwargs)
    import redis.asyncio

    connection_class = _async_connection_class(pool.connection_class)
    twin_pool = redis.asyncio.ConnectionPool(
        connection_class=connection_class,
        max_connections=MAX_CONNECTIONS,
        **_async_kwargs(kwargs, connection_class),
    )
    return redis.asyncio.Redis(connection_pool=twin_pool)


def _cluster_twin(client: Any) -> Any:
    from redis.asyncio.cluster import ClusterNode, RedisCluster

    manager = client.nodes_manager
    kwargs = dict(manager.connection_kwargs)
    if _is_a(kwargs.get("connection_class"), "SSLConnection"):
        kwargs["ssl"] = True
    nodes = [ClusterNode(node.host, node.port) for node in manager.startup_nodes.values()]
    accepted = _parameters(RedisCluster)
    return RedisCluster(
        startup_nodes=nodes, max_connections=MAX_CONNECTIONS, **_converted(kwargs, accepted)
    )


def _sentinel_twin(pool: Any, manager: Any, kwargs: dict[str, Any]) -> Any:
    from redis.asyncio.sentinel import (
        Sentinel,
        SentinelManagedConnection,
        SentinelManagedSSLConnection,
    )

    addresses = [
        (s.connection_pool.connection_kwargs["host"], s.connection_pool.connection_kwargs["port"])
        for s in manager.sentinels
    ]
    sentinel = Sentinel(
        addresses,
        min_other_sentinels=manager.min_other_sentinels,
        sentinel_kwargs=_async_kwargs(dict(manager.sentinel_kwargs), _async_connection_class(None)),
    )
    tls = _is_a(pool.connection_class, "SSL")
    connection_class = SentinelManagedSSLConnection if tls else SentinelManagedConnection
    return sentinel.master_for(
        pool.service_name,
        connection_class=connection_class,
        max_connections=MAX_CONNECTIONS,
        **_async_kwargs(kwargs, connection_class),
    )


def _is_a(cls: type | None, name_part: str) -> bool:
    return cls is not None and any(name_part in base.__name__ for base in cls.__mro__)


def _async_connection_class(cls: type | None) -> type:
    """The ``redis.asyncio`` connection class doing what blocking ``cls`` does."""
    from redis.asyncio import connection

    if _is_a(cls, "UnixDomainSocket"):
        return connection.UnixDomainSocketConnection
    if _is_a(cls, "SSLConnection"):
        return connection.SSLConnection
    return connection.Connection


def _async_kwargs(kwargs: dict[str, Any], connection_class: type) -> dict[str, Any]:
    return _converted(kwargs, _parameters(connection_class))


#: The connection settings a twin takes over (plus every ``ssl_*`` one);
#: others are redis-py's own machinery (parser classes, notification handlers)
#: of the blocking client, which the asyncio client makes for itself.
SETTINGS = frozenset(
    {
        "host",
        "port",
        "path",
        "db",
        "username",
        "password",
        "credential_provider",
        "client_name",
        "protocol",
        "socket_timeout",
        "socket_connect_timeout",
        "socket_keepalive",
        "socket_keepalive_options",
        "retry",
        "retry_on_timeout",
        "retry_on_error",
        "health_check_interval",
        "encoding",
        "encoding_errors",
        "decode_responses",
        "ssl",  # (a Cluster's: its nodes' connection class says it)
    }
)


def _converted(kwargs: dict[str, Any], accepted: frozenset[str]) -> dict[str, Any]:
    """The connection settings of ``kwargs`` that the asyncio class with
    parameters ``accepted`` takes, a blocking ``Retry`` made an asyncio one."""
    converted = {}
    for key, value in kwargs.items():
        if key not in accepted or not (key in SETTINGS or key.startswith("ssl_")):
            continue
        if key == "retry" and value is not None:
            from redis.asyncio.retry import Retry

            value = Retry(value._backoff, value._retries)
        converted[key] = value
    return converted


@cache
def _parameters(cls: type) -> frozenset[str]:
    """The keyword parameters of ``cls``'s constructor, up its bases while
    each passes ``**kwargs`` on."""
    names: set[str] = set()
    for base in cls.__mro__:
        init = base.__dict__.get("__init__")
        if init is None:
            continue
        parameters = inspect.signature(init).parameters.values()
        names |= {p.name for p in parameters if p.kind is not p.VAR_KEYWORD} - {"self"}
        if not any(p.kind is p.VAR_KEYWORD for p in parameters):
            break
    return frozenset(names)
