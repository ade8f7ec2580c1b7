"""One private, throw-away ``redis-server``: :class:`EmbeddedRedis`.

It runs on a free loopback TCP port (or on a unix socket) inside a fresh
temporary directory, without any persistence, and stops at exit (and, on
Linux, when the process that started it dies). Never imports Django.
"""

from __future__ import annotations

import atexit
import contextlib
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
from redis.retry import Retry

from .binaries import find_redis_binary

__all__ = [
    "CLUSTER_BUS_OFFSET",
    "MAX_PORT",
    "EmbeddedRedis",
    "Managed",
    "free_loopback_port",
    "port_is_free",
]

LOOPBACK = "127.0.0.1"

# Redis 6.x puts the cluster bus on ``port + 10000``, so a cluster node's port
# must leave room for it.
CLUSTER_BUS_OFFSET = 10000
MAX_PORT = 65535
_LOG_TAIL_LINES = 25


def free_loopback_port() -> int:
    """Return a TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        return int(sock.getsockname()[1])


def port_is_free(port: int) -> bool:
    """Whether a TCP port on 127.0.0.1 can be bound now."""
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


ManagedT = TypeVar("ManagedT", bound="Managed")


class Managed:
    """``with server:`` starts it and stops it on exit."""

    def start(self: ManagedT) -> ManagedT:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self: ManagedT) -> ManagedT:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


class EmbeddedRedis(Managed):
    """A private ``redis-server`` process in a fresh temporary directory.

    By default it listens on a free loopback TCP port (``port`` names one);
    with ``unix_socket=True`` it listens only on a unix socket inside its
    temporary directory. Persistence
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
        port: int | None = None,
    ) -> None:
        if port is not None and not (isinstance(port, int) and 0 < port <= MAX_PORT):
            raise ValueError(f"port must be an int from 1 to {MAX_PORT}, got {port!r}")
        self.unix_socket = unix_socket
        self.fixed_port = port
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
            attempts = 1 if self.unix_socket or self.fixed_port else self.port_attempts
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
                conn = self.probe_client()
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
        if self.fixed_port is not None:
            if not port_is_free(self.fixed_port):
                raise RuntimeError(f"port {self.fixed_port} of {LOOPBACK} is already in use")
            return self.fixed_port
        return free_loopback_port()

    def probe_client(self, timeout: float = 2, **kwargs: Any) -> redis.Redis:
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
            conn = self.probe_client(timeout=1)
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
