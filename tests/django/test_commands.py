"""``manage.py pool_status``, ``manage.py pool_gc`` and what ``manage.py pool_sync``
does with locks, against the harness's real Redis.

Most tests run the commands in-process with ``call_command``; the exit status,
``--loop`` and signal handling are checked on a real ``python -m django``
subprocess whose settings module is written into ``tmp_path``.
"""

from __future__ import annotations

import io
import json
import os
import re
import signal
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from django.core.management import call_command
from django.core.management.base import CommandError

from django_redis_pool import Lease, ResourcePool, get_lock, get_pool, get_semaphore
from django_redis_pool.primitives.leased.primitive import LeasedPrimitive
from django_redis_pool.signals import lease_reclaimed
from tests.primitives.test_snapshot import HOLDER_KEYS, WAITER_KEYS, contents_of
from tests.primitives.test_snapshot import SNAPSHOT_KEYS as PRIMITIVE_KEYS
from tests.support.primitive_helpers import ops
from tests.support.stoppable_servers import closed_port
from tests.support.waiting import STARTUP, wait_for

ROOT = Path(__file__).resolve().parents[2]


def setting(url: str) -> dict[str, Any]:
    return {
        "CONNECTION": {"URL": url},
        "POOLS": {"printers": {"RESOURCES": ["p1", "p2"], "LEASE_TIMEOUT": 30}},
        "SEMAPHORES": {"reports": {"MAX_SIZE": 2}},
        "LOCKS": {"imports": {}},
    }


@pytest.fixture
def configured(settings: Any, redis_url: str) -> None:
    settings.DJANGO_REDIS_POOL = setting(redis_url)


@pytest.fixture
def synced(configured: None) -> None:
    call_command("pool_sync", verbosity=0)


def run(command: str, *args: str, **options: Any) -> str:
    """Run a management command; returns what it wrote to stdout."""
    out = io.StringIO()
    call_command(command, *args, stdout=out, stderr=io.StringIO(), **options)
    return out.getvalue()


def raw_keys(client: redis.Redis) -> dict[bytes, Any]:
    """Every key in the (private, flushed) Redis with its contents, TTLs left out."""
    return contents_of(client, client.scan_iter())


def expired_hold(pool: ResourcePool, holder: str) -> Lease:
    """A hold of ``pool`` by ``holder`` that has expired but was not reclaimed.

    Taken with a long lease, then renewed to 50 ms: a renewal touches only its own
    lease (an acquire would reclaim the holds that already expired)."""
    lease = pool.acquire(holder=holder, lease_timeout=30)
    assert lease is not None
    assert lease.renew(0.05)
    wait_for(lambda: not pool.is_occupied(lease.resource), what=f"{holder}'s hold to expire")
    return lease


def queue_dead_waiter(primitive: LeasedPrimitive, holder: str) -> None:
    """What a caller that queued (through the real acquire script, as
    ``LeaseEngine.acquire`` does) and then died leaves: a waiter that checks in
    never again, presumed dead once its liveness window (1 ms + the 1 s grace)
    has passed. Waits until it has."""
    engine = ops(primitive)
    reply = engine.run("acquire", uuid.uuid4().hex, -1, 0, -1, -1, 1, engine.restore, 1, holder)
    assert isinstance(reply, int), f"queued, not {reply!r}"
    wait_for(lambda: primitive.collect(dry_run=True).dropped, what=f"{holder} to be presumed dead")


@pytest.fixture
def blocked() -> Iterator[Callable[[Callable[[], Any]], None]]:
    """``blocked(fn)`` runs a blocking acquire in a thread; the test must let it
    finish (by releasing what it waits for). Joined at the end of the test."""
    threads: list[threading.Thread] = []
    errors: list[BaseException] = []

    def start(fn: Callable[[], Any]) -> None:
        def body() -> None:
            try:
                fn()
            except BaseException as exc:  # reported at teardown
                errors.append(exc)

        thread = threading.Thread(target=body, daemon=True)
        thread.start()
        threads.append(thread)

    yield start
    for thread in threads:
        thread.join(15)
        assert not thread.is_alive(), "a blocked acquire never finished"
    assert errors == []


