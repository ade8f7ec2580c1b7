"""A Django project over HTTP: served by uvicorn or gunicorn, loaded by wrk
(``asgi`` and ``overload``).

The project is ``assets/asgi_app.py`` (its docstring says what it serves and
which environment variables shape it). :func:`serving` starts one server
process, :func:`wrk` loads it, :func:`sampling` watches the serving process's
threads and memory. :func:`missing` tells what a server kind lacks here (wrk is
Debian's package; uvicorn and gunicorn are in the ``bench`` extra).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ASSETS = Path(__file__).resolve().parent / "assets"
#: wrk's Lua script counting the responses by HTTP status.
STATUSES = ASSETS / "wrk_statuses.lua"

#: What each server kind needs: Python modules, then programs.
NEEDS = {
    "async": (("uvicorn", "uvloop", "httptools"), ("wrk",)),
    "sync": (("gunicorn",), ("wrk",)),
}


def missing(kind: str) -> str | None:
    """Why ``kind`` (``async``: uvicorn; ``sync``: gunicorn) cannot be measured
    here, or None."""
    modules, programs = NEEDS[kind]
    gone = [f"{p} (apt-get install {p})" for p in programs if shutil.which(p) is None]
    gone += [f"{m} (the bench extra)" for m in modules if importlib.util.find_spec(m) is None]
    return f"needs {', '.join(gone)}" if gone else None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def server_command(kind: str, port: int, threads: int, connections: int = 0) -> list[str]:
    """uvicorn (``async``) or gunicorn gthread with ``threads`` threads (``sync``)
    serving ``asgi_app``, for up to ``connections`` clients (default ``threads``)."""
    if kind == "async":
        return [
            sys.executable, "-m", "uvicorn", "asgi_app:application",
            "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
            "--log-level", "warning", "--no-access-log", "--backlog", "4096",
            "--loop", "uvloop", "--http", "httptools",
        ]  # fmt: skip
    return [
        sys.executable, "-m", "gunicorn", "asgi_app:wsgi",
        "-k", "gthread", "-w", "1", "--threads", str(threads),
        "-b", f"127.0.0.1:{port}", "--backlog", "4096", "--log-level", "warning",
        "--worker-connections", str((connections or threads) * 2), "--keep-alive", "30",
    ]  # fmt: skip


def worker_pid(server: subprocess.Popen[bytes], kind: str) -> int:
    """The process serving requests: gunicorn's worker (its only child)."""
    if kind == "async":
        return server.pid
    children = Path(f"/proc/{server.pid}/task/{server.pid}/children")
    for _ in range(100):
        pids = children.read_text().split() if children.exists() else []
        if pids:
            return int(pids[0])
        time.sleep(0.05)
    raise RuntimeError("gunicorn started no worker")


def sample(pid: int, stop: threading.Event, seen: dict[str, int]) -> None:
    while not stop.is_set():
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            return
        for field, key in (("Threads", "threads"), ("VmRSS", "rss_kb")):
            match = re.search(rf"^{field}:\s+(\d+)", status, re.M)
            if match:
                seen[key] = max(seen.get(key, 0), int(match[1]))
        stop.wait(0.25)


@contextlib.contextmanager
def sampling(pid: int) -> Iterator[dict[str, int]]:
    """Yield the highest threads and RSS of process ``pid`` seen while inside (read
    the dict after the block)."""
    seen: dict[str, int] = {}
    stop = threading.Event()
    watcher = threading.Thread(target=sample, args=(pid, stop, seen))
    watcher.start()
    try:
        yield seen
    finally:
        stop.set()
        watcher.join()


def wrk(
    url: str, clients: int, seconds: float, threads: int = 2, script: Path | None = None
) -> dict[str, Any]:
    """wrk's requests/s, latency p50 and p99 (ms), non-2xx answers, socket errors;
    with ``script``, also what it prints as ``status <code>: <count>`` lines
    (``statuses``: count by HTTP status) and the ``requests`` answered."""
    duration = f"-d{max(1, round(seconds))}s"
    extra = ["-s", str(script)] if script else []
    out = subprocess.run(
        ["wrk", f"-t{threads}", f"-c{clients}", duration, "--latency", "--timeout", "30s",
         *extra, url],
        capture_output=True,
        text=True,
        check=True,
    ).stdout  # fmt: skip

    def ms(label: str) -> float:
        match = re.search(rf"^\s+{label}\s+([\d.]+)(us|ms|s)\s*$", out, re.M)
        assert match, out
        return float(match[1]) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[match[2]]

    rps = re.search(r"Requests/sec:\s+([\d.]+)", out)
    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    errors = re.search(r"Socket errors: (.*)", out)
    requests = re.search(r"^\s*(\d+) requests in ", out, re.M)
    assert rps and requests, out
    result: dict[str, Any] = {
        "rps": float(rps[1]),
        "p50": ms("50%"),
        "p99": ms("99%"),
        "non2xx": int(bad[1]) if bad else 0,
        "errors": errors[1].strip() if errors else "",
    }
    if script:
        statuses = re.findall(r"^status (\d+): (\d+)$", out, re.M)
        result["statuses"] = {int(code): int(count) for code, count in statuses}
        result["requests"] = int(requests[1])
    return result


@contextlib.contextmanager
def serving(
    kind: str, env: dict[str, str], threads: int, connections: int = 0, ready: str = ""
) -> Iterator[tuple[str, int]]:
    """Start ``server_command(kind, ...)`` with ``env`` added to the environment, wait
    until ``/<ready>`` answers, yield (its root URL, the pid serving requests);
    stop it when the block ends (SIGTERM: gunicorn's worker runs its exit handlers;
    uvicorn, which raises the signal again once shut down, does not), killed if it
    takes more than 30 s. The server imports the ``django_redis_pool`` this
    process imported."""
    import django_redis_pool

    package = Path(django_redis_pool.__file__).resolve().parent.parent
    port = free_port()
    path = [str(ASSETS), str(package), os.environ.get("PYTHONPATH", "")]
    env = {**os.environ, **env, "PYTHONPATH": os.pathsep.join(p for p in path if p)}
    command = server_command(kind, port, threads, connections)
    server = subprocess.Popen(command, cwd=ASSETS, env=env)
    try:
        root = f"http://127.0.0.1:{port}"
        for _ in range(200):
            try:
                urllib.request.urlopen(f"{root}/{ready}", timeout=5).read()
                break
            except OSError:
                time.sleep(0.05)
        yield root, worker_pid(server, kind)
    finally:
        server.terminate()
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
