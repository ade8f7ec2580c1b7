"""``scripts/dev.py test --busy [N]``: the suite beside N CPU-bound processes,
which are stopped at the end of the run, however it ends. ``scripts/dev.py
example`` on an address it cannot listen on: one message, and nothing started."""

from __future__ import annotations

import importlib.util
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from tests.support.waiting import wait_for

DEV_PY = Path(__file__).resolve().parents[2] / "scripts" / "dev.py"


@pytest.fixture(scope="module")
def dev() -> ModuleType:
    spec = importlib.util.spec_from_file_location("dev", DEV_PY)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ([], (0, [])),
        (["-k", "waiting"], (0, ["-k", "waiting"])),
        (["--busy"], (2, [])),
        (["--busy", "3"], (3, [])),
        (["--busy=1", "-k", "waiting"], (1, ["-k", "waiting"])),
        (["--busy", "-k", "waiting"], (2, ["-k", "waiting"])),
        (
            ["tests/primitives/test_pool.py", "--busy", "4", "-x"],
            (4, ["tests/primitives/test_pool.py", "-x"]),
        ),
    ],
)
def test_busy_takes_an_optional_count_and_leaves_pytest_its_arguments(
    dev: ModuleType, args: list[str], expected: tuple[int, list[str]]
) -> None:
    assert dev.split_busy(args) == expected


@pytest.mark.parametrize("count", ["0", "two"])
def test_busy_refuses_a_count_that_is_not_a_positive_number(dev: ModuleType, count: str) -> None:
    with pytest.raises(SystemExit, match="--busy takes a number of processes >= 1"):
        dev.split_busy([f"--busy={count}"])


def _cpu_seconds(pid: int) -> float:
    """CPU time (user + system) of process ``pid`` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc (Linux)")
def test_the_busy_processes_spin_while_the_run_runs_and_stop_when_it_fails(
    dev: ModuleType,
) -> None:
    with pytest.raises(RuntimeError, match="the run failed"), dev.busy_processes(2) as hogs:
        assert len(hogs) == 2
        for hog in hogs:
            wait_for(lambda h=hog: _cpu_seconds(h.pid) > 0.2, 30, "the process to spin")
            assert hog.poll() is None
        raise RuntimeError("the run failed")
    assert all(hog.returncode is not None for hog in hogs), "stopped and reaped"


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc (Linux)")
def test_the_busy_processes_stop_when_their_parent_is_killed(dev: ModuleType) -> None:
    """A run killed outright (SIGKILL: no cleanup) leaves no process spinning."""
    parent = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; sys.path.insert(0, sys.argv[1]); import dev\n"
            "with dev.busy_processes(1) as hogs:\n"
            "    print('hog', hogs[0].pid, flush=True); time.sleep(600)",
            str(DEV_PY.parent),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert parent.stdout is not None
    line = parent.stdout.readline()
    while line and not line.startswith("hog "):  # (after dev.py's own report)
        line = parent.stdout.readline()
    hog = int(line.split()[1])
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    wait_for(lambda: not _alive(hog), 60, "the orphaned process to stop")


def _alive(pid: int) -> bool:
    """Whether ``pid`` is a process that has not exited (a zombie has)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ([], ("127.0.0.1", 8000, False)),
        (["8123"], ("127.0.0.1", 8123, False)),
        (["127.0.0.1:8123"], ("127.0.0.1", 8123, False)),
        (["--nothreading", "0.0.0.0:9000"], ("0.0.0.0", 9000, False)),
        (["localhost:9000"], ("localhost", 9000, False)),
        (["[::1]:8001"], ("::1", 8001, True)),
        (["-6"], ("::1", 8000, True)),
        (["--ipv6", "8002"], ("::1", 8002, True)),
    ],
)
def test_the_example_listens_where_runserver_would(
    dev: ModuleType, args: list[str], expected: tuple[str, int, bool]
) -> None:
    assert dev.example_address(args) == expected


def test_the_example_refuses_an_address_runserver_would_refuse(dev: ModuleType) -> None:
    with pytest.raises(SystemExit, match="'80x' is not a valid port number or address:port"):
        dev.example_address(["80x"])