def subprocess_env(tmp_path: Path, url: str) -> dict[str, str]:
    """Environment for ``python -m django`` using a settings module in ``tmp_path``
    that points ``DJANGO_REDIS_POOL`` at ``url``."""
    (tmp_path / "cmd_settings.py").write_text(
        f"from tests.settings import *  # noqa: F403\nDJANGO_REDIS_POOL = {setting(url)!r}\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("DJANGO_")}
    env["DJANGO_SETTINGS_MODULE"] = "cmd_settings"
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tmp_path), str(ROOT)]))
    return env


def start_django(
    tmp_path: Path, url: str, *args: str
) -> tuple[subprocess.Popen[bytes], Path, Path]:
    """Start ``python -m django *args``; returns it and the files of its stdout and stderr."""
    out, err = tmp_path / "stdout.txt", tmp_path / "stderr.txt"
    with out.open("wb") as stdout, err.open("wb") as stderr:
        proc = subprocess.Popen(
            [sys.executable, "-m", "django", *args],
            cwd=ROOT,
            env=subprocess_env(tmp_path, url),
            stdout=stdout,
            stderr=stderr,
        )
    return proc, out, err


def stop(proc: subprocess.Popen[bytes]) -> int:
    """SIGTERM ``proc``; its exit status (killed and failed if it does not exit)."""
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)
        raise AssertionError("did not exit within 10 s of SIGTERM") from None


# ------------------------------------------------------------------- pool_status


def table_rows(output: str) -> dict[str, list[str]]:
    """The rows of the status table by name (the lines before the first blank one)."""
    lines = output.split("\n\n", 1)[0].splitlines()
    assert lines[0].split() == ["NAME", "KIND", "HELD", "FREE", "WAITING", "SIZE"]
    return {line.split()[0]: line.split()[1:] for line in lines[1:]}


def test_status_table_has_a_header_and_a_row_per_primitive(synced: None) -> None:
    get_pool("printers").acquire(holder="alice")
    get_semaphore("reports").acquire("bob")
    assert get_lock("imports").acquire(holder="job-1", blocking=False)
    rows = table_rows(run("pool_status"))
    assert rows == {
        "imports": ["lock", "1", "0", "0", "1"],
        "printers": ["pool", "1", "1", "0", "2"],
        "reports": ["semaphore", "1", "1", "0", "2"],
    }


def test_status_of_an_idle_setup(synced: None) -> None:
    rows = table_rows(run("pool_status"))
    assert rows["printers"] == ["pool", "0", "2", "0", "2"]
    assert rows["imports"] == ["lock", "0", "1", "0", "1"]
    assert rows["reports"] == ["semaphore", "0", "2", "0", "2"], "pool_sync stored MAX_SIZE"


def test_status_only_reads(configured: None, redis_client: redis.Redis) -> None:
    get_pool("printers").associate("p1")
    before = raw_keys(redis_client)
    rows = table_rows(run("pool_status"))
    assert raw_keys(redis_client) == before
    # MAX_SIZE is stored by pool_sync or the first acquire, not by reading; until
    # then the size shown is the configured one, which the first acquire stores.
    assert rows["reports"] == ["semaphore", "0", "2", "0", "2"]
    assert rows["printers"] == ["pool", "0", "1", "0", "1"]


def test_status_says_what_fills_an_empty_primitive(settings: Any, redis_url: str) -> None:
    settings.DJANGO_REDIS_POOL = {
        "CONNECTION": {"URL": redis_url},
        "POOLS": {"empty": {}, "unsynced": {"RESOURCES": ["p1"]}},
    }
    output = run("pool_status")
    assert (
        '  no resources, and DJANGO_REDIS_POOL["POOLS"]["empty"]["RESOURCES"] lists none: '
        "list them there and run manage.py pool_sync, or use the admin's 'Add a resource' action"
    ) in output
    assert "  no resources in Redis: run manage.py pool_sync (it stores RESOURCES)" in output


