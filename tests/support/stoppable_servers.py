"""Servers some tests start beside the harness's own: a Redis they may stop
(SIGSTOP) and a real Redis Sentinel watching it; and a port where no server is
(:func:`closed_port`)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from django_redis_pool.testing import EmbeddedRedis, find_redis_binary
from tests.support.waiting import wait_for

__all__ = ["hung_server", "sentinel"]


@pytest.fixture
def hung_server() -> Iterator[EmbeddedRedis]:
    """A redis-server of its own, stopped (SIGSTOP) by the test when it wants."""
    server = EmbeddedRedis().start()
    try:
        yield server
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(server.pid, signal.SIGCONT)
        server.stop()


@pytest.fixture
def sentinel(hung_server: EmbeddedRedis, tmp_path: Any) -> Iterator[int]:
    """A real Redis Sentinel (the same redis-server binary, ``--sentinel``)
    watching ``hung_server`` as "mymaster"; yields its port."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    config = tmp_path / "sentinel.conf"
    config.write_text(
        f"port {port}\nbind 127.0.0.1\ndir {tmp_path}\n"
        f"sentinel monitor mymaster 127.0.0.1 {hung_server.port} 1\n"
        "sentinel down-after-milliseconds mymaster 60000\n"
    )
    process = subprocess.Popen(
        [find_redis_binary("redis-server"), str(config), "--sentinel"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        probe = redis.Redis(port=port, socket_timeout=1, retry=Retry(NoBackoff(), 0))
        wait_for(
            lambda: _answers(probe, "SENTINEL", "get-master-addr-by-name", "mymaster"),
            what="the sentinel",
        )
        yield port
    finally:
        process.kill()
        process.wait()


def _answers(client: Any, *command: str) -> bool:
    try:
        return bool(client.execute_command(*command))
    except redis.exceptions.RedisError:
        return False


def closed_port() -> int:
    """A loopback port nothing listens on (bound once, then closed)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
