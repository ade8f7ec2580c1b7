"""Every code sample of README.md and of the Quickstart (docs/getting-started.md)
runs, in the page's order, against the harness's real Redis.

The convention the pages follow (so that their samples stay readable):

* A ``python`` block whose first line is a comment naming a file of the
  project (``# mysite/settings.py``, ``# mysite/views.py``, ``# mysite/urls.py``)
  is that file's code: a settings block is *appended* to the settings that
  ``django-admin startproject`` wrote (so it can say ``INSTALLED_APPS += [...]``);
  any other file is written as given.
* Any other ``python`` block is a script run in the project with its settings
  loaded (``django.setup()`` first), as ``manage.py shell`` would.
* A ``sh`` block is a list of commands, one a line (``# ...`` comments are
  dropped). ``django-admin ...``, ``cd DIR`` and ``python manage.py ...`` run
  for real and must succeed (``pool_status --json`` must print JSON, and
  ``pool_gc --loop`` must keep running until it is stopped with SIGTERM, then
  exit cleanly). The commands that cannot run here are listed in
  :data:`NOT_RUN`, each with its reason; any other command fails the test.
* ``text`` (or ``console``, ``json``) blocks are output or illustrations, never
  run.

The URL ``redis://127.0.0.1:6379/0`` in the samples is replaced by the
harness's. When a page does not create its project itself, the test runs
``django-admin startproject mysite`` first. After the last block, every path
the ``urls.py`` block routes (but ``admin/``) is requested with Django's test
client and must answer 200.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import textwrap
import threading
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.support.waiting import STARTUP, wait_for

pytestmark = pytest.mark.release

ROOT = Path(__file__).resolve().parents[2]
SAMPLE_URL = "redis://127.0.0.1:6379/0"
PROJECT = "mysite"

#: Commands the samples show but this test does not run (prefix -> reason).
NOT_RUN = {
    "pip install": "installs from PyPI; the test runs the working tree's package",
    "python -m build": "builds a wheel (tests/project/test_packaging.py builds and installs one)",
    "python3 scripts/dev.py": "starts the example project or the whole suite "
    "(tests/example/test_example_tour_browser.py runs the example that way)",
    "python manage.py createsuperuser": "interactive",
    "sudo apt-get": "installs a system package; the harness starts its own Redis",
    "docker run": "needs a container runtime; the harness starts its own Redis",
    "python -m django_redis_pool.testing": "a Redis until stopped "
    "(tests/project/test_harness.py runs it); the harness starts its own Redis",
    "python manage.py runserver": "a server until stopped; the views are requested "
    "with the test client instead",
}

#: Service commands: started; once they print this (they run, their signal
#: handlers are set), stopped by SIGTERM, on which they must exit cleanly.
SERVICES = {"python manage.py pool_gc --loop": "Reclaiming every"}

FENCE = re.compile(r"^```([\w-]*)[^\n]*\n(.*?)^```", re.M | re.S)
FILE_HEADER = re.compile(r"#\s*([\w./-]+\.py)\s*$")


@dataclass
class Run:
    """The state of one page's run: where the shell is, what was executed."""

    tmp: Path
    url: str
    cwd: Path
    #: The Python that runs everything: the suite's own, with the working
    #: tree's package first; or a fresh venv's, with only what it installed.
    python: str = sys.executable
    fresh: bool = False
    executed: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)

    @property
    def project(self) -> Path:
        return self.tmp / PROJECT

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not (self.fresh and k.startswith("PYTHON"))}
        # The working tree's package first (the venv may hold another checkout's);
        # in a fresh venv, the installed one.
        path = [str(self.project)] if self.fresh else [str(ROOT), str(self.project)]
        env["PYTHONPATH"] = os.pathsep.join(path)
        env["DJANGO_SETTINGS_MODULE"] = f"{PROJECT}.settings"
        env.pop("DJANGO_REDIS_POOL_SETTINGS", None)
        return env


