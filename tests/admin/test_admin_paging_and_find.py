"""Paging and find in the admin dashboard: a 100,000-resource pool shown one
page at a time, page links that keep the other tables' pages, page numbers
that are no page, what a page and the overview cost Redis (one round trip,
whatever the pool's size), and find: what one resource, identity or holder is
now.

Through Django's test client, against the harness's real Redis (the setting,
the users and the fixtures: :mod:`tests.support.admin_fixtures`).
"""

from __future__ import annotations

import html
import re
from typing import Any
from urllib.parse import parse_qs

import pytest
import redis
from django.test import Client

from django_redis_pool import ResourcePool, get_pool
from django_redis_pool.dashboard import charts
from django_redis_pool.dashboard.tables import PAGE_SIZE
from tests.support.admin_fixtures import World, action_url, dashboard_url, detail_url
from tests.support.admin_pages import data_rows, module, page_text, pager, table, text_of
from tests.support.redis_inspect import commands_run_by, script_calls

pytestmark = pytest.mark.django_db


#: What the pages show around page links.
PREV = "\N{SINGLE LEFT-POINTING ANGLE QUOTATION MARK} previous"
NEXT = "next \N{SINGLE RIGHT-POINTING ANGLE QUOTATION MARK}"


def ids(count: int) -> list[str]:
    return [f"r{index:06d}" for index in range(count)]


def fill_pool(pool: ResourcePool, client: redis.Redis, ids: list[str]) -> None:
    """Associate ``ids`` with ``pool`` quickly (1,000 a step)."""
    assert pool.associate_many(ids) == len(ids)


def big_pool(settings: Any, redis_url: str, client: redis.Redis, sizes: dict[str, int]) -> None:
    """Configure pools ``sizes`` (name -> number of resources) and fill them."""
    settings.DJANGO_REDIS_POOL = {
        "CONNECTION": {"URL": redis_url},
        "POOLS": {name: {"LEASE_TIMEOUT": 60} for name in sizes},
    }
    for name, count in sizes.items():
        fill_pool(get_pool(name), client, ids(count))


