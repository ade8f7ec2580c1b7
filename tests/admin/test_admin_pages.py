"""What the admin dashboard's pages show: every primitive with its counts and
health, what fills an empty one, an exhausted pool's waiters, the holders of
a pool, a semaphore and a lock with their times in the project's time zone,
holds that never expire or expired awaiting gc, and empty tables.

Through Django's test client, against the harness's real Redis (the setting,
the users and the fixtures: :mod:`tests.support.admin_fixtures`).
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from datetime import datetime
from types import SimpleNamespace
from typing import Any
from zoneinfo import ZoneInfo

import pytest
import redis
from django.test import Client

from django_redis_pool import get_lock, get_semaphore
from django_redis_pool.holder_names import request_holder
from tests.support.admin_fixtures import (
    NA,
    World,
    dashboard_url,
    detail_url,
    expire,
    expired_hold,
)
from tests.support.admin_pages import (
    dashboard_row,
    data_rows,
    has_module,
    health_icons,
    module,
    page_text,
    pager,
    table,
    text_of,
)
from tests.support.waiting import wait_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def utc(settings: Any) -> None:
    """The project's time zone is UTC (then any reading of "shown in UTC" agrees)."""
    settings.TIME_ZONE = "UTC"


def seconds_left(cell: str) -> float:
    found = re.fullmatch(r"(\d+\.\d) s", cell)
    assert found is not None, cell
    return float(found.group(1))


def test_the_dashboard_lists_every_primitive_with_its_counts_and_health(
    world: World, viewer: Client, redis_url: str
) -> None:
    response = viewer.get(dashboard_url())

    assert response.status_code == 200
    names = ("printers", "empty", "reports", "unsized", "imports", "plain")
    rows = {name: dashboard_row(response, name) for name in names}
    #             name        kind         size free held waiting health
    assert rows == {
        "printers": ["printers", "pool", "3", "2", "1", "0", "OK"],
        "empty": ["empty", "pool", "0", "0", "0", "0", EMPTY_POOL_NOTE],
        "reports": ["reports", "semaphore", "2", "1", "1", "0", "OK"],
        "unsized": ["unsized", "semaphore", NA, "0", "0", "0", UNSIZED_NOTE],
        "imports": ["imports", "lock", "1", "0", "1", "0", "OK"],
        "plain": ["plain", "lock", "1", "1", "0", "0", "OK"],
    }  # fmt: skip
    assert len(re.findall(r'<tr class="drp-row"', response.content.decode())) == 6
    assert health_icons(response) == {
        "printers": "OK",
        "empty": "Warning",
        "reports": "OK",
        "unsized": "Warning",
        "imports": "OK",
        "plain": "OK",
    }
    for name in rows:
        assert f'href="{detail_url(name)}"' in response.content.decode()
    assert f"Redis: {redis_url} · key prefix drp" in page_text(response)


EMPTY_POOL_NOTE = (
    'no resources, and DJANGO_REDIS_POOL["POOLS"]["empty"]["RESOURCES"] lists none: list '
    "them there and run manage.py pool_sync, or use the admin's 'Add a resource' action"
)


UNSIZED_NOTE = (
    'no max size, and DJANGO_REDIS_POOL["SEMAPHORES"]["unsized"]["MAX_SIZE"] is not set: '
    "set it and run manage.py pool_sync, or use the admin's 'Set max size' action"
)


def test_an_empty_primitive_whose_setting_lists_members_is_told_to_run_pool_sync(
    configured: None, viewer: Client, redis_client: redis.Redis
) -> None:
    for key in redis_client.scan_iter("*printers*"):
        redis_client.delete(key)  # e.g. a fresh Redis, pool_sync not run yet

    response = viewer.get(dashboard_url())

    assert dashboard_row(response, "printers")[6] == (
        "no resources in Redis: run manage.py pool_sync (it stores RESOURCES), or use the "
        "admin's 'Add a resource' action"
    )


@pytest.mark.parametrize(("name", "note"), [("empty", EMPTY_POOL_NOTE), ("unsized", UNSIZED_NOTE)])
def test_the_detail_page_of_an_empty_primitive_says_what_fills_it(
    configured: None, viewer: Client, name: str, note: str
) -> None:
    response = viewer.get(detail_url(name))

    assert response.status_code == 200
    assert note[0].upper() + note[1:] in page_text(response)