def blocks(text: str) -> list[tuple[str, str]]:
    """The fenced code blocks of a page: ``(language, code)`` in order."""
    return [(m.group(1), textwrap.dedent(m.group(2))) for m in FENCE.finditer(text)]


def _run(run: Run, argv: list[str], what: str, timeout: float = 120) -> str:
    result = subprocess.run(
        argv, cwd=run.cwd, env=run.env(), capture_output=True, text=True, timeout=timeout
    )
    assert result.returncode == 0, (
        f"{what} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}"
    )
    run.executed.append(what)
    return result.stdout


def _service(run: Run, argv: list[str], what: str, ready: str) -> None:
    """Run the service ``argv`` until it prints ``ready``, then SIGTERM it.
    (Not a fixed time: on a busy machine, Django may still be importing when
    it ends, and SIGTERM would kill a process whose handlers are not set yet.)"""
    proc = subprocess.Popen(
        argv,
        cwd=run.cwd,
        env={**run.env(), "PYTHONUNBUFFERED": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: list[str] = []

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        wait_for(
            lambda: any(ready in line for line in lines) or proc.poll() is not None,
            STARTUP,
            f"{what} to print {ready!r}",
        )
        if proc.poll() is not None:
            pytest.fail(f"{what} exited ({proc.returncode}) instead of running: {''.join(lines)}")
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    reader.join(10)
    assert proc.stderr is not None
    out, err = "".join(lines), proc.stderr.read()
    assert proc.returncode == 0, f"{what} did not stop cleanly on SIGTERM:\n{out}\n{err}"
    run.executed.append(what)


def run_shell(run: Run, code: str) -> None:
    for raw in code.splitlines():
        line = re.sub(r"\s+#.*$", "", raw).strip()
        if not line or line.startswith("#"):
            continue
        line = line.replace(SAMPLE_URL, run.url)
        reason = next((why for prefix, why in NOT_RUN.items() if line.startswith(prefix)), None)
        if reason is not None:
            run.skipped.append(f"{line}  ({reason})")
            continue
        argv = shlex.split(line)
        if argv[0] == "cd":
            run.cwd = (run.cwd / argv[1]).resolve()
            assert run.cwd.is_dir(), line
            run.executed.append(line)
        elif argv[0] == "django-admin":
            _run(run, [run.python, "-m", "django", *argv[1:]], line)
        elif argv[:2] == ["python", "manage.py"]:
            command = [run.python, "manage.py", *argv[2:]]
            if line in SERVICES:
                _service(run, command, line, SERVICES[line])
                continue
            out = _run(run, command, line)
            if "--json" in argv:
                json.loads(out)  # raises if it is not one JSON document
        else:
            pytest.fail(
                f"a sample runs {line!r}, which this test neither runs nor lists in NOT_RUN"
            )


def write_file(run: Run, relative: str, code: str) -> None:
    code = code.replace(SAMPLE_URL, run.url)
    path = run.cwd / relative
    assert path.parent.is_dir(), f"{relative}: no such folder in the project"
    if relative.endswith("settings.py"):
        assert path.is_file(), relative
        with path.open("a") as f:
            f.write("\n\n" + code)
    else:
        path.write_text(code)
    if relative.endswith("urls.py"):
        run.paths = re.findall(r'path\("([^"]*)"', code)
    run.executed.append(f"wrote {relative}")


SCRIPT_PRELUDE = "import django\ndjango.setup()\n"


def run_script(run: Run, code: str, what: str) -> str:
    script = run.tmp / "sample.py"
    script.write_text(SCRIPT_PRELUDE + code.replace(SAMPLE_URL, run.url))
    return _run(run, [run.python, str(script)], what)


def request_paths(run: Run) -> None:
    paths = [p for p in run.paths if not p.startswith("admin/")]
    assert paths, "the page routes no view"
    code = textwrap.dedent(
        f"""
        from django.test import Client
        from django.test.utils import setup_test_environment

        setup_test_environment()
        client = Client()
        for path in {paths!r}:
            response = client.get("/" + path)
            body = response.content.decode()
            assert response.status_code == 200, (path, response.status_code, body)
            print(path, body)
        """
    )
    out = run_script(run, code, f"GET {paths}")
    print(out)


def run_page(page: Path, tmp_path: Path, redis_url: str, python: str | None = None) -> Run:
    text = page.read_text()
    run = Run(tmp=tmp_path, url=redis_url, cwd=tmp_path)
    if python is not None:
        run.python, run.fresh = python, True
    shell = "\n".join(code for language, code in blocks(text) if language == "sh")
    if not re.search(r"^\s*django-admin startproject", shell, flags=re.M):
        run_shell(run, f"django-admin startproject {PROJECT}\ncd {PROJECT}")
    for number, (language, code) in enumerate(blocks(text), 1):
        first = code.splitlines()[0] if code.strip() else ""
        if language == "sh":
            run_shell(run, code)
        elif language == "python":
            header = FILE_HEADER.fullmatch(first.strip())
            if header:
                write_file(run, header.group(1), code)
            else:
                out = run_script(run, code, f"{page.name} python block {number}")
                print(out)
        elif language in ("text", "console", "json"):
            continue
        else:
            pytest.fail(f"{page.name} block {number}: a ```{language} block is not classified")
    request_paths(run)
    print("executed:", *run.executed, sep="\n  ")
    print("not run (NOT_RUN):", *run.skipped, sep="\n  ")
    return run


# (a page runs a dozen ``manage.py`` processes in turn, each starting Django:
# more than the 120 s a single test gets on a machine shared beyond two hogs)
@pytest.mark.timeout(360)
@pytest.mark.parametrize("page", ["README.md", "docs/getting-started.md"])
def test_every_sample_of_the_page_runs(page: str, tmp_path: Path, redis_url: str) -> None:
    run = run_page(ROOT / page, tmp_path, redis_url)
    ran = "\n".join(run.executed)
    for command in ("migrate", "check", "pool_sync", "pool_status --json"):
        assert f"python manage.py {command}" in ran, f"{page} never runs manage.py {command}"


@pytest.mark.timeout(900)
def test_a_new_user_follows_the_readme_in_a_fresh_venv(tmp_path: Path, redis_url: str) -> None:
    """Install from the checkout into a fresh venv, as the README says (pip
    pulls Django and redis-py from PyPI), then do what its Usage section does:
    startproject, its settings and views, check, migrate, pool_sync; one
    request is held, and one refused with Retry-After while the pool is taken."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = str(venv / "bin" / "python")
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "DJANGO_"))}
    install = [python, "-m", "pip", "install", "-q", "--disable-pip-version-check", str(ROOT)]
    result = subprocess.run(install, env=clean, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    work = tmp_path / "work"
    work.mkdir()
    run = run_page(ROOT / "README.md", work, redis_url, python=python)
    where = run_script(run, "import django_redis_pool\nprint(django_redis_pool.__file__)", "where")
    assert str(venv) in where, f"the sample ran {where.strip()}, not the installed package"
    refused = textwrap.dedent(
        """
        from django.test import Client
        from django.test.utils import setup_test_environment

        from django_redis_pool import get_pool

        import threading

        setup_test_environment()
        pool = get_pool("printers")
        held = [pool.acquire(holder=f"other-{i}") for i in range(2)]
        assert all(held), held
        response = Client().get("/print/")
        print(response.status_code, response.headers.get("Retry-After"))
        assert response.status_code == 503, response.status_code
        assert int(response.headers["Retry-After"]) >= 1
        for lease in held:
            lease.release()
        assert Client().get("/print/").status_code == 200

        # the README's way to see it: three prints of 5 s at once
        codes = []
        def print_for(seconds):
            codes.append(Client().get(f"/print/?seconds={seconds}").status_code)
        prints = [threading.Thread(target=print_for, args=(5,)) for _ in range(3)]
        for thread in prints:
            thread.start()
        for thread in prints:
            thread.join()
        print(sorted(codes))
        assert sorted(codes) == [200, 200, 503], codes
        """
    )
    print(run_script(run, refused, "a request refused while the printers are taken"))