def test_status_and_gc_with_nothing_configured_say_so(settings: Any, redis_url: str) -> None:
    settings.DJANGO_REDIS_POOL = {"CONNECTION": {"URL": redis_url}}
    nothing = (
        "No pools, semaphores, locks, allocators, queues, object pools or rate limits "
        "are configured."
    )
    assert nothing in run("pool_status")
    assert nothing in run("pool_gc")
    assert json.loads(run("pool_status", "--json")) == {"primitives": []}


def test_status_lists_holders_with_fence_and_seconds_left(synced: None) -> None:
    lease = get_pool("printers").acquire(holder="alice")
    assert lease is not None
    lock = get_lock("imports")
    assert lock.acquire(holder="job-1", blocking=False)
    output = run("pool_status")
    assert "printers (pool)" in output
    match = re.search(r"^  p1  held by alice  fence (\d+)  ([\d.]+) s left$", output, re.M)
    assert match, output
    assert int(match[1]) == lease.fence
    assert 25 <= float(match[2]) <= 30
    assert "imports (lock)" in output
    assert re.search(rf"^  held by job-1  fence {lock.fence}  [\d.]+ s left$", output, re.M)


def test_status_says_no_expiry_for_a_hold_without_one(synced: None) -> None:
    assert get_semaphore("reports").acquire("bob")  # no LEASE_TIMEOUT
    assert re.search(r"^  held by bob  fence \d+  no expiry$", run("pool_status"), re.M)


def test_status_lists_waiters_in_serving_order(synced: None, blocked: Any) -> None:
    lock = get_lock("imports")
    assert lock.acquire(holder="job-1", blocking=False)

    def wait_then_release(holder: str) -> None:
        assert lock.acquire(holder=holder, timeout=15)
        lock.release(holder=holder)

    blocked(lambda: wait_then_release("job-2"))
    wait_for(lambda: lock.waiting_count() == 1, what="job-2 to queue")
    blocked(lambda: wait_then_release("job-3"))
    wait_for(lambda: lock.waiting_count() == 2, what="job-3 to queue")
    try:
        output = run("pool_status")
        assert table_rows(output)["imports"] == ["lock", "1", "0", "2", "1"]
        first = re.search(r"^  waiting #1: job-2  priority 0  for [\d.]+ s$", output, re.M)
        second = re.search(r"^  waiting #2: job-3  priority 0  for [\d.]+ s$", output, re.M)
        assert first and second, output
    finally:
        lock.release(holder="job-1")


def test_status_json(synced: None, blocked: Any) -> None:
    pool = get_pool("printers")
    lease = pool.acquire(holder="alice")
    assert lease is not None and pool.acquire(holder="carol") is not None
    blocked(lambda: pool.acquire(timeout=15, holder="dave", priority=2).release())
    wait_for(lambda: pool.waiting_count() == 1, what="dave to queue")
    try:
        data = json.loads(run("pool_status", "--json"))
    finally:
        lease.release()
    assert set(data) == {"primitives"}
    by_name = {p["name"]: p for p in data["primitives"]}
    assert set(by_name) == {"imports", "printers", "reports"}
    for primitive in data["primitives"]:
        assert set(primitive) == PRIMITIVE_KEYS
    printers = by_name["printers"]
    assert printers["kind"] == "pool"
    assert (printers["size"], printers["free"], printers["held"], printers["waiting"]) == (
        2,
        0,
        2,
        1,
    )
    assert printers["available"] == []
    holders = {h["holder"]: h for h in printers["holders"]}
    assert set(holders) == {"alice", "carol"}
    alice = holders["alice"]
    assert set(alice) == HOLDER_KEYS | {"request"}
    assert alice["request"] is None  # a holder named in code, not a request's name
    assert (alice["resource"], alice["fence"]) == ("p1", lease.fence)
    assert alice["expires_at"] == pytest.approx(lease.expires_at)
    assert 25 <= alice["seconds_left"] <= 30
    [waiter] = printers["waiters"]
    assert set(waiter) == WAITER_KEYS
    assert (waiter["holder"], waiter["priority"]) == ("dave", 2)
    assert waiter["deadline"] > waiter["since"] and waiter["waited"] >= 0
    assert by_name["imports"]["kind"] == "lock" and by_name["imports"]["size"] == 1
    assert by_name["reports"]["kind"] == "semaphore" and by_name["reports"]["size"] == 2