@pytest.fixture
def busy_port() -> Iterator[int]:
    """A port of 127.0.0.1 that a socket listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield int(sock.getsockname()[1])


def test_a_free_port_can_be_listened_on_and_a_busy_one_not(dev: ModuleType, busy_port: int) -> None:
    assert dev.cannot_listen("127.0.0.1", busy_port, False) == "that port is already in use"
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        free = int(sock.getsockname()[1])
    assert dev.cannot_listen("127.0.0.1", free, False) is None


def test_the_example_on_a_busy_port_says_so_and_starts_nothing(busy_port: int) -> None:
    """Before the venv, Redis, migrate, the worker or runserver: one message."""
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    result = subprocess.run(
        [sys.executable, str(DEV_PY), "example", f"127.0.0.1:{busy_port}"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 1, result
    assert result.stdout == "", "nothing was started (no [dev] line)"
    assert result.stderr == (
        f"[dev] cannot serve the example at http://127.0.0.1:{busy_port}/: that port is "
        "already in use. Nothing was started. Stop what listens there, or give another "
        f"address: python3 scripts/dev.py example 127.0.0.1:{busy_port + 1}\n"
    )


def test_the_example_checks_the_port_again_before_it_starts_redis(
    dev: ModuleType, busy_port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The port may be taken while the venv is installed: the inner step checks
    it again, before the embedded Redis (or anything else) is started."""
    started = []

    class EmbeddedRedis:
        def __init__(self, **kwargs: object) -> None:
            started.append(kwargs)

    monkeypatch.setattr("django_redis_pool.testing.EmbeddedRedis", EmbeddedRedis)
    monkeypatch.setattr(dev.signal, "signal", lambda *args: None)  # (pytest's, kept)
    monkeypatch.delenv("REDIS_URL", raising=False)
    with pytest.raises(SystemExit, match="that port is already in use"):
        dev.cmd_example_inner([f"127.0.0.1:{busy_port}"])
    assert started == []


def test_an_install_waits_for_another_dev_py_install_of_the_same_venv(
    dev: ModuleType, tmp_path: Path
) -> None:
    other = subprocess.Popen(
        [sys.executable, "-c", (
            "import importlib.util, sys\n"
            "spec = importlib.util.spec_from_file_location('dev', sys.argv[1])\n"
            "dev = importlib.util.module_from_spec(spec); spec.loader.exec_module(dev)\n"
            "print('locking', flush=True)\n"
            "with dev.venv_lock(dev.Path(sys.argv[2])):\n"
            "    print('locked', flush=True)\n"
        ), str(DEV_PY), str(tmp_path)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert other.stdout is not None
    with dev.venv_lock(tmp_path):
        assert other.stdout.readline() == "locking\n"
        # (the kernel lists a process waiting for an flock in /proc/locks, "->")
        wait_for(
            lambda: (
                any(
                    "-> FLOCK" in line and f" {other.pid} " in line
                    for line in Path("/proc/locks").read_text().splitlines()
                )
                or other.poll() is not None
            ),
            what="the other install to wait for the lock",
        )
        assert other.poll() is None, "it went on while this process held the lock"
    assert other.stdout.readline() == "locked\n"
    assert other.wait(30) == 0


def test_loadgroup_runs_the_tests_of_one_xdist_group_in_one_worker(tmp_path: Path) -> None:
    """What ``scripts/dev.py test`` relies on to start the example once, not in
    every worker (pytest 9.2 undoes it: pytest-xdist issue 1386)."""
    (tmp_path / "test_grouped.py").write_text(
        "import pytest\n"
        "pytestmark = pytest.mark.xdist_group('one')\n"
        "@pytest.mark.parametrize('i', range(8))\n"
        "def test_it(i):\n"
        "    pass\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "PYTEST_"))}
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:django",
         "-n", "2", "--dist", "loadgroup", "-v", "test_grouped.py"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    workers = {line.split("]")[0] for line in result.stdout.splitlines() if "PASSED" in line}
    assert len(workers) == 1, result.stdout
