"""A redis-server whose wall clock a test moves while it runs.

:class:`ShiftedClockRedis` starts the harness's redis-server binary (the
embedded 6.2, or ``DJANGO_REDIS_POOL_REDIS_SERVER``'s) with
``tests/support/clockshift.c`` preloaded, compiled here with the machine's C compiler.
``place(us)`` sets the server's clock (``TIME``, and so every script's clock)
to ``us`` microseconds since the epoch from now on; it keeps running from
there. Monotonic clocks are not moved. Without a C compiler the fixture
fails and says so: the test is never skipped.
"""

from __future__ import annotations

import mmap
import os
import shutil
import stat
import struct
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from django_redis_pool.testing import EmbeddedRedis, find_redis_binary

__all__ = ["WRAP_US", "ShiftedClockRedis", "shifted_redis"]

SOURCE = Path(__file__).with_name("clockshift.c")
#: 2^32 microseconds (71.6 minutes): a score that keeps the Redis clock in
#: microseconds modulo this wraps at every multiple of it.
WRAP_US = 2**32


class ShiftedClockRedis:
    """An :class:`EmbeddedRedis` whose wall clock :meth:`place` moves."""

    def __init__(self, workdir: Path) -> None:
        compiler = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
        if compiler is None:
            pytest.fail(
                "moving the Redis clock needs a C compiler (cc or gcc; Debian: apt-get "
                "install gcc) to build tests/support/clockshift.c",
                pytrace=False,
            )
        library = workdir / "clockshift.so"
        subprocess.run(
            [compiler, "-O2", "-shared", "-fPIC", "-o", str(library), str(SOURCE)],
            check=True,
        )
        self._offset_file = workdir / "offset"
        self._offset_file.write_bytes(struct.pack("=q", 0))
        wrapper = workdir / "redis-server"
        wrapper.write_text(
            "#!/bin/sh\n"
            f"LD_PRELOAD='{library}' CLOCKSHIFT_FILE='{self._offset_file}' "
            f"exec '{find_redis_binary('redis-server')}' \"$@\"\n"
        )
        wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
        self.server = EmbeddedRedis(executable=str(wrapper))
        self._file = open(self._offset_file, "r+b")  # noqa: SIM115 - closed in stop()
        self._map = mmap.mmap(self._file.fileno(), 8)

    def start(self) -> ShiftedClockRedis:
        self.server.start()
        return self

    def stop(self) -> None:
        self.server.stop()
        self._map.close()
        self._file.close()

    def client(self) -> redis.Redis:
        return self.server.client()

    def now_us(self) -> int:
        """The server's clock (``TIME``) in microseconds."""
        conn = self.server.client()
        try:
            seconds, micros = conn.time()
        finally:
            conn.close()
        return int(seconds) * 1_000_000 + int(micros)

    def place(self, us: int) -> None:
        """Set the server's clock to ``us`` (microseconds since the epoch) now."""
        self._map[:8] = struct.pack("=q", us - time.time_ns() // 1000)

    def place_before_wrap(self, before_us: int) -> int:
        """Set the clock ``before_us`` microseconds before its next multiple of
        :data:`WRAP_US` (at least a whole wrap ahead, so it only moves
        forward); returns that multiple."""
        wrap = (self.now_us() // WRAP_US + 2) * WRAP_US
        self.place(wrap - before_us)
        return wrap


@pytest.fixture(scope="module")
def shifted_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ShiftedClockRedis]:
    """A private redis-server whose clock the test moves (module-wide)."""
    server = ShiftedClockRedis(tmp_path_factory.mktemp("clockshift")).start()
    try:
        yield server
    finally:
        server.stop()