def test_the_detail_page_of_a_filled_primitive_has_no_empty_note(
    configured: None, viewer: Client
) -> None:
    response = viewer.get(detail_url("printers"))

    assert "drp-empty-note" not in response.content.decode()


def test_the_dashboard_says_when_nothing_is_configured(
    settings: Any, redis_url: str, viewer: Client
) -> None:
    settings.DJANGO_REDIS_POOL = {"CONNECTION": {"URL": redis_url}}

    response = viewer.get(dashboard_url())

    assert response.status_code == 200
    assert "Nothing is configured" in page_text(response)


def test_an_exhausted_pool_with_waiters_is_a_warning_and_lists_them(
    world: World, viewer: Client, waiter: Callable[..., dict[str, Any]]
) -> None:
    pool = world.pool
    others = [pool.acquire(holder="worker-2"), pool.acquire(holder="worker-3")]
    assert all(others) and pool.available_count() == 0
    low = waiter(lambda: pool.acquire(timeout=5, holder="waiter-1", priority=1))
    wait_for(lambda: pool.waiting_count() == 1, what="the first waiter to queue")
    high = waiter(lambda: pool.acquire(timeout=5, holder="waiter-7", priority=7))
    try:
        wait_for(lambda: pool.waiting_count() == 2, what="the second waiter to queue")

        overview = viewer.get(dashboard_url())
        detail = viewer.get(detail_url("printers"))
    finally:  # hand two resources to the waiters
        assert world.pool_lease.release() and others[0] is not None and others[0].release()
        wait_for(lambda: all({"lease", "error"} & {*q} for q in (low, high)), what="both served")

    assert dashboard_row(overview, "printers") == [
        "printers", "pool", "3", "0", "3", "2", "exhausted, 2 waiting"
    ]  # fmt: skip
    assert health_icons(overview)["printers"] == "Warning"
    assert "Waiters (2), in serving order" in page_text(detail)
    rows = table(detail, "waiters")
    assert [[row[0], row[2]] for row in rows] == [["waiter-7", "7"], ["waiter-1", "1"]]
    for _holder, request, _priority, since, waited, gives_up_at in rows:
        assert request == NA  # holders named in code: no request
        assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d [A-Z]+", since)
        assert re.fullmatch(r"\d+\.\d s", waited)
        assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d [A-Z]+", gives_up_at)
    for queued, holder in ((low, "waiter-1"), (high, "waiter-7")):
        assert queued.get("lease") is not None, queued
        assert queued["lease"].holder == holder
        assert queued["lease"].release()


def local_time(seconds: float | None, zone: str = "UTC") -> str:
    """A Redis-clock time as docs/admin.md says the pages show it: in the project's
    TIME_ZONE, Y-m-d H:i:s and the zone's abbreviation."""
    assert seconds is not None
    return datetime.fromtimestamp(seconds, tz=ZoneInfo(zone)).strftime("%Y-%m-%d %H:%M:%S %Z")


def test_the_detail_page_lists_the_holders_of_a_pool(
    world: World, viewer: Client, utc: None
) -> None:
    lease = world.pool_lease

    response = viewer.get(detail_url("printers"))

    assert response.status_code == 200
    [row] = table(response, "holders")
    resource, holder, request, fence, held_since, left = row
    assert (resource, holder, fence) == (lease.resource, "worker-1", str(lease.fence))
    assert request == NA  # a holder named in code: no request
    assert held_since == local_time(lease.acquired_at)
    assert 0 < seconds_left(left) <= 30
    assert sorted(data_rows(response, "available")) == sorted(world.pool.available())
    assert "Available (2)" in page_text(response)
    assert "Holders (1)" in page_text(response)
    assert table(response, "waiters") == [["Nobody is waiting."]]
    assert "size 3 · 2 free" in page_text(response)


def test_the_detail_page_lists_the_holders_of_a_semaphore(
    world: World, viewer: Client, utc: None
) -> None:
    lease = world.semaphore_lease

    response = viewer.get(detail_url("reports"))

    [row] = table(response, "holders")
    identity, request, fence, permits, held_since, left = row  # (its identity is its holder)
    assert (identity, request, fence) == ("job-1", NA, str(lease.fence))
    assert permits == "1"
    assert held_since == local_time(lease.acquired_at)
    assert 0 < seconds_left(left) <= 30
    assert "Holders (1; 1 of 2 permits)" in page_text(response)
    assert not has_module(response, "available")


