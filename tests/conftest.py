"""Test harness: a real ``redis-server`` and a real 3-master Redis Cluster.

Both are private processes started by :mod:`django_redis_pool.testing` on free
loopback ports. Every client fixture first checks that the server's ``run_id``
is one the harness started (it never touches any other Redis), then FLUSHALLs.

Fixtures:

``redis_server`` (session)  the started :class:`EmbeddedRedis`.
``redis_client``            a flushed :class:`redis.Redis` to it (bytes replies).
``redis_url``               ``redis_server.url`` after the same flush.
``redis_cluster`` (session) the started :class:`EmbeddedRedisCluster` (lazy).
``cluster_client``          a flushed :class:`redis.cluster.RedisCluster` (bytes replies).
``client``                  parametrized: ``redis_client``, then ``cluster_client``
                            (marked ``cluster``; ``-m "not cluster"`` skips it).
``long_client``             a new client of ``client``'s Redis whose primitives' blocking
                            reads last 30 s (:data:`tests.support.primitive_helpers.LONG_CHUNK`).
``redis_version`` (session) the server's version as a tuple, e.g. ``(6, 2, 14)``.
``hung_server``, ``sentinel`` a redis-server a test may stop, and a real Sentinel
                            watching it (:mod:`tests.support.stoppable_servers`).
``api``                     parametrized: ``sync``, then ``async`` (marked
                            ``async_path``): the primitives' blocking methods
                            run as their asyncio twins (:mod:`tests.support.async_bridge`).

The server binary is the embedded Redis 6.2 unless ``DJANGO_REDIS_POOL_REDIS_SERVER``
names another (``scripts/dev.py test`` runs the suite again on Redis 7 that way);
the report header says which one runs.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from redis.cluster import RedisCluster

from django_redis_pool.primitives import counts
from django_redis_pool.primitives.wire.channel import Channel
from django_redis_pool.testing import EmbeddedRedis, EmbeddedRedisCluster, find_redis_binary
from tests.support.async_bridge import async_path
from tests.support.client_specs import client_from, spec_of
from tests.support.primitive_helpers import LONG_CHUNK, LONG_READ_TIMEOUT
from tests.support.stoppable_servers import hung_server, sentinel  # noqa: F401 (fixtures for every module)

# Browser test modules import their helpers from it (and load it as a plugin).
pytest.register_assert_rewrite("tests.support.browser")


def _assert_ours(conn: redis.Redis, expected_run_id: str, where: str) -> None:
    run_id = conn.info("server")["run_id"]
    if isinstance(run_id, bytes):
        run_id = run_id.decode()
    if run_id != expected_run_id:
        pytest.fail(
            f"refusing to use {where}: its run_id {run_id!r} is not the harness's "
            f"{expected_run_id!r} (the harness only touches Redis servers it started)",
            pytrace=False,
        )


def pytest_report_header(config: pytest.Config) -> str:
    path = find_redis_binary()
    version = subprocess.run([path, "--version"], capture_output=True, text=True, check=False)
    return f"redis-server: {path} ({version.stdout.strip()})"


@pytest.fixture(scope="session")
def redis_version(redis_server: EmbeddedRedis) -> tuple[int, ...]:
    """The version of the harness's redis-server, e.g. ``(7, 0, 15)``."""
    conn = redis_server.client()
    try:
        version = conn.info("server")["redis_version"]
    finally:
        conn.close()
    return tuple(int(part) for part in str(version).split("."))


@pytest.fixture(scope="session")
def redis_server() -> Iterator[EmbeddedRedis]:
    """A private redis-server on a free loopback port, for the whole session."""
    with EmbeddedRedis() as server:
        yield server


@pytest.fixture
def redis_client(redis_server: EmbeddedRedis) -> Iterator[redis.Redis]:
    """A ``redis.Redis`` (``decode_responses=False``) to ``redis_server``, after FLUSHALL."""
    conn = redis_server.client()
    try:
        _assert_ours(conn, redis_server.run_id, redis_server.url)
        conn.flushall()
        yield conn
    finally:
        conn.close()


@pytest.fixture
def redis_url(redis_server: EmbeddedRedis, redis_client: redis.Redis) -> str:
    """``redis_server.url`` (``redis://127.0.0.1:PORT/0``), after FLUSHALL."""
    return redis_server.url


@pytest.fixture(scope="session")
def redis_cluster() -> Iterator[EmbeddedRedisCluster]:
    """A private 3-master Redis Cluster; started only when a test asks for it."""
    with EmbeddedRedisCluster(masters=3) as cluster:
        yield cluster


@pytest.fixture
def cluster_client(redis_cluster: EmbeddedRedisCluster) -> Iterator[RedisCluster]:
    """A ``RedisCluster`` (``decode_responses=False``) after FLUSHALL on every master."""
    for node in redis_cluster.nodes:
        conn = node.client()
        try:
            _assert_ours(conn, node.run_id, node.url)
        finally:
            conn.close()
    redis_cluster.flushall()
    conn = redis_cluster.client()
    try:
        known = {int(node.port) for node in conn.get_nodes()}
        if not known <= set(redis_cluster.ports):
            pytest.fail(
                f"cluster client discovered nodes {sorted(known)} outside the harness's "
                f"{redis_cluster.ports}",
                pytrace=False,
            )
        yield conn
    finally:
        conn.close()


@pytest.fixture(params=["redis", pytest.param("cluster", marks=pytest.mark.cluster)])
def client(request: pytest.FixtureRequest) -> Any:
    """``redis_client`` or ``cluster_client``: runs the test on both topologies."""
    name = "redis_client" if request.param == "redis" else "cluster_client"
    return request.getfixturevalue(name)


@pytest.fixture
def long_client(client: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """A new client of ``client``'s Redis, for primitives whose blocking reads
    last ``LONG_CHUNK`` (30 s; the primitives made after it, in this process and
    in children forked after it): ``Channel.wait_chunk`` is set for the
    test, and the client's socket timeout is longer than a read (redis-py 8's
    default, 5 s, would cut the chunk to 4 s)."""
    monkeypatch.setattr(Channel, "wait_chunk", LONG_CHUNK)
    conn = client_from(spec_of(client), socket_timeout=LONG_READ_TIMEOUT)
    try:
        yield conn
    finally:
        conn.close()


@pytest.fixture(params=["sync", pytest.param("async", marks=pytest.mark.async_path)])
def api(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Which API a behaviour test drives: the blocking one, or the asyncio twins."""
    if request.param == "sync":
        yield "sync"
        return
    with async_path(monkeypatch):
        yield "async"


@pytest.fixture(autouse=True)
def _counts_flushed_only_when_asked(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Counts (:mod:`django_redis_pool.primitives.counts`) are recorded as in
    production, but added into Redis only by an explicit ``counts.flush()``
    (or a scrape), never by the background thread: a test comparing a
    primitive's keys before and after a read sees no write it did not make.
    ``tests/django/test_metrics.py`` turns the thread on where it tests it. What a
    test left unflushed is dropped after it."""
    monkeypatch.setattr(counts, "background", False)
    yield
    counts.forget()
