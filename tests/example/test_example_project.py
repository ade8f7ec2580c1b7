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
import re, threading
from django.conf import settings
from django.test import Client
client = Client(HTTP_HOST="localhost")
index = client.get("/")
assert index.status_code == 200, index.status_code
assert b"a guided tour" in index.content, index.content
printers = client.get("/printers/")
assert printers.status_code == 200, printers.status_code
assert b"available: 3" in printers.content, printers.content
# A hold's expiry reads as a time of TIME_ZONE (UTC), and how far off it is.
assert settings.TIME_ZONE == "UTC" and settings.USE_TZ
from django_redis_pool import get_pool
held = get_pool("printers").acquire(timeout=0)
printers = client.get("/printers/")
expiry = rb"<td>\\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d:\\d\\d UTC, in (29|30) s</td>"
assert re.search(expiry, printers.content), printers.content
assert b"available: 2, leased: 1, total: 3" in printers.content, printers.content
get_pool("printers").release(held)
printed = client.get("/print/")
assert printed.status_code == 200, printed.status_code
assert b"Printed on <b>printer-" in printed.content, printed.content
report = client.get("/report/?seconds=0.1")
assert report.status_code == 200, report.status_code
assert b"1 of 2 slots were in use" in report.content, report.content
# Its button starts a 30 s report, and links the semaphore's page in the admin.
assert b"data-seconds='30'>Build a 30 s report" in report.content, report.content
assert b"href='/admin/django_redis_pool/dashboard/reports/'" in report.content
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
proxies = get_allocator("proxies")
assert proxies.get_soft_bind("ann") == "proxy-fast"
assert "ann → <b>proxy-fast</b>, bob → <b>none yet</b>".encode() in fetched.content
# Soft binding: bob fetches while ann's fetch holds proxy-fast, so he gets
# another proxy; then, alone, each gets their own again (bob too, though
# proxy-fast is free by then).
def proxy_of(response):
    return re.search(rb"through <b>([^<]+)</b>", response.content).group(1).decode()
ann_alone = []
ann_client = Client(HTTP_HOST="localhost")
holding = threading.Thread(
    target=lambda: ann_alone.append(ann_client.get("/fetch/?visitor=ann&seconds=1"))
)
holding.start()
import time
deadline = time.monotonic() + 10
while proxies.state("proxy-fast") != "held":
    assert time.monotonic() < deadline, "ann's fetch never held proxy-fast"
    time.sleep(0.01)
