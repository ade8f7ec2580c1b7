"""A private Redis Sentinel group on loopback: :class:`EmbeddedSentinelGroup`.

A master and ``replicas`` replicas (each an :class:`~.server.EmbeddedRedis`)
watched by ``sentinels`` Sentinels (the same ``redis-server`` binary with
``--sentinel``) as ``service``, quorum a majority. A failover can be asked for
(``SENTINEL FAILOVER``) or caused (:meth:`kill_master`). Never imports Django.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import redis

from .binaries import find_redis_binary
from .server import EmbeddedRedis, free_loopback_port

__all__ = ["EmbeddedSentinelGroup"]


class EmbeddedSentinelGroup:
    """A master, ``replicas`` replicas and ``sentinels`` Sentinels watching
    them as ``service``; the master is declared down after ``down_after_ms``.

    Context manager; :meth:`start` waits until every Sentinel knows the master
    and its replicas and every replica is in sync (bounded by ``startup_timeout``).
    """

    def __init__(
        self,
        *,
        replicas: int = 2,
        sentinels: int = 3,
        service: str = "mymaster",
        down_after_ms: int = 1000,
        failover_timeout_ms: int = 5000,
        startup_timeout: float = 30.0,
    ) -> None:
        self.replica_count = replicas
        self.sentinel_count = sentinels
        self.service = service
        self.down_after_ms = down_after_ms
        self.failover_timeout_ms = failover_timeout_ms
        self.startup_timeout = startup_timeout
        self.servers: list[EmbeddedRedis] = []
        self.sentinel_ports: list[int] = []
        self._sentinels: list[subprocess.Popen[bytes]] = []
        self._dir: tempfile.TemporaryDirectory[str] | None = None

    def __enter__(self) -> EmbeddedSentinelGroup:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> EmbeddedSentinelGroup:
        """Start the servers and the Sentinels; wait until they agree."""
        atexit.register(self.stop)
        self._dir = tempfile.TemporaryDirectory(prefix="drp-sentinel-")
        try:
            master = EmbeddedRedis().start()
            self.servers.append(master)
            for _ in range(self.replica_count):
                replica = EmbeddedRedis(
                    extra_args=("--replicaof", "127.0.0.1", str(master.port))
                ).start()
                self.servers.append(replica)
            for i in range(self.sentinel_count):
                self._start_sentinel(i, master.port)
            self._wait(self._agreed, "the Sentinels to know the master and its replicas")
        except BaseException:
            self.stop()
            raise
        return self

    def _start_sentinel(self, i: int, master_port: int) -> None:
        assert self._dir is not None
        port = free_loopback_port()
        config = Path(self._dir.name) / f"sentinel-{i}.conf"
        quorum = self.sentinel_count // 2 + 1
        config.write_text(
            f"port {port}\nbind 127.0.0.1\ndir {self._dir.name}\n"
            f"sentinel monitor {self.service} 127.0.0.1 {master_port} {quorum}\n"
            f"sentinel down-after-milliseconds {self.service} {self.down_after_ms}\n"
            f"sentinel failover-timeout {self.service} {self.failover_timeout_ms}\n"
            f"sentinel parallel-syncs {self.service} {self.replica_count}\n"
        )
        process = subprocess.Popen(
            [find_redis_binary("redis-server"), str(config), "--sentinel"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        self._sentinels.append(process)
        self.sentinel_ports.append(port)

    def _wait(self, done: Any, what: str) -> None:
        ends = time.monotonic() + self.startup_timeout
        while not done():
            if time.monotonic() > ends:
                raise RuntimeError(f"timed out waiting for {what}")
            time.sleep(0.05)

    def _agreed(self) -> bool:
        try:
            for port in self.sentinel_ports:
                conn = redis.Redis(port=port, socket_timeout=1, decode_responses=True)
                try:
                    fields = conn.sentinel_master(self.service)  # (parsed: a dict)
                    if int(fields["num-slaves"]) < self.replica_count:
                        return False
                    if int(fields["num-other-sentinels"]) < self.sentinel_count - 1:
                        return False
                finally:
                    conn.close()
            return all(self._in_sync(server) for server in self.replicas())
        except (redis.RedisError, OSError, KeyError, ValueError):
            return False

    @staticmethod
    def _in_sync(server: EmbeddedRedis) -> bool:
        conn = server.client(decode_responses=True)
        try:
            return conn.info("replication").get("master_link_status") == "up"
        finally:
            conn.close()

    def master(self) -> EmbeddedRedis:
        """The server that the Sentinels name master now."""
        port = self.master_address()[1]
        return next(server for server in self.servers if server.port == port)

    def master_address(self) -> tuple[str, int]:
        """``(host, port)`` of the master, as the first Sentinel that answers says."""
        for port in self.sentinel_ports:
            conn = redis.Redis(port=port, socket_timeout=1, decode_responses=True)
            with contextlib.suppress(redis.RedisError, OSError):
                host, master_port = conn.execute_command(
                    "SENTINEL", "GET-MASTER-ADDR-BY-NAME", self.service
                )
                conn.close()
                return str(host), int(master_port)
            conn.close()
        raise RuntimeError("no Sentinel answered")

    def replicas(self) -> list[EmbeddedRedis]:
        """The running servers that are not the master the first one started as."""
        return [server for server in self.servers[1:] if server.running]

    def failover(self) -> tuple[str, int]:
        """``SENTINEL FAILOVER`` (a planned one); waits until the Sentinels name
        a new master and returns its address."""
        before = self.master_address()
        conn = redis.Redis(port=self.sentinel_ports[0], socket_timeout=5)
        try:
            conn.execute_command("SENTINEL", "FAILOVER", self.service)
        finally:
            conn.close()
        self._wait(lambda: self.master_address() != before, "the planned failover")
        return self.master_address()

    def kill_master(self) -> tuple[str, int]:
        """SIGKILL the master (what it had not sent its replicas yet is lost)
        and wait until the Sentinels promote a replica; returns its address.
        The killed server stays down."""
        master = self.master()
        before = (master.host, master.port)
        with contextlib.suppress(ProcessLookupError):
            os.kill(master.pid, signal.SIGKILL)
        self._wait(lambda: self.master_address() != before, "the Sentinels to promote a replica")
        return self.master_address()

    @property
    def sentinels(self) -> list[tuple[str, int]]:
        """``(host, port)`` of every Sentinel (for ``redis.sentinel.Sentinel``)."""
        return [("127.0.0.1", port) for port in self.sentinel_ports]

    def stop(self) -> None:
        """Stop the Sentinels and the servers. Idempotent."""
        for process in self._sentinels:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            process.wait()
        self._sentinels = []
        for server in self.servers:
            server.stop()
        self.servers = []
        if self._dir is not None:
            self._dir.cleanup()
            self._dir = None
        atexit.unregister(self.stop)
