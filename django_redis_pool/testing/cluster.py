"""A private Redis Cluster of loopback nodes: :class:`EmbeddedRedisCluster`.

Each node is an :class:`~.server.EmbeddedRedis` started in cluster mode;
``redis-cli --cluster create`` joins them into a real Redis Cluster. Never
imports Django.
"""

from __future__ import annotations

import atexit
import subprocess
import time
from collections.abc import Sequence
from typing import Any

import redis
from redis.cluster import ClusterNode, RedisCluster

from .binaries import find_redis_binary
from .server import (
    CLUSTER_BUS_OFFSET,
    MAX_PORT,
    EmbeddedRedis,
    Managed,
    free_loopback_port,
    port_is_free,
)

__all__ = ["EmbeddedRedisCluster"]


class _ClusterNode(EmbeddedRedis):
    """An :class:`EmbeddedRedis` whose port leaves room for the cluster bus port."""

    def _choose_port(self) -> int:
        for _ in range(200):
            port = free_loopback_port()
            if port + CLUSTER_BUS_OFFSET <= MAX_PORT and port_is_free(port + CLUSTER_BUS_OFFSET):
                return port
        raise RuntimeError("could not find a free port pair for a Redis Cluster node")


class EmbeddedRedisCluster(Managed):
    """A private Redis Cluster of ``masters`` loopback nodes, each with
    ``replicas`` replicas (default none).

    Each node is an :class:`EmbeddedRedis` started with ``--cluster-enabled
    yes`` in its own temporary directory; ``redis-cli --cluster create`` then
    assigns all 16384 slots, and :meth:`start` waits (bounded by
    ``startup_timeout``) until every node reports ``cluster_state:ok`` and
    knows every master. Context manager; :meth:`stop` also runs at exit.
    """

    def __init__(
        self,
        masters: int = 3,
        *,
        replicas: int = 0,
        extra_args: Sequence[str] = (),
        node_timeout_ms: int = 5000,
        startup_timeout: float = 30.0,
        die_with_parent: bool = True,
    ) -> None:
        if masters < 3:
            raise ValueError("a Redis Cluster needs at least 3 masters")
        self.masters = masters
        self.replicas = replicas
        self.extra_args = tuple(extra_args)
        self.node_timeout_ms = node_timeout_ms
        self.startup_timeout = startup_timeout
        self.die_with_parent = die_with_parent
        self.nodes: list[EmbeddedRedis] = []

    def start(self) -> EmbeddedRedisCluster:
        """Start the nodes, create the cluster and wait until it is healthy."""
        if self.nodes:
            return self
        server = find_redis_binary("redis-server")
        cli = find_redis_binary("redis-cli")
        atexit.register(self.stop)
        node_args = (
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            "nodes.conf",
            "--cluster-node-timeout",
            str(self.node_timeout_ms),
            *self.extra_args,
        )
        try:
            for _ in range(self.masters * (1 + self.replicas)):
                node = _ClusterNode(
                    extra_args=node_args,
                    executable=server,
                    die_with_parent=self.die_with_parent,
                )
                self.nodes.append(node)
                node.start()
            self._create(cli)
            self._wait_until_healthy()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop every node and remove their directories. Idempotent."""
        nodes, self.nodes = self.nodes, []
        for node in nodes:
            node.stop()
        atexit.unregister(self.stop)

    @property
    def ports(self) -> list[int]:
        """The nodes' TCP ports."""
        return [node.port for node in self._require_nodes()]

    @property
    def startup_nodes(self) -> list[tuple[str, int]]:
        """``(host, port)`` of every node."""
        return [(node.host, node.port) for node in self._require_nodes()]

    @property
    def url(self) -> str:
        """A ``redis://`` URL of the first node (enough for cluster discovery)."""
        first = self._require_nodes()[0]
        return f"redis://{first.host}:{first.port}"

    def client(self, **kwargs: Any) -> RedisCluster:
        """Return a new :class:`redis.cluster.RedisCluster` for this cluster."""
        kwargs.setdefault(
            "startup_nodes", [ClusterNode(host, port) for host, port in self.startup_nodes]
        )
        return RedisCluster(**kwargs)

    def flushall(self) -> None:
        """Run ``FLUSHALL`` on every master (replicas follow)."""
        for node in self._require_nodes():
            conn = node.client()
            try:
                if conn.execute_command("ROLE")[0] in (b"master", "master"):
                    conn.flushall()
            finally:
                conn.close()

    def _create(self, cli: str) -> None:
        cmd = [cli, "--cluster", "create"]
        cmd += [f"{host}:{port}" for host, port in self.startup_nodes]
        cmd += ["--cluster-replicas", str(self.replicas), "--cluster-yes"]
        try:
            result = subprocess.run(
                cmd,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=self.startup_timeout,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise RuntimeError(
                f"`{' '.join(cmd)}` did not finish within {self.startup_timeout}s"
            ) from exc
        output = (result.stdout + result.stderr).decode(errors="replace")
        if result.returncode != 0 or "[ERR]" in output:
            raise RuntimeError(f"`{' '.join(cmd)}` failed ({result.returncode}):\n{output}")

    def _wait_until_healthy(self) -> None:
        deadline = time.monotonic() + self.startup_timeout
        last: dict[int, str] = {}
        while True:
            if all(self._node_healthy(node, last) for node in self.nodes):
                return
            if time.monotonic() >= deadline:
                detail = "\n".join(f"node {port}: {state}" for port, state in last.items())
                raise RuntimeError(
                    f"Redis Cluster not healthy after {self.startup_timeout}s:\n{detail}"
                )
            time.sleep(0.1)

    def _node_healthy(self, node: EmbeddedRedis, last: dict[int, str]) -> bool:
        conn = node.probe_client(decode_responses=True)
        try:
            info = conn.execute_command("CLUSTER", "INFO")
        except (redis.RedisError, OSError) as exc:
            last[node.port] = repr(exc)
            return False
        finally:
            conn.close()
        if isinstance(info, str):
            fields = dict(line.split(":", 1) for line in info.splitlines() if ":" in line)
        else:
            fields = {str(k): str(v) for k, v in dict(info).items()}
        last[node.port] = ", ".join(
            f"{key}={fields.get(key)}"
            for key in ("cluster_state", "cluster_known_nodes", "cluster_size")
        )
        healthy = (
            fields.get("cluster_state") == "ok"
            and fields.get("cluster_slots_ok") == "16384"
            and fields.get("cluster_known_nodes") == str(len(self.nodes))
            and fields.get("cluster_size") == str(self.masters)
        )
        if healthy and self.replicas:
            # Every node knows every replica's master (a master ignores a manual
            # failover asked by a node it does not know as its replica), and a
            # replica has its master's data.
            conn = node.probe_client(decode_responses=True)
            try:
                nodes = conn.execute_command("CLUSTER", "NODES")
                replication = conn.info("replication")
            except (redis.RedisError, OSError):
                return False
            finally:
                conn.close()
            lines = nodes.splitlines() if isinstance(nodes, str) else []
            replicas = [line.split() for line in lines if "slave" in line.split()[2].split(",")]
            known = sum(1 for fields in replicas if fields[3] != "-")
            link = replication.get("master_link_status", "up")
            last[node.port] += f", replicas known={known}, master link {link}"
            return known == self.masters * self.replicas and link == "up"
        return healthy

    def _require_nodes(self) -> list[EmbeddedRedis]:
        if not self.nodes:
            raise RuntimeError("EmbeddedRedisCluster is not running; call start() first")
        return self.nodes