def test_status_name_filters_and_is_repeatable(synced: None) -> None:
    rows = table_rows(run("pool_status", "--name", "printers"))
    assert set(rows) == {"printers"}
    data = json.loads(run("pool_status", "--json", "--name", "imports", "--name", "reports"))
    assert sorted(p["name"] for p in data["primitives"]) == ["imports", "reports"]


def test_status_unknown_name_is_a_command_error_naming_it(synced: None) -> None:
    with pytest.raises(CommandError, match=r"'nope'.*configured: 'imports', 'printers', 'reports'"):
        run("pool_status", "--name", "printers", "--name", "nope")


def test_status_with_redis_down_is_a_command_error(settings: Any) -> None:
    settings.DJANGO_REDIS_POOL = setting(f"redis://127.0.0.1:{closed_port()}/0")
    with pytest.raises(CommandError, match=r"Redis could not be reached.*Start Redis"):
        run("pool_status")


def test_status_verbosity_0_prints_only_the_table(synced: None) -> None:
    get_pool("printers").acquire(holder="alice")
    assert get_lock("imports").acquire(holder="job-1", blocking=False)
    output = run("pool_status", verbosity=0)
    lines = output.splitlines()
    assert len(lines) == 4, output
    assert set(table_rows(output)) == {"imports", "printers", "reports"}
    assert "held by" not in output


def test_status_unknown_name_exits_1_from_the_command_line(tmp_path: Path, redis_url: str) -> None:
    result = run_django(tmp_path, redis_url, "pool_status", "--name", "nope")
    assert result.returncode == 1, result.stderr
    assert "CommandError: Not configured: 'nope'" in result.stderr
    assert result.stdout == ""


