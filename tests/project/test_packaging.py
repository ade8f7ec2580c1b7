"""The release artifacts: the sdist and the wheel build, pass ``twine check
--strict``, carry every file of the package, and the wheel alone, installed into
a fresh venv, serves a minimal project's ``@with_resource`` view on real Redis.

One build and one venv for the module. The project's subprocesses run from
``tmp_path`` with the fresh venv's Python (``-E -s``: no PYTHONPATH, no user
site), so they import the installed wheel, never this checkout; a test asserts
that.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tarfile
import textwrap
import urllib.request
import zipfile
from pathlib import Path

import pytest

from tests.support.waiting import STARTUP, wait_for

# (the build and the venv, made in the first test's setup, fetch from the index)
pytestmark = [pytest.mark.release, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "django_redis_pool"
PIP_TIMEOUT = 600
#: What of the checkout is not the project's sources (tools' environments,
#: caches, build output), left out of the copy the release is built from.
NOT_SOURCES = (
    ".git",
    ".venv",
    ".nox",
    ".cache",
    ".*_cache",
    ".hypothesis",
    "__pycache__",
    "*.egg-info",
    "build",
    "dist",
    "site",
)


def package_files() -> set[str]:
    """Every file of the package in the source tree (``django_redis_pool/...``),
    but compiled bytecode."""
    return {
        path.relative_to(ROOT).as_posix()
        for path in PACKAGE.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc"
    }


def run(cmd: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: float = 300):
    """Run ``cmd``; fail the test with its output unless it exits 0."""
    result = subprocess.run(
        cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert result.returncode == 0, (
        f"{' '.join(map(str, cmd))} exited {result.returncode}\n"
        f"--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}"
    )
    return result


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The sdist and the wheel, built once (``python -m build``: the wheel is
    built from the sdist, so the sdist is proven to build)."""
    out = tmp_path_factory.mktemp("dist")
    # From a private copy of the tree: setuptools writes its egg-info and the
    # sdist's staging directory into the source tree, and two test workers
    # building this checkout at once removed each other's (a busy run's failure).
    source = tmp_path_factory.mktemp("source") / "tree"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(*NOT_SOURCES))
    run([sys.executable, "-m", "build", "--outdir", str(out), str(source)], cwd=out, timeout=600)
    (sdist,) = out.glob("*.tar.gz")
    (wheel,) = out.glob("*.whl")
    return {"sdist": sdist, "wheel": wheel}


@pytest.fixture(scope="module")
def venv_python(dist: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with the wheel installed (pip pulls Django and redis-py)."""
    venv = tmp_path_factory.mktemp("venv")
    run([sys.executable, "-m", "venv", str(venv)], cwd=venv)
    python = venv / ("Scripts" if os.name == "nt" else "bin") / "python"
    pip = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    run([*pip, str(dist["wheel"])], cwd=venv, env=clean_env(), timeout=PIP_TIMEOUT)
    return python


def clean_env(**extra: str) -> dict[str, str]:
    """The environment without anything that could point Python at the checkout."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("PYTHON", "DJANGO_", "VIRTUAL_ENV"))
    }
    return {**env, **extra}


def test_twine_check_strict_passes_on_both(dist: dict[str, Path]) -> None:
    result = run(
        [
            sys.executable,
            "-m",
            "twine",
            "check",
            "--strict",
            str(dist["sdist"]),
            str(dist["wheel"]),
        ],
        cwd=dist["wheel"].parent,
    )
    assert result.stdout.count("PASSED") == 2, result.stdout


def test_wheel_carries_every_file_of_the_package(dist: dict[str, Path]) -> None:
    with zipfile.ZipFile(dist["wheel"]) as wheel:
        names = set(wheel.namelist())
    source = package_files()
    assert {name for name in source if name.endswith(".lua")}, "no Lua script in the tree?"
    assert source - names == set(), "files of the package missing from the wheel"
    # the kinds of data that a glob in pyproject.toml must name, checked one by one
    for pattern in ("primitives/*/*.lua", "templates/**/*.html", "migrations/*.py"):
        expected = {p.relative_to(ROOT).as_posix() for p in PACKAGE.glob(pattern)}
        assert expected, pattern
        assert expected <= names, pattern
    assert "django_redis_pool/py.typed" in names
    metadata = next(name for name in names if name.endswith(".dist-info/METADATA"))
    assert any(name.endswith(".dist-info/licenses/LICENSE") for name in names)
    with zipfile.ZipFile(dist["wheel"]) as wheel:
        text = wheel.read(metadata).decode()
    assert "Requires-Python: >=3.10" in text
    assert "Classifier: Framework :: Django :: 5.2" in text
    assert "Classifier: Framework :: Django :: 6.0" in text


def test_the_version_is_written_once_and_the_wheel_names_it_and_the_project_urls(
    dist: dict[str, Path],
) -> None:
    import django_redis_pool

    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    project = pyproject.partition("\n[project]\n")[2].partition("\n[")[0]
    assert 'dynamic = ["version"]' in project and "\nversion = " not in project
    assert dist["wheel"].name.startswith(f"django_redis_pool-{django_redis_pool.__version__}-")
    with zipfile.ZipFile(dist["wheel"]) as wheel:
        metadata = next(name for name in wheel.namelist() if name.endswith(".dist-info/METADATA"))
        text = wheel.read(metadata).decode()
    assert f"Version: {django_redis_pool.__version__}" in text
    for label in ("Homepage", "Documentation", "Changelog", "Source", "Issues"):
        assert f"Project-URL: {label}, https://" in text, label


