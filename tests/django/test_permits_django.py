"""Weighted permits in Django: ``@with_resource(permits=)``, ``PERMITS`` on a
``MIDDLEWARE`` rule and as a semaphore's default, their system checks (E038,
E039), and the permits each holder takes as the admin, ``pool_status --json``
and the metrics show them. Against the harness's real Redis."""

from __future__ import annotations

import io
import json
import threading
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.contrib.admin.utils import quote
from django.core.checks import run_checks
from django.core.management import call_command
from django.test import AsyncClient, Client
from django.urls import reverse

from django_redis_pool import NotConfigured, get_pool, get_semaphore, registry
from django_redis_pool.checks import TAG
from django_redis_pool.decorators import with_resource
from tests import settings as base_settings
from tests.support.admin_pages import page_text, table
from tests.support.waiting import wait_for
from tests.urlconfs import permit_views

RESOURCE_MIDDLEWARE = "django_redis_pool.middleware.ResourceMiddleware"


def setting(url: str, **extra: Any) -> dict[str, Any]:
    return {
        "CONNECTION": {"URL": url},
        "POOLS": {"printers": {"RESOURCES": ["p1"], "LEASE_TIMEOUT": 30}},
        "SEMAPHORES": {"jobs": {"MAX_SIZE": 4, "LEASE_TIMEOUT": 30}},
        **extra,
    }


def ids(settings: Any, value: Any) -> list[str]:
    """The ids of our checks' messages for ``DJANGO_REDIS_POOL = value`` (with
    ``ResourceMiddleware`` installed, so that rules are no W002)."""
    settings.MIDDLEWARE = [*base_settings.MIDDLEWARE, RESOURCE_MIDDLEWARE]
    settings.DJANGO_REDIS_POOL = value
    return [m.id for m in run_checks(tags=[TAG]) if m.id.startswith("django_redis_pool.")]


def message(settings: Any, value: Any, check_id: str) -> Any:
    settings.DJANGO_REDIS_POOL = value
    found = [m for m in run_checks(tags=[TAG]) if m.id == f"django_redis_pool.{check_id}"]
    assert len(found) == 1, found
    assert found[0].hint
    return found[0]


# ---------------------------------------------------------------- @with_resource


@pytest.mark.urls("tests.urlconfs.permit_views")
def test_a_view_holds_the_permits_its_decorator_asks_for(settings: Any, redis_url: str) -> None:
    settings.DJANGO_REDIS_POOL = setting(redis_url)
    response = Client().get("/three/")
    assert response.status_code == 200
    assert response.json() == {"permits": 3, "held": 3}
    assert get_semaphore("jobs").get_held_permits() == 0, "all given back after the response"


@pytest.mark.urls("tests.urlconfs.permit_views")
def test_a_second_request_is_refused_when_its_permits_are_not_free(
    settings: Any, redis_url: str
) -> None:
    settings.DJANGO_REDIS_POOL = setting(redis_url)
    permit_views.GATE.clear()
    permit_views.ENTERED.clear()
    first: list[Any] = []
    thread = threading.Thread(target=lambda: first.append(Client().get("/three-gated/")))
    thread.start()
    try:
        wait_for(lambda: permit_views.ENTERED, 15, "the first request to hold its permits")
        assert get_semaphore("jobs").get_held_permits() == 3
        assert Client().get("/three/").status_code == 503, "one permit is free, three are asked"
        assert Client().get("/default/").json() == {"permits": 1, "held": 4}
    finally:
        permit_views.GATE.set()
        thread.join(15)
    assert first[0].json() == {"permits": 3, "held": 3}
    assert Client().get("/three/").status_code == 200


@pytest.mark.urls("tests.urlconfs.permit_views")
def test_an_async_view_holds_its_permits_on_the_event_loop(settings: Any, redis_url: str) -> None:
    settings.DJANGO_REDIS_POOL = setting(redis_url)
    response = async_to_sync(AsyncClient().get)("/two-async/")
    assert response.status_code == 200
    assert response.json() == {"permits": 2, "held": 2}
    assert get_semaphore("jobs").get_held_permits() == 0


@pytest.mark.urls("tests.urlconfs.permit_views")
def test_a_semaphores_permits_setting_is_what_its_requests_take_by_default(
    settings: Any, redis_url: str
) -> None:
    settings.DJANGO_REDIS_POOL = setting(
        redis_url, SEMAPHORES={"jobs": {"MAX_SIZE": 4, "PERMITS": 2}}
    )
    assert Client().get("/default/").json() == {"permits": 2, "held": 2}
    assert Client().get("/three/").json() == {"permits": 3, "held": 3}, "a view's own first"
    assert get_semaphore("jobs").acquire("code") is True, "code passes its own (1)"
    assert get_semaphore("jobs").get_held_permits() == 1