def test_a_100k_resource_pool_is_shown_one_page_at_a_time(
    settings: Any, redis_url: str, redis_client: redis.Redis, viewer: Client
) -> None:
    big_pool(settings, redis_url, redis_client, {"big": 100_000})
    pool = get_pool("big")
    leases = [pool.acquire(holder=f"worker-{n}") for n in range(3)]
    available = pool.available()
    assert len(available) == 99_997
    pages = -(-len(available) // PAGE_SIZE)
    assert pages == 2000
    url = detail_url("big")

    first = viewer.get(url)
    second = viewer.get(url, {"available_page": 2})
    last = viewer.get(url, {"available_page": pages})
    beyond = viewer.get(url, {"available_page": pages + 1})

    assert [r.status_code for r in (first, second, last, beyond)] == [200] * 4
    assert len(data_rows(first, "available")) == PAGE_SIZE
    assert data_rows(first, "available") == available[:PAGE_SIZE]
    assert data_rows(second, "available") == available[PAGE_SIZE : 2 * PAGE_SIZE]
    assert len(set(data_rows(first, "available") + data_rows(second, "available"))) == 100
    assert data_rows(last, "available") == available[(pages - 1) * PAGE_SIZE :]
    assert data_rows(beyond, "available") == []
    assert table(beyond, "available") == [["No rows on this page."]]
    assert pager(first, "available") == f"Page 1 of {pages} {NEXT}"
    assert pager(second, "available") == f"{PREV} Page 2 of {pages} {NEXT}"
    assert pager(last, "available") == f"{PREV} Page {pages} of {pages}"
    assert pager(beyond, "available") == f"{PREV} Page {pages + 1} of {pages}"
    assert f'href="?available_page={pages}" rel="prev"' in module(beyond, "available")
    assert "Available (99997)" in page_text(first)
    # the other tables are unaffected by the available table's page
    for response in (first, second, beyond):
        assert sorted(data_rows(response, "holders")) == sorted(
            lease.resource for lease in leases if lease is not None
        )


def test_page_links_keep_the_other_tables_pages(
    settings: Any, redis_url: str, redis_client: redis.Redis, viewer: Client
) -> None:
    big_pool(settings, redis_url, redis_client, {"big": 200})
    pool = get_pool("big")
    for n in range(PAGE_SIZE + 1):
        assert pool.acquire(holder=f"worker-{n}") is not None

    response = viewer.get(detail_url("big"), {"available_page": 2, "holders_page": 2})

    assert len(data_rows(response, "available")) == PAGE_SIZE
    next_page = re.search(r'href="\?([^"]*)" rel="next"', module(response, "available"))
    assert next_page is not None
    assert parse_qs(html.unescape(next_page.group(1))) == {
        "available_page": ["3"],
        "holders_page": ["2"],
    }
    assert pager(response, "holders") == f"{PREV} Page 2 of 2"
    assert len(data_rows(response, "holders")) == 1


@pytest.mark.parametrize("page", ["0", "-3", "abc", ""])
def test_a_page_number_that_is_no_page_shows_the_first_page(
    settings: Any, redis_url: str, redis_client: redis.Redis, viewer: Client, page: str
) -> None:
    big_pool(settings, redis_url, redis_client, {"big": 120})

    response = viewer.get(detail_url("big"), {"available_page": page})

    assert response.status_code == 200
    assert data_rows(response, "available") == ids(PAGE_SIZE)
    assert pager(response, "available") == f"Page 1 of 3 {NEXT}"


def test_a_huge_page_number_shows_an_empty_page(
    settings: Any, redis_url: str, redis_client: redis.Redis, viewer: Client
) -> None:
    # An offset beyond 2**52 would be refused by snapshot(): never a 500.
    big_pool(settings, redis_url, redis_client, {"big": 120})

    response = viewer.get(detail_url("big"), {"available_page": 10**14})

    assert response.status_code == 200
    assert table(response, "available") == [["No rows on this page."]]


def cost_of(
    client: Client, redis_client: redis.Redis, url: str, params: Any = None
) -> dict[str, int]:
    """The Redis commands (by name) that rendering ``url`` ran."""

    def render() -> None:
        assert client.get(url, params or {}).status_code == 200

    return commands_run_by(redis_client, render)


def test_a_page_costs_one_round_trip_whatever_the_pool_size(
    settings: Any, redis_url: str, redis_client: redis.Redis, viewer: Client
) -> None:
    sizes = {"small": 1_000, "big": 100_000}
    big_pool(settings, redis_url, redis_client, sizes)
    held = {name: get_pool(name).acquire(holder="worker") for name in sizes}
    pages, finds, overviews = {}, {}, {}
    for name in sizes:  # one pool configured at a time, for the overview's sake
        settings.DJANGO_REDIS_POOL = {
            "CONNECTION": {"URL": redis_url},
            "POOLS": {name: {"LEASE_TIMEOUT": 60}},
        }
        url = detail_url(name)
        viewer.get(url)  # warm up: the new client connects, the script is loaded
        for page in (1, 2, 10):
            pages[name, page] = cost_of(viewer, redis_client, url, {"available_page": page})
        lease = held[name]
        assert lease is not None
        finds[name, "held"] = cost_of(viewer, redis_client, url, {"find": lease.resource})
        finds[name, "available"] = cost_of(viewer, redis_client, url, {"find": "r000500"})
        overviews[name] = cost_of(viewer, redis_client, dashboard_url())

    page = pages["small", 1]
    print(f"\nRedis commands per detail page (1k and 100k resources): {page}")
    print(
        f"per detail page finding a held / an available resource: {finds['small', 'held']} / "
        f"{finds['small', 'available']}"
    )
    print(f"per overview of one pool: {overviews['small']}")
    # two round trips: the snapshot script, and the last hour's counts (the chart)...
    assert script_calls(page) == 2
    # ...and the few commands they run: the counts script reads the totals and
    # each minute's hash (Redis's own work, within its one round trip)
    assert page["hgetall"] == 1 + charts.MINUTES
    assert sum(page.values()) - page["hgetall"] <= 14
    assert all(cost == page for cost in pages.values())
    assert script_calls(finds["small", "held"]) == 3  # + the hold's record
    assert script_calls(finds["small", "available"]) == 4  # + the record, + the membership
    assert finds["big", "held"] == finds["small", "held"]
    assert finds["big", "available"] == finds["small", "available"]
    # per primitive: one counts-only snapshot, one read of the last hour (the sparkline)
    assert script_calls(overviews["small"]) == 2
    assert overviews["big"] == overviews["small"]


def test_the_overview_costs_one_round_trip_per_primitive(
    world: World, viewer: Client, redis_client: redis.Redis
) -> None:
    viewer.get(dashboard_url())  # warm up: scripts loaded, connection open

    cost = cost_of(viewer, redis_client, dashboard_url())

    # six primitives, one counts-only snapshot and one read of the last hour each
    assert script_calls(cost) == 12


def test_find_shows_what_one_resource_of_a_pool_is_now(world: World, operator: Client) -> None:
    lease = world.pool_lease
    available = world.pool.available()[0]
    url = detail_url("printers")

    held = operator.get(url, {"find": lease.resource})
    free = operator.get(url, {"find": f"  {available} "})
    absent = operator.get(url, {"find": "p404"})
    invalid = operator.get(url, {"find": "{p1}"})

    [row] = table(held, "found")
    assert [row[0], row[1], row[3]] == [lease.resource, "worker-1", str(lease.fence)]
    assert f"{lease.resource}: held" in page_text(held)
    assert f'value="{lease.resource}"' in held.content.decode()  # the search box keeps it
    assert f"{available}: available" in page_text(free)
    assert f"{action_url('printers', 'remove')}?resource={available}" in module(free, "found")
    assert "p404: not in the pool" in page_text(absent)
    assert "not allowed" in text_of(module(invalid, "found"))
    assert 'class="errornote"' in module(invalid, "found")
    for response in (held, free, absent, invalid):
        assert response.status_code == 200
        assert len(data_rows(response, "holders")) == 1  # the tables are still there


@pytest.mark.parametrize(
    ("name", "key", "state"),
    [
        ("reports", "job-1", "held"),
        ("reports", "job-2", "not held"),
        ("imports", "importer", "held"),
        ("imports", "someone", "not held"),
    ],
)
def test_find_shows_whether_an_identity_or_holder_holds_now(
    world: World, viewer: Client, name: str, key: str, state: str
) -> None:
    response = viewer.get(detail_url(name), {"find": key})

    assert response.status_code == 200
    assert f"{key}: {state}" in page_text(response)
    if state == "held":
        assert table(response, "found")[0][0] == key