def run_django(tmp_path: Path, url: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``python -m django <args>`` in a fresh process, as a user runs it."""
    return subprocess.run(
        [sys.executable, "-m", "django", *args],
        cwd=ROOT,
        env=subprocess_env(tmp_path, url),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize("command", ["pool_status", "pool_gc"])
def test_json_with_redis_down_prints_the_error_as_json_and_exits_1(
    tmp_path: Path, command: str
) -> None:
    result = run_django(tmp_path, f"redis://127.0.0.1:{closed_port()}/0", command, "--json")
    assert result.returncode == 1, result.stderr
    document = json.loads(result.stdout)
    assert set(document) == {"error"}
    assert "Redis could not be reached" in document["error"]
    assert "Start Redis" in document["error"]


def test_an_invalid_setting_is_reported_as_docs_commands_md_says(tmp_path: Path) -> None:
    """Django's check report (several lines) before the command; with
    --skip-checks, one line per error and "Run manage.py check"; no traceback."""
    env = subprocess_env(tmp_path, "redis://127.0.0.1:6379/0")
    bad = {"POOLS": {"p": {"ORDER": "x"}, "q": {"LEASE_TIMEOUT": -1}}}
    (tmp_path / "cmd_settings.py").write_text(
        f"from tests.settings import *  # noqa: F403\nDJANGO_REDIS_POOL = {bad!r}\n"
    )

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "django", "pool_status", *args],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    checked = run()
    assert checked.returncode == 1 and "Traceback" not in checked.stderr
    assert checked.stderr.startswith("SystemCheckError: System check identified some issues:")
    assert checked.stderr.count("HINT:") == 2
    skipped = run("--skip-checks")
    assert skipped.returncode == 1 and "Traceback" not in skipped.stderr
    lines = skipped.stderr.strip().splitlines()
    assert lines[0].startswith("CommandError: (django_redis_pool.E018) ")
    assert lines[1].startswith("(django_redis_pool.E018) ") and " HINT: " in lines[1]
    assert lines[2:] == ["Run manage.py check for details."]


@pytest.mark.parametrize("command", ["pool_status", "pool_gc"])
def test_json_with_an_unknown_name_prints_the_error_as_json_and_exits_1(
    tmp_path: Path, redis_url: str, command: str
) -> None:
    result = run_django(tmp_path, redis_url, command, "--json", "--name", "nope")
    assert result.returncode == 1, result.stderr
    assert "Not configured: 'nope'" in json.loads(result.stdout)["error"]


def test_json_error_is_raised_as_a_command_error_by_call_command(settings: Any) -> None:
    settings.DJANGO_REDIS_POOL = setting(f"redis://127.0.0.1:{closed_port()}/0")
    out = io.StringIO()
    with pytest.raises(CommandError, match="Redis could not be reached"):
        call_command("pool_status", "--json", stdout=out, stderr=io.StringIO())
    assert "Redis could not be reached" in json.loads(out.getvalue())["error"]


# ----------------------------------------------------------------------- pool_gc


def test_gc_reports_the_expired_holds_it_reclaimed(synced: None) -> None:
    pool = get_pool("printers")
    expired_hold(pool, "alice")
    output = run("pool_gc")
    assert "printers: 1 expired holds reclaimed, 0 dead waiters dropped" in output
    assert "imports: nothing to reclaim" in output
    assert "reports: nothing to reclaim" in output
    assert pool.leases() == [] and sorted(pool.available()) == ["p1", "p2"]
    assert "printers: nothing to reclaim" in run("pool_gc")


def test_gc_verbosity_2_lists_holder_and_fence(synced: None) -> None:
    lease = expired_hold(get_pool("printers"), "alice")
    output = run("pool_gc", verbosity=2)
    assert f"  p1  held by alice  fence {lease.fence}" in output


def test_gc_verbosity_0_prints_nothing(synced: None, redis_client: redis.Redis) -> None:
    expired_hold(get_pool("printers"), "alice")
    assert run("pool_gc", verbosity=0) == ""
    assert redis_client.zcard("drp:{pool:printers}:leases") == 0, "but reclaims"


def test_gc_dry_run_changes_nothing_and_says_would_be(
    synced: None, redis_client: redis.Redis
) -> None:
    pool = get_pool("printers")
    lease = expired_hold(pool, "alice")
    assert get_lock("imports").acquire(holder="job-1", blocking=False)
    queue_dead_waiter(get_lock("imports"), "ghost")
    before = raw_keys(redis_client)
    output = run("pool_gc", "--dry-run", verbosity=2)
    assert raw_keys(redis_client) == before
    assert (
        "printers: 1 expired holds would be reclaimed, 0 dead waiters would be dropped "
        "(dry run, nothing changed)"
    ) in output
    assert f"  p1  held by alice  fence {lease.fence}" in output
    assert "imports: 0 expired holds would be reclaimed, 1 dead waiters would be dropped" in output
    assert "  waiter ghost  priority 0" in output
    real = run("pool_gc")
    assert "printers: 1 expired holds reclaimed, 0 dead waiters dropped" in real
    assert "imports: 0 expired holds reclaimed, 1 dead waiters dropped" in real
    assert raw_keys(redis_client) != before
    assert redis_client.zcard("drp:{pool:printers}:leases") == 0
    assert get_lock("imports").waiting_count() == 0


def test_gc_json(synced: None) -> None:
    pool = get_pool("printers")
    lease = expired_hold(pool, "alice")
    lock = get_lock("imports")
    assert lock.acquire(holder="job-1", blocking=False)
    queue_dead_waiter(lock, "ghost")
    dry = json.loads(run("pool_gc", "--json", "--dry-run"))
    data = json.loads(run("pool_gc", "--json"))
    assert dry == {**data, "dry_run": True}, "a dry run reports the same"
    assert (data["dry_run"], data["reclaimed"], data["dropped"]) == (False, 1, 1)
    by_name = {p["name"]: p for p in data["primitives"]}
    assert set(by_name) == {"imports", "printers", "reports"}
    printers = by_name["printers"]
    assert printers["kind"] == "pool"
    assert printers["reclaimed"] == [
        {
            "resource": "p1",
            "holder": "alice",
            "fence": lease.fence,
            "permits": 1,
            "acquired_at": lease.acquired_at,
            "expires_at": lease.expires_at,
        }
    ]
    assert printers["dropped"] == []
    imports = by_name["imports"]
    assert imports["kind"] == "lock" and imports["reclaimed"] == []
    [waiter] = imports["dropped"]
    assert set(waiter) == {"holder", "priority", "permits", "since", "deadline"}
    assert (waiter["holder"], waiter["priority"], waiter["deadline"]) == ("ghost", 0, None)
    assert by_name["reports"] == {
        "kind": "semaphore",
        "name": "reports",
        "reclaimed": [],
        "dropped": [],
    }
    again = json.loads(run("pool_gc", "--json"))
    assert (again["reclaimed"], again["dropped"]) == (0, 0)


def test_gc_name_filter(synced: None, redis_client: redis.Redis) -> None:
    expired_hold(get_pool("printers"), "alice")
    output = run("pool_gc", "--name", "imports", "--name", "reports")
    assert "printers" not in output
    assert "imports: nothing to reclaim" in output
    assert redis_client.zcard("drp:{pool:printers}:leases") == 1, "left alone"
    with pytest.raises(CommandError, match="'plotters'"):
        run("pool_gc", "--name", "plotters")


def test_gc_sends_lease_reclaimed_once_per_reclaimed_lease(synced: None) -> None:
    pool = get_pool("printers")
    first = pool.acquire(holder="alice", lease_timeout=30)
    second = pool.acquire(holder="bob", lease_timeout=30)
    assert first is not None and second is not None
    for lease in (first, second):
        assert lease.renew(0.05)
    wait_for(lambda: pool.occupied_count() == 0, what="both holds to expire")
    received: list[dict[str, Any]] = []

    def receiver(sender: Any, **kwargs: Any) -> None:
        received.append({"sender": sender, **kwargs})

    lease_reclaimed.connect(receiver)
    try:
        run("pool_gc", "--dry-run")
        assert received == [], "not in a dry run"
        run("pool_gc")
        run("pool_gc")
    finally:
        lease_reclaimed.disconnect(receiver)
    assert len(received) == 2
    assert {r["sender"] for r in received} == {ResourcePool}
    assert {r["name"] for r in received} == {"printers"}
    got = sorted((r["lease"].holder, r["lease"].fence) for r in received)
    assert got == [("alice", first.fence), ("bob", second.fence)]


def test_gc_drops_a_dead_waiter(synced: None) -> None:
    lock = get_lock("imports")
    assert lock.acquire(holder="job-1", blocking=False)
    queue_dead_waiter(lock, "ghost")
    assert lock.waiting_count() == 1
    output = run("pool_gc", "--name", "imports", verbosity=2)
    assert "imports: 0 expired holds reclaimed, 1 dead waiters dropped" in output
    assert "  waiter ghost  priority 0" in output
    assert lock.waiting_count() == 0
    assert lock.owned(holder="job-1"), "the live holder keeps the lock"


@pytest.mark.parametrize("interval", ["0", "-1", "abc", "inf", "nan"])
def test_gc_interval_must_be_positive_seconds(synced: None, interval: str) -> None:
    with pytest.raises(CommandError, match=rf"--interval must be .* got '{interval}'"):
        run("pool_gc", "--loop", "--interval", interval)


def test_gc_with_redis_down_is_a_command_error(settings: Any) -> None:
    settings.DJANGO_REDIS_POOL = setting(f"redis://127.0.0.1:{closed_port()}/0")
    with pytest.raises(CommandError, match=r"Redis could not be reached.*Start Redis"):
        run("pool_gc")


def test_gc_loop_reclaims_until_sigterm_then_exits_0(
    synced: None, tmp_path: Path, redis_url: str, redis_client: redis.Redis
) -> None:
    proc, out, err = start_django(tmp_path, redis_url, "pool_gc", "--loop", "--interval", "0.2")
    try:
        wait_for(lambda: "Reclaiming every 0.2 s" in out.read_text(), STARTUP, "the loop to start")
        lease = get_pool("printers").acquire(holder="crashed", lease_timeout=0.3)
        assert lease is not None
        wait_for(
            lambda: (
                redis_client.zcard("drp:{pool:printers}:leases") == 0
                and redis_client.zcard("drp:{pool:printers}:avail") == 2
            ),
            what="the loop to reclaim the expired hold",
        )
        wait_for(lambda: "printers: 1 expired holds reclaimed" in out.read_text())
    finally:
        status = stop(proc)
    assert status == 0, err.read_text()
    assert "nothing to reclaim" not in out.read_text(), "quiet passes say nothing"


def test_gc_loop_keeps_running_while_redis_is_down(tmp_path: Path) -> None:
    url = f"redis://127.0.0.1:{closed_port()}/0"
    proc, _, err = start_django(tmp_path, url, "pool_gc", "--loop", "--interval", "0.2")
    try:
        wait_for(
            lambda: err.read_text().count("Redis is unreachable, retrying in 0.2 s") >= 2,
            timeout=30,
            what="two failed passes",
        )
        assert proc.poll() is None, "still running"
    finally:
        status = stop(proc)
    assert status == 0, err.read_text()


def test_gc_loop_json_reports_each_failed_pass_as_json(tmp_path: Path) -> None:
    url = f"redis://127.0.0.1:{closed_port()}/0"
    proc, out, _ = start_django(tmp_path, url, "pool_gc", "--loop", "--json", "--interval", "0.2")
    try:
        wait_for(
            lambda: len(out.read_text().splitlines()) >= 2, timeout=30, what="two failed passes"
        )
    finally:
        stop(proc)
    for line in out.read_text().splitlines():
        document = json.loads(line)
        assert "Redis could not be reached" in document["error"]
        assert document["retry_in"] == 0.2


# --------------------------------------------------------------------- pool_sync


def test_sync_with_redis_down_fails_first_with_one_line(settings: Any) -> None:
    settings.DJANGO_REDIS_POOL = setting(f"redis://127.0.0.1:{closed_port()}/0")
    out = io.StringIO()
    with pytest.raises(CommandError, match=r"Redis could not be reached.*Start Redis") as excinfo:
        # (the lock first: it has nothing to sync, and would be reported at once)
        call_command("pool_sync", "--name", "imports", "--name", "printers", stdout=out, stderr=out)
    assert out.getvalue() == "", "pool_sync reported a primitive before it failed"
    assert "\n" not in str(excinfo.value)


def test_sync_reports_a_lock_as_nothing_to_sync(configured: None) -> None:
    output = run("pool_sync")
    assert "imports: a lock, nothing to sync" in output
    assert "printers: 2 added" in output


def test_sync_name_selects_a_lock(configured: None) -> None:
    output = run("pool_sync", "--name", "imports")
    assert output.strip() == "imports: a lock, nothing to sync"
    assert get_pool("printers").total_count() == 0, "nothing else was synced"
    assert run("pool_sync", "--name", "imports", verbosity=0) == ""


def test_sync_unknown_name_is_a_command_error(configured: None) -> None:
    with pytest.raises(CommandError, match=r"'exports'.*'imports', 'printers', 'reports'"):
        run("pool_sync", "--name", "imports", "--name", "exports")