@pytest.mark.urls("tests.urlconfs.permit_views")
def test_permits_on_a_view_of_a_pool_fail_naming_the_mistake(settings: Any, redis_url: str) -> None:
    settings.DJANGO_REDIS_POOL = setting(redis_url)
    get_pool("printers").associate("p1")
    with pytest.raises(NotConfigured, match="permits"):
        Client().get("/pool/")
    assert get_pool("printers").occupied_count() == 0


@pytest.mark.parametrize("bad", [0, -2, 1.5, "3", True])
def test_with_resource_refuses_bad_permits_at_once(bad: Any) -> None:
    with pytest.raises(ValueError, match="permits"):
        with_resource("jobs", permits=bad)


# ------------------------------------------------------------------- middleware


@pytest.mark.urls("tests.urlconfs.permit_views")
@pytest.mark.parametrize("client_class", [Client, AsyncClient])
def test_a_middleware_rules_permits_are_held_for_its_requests(
    settings: Any, redis_url: str, client_class: Any
) -> None:
    settings.MIDDLEWARE = [*base_settings.MIDDLEWARE, RESOURCE_MIDDLEWARE]
    rule = {"PATH": r"^/mw/", "RESOURCE": "jobs", "TIMEOUT": 0, "PERMITS": 4}
    settings.DJANGO_REDIS_POOL = setting(redis_url, MIDDLEWARE=[rule])
    get = client_class().get
    if client_class is AsyncClient:
        get = async_to_sync(get)
    assert get("/mw/").json() == {"permits": 4, "held": 4}
    semaphore = get_semaphore("jobs")
    assert semaphore.acquire("other", timeout=0) is True
    assert get("/mw/").status_code == 503, "three permits are free, the rule asks four"
    assert semaphore.release("other") is True
    assert semaphore.get_held_permits() == 0


# ------------------------------------------------------------------------ checks


def test_valid_permits_give_no_message(settings: Any) -> None:
    value = setting(
        "redis://127.0.0.1:6379/0",
        SEMAPHORES={"jobs": {"MAX_SIZE": 4, "PERMITS": 4}, "open": {"MAX_SIZE": 0}},
        MIDDLEWARE=[
            {"PATH": "^/a/", "RESOURCE": "jobs", "PERMITS": 4},
            {"PATH": "^/b/", "RESOURCE": "jobs", "PERMITS": None},
            {"PATH": "^/c/", "RESOURCE": "open", "PERMITS": 9},  # sized at run time
        ],
    )
    assert ids(settings, value) == []


@pytest.mark.parametrize("bad", [0, -1, 2.0, "2", True, [2]])
def test_a_rules_permits_that_are_not_an_int_of_at_least_1_are_e038(
    settings: Any, bad: Any
) -> None:
    rule = {"PATH": "^/a/", "RESOURCE": "jobs", "PERMITS": bad}
    found = message(settings, setting("redis://h:6379/0", MIDDLEWARE=[rule]), "E038")
    assert 'DJANGO_REDIS_POOL["MIDDLEWARE"][0]["PERMITS"]' in found.msg


def test_a_rules_permits_on_a_resource_that_is_not_a_semaphore_are_e038(settings: Any) -> None:
    rules = [{"PATH": "^/a/", "RESOURCE": "printers", "PERMITS": 2}]
    found = message(settings, setting("redis://h:6379/0", MIDDLEWARE=rules), "E038")
    assert "'printers' is a pool" in found.msg and "semaphores" in found.msg


def test_a_rules_permits_above_the_max_size_are_e039(settings: Any) -> None:
    rules = [{"PATH": "^/a/", "RESOURCE": "jobs", "PERMITS": 5}]
    found = message(settings, setting("redis://h:6379/0", MIDDLEWARE=rules), "E039")
    assert "= 5" in found.msg and '["SEMAPHORES"]["jobs"]["MAX_SIZE"]' in found.msg


def test_a_semaphores_permits_setting_above_its_max_size_is_e039(settings: Any) -> None:
    value = setting("redis://h:6379/0", SEMAPHORES={"jobs": {"MAX_SIZE": 2, "PERMITS": 3}})
    found = message(settings, value, "E039")
    assert 'DJANGO_REDIS_POOL["SEMAPHORES"]["jobs"]["PERMITS"] = 3' in found.msg