def test_the_release_workflow_builds_checks_and_publishes_a_version_tag() -> None:
    import yaml

    workflow = yaml.safe_load((ROOT / ".github/workflows/release.yml").read_text())
    assert workflow[True]["push"]["tags"] == ["v*"]  # (YAML 1.1 reads "on" as True)
    build, publish = workflow["jobs"]["build"], workflow["jobs"]["publish"]
    commands = "\n".join(step.get("run", "") for step in build["steps"])
    assert "python -m build" in commands and "twine check --strict" in commands
    assert '"v$version" = "$GITHUB_REF_NAME"' in commands
    assert publish["needs"] == "build" and publish["permissions"] == {"id-token": "write"}
    assert any(
        step.get("uses", "").startswith("pypa/gh-action-pypi-publish") for step in publish["steps"]
    )


def test_sdist_carries_what_it_needs_to_build(dist: dict[str, Path]) -> None:
    with tarfile.open(dist["sdist"]) as sdist:
        top, *_ = sdist.getnames()
        names = {name.partition("/")[2] for name in sdist.getnames()}
    assert top == dist["sdist"].name.removesuffix(".tar.gz")
    assert {"pyproject.toml", "README.md", "LICENSE", "PKG-INFO"} <= names
    assert package_files() - names == set(), "files of the package missing from the sdist"
    # MANIFEST.in: the whole test suite (not only setuptools' tests/test_*.py) and
    # the docs site's sources
    tracked = subprocess.run(
        ["git", "ls-files", "tests", "docs", "mkdocs.yml", "scripts/mkdocs_hooks.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert tracked and set(tracked) - names == set(), "tests or docs missing from the sdist"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


PROJECT_FILES = {
    "manage.py": """
        import os, sys
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "smoke.settings")
        from django.core.management import execute_from_command_line
        execute_from_command_line(sys.argv)
    """,
    "smoke/__init__.py": "",
    "smoke/settings.py": """
        import os
        from pathlib import Path
        SECRET_KEY = "smoke-test"
        DEBUG = False
        ALLOWED_HOSTS = ["127.0.0.1"]
        INSTALLED_APPS = [
            "django.contrib.contenttypes",
            "django.contrib.auth",
            "django_redis_pool",
        ]
        ROOT_URLCONF = "smoke.urls"
        DATABASES = {
            "default": {
                "ENGINE": "django.db.backends.sqlite3",
                "NAME": Path(__file__).resolve().parent.parent / "db.sqlite3",
            }
        }
        DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
        USE_TZ = True
        DJANGO_REDIS_POOL = {
            "CONNECTION": {"URL": os.environ["REDIS_URL"]},
            "KEY_PREFIX": "smoke",
            "POOLS": {"printers": {"RESOURCES": ["printer-1"], "LEASE_TIMEOUT": 30}},
        }
    """,
    "smoke/urls.py": """
        from django.urls import path
        from smoke.views import prints
        urlpatterns = [path("print/", prints)]
    """,
    "smoke/views.py": """
        from django.http import HttpResponse
        from django_redis_pool import get_pool, with_resource

        @with_resource("printers", timeout=5)
        def prints(request):
            lease = request.resources["printers"]
            pool = get_pool("printers")
            return HttpResponse(
                f"{lease.resource} occupied={pool.occupied_count()}", content_type="text/plain"
            )
    """,
}


def test_wheel_alone_serves_a_decorated_view(
    venv_python: Path, redis_url: str, tmp_path: Path
) -> None:
    project = tmp_path / "project"
    for name, text in PROJECT_FILES.items():
        (project / name).parent.mkdir(parents=True, exist_ok=True)
        (project / name).write_text(textwrap.dedent(text).lstrip())
    env = clean_env(REDIS_URL=redis_url)
    python = [str(venv_python), "-E", "-s"]

    where = run(
        [*python, "-c", "import django_redis_pool; print(django_redis_pool.__file__)"],
        cwd=project,
        env=env,
    )
    installed = Path(where.stdout.strip())
    assert venv_python.parent.parent in installed.parents, installed
    assert ROOT not in installed.parents

    manage = [*python, "manage.py"]
    run([*manage, "check", "--fail-level", "WARNING"], cwd=project, env=env)
    run([*manage, "migrate", "--noinput"], cwd=project, env=env)
    synced = run([*manage, "pool_sync"], cwd=project, env=env)
    assert "printers" in synced.stdout + synced.stderr

    port = free_port()
    server = subprocess.Popen(
        [*manage, "runserver", "--noreload", f"127.0.0.1:{port}"],
        cwd=project,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )

    def listening() -> bool:
        assert server.poll() is None, server.stdout.read()
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return True
        except OSError:
            return False

    try:
        wait_for(listening, STARTUP, "runserver to listen")
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/print/", timeout=30) as response:
            assert response.status == 200
            body = response.read().decode()
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
    assert body == "printer-1 occupied=1"  # held while the view ran

    released = run(
        [
            *manage,
            "shell",
            "-c",
            "from django_redis_pool import get_pool; p = get_pool('printers'); "
            "print(p.available(), p.occupied_count())",
        ],
        cwd=project,
        env=env,
    )
    # (Django >= 5.2's shell may first say what it imported)
    assert released.stdout.splitlines()[-1] == "['printer-1'] 0"  # and released after it
