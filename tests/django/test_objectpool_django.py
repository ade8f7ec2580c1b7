"""Object pools in Django: ``OBJECT_POOLS`` and its checks, ``get_object_pool``,
a borrowed object per request, the global limit through a configured
semaphore, and each process's counters in ``pool_status`` and the admin."""

from __future__ import annotations

import io
import json
import time
from typing import Any

import pytest
from django.core.management import call_command
from django.http import HttpResponse
from django.test import Client, RequestFactory

from django_redis_pool import ObjectPool, get_object_pool, get_semaphore, signals
from django_redis_pool.checks import check_settings
from django_redis_pool.decorators import with_resource
from tests.support.admin_fixtures import detail_url, login, viewer  # noqa: F401
from tests.support.pooled_objects import Client as Made

#: A request's wait that it must never wait out here.
LONG = 60.0


def setting(url: str, **options: Any) -> dict[str, Any]:
    return {
        "CONNECTION": {"URL": url},
        "SEMAPHORES": {"clients-everywhere": {"MAX_SIZE": 3}},
        "OBJECT_POOLS": {
            "clients": {
                "FACTORY": "tests.support.pooled_objects.make",
                "DESTROY": "tests.support.pooled_objects.close",
                "VALIDATE": "tests.support.pooled_objects.is_alive",
                "MAX": 2,
                "TEST_ON_BORROW": True,
                "GLOBAL_LIMIT": "clients-everywhere",
                **options,
            }
        },
    }


@pytest.fixture
def configured(settings: Any, redis_url: str) -> None:
    settings.DJANGO_REDIS_POOL = setting(redis_url)
    call_command("pool_sync", verbosity=0)


def test_the_setting_builds_this_process_pool(configured: None) -> None:
    pool = get_object_pool("clients")
    assert isinstance(pool, ObjectPool) and pool.max == 2 and pool.test_on_borrow
    with pool.hold(timeout=5) as client:
        assert isinstance(client, Made)
    assert get_semaphore("clients-everywhere").get_current_size() == 1, "one global slot held"


def test_a_pool_built_in_code_may_name_a_configured_semaphore(configured: None) -> None:
    pool: ObjectPool[Made] = ObjectPool(Made, max=1, global_limit="clients-everywhere")
    with pool.hold(timeout=5):
        assert get_semaphore("clients-everywhere").get_current_size() == 1
    pool.clear()
    assert get_semaphore("clients-everywhere").get_current_size() == 0


def test_factory_is_required_and_paths_must_import(settings: Any, redis_url: str) -> None:
    value = setting(redis_url)
    del value["OBJECT_POOLS"]["clients"]["FACTORY"]
    settings.DJANGO_REDIS_POOL = value
    messages = [m for m in check_settings() if m.is_serious()]
    assert [m.id for m in messages] == ["django_redis_pool.E024"]
    assert "has no FACTORY" in messages[0].msg
    settings.DJANGO_REDIS_POOL = setting(redis_url, VALIDATE="tests.support.pooled_objects.nope")
    messages = [m for m in check_settings() if m.is_serious()]
    assert [m.id for m in messages] == ["django_redis_pool.E018"]
    assert "cannot be imported" in messages[0].msg


@pytest.mark.django_db  # closing a response closes old database connections
def test_a_request_borrows_an_object_and_gives_it_back(configured: None) -> None:
    @with_resource("clients", timeout=5)
    def view(request: Any) -> HttpResponse:
        return HttpResponse(str(request.resources["clients"].number))

    response = view(RequestFactory().get("/"))
    pool = get_object_pool("clients")
    assert pool.borrowed == 1
    response.close()
    assert pool.borrowed == 0 and pool.available == 1


@pytest.mark.django_db
def test_a_request_past_max_waiting_is_refused_at_once(settings: Any, redis_url: str) -> None:
    settings.DJANGO_REDIS_POOL = setting(redis_url, MAX=1, MAX_WAITING=0)
    errors: list[Any] = []

    def receiver(sender: Any, **kwargs: Any) -> None:
        errors.append(kwargs["error"])

    @with_resource("clients", timeout=LONG)
    def view(request: Any) -> HttpResponse:
        return HttpResponse("ok")

    pool = get_object_pool("clients")
    pool.max_waiting = None  # (a creation waits too: make the one object first)
    with pool.hold(timeout=5):
        pass
    pool.max_waiting = 0
    signals.resource_unavailable.connect(receiver, weak=False)
    try:
        with pool.hold(timeout=5):  # the only object, on loan
            started = time.monotonic()
            response = view(RequestFactory().get("/"))
            assert time.monotonic() - started < LONG / 2, "refused at once, not after LONG"
    finally:
        signals.resource_unavailable.disconnect(receiver)
    assert response.status_code == 503
    assert response["Retry-After"] == str(int(LONG))
    (error,) = errors
    assert error.reason == "full" and "max_waiting" in str(error)


def test_pool_status_lists_the_live_processes(configured: None) -> None:
    pool = get_object_pool("clients")
    held = pool.acquire(timeout=5)
    out = io.StringIO()
    call_command("pool_status", "--json", stdout=out)
    data = {p["name"]: p for p in json.loads(out.getvalue())["primitives"]}
    clients = data["clients"]
    assert clients["kind"] == "object_pool" and len(clients["processes"]) == 1
    assert clients["processes"][0]["slots"] >= 1
    pool.release(held)


@pytest.mark.django_db
def test_the_admin_shows_the_processes(configured: None, viewer: Client) -> None:  # noqa: F811
    get_object_pool("clients")
    page = viewer.get(detail_url("clients")).content.decode()
    assert "Processes (1)" in page and "data-pid=" in page


@pytest.mark.parametrize(
    ("options", "fragment"),
    [({"MAX": 0}, "from 1 to"), ({"MIN": 3, "MAX": 2}, "MIN 3 above MAX 2")],
)
def test_sizes_that_cannot_work_are_reported_by_the_checks(
    settings: Any, redis_url: str, options: dict[str, Any], fragment: str
) -> None:
    settings.DJANGO_REDIS_POOL = setting(redis_url, **options)
    messages = [m for m in check_settings() if m.is_serious()]
    assert [m.id for m in messages] == ["django_redis_pool.E018"]
    assert fragment in messages[0].msg