def test_the_detail_page_lists_the_holder_of_a_lock(
    world: World, viewer: Client, utc: None
) -> None:
    lease = world.lock_lease

    response = viewer.get(detail_url("imports"))

    [row] = table(response, "holders")
    holder, request, fence, held_since, left = row
    assert (holder, request, fence) == ("importer", NA, str(lease.fence))
    assert held_since == local_time(lease.acquired_at)
    assert 0 < seconds_left(left) <= 30
    assert "Holders (1 of 1)" in page_text(response)


def test_times_are_shown_in_the_project_time_zone_and_say_which(
    settings: Any, world: World, viewer: Client
) -> None:
    settings.TIME_ZONE = "Asia/Tokyo"
    lease = world.pool_lease

    response = viewer.get(detail_url("printers"))

    [[_resource, _holder, _request, _fence, held_since, _left]] = table(response, "holders")
    assert held_since == local_time(lease.acquired_at, "Asia/Tokyo")
    assert held_since.endswith(" JST")


def test_a_hold_without_expiry_never_expires_on_the_page(world: World, viewer: Client) -> None:
    lock = get_lock("plain")
    assert lock.acquire(holder="forever", blocking=False)

    response = viewer.get(detail_url("plain"))

    [[holder, _request, _fence, _since, left]] = table(response, "holders")
    assert (holder, left) == ("forever", "never expires")


def test_an_expired_hold_awaiting_gc_is_noted(world: World, viewer: Client) -> None:
    _name, _lease = expired_hold(world, "pool")

    overview = viewer.get(dashboard_url())
    detail = viewer.get(detail_url("printers"))

    # the expired hold counts as available, not held
    assert dashboard_row(overview, "printers") == [
        "printers", "pool", "3", "2", "1", "0", "1 expired awaiting gc"
    ]  # fmt: skip
    assert health_icons(overview)["printers"] == "OK"
    assert "1 expired hold will be reclaimed by the next acquire or gc." in page_text(detail)


def test_two_expired_holds_awaiting_gc_are_holds(world: World, viewer: Client) -> None:
    # both taken before either expires (an acquire reclaims the expired holds)
    leases = [world.pool.acquire(holder=holder) for holder in ("crashed", "crashed-too")]
    for lease in leases:
        assert lease is not None
        expire(lease, lambda lease=lease: world.pool.is_occupied(lease.resource))

    detail = viewer.get(detail_url("printers"))

    assert "2 expired holds will be reclaimed by the next acquire or gc." in page_text(detail)


@pytest.mark.parametrize(
    ("workers", "words"),
    [(0, "0 workers, 0 deferred"), (1, "1 worker, 0 deferred"), (2, "2 workers")],
)
def test_a_queues_row_counts_its_workers_in_words(workers: int, words: str) -> None:
    from django_redis_pool.dashboard.queue_panels import queue_summary

    counts = {"pending": 0, "running": 0, "scheduled": 0, "failed": 0, "workers": workers}
    note = queue_summary(SimpleNamespace(counts=lambda: counts)).note

    assert note.startswith(words)
    assert "(s)" not in note


@pytest.mark.parametrize(
    ("requeued", "words"),
    [(0, "requeued 0 tasks"), (1, "requeued 1 task,"), (3, "requeued 3 tasks")],
)
def test_a_queues_gc_counts_its_tasks_in_words(
    monkeypatch: pytest.MonkeyPatch, requeued: int, words: str
) -> None:
    from django_redis_pool.dashboard import queue_panels

    report = SimpleNamespace(counts={"requeued": requeued, "failed": 0})
    kind = SimpleNamespace(collect=lambda queue, dry_run: report)
    monkeypatch.setattr(queue_panels.registry, "by_name", lambda: {"queue": kind})

    message = queue_panels.run_gc(SimpleNamespace(kind="queue", name="jobs"), {})

    assert message.startswith(f"gc of queue 'jobs': {words}") and "(s)" not in message


