"""``scripts/dev.py test --busy [N]``: the suite beside N CPU-bound processes,
which are stopped at the end of the run, however it ends."""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
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