bob = client.get("/fetch/?visitor=bob")
holding.join()
assert proxy_of(ann_alone[0]) == "proxy-fast", ann_alone[0].content
bobs = proxy_of(bob)
assert bobs in ("proxy-a", "proxy-b"), bob.content
assert proxies.state("proxy-fast") == "free"
assert proxy_of(client.get("/fetch/?visitor=bob")) == bobs, "bob kept his proxy"
assert proxy_of(client.get("/fetch/?visitor=ann")) == "proxy-fast", "ann kept hers"
again = client.get("/fetch/?visitor=bob&seconds=x")
assert proxy_of(again) == bobs, again.content
assert f"ann → <b>proxy-fast</b>, bob → <b>{bobs}</b>".encode() in again.content
# The task page: GET shows the form (and starts nothing), POST (with the CSRF
# token) starts a task.
from django_redis_pool import get_queue
strict = Client(HTTP_HOST="localhost", enforce_csrf_checks=True)
form = strict.get("/task/")
assert form.status_code == 200, form.status_code
assert b"<form method='post' action='/task/'>" in form.content, form.content
assert b"None yet" in form.content, form.content
assert get_queue("default").counts()["pending"] == 0, "a GET started a task"
assert strict.post("/task/", {"to": "10"}).status_code == 403, "no CSRF token"
token = re.search(rb"name='csrfmiddlewaretoken' value='([^']+)'", form.content).group(1)
started = strict.post("/task/", {"to": "10", "csrfmiddlewaretoken": token.decode()})
assert started.status_code == 303, started.status_code
assert re.fullmatch(r"/task/[0-9a-f-]+/", started["Location"]), started["Location"]
assert get_queue("default").counts()["pending"] == 1
# Its page says "queued" (no "0 of 0") and reloads nothing: its script asks
# for the task's state (?format=json) and shows it in place.
page = strict.get(started["Location"])
assert page.status_code == 200 and not page.has_header("Refresh"), page.headers
assert b"<p id='status'>queued</p>" in page.content, page.content
assert b"<progress id='progress'></progress> <span id='count'></span>" in page.content
assert b" of 0" not in page.content and b"data-json='?format=json'" in page.content
state = strict.get(started["Location"] + "?format=json")
assert state["Content-Type"] == "application/json", state.headers
assert state.json() == {
    "status": "queued", "current": None, "total": None, "progress": "", "result": "",
    "ended": False,
}, state.json()
assert strict.get("/task/nope/?format=json").status_code == 404
# A running task that has reported nothing yet shows no "0 of 0"; a progress
# read back from Redis that is no number shows none.
from django_redis_pool import Task
from example_project.task_pages import task_state
running = task_state(Task(id="t", name="count", params={}, status="running"))
assert (running["progress"], running["total"], running["ended"]) == ("", None, False)
odd = Task(id="t", name="count", params={}, status="running", progress=("x", float("nan")))
assert task_state(odd)["progress"] == "" and task_state(odd)["current"] is None
listed = strict.get("/task/")
task_id = started["Location"].split("/")[2]
assert f"<a href='/task/{task_id}/'>{task_id}</a></td><td>queued</td>".encode() in listed.content
from django.core.management import call_command
call_command("pool_worker", "--burst", verbosity=0)
done = strict.get(started["Location"])
assert b"result: {&quot;counted&quot;: 10}" in done.content, done.content
assert b"<span id='count'>10 of 10</span>" in done.content, done.content
assert b"<progress id='progress' value='10' max='10'>" in done.content, done.content
assert strict.get(started["Location"] + "?format=json").json() == {
    "status": "done", "current": 10, "total": 10, "progress": "10 of 10",
    "result": 'result: {"counted": 10}', "ended": True,
}
listed = strict.get("/task/")
assert b"<td>done</td><td>{&quot;counted&quot;: 10}</td>" in listed.content, listed.content
first = client.get("/client/")
again = client.get("/client/")
assert b"client #1 fetched /status (its request #1)" in first.content, first.content
assert b"client #1 fetched /status (its request #2)" in again.content, "the client was kept"
# What the tour says of the rate limit: a burst of 2 in quick succession, then
# one every 12 s; the third in quick succession gets the 429 page.
tour = index.content.decode()
assert "may search twice in quick succession, and then once every 12 s" in tour, tour
assert "the third search in quick succession gets the 429 page" in tour, tour
assert "says to retry in 12 s" in tour, tour
searched = [client.get("/search/") for _ in range(3)]
assert [r.status_code for r in searched] == [200, 200, 429], searched
assert b"<p id='left'>1 search left now.</p>" in searched[0].content, searched[0].content
assert b"comes back every 12 s, and all 2 are back in 12 s" in searched[0].content
assert b"<p id='left'>0 searches left now.</p>" in searched[1].content, searched[1].content
assert b"all 2 are back in 24 s" in searched[1].content, searched[1].content
assert searched[0]["RateLimit-Policy"] == "5;w=60;burst=2", searched[0].headers
assert searched[1]["RateLimit-Remaining"] == "0", searched[1].headers
assert searched[2]["Retry-After"] in ("11", "12"), searched[2].headers
assert b"Too many searches: slow down" in searched[2].content, searched[2].content
retry = searched[2]["Retry-After"]
assert f"try again in {retry} s, when a spent one is back".encode() in searched[2].content
# The admin shows its times in TIME_ZONE: UTC.
from django.contrib.auth.models import User
from django.urls import reverse
client.force_login(User.objects.create_superuser("tz", "tz@example.com", "tz"))
admin_page = client.get(reverse("admin:django_redis_pool_primitive", args=["printers"]))
assert admin_page.status_code == 200, admin_page.status_code
assert re.search(rb"\\d\\d:\\d\\d:\\d\\d UTC", admin_page.content), admin_page.content
# The site's icon (browsers ask every site for /favicon.ico, the admin's pages too).
icon = client.get("/favicon.ico")
assert icon.status_code == 200 and icon["Content-Type"] == "image/svg+xml", icon.headers
assert icon.content.startswith(b"<svg ") and b"max-age" in icon["Cache-Control"].encode()
assert b"<link rel='icon' href='/favicon.ico'" in index.content, index.content
metrics = client.get("/metrics/")
assert metrics.status_code == 200, metrics.status_code
text = metrics.content.decode()
# (the print job's, and the printer held above to read its expiry)
assert 'django_redis_pool_acquired_total{kind="pool",name="printers"} 2.0' in text, text
assert 'django_redis_pool_tasks_completed_total{kind="queue",name="default"} 1.0' in text, text
print("views ok")
"""


def manage(redis_url: str, *args: str, db: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``manage.py *args`` of the example on ``redis_url`` (and its SQLite file
    ``db``, if given: else the example's own, which the check does not open)."""
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    env["REDIS_URL"] = redis_url
    if db is not None:
        env["EXAMPLE_DB"] = str(db)
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


def test_example_project_views_work(redis_url: str, tmp_path: Path) -> None:
    db = tmp_path / "db.sqlite3"  # (sessions keep the task page's list; the admin's user)
    migrated = manage(redis_url, "migrate", "--noinput", db=db)
    assert migrated.returncode == 0, migrated.stderr
    synced = manage(redis_url, "pool_sync", db=db)
    assert synced.returncode == 0, synced.stderr
    assert "printers: 3 added" in synced.stdout
    assert "reports: max size set to 2" in synced.stdout
    assert "proxies: 3 added" in synced.stdout
    assert "http-clients: an object pool, nothing to sync" in synced.stdout
    assert "search: a rate limit, nothing to sync" in synced.stdout
    result = manage(redis_url, "shell", "-c", VIEWS_SCRIPT, db=db)
    assert result.returncode == 0, result.stderr
    assert "views ok" in result.stdout