def test_an_object_pools_row_counts_its_processes_in_words(settings: Any, redis_url: str) -> None:
    from django_redis_pool import get_object_pool
    from django_redis_pool.dashboard.object_pool_panels import object_pool_summary

    settings.DJANGO_REDIS_POOL = {
        "CONNECTION": {"URL": redis_url},
        "OBJECT_POOLS": {"clients": {"FACTORY": "tests.support.pooled_objects.make", "MAX": 2}},
    }
    pool = get_object_pool("clients")  # this process uses it: one process

    assert object_pool_summary(pool).note == "1 process"


def test_empty_tables_say_so(configured: None, viewer: Client) -> None:
    response = viewer.get(detail_url("empty"))

    assert table(response, "available") == [["Nothing is available."]]
    assert table(response, "holders") == [["Nothing is held."]]
    assert table(response, "waiters") == [["Nobody is waiting."]]
    assert pager(response, "available") is None


def header_of(response: Any, module_id: str) -> list[str]:
    """The column headings of the table in module ``module_id``."""
    return [text_of(th) for th in re.findall(r"<th [^>]*>(.*?)</th>", module(response, module_id))]


def test_a_request_holder_is_named_once_by_its_process_beside_its_request(
    world: World, viewer: Client, waiter: Callable[..., dict[str, Any]]
) -> None:
    """A holder made by a request (``host:pid:hex METHOD path user``) is
    shown by its process part, its request in the Request column: no cell
    says the request twice, none ends in the bare "-" of an anonymous user.
    A semaphore's identity is its holder: one column for both."""
    named = {
        "pool": request_holder("web-1:11:0123456789ab", "GET", "/print/", None),
        "waiter": request_holder("web-2:22:0123456789ab", "PUT", "/scan/", "bob"),
        "semaphore": request_holder("web-3:33:0123456789ab", "POST", "/export/", "alice"),
        "lock": request_holder("web-4:44:0123456789ab", "DELETE", "/import/", None),
    }
    pool = world.pool
    held = pool.acquire(holder=named["pool"])
    last = pool.acquire(holder="worker-2")
    assert held is not None and last is not None and pool.available_count() == 0
    queued = waiter(lambda: pool.acquire(timeout=10, holder=named["waiter"]))
    assert get_semaphore("reports").acquire(named["semaphore"])
    assert get_lock("plain").for_holder(named["lock"]).acquire(blocking=False)
    try:
        wait_for(lambda: pool.waiting_count() == 1, what="the request's waiter to queue")
        pages = {name: viewer.get(detail_url(name)) for name in ("printers", "reports", "plain")}
    finally:
        assert last.release()
        wait_for(lambda: "lease" in queued or "error" in queued, what="the waiter to be served")
    assert queued["lease"].release()

    holders = {row[0]: row for row in table(pages["printers"], "holders")}
    assert holders[held.resource][1:3] == ["web-1:11:0123456789ab", "GET /print/ · anonymous"]
    [waiting] = table(pages["printers"], "waiters")
    assert waiting[:2] == ["web-2:22:0123456789ab", "PUT /scan/ · bob"]
    assert header_of(pages["reports"], "holders")[:2] == ["Identity", "Request"]
    semaphore_rows = {row[0]: row for row in table(pages["reports"], "holders")}
    assert semaphore_rows["web-3:33:0123456789ab"][1] == "POST /export/ · alice"
    assert semaphore_rows["job-1"][1] == NA  # an identity named in code
    [lock_row] = table(pages["plain"], "holders")
    assert lock_row[:2] == ["web-4:44:0123456789ab", "DELETE /import/ · anonymous"]
    for name, response in pages.items():
        for row in table(response, "holders") + table(response, "waiters"):
            assert not any(cell == "-" or cell.endswith(" -") for cell in row), (name, row)
            request_words = [c for c in row if re.match(r"(GET|PUT|POST|DELETE) /", c)]
            assert len(request_words) <= 1, f"the request said twice on {name}: {row}"
    # the whole name is still there, as the title of its cell
    shown_on = {"pool": "printers", "waiter": "printers", "semaphore": "reports", "lock": "plain"}
    for what, holder in named.items():
        assert f'title="{html.escape(holder)}"' in pages[shown_on[what]].content.decode()