@pytest.mark.parametrize("bad", [0, "2", True])
def test_a_semaphores_bad_permits_setting_is_e018(settings: Any, bad: Any) -> None:
    value = setting("redis://h:6379/0", SEMAPHORES={"jobs": {"MAX_SIZE": 2, "PERMITS": bad}})
    assert message(settings, value, "E018").msg.startswith(
        'DJANGO_REDIS_POOL["SEMAPHORES"]["jobs"]["PERMITS"]'
    )


def test_a_semaphore_without_max_size_takes_any_permits_in_its_rules(settings: Any) -> None:
    rules = [{"PATH": "^/a/", "RESOURCE": "jobs", "PERMITS": 50}]
    value = setting("redis://h:6379/0", SEMAPHORES={"jobs": {}}, MIDDLEWARE=rules)
    assert ids(settings, value) == ["django_redis_pool.W006"]  # (no MAX_SIZE at all)


@pytest.mark.urls("tests.urlconfs.permit_check_views")
def test_views_asking_permits_of_a_pool_or_above_the_max_size_are_e038_and_e039(
    settings: Any,
) -> None:
    settings.DJANGO_REDIS_POOL = setting("redis://h:6379/0")
    found = {
        m.obj: m
        for m in run_checks(tags=[TAG, "urls"])
        if m.id in ("django_redis_pool.E038", "django_redis_pool.E039")
    }
    assert set(found) == {
        "tests.urlconfs.permit_check_views.pool_with_permits",
        "tests.urlconfs.permit_check_views.too_many",
    }
    assert (
        found["tests.urlconfs.permit_check_views.pool_with_permits"].id == "django_redis_pool.E038"
    )
    assert found["tests.urlconfs.permit_check_views.too_many"].id == "django_redis_pool.E039"
    assert "@with_resource('jobs')" in found["tests.urlconfs.permit_check_views.too_many"].msg


# ------------------------------------------- what the admin, pool_status and metrics show


def test_pool_status_json_shows_each_holders_permits(settings: Any, redis_url: str) -> None:
    settings.DJANGO_REDIS_POOL = setting(redis_url)
    semaphore = get_semaphore("jobs")
    assert semaphore.acquire("big", permits=3) is True
    assert semaphore.acquire("small") is True
    out = io.StringIO()
    call_command("pool_status", "--json", stdout=out)
    [jobs] = [p for p in json.loads(out.getvalue())["primitives"] if p["name"] == "jobs"]
    assert (jobs["size"], jobs["held"], jobs["holds"], jobs["free"]) == (4, 4, 2, 0)
    assert {h["holder"]: h["permits"] for h in jobs["holders"]} == {"big": 3, "small": 1}
    text = io.StringIO()
    call_command("pool_status", "--verbosity", "2", stdout=text)
    assert "held by big  fence" in text.getvalue() and "3 permits" in text.getvalue()


def test_a_semaphores_held_gauge_counts_permits(settings: Any, redis_url: str) -> None:
    settings.DJANGO_REDIS_POOL = setting(redis_url)
    semaphore = get_semaphore("jobs")
    assert semaphore.acquire("big", permits=3) is True
    gauges = registry.by_name()["semaphore"].gauges(semaphore)
    assert (gauges["size"], gauges["held"], gauges["free"], gauges["waiting"]) == (4, 3, 1, 0)


@pytest.mark.django_db
@pytest.mark.urls("tests.urlconfs.admin_and_metrics")
def test_the_admin_shows_the_permits_of_each_holder_and_waiter(
    settings: Any, redis_url: str, admin_client: Client
) -> None:
    settings.DJANGO_REDIS_POOL = setting(redis_url)
    semaphore = get_semaphore("jobs")
    assert semaphore.acquire("big", permits=3) is True
    waiting = threading.Thread(
        target=semaphore.acquire, args=("huge",), kwargs={"permits": 4, "timeout": 5}
    )
    waiting.start()
    try:
        wait_for(lambda: semaphore.waiting_count() == 1, what="huge to queue")
        response = admin_client.get(
            reverse("admin:django_redis_pool_primitive", args=[quote("jobs")])
        )
        assert response.status_code == 200
        [row] = table(response, "holders")
        fence = str(semaphore.lease_of("big").fence)
        assert row[:4] == ["big", "\N{EN DASH}", fence, "3"]  # (its identity is its holder)
        assert "Holders (1; 3 of 4 permits)" in page_text(response)
        [waiter] = table(response, "waiters")
        assert waiter[:4] == ["huge", "\N{EN DASH}", "0", "4"]  # holder, request, priority, permits
    finally:
        semaphore.release("big")
        waiting.join(10)
    assert semaphore.release("huge") is True
