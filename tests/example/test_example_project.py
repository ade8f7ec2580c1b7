"""Smoke test of example_project/: its settings pass ``manage.py check`` and its
views work against the harness's Redis (each run in a subprocess, since the
project has its own settings module)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MANAGE = ROOT / "example_project" / "manage.py"

VIEWS_SCRIPT = """
from django.test import Client
client = Client(HTTP_HOST="localhost")
index = client.get("/")
assert index.status_code == 200, index.status_code
assert b"a guided tour" in index.content, index.content
printers = client.get("/printers/")
assert printers.status_code == 200, printers.status_code
assert b"available: 3" in printers.content, printers.content
printed = client.get("/print/")
assert printed.status_code == 200, printed.status_code
assert b"Printed on <b>printer-" in printed.content, printed.content
report = client.get("/report/")
assert report.status_code == 200, report.status_code
assert b"1 of 2 slots were in use" in report.content, report.content
imported = client.get("/import/")
assert imported.status_code == 200, imported.status_code
assert b"Imported with fence " in imported.content, imported.content
from django_redis_pool import get_lock
lock = get_lock("import")
assert lock.acquire(blocking=False)
refused = client.get("/import/")
assert refused.status_code == 503, refused.status_code
assert refused["Retry-After"] == "1", refused.headers
assert b"An import is already running" in refused.content, refused.content
lock.release()
fetched = client.get("/fetch/?visitor=ann")
assert fetched.status_code == 200, fetched.status_code
assert b"Fetched for ann through <b>proxy-fast</b>" in fetched.content, fetched.content
from django_redis_pool import get_allocator
assert get_allocator("proxies").get_soft_bind("ann") == "proxy-fast"
started = client.get("/task/")
assert started.status_code == 302, started.status_code
page = client.get(started["Location"])
assert page.status_code == 200 and b"queued" in page.content and page["Refresh"] == "1"
from django.core.management import call_command
call_command("pool_worker", "--burst", verbosity=0)
done = client.get(started["Location"])
assert b"result: {&#x27;counted&#x27;: 10}" in done.content, done.content
assert b"10 of 10" in done.content and not done.has_header("Refresh")
first = client.get("/client/")
again = client.get("/client/")
assert b"client #1 fetched /status (its request #1)" in first.content, first.content
assert b"client #1 fetched /status (its request #2)" in again.content, "the client was kept"
searched = [client.get("/search/") for _ in range(3)]
assert [r.status_code for r in searched] == [200, 200, 429], searched
assert b"1 searches left now" in searched[0].content, searched[0].content
assert searched[0]["RateLimit-Policy"] == "5;w=60;burst=2", searched[0].headers
assert searched[1]["RateLimit-Remaining"] == "0", searched[1].headers
assert searched[2]["Retry-After"] in ("11", "12"), searched[2].headers
assert b"Too many searches: slow down" in searched[2].content, searched[2].content
metrics = client.get("/metrics/")
assert metrics.status_code == 200, metrics.status_code
text = metrics.content.decode()
assert 'django_redis_pool_acquired_total{kind="pool",name="printers"} 1.0' in text, text
assert 'django_redis_pool_tasks_completed_total{kind="queue",name="default"} 1.0' in text, text
print("views ok")
"""


def manage(redis_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    env["REDIS_URL"] = redis_url
    # The repository root first, so the checkout's package is imported.
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, str(MANAGE), *args],
        cwd=MANAGE.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_example_project_passes_manage_py_check(redis_url: str) -> None:
    result = manage(redis_url, "check")
    assert result.returncode == 0, result.stderr
    assert "no issues" in result.stdout


def test_example_project_views_work(redis_url: str) -> None:
    synced = manage(redis_url, "pool_sync")
    assert synced.returncode == 0, synced.stderr
    assert "printers: 3 added" in synced.stdout
    assert "reports: max size set to 2" in synced.stdout
    assert "proxies: 3 added" in synced.stdout
    assert "http-clients: an object pool, nothing to sync" in synced.stdout
    assert "search: a rate limit, nothing to sync" in synced.stdout
    result = manage(redis_url, "shell", "-c", VIEWS_SCRIPT)
    assert result.returncode == 0, result.stderr
    assert "views ok" in result.stdout
