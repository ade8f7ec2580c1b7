"""Allocators in Django: settings and checks, ``get_allocator``, a key per
request bound to its identity, ``pool_sync`` (batched), ``pool_status``,
``pool_gc`` with ``HEALTH_CHECK``, and the admin's section and actions."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from typing import Any

import pytest
import redis
from django.core.management import call_command
from django.http import HttpResponse
from django.test import Client, RequestFactory

from django_redis_pool import AllocatedKey, Allocator, get_allocator
from django_redis_pool.checks import check_settings
from django_redis_pool.decorators import with_resource
from tests.support.admin_fixtures import action_url, detail_url, login, operator, viewer  # noqa: F401
from tests.support.redis_inspect import commands_run_by, script_calls, unload_scripts
from tests.support.waiting import wait_for

#: Keys the health check below finds unhealthy.
BROKEN = {"proxy-2"}


def probe(key: str) -> bool:
    if key == "proxy-3":
        raise ConnectionError("proxy-3 refused the probe")
    return key not in BROKEN


def setting(url: str, **options: Any) -> dict[str, Any]:
    return {
        "CONNECTION": {"URL": url},
        "ALLOCATORS": {
            "proxies": {
                "KEYS": {"fast": 5, "proxy-1": 0, "proxy-2": 0, "proxy-3": 0},
                "LEASE_TIMEOUT": 30,
                **options,
            },
            "shared": {"KEYS": ["s1", "s2"], "SHARED": True},
        },
    }


@pytest.fixture
def configured(settings: Any, redis_url: str) -> None:
    settings.DJANGO_REDIS_POOL = setting(redis_url)
    call_command("pool_sync", verbosity=0)


def run(command: str, *args: str) -> str:
    out = io.StringIO()
    call_command(command, *args, stdout=out, no_color=True)
    return out.getvalue()


# -- settings ----------------------------------------------------------------------


def test_settings_build_the_configured_allocator(configured: None) -> None:
    proxies = get_allocator("proxies")
    assert isinstance(proxies, Allocator) and proxies.lease_timeout == 30
    assert proxies.shared is False and get_allocator("shared").shared is True
    assert proxies.keys() == ["fast", "proxy-1", "proxy-2", "proxy-3"]
    assert proxies.malloc_key() == "fast", "KEYS priorities are applied"


@pytest.mark.parametrize(
    ("option", "value", "fragment"),
    [
        ("KEYS", "proxy-1", "must be a list of keys or a dict"),
        ("KEYS", ["a", "a"], "lists 'a' more than once"),
        ("KEYS", {"a": "high"}, "must be an int priority"),
        ("KEYS", {"a": 2**21}, "is beyond"),
        ("KEYS", ["a b"], "whitespace"),
        ("SHARED", "no", "True or False"),
        ("SOFT_BIND_TIMEOUT", 0, "> 0"),
        ("HEALTH_CHECK", "no.such.module.probe", "cannot be imported"),
        ("HEALTH_COOLDOWN", -1, ">= 0"),
    ],
)
def test_bad_options_are_reported_by_the_checks(
    settings: Any, redis_url: str, option: str, value: Any, fragment: str
) -> None:
    settings.DJANGO_REDIS_POOL = setting(redis_url, **{option: value})
    messages = [m for m in check_settings() if m.is_serious()]
    assert [m.id for m in messages] == ["django_redis_pool.E018"]
    assert f'["ALLOCATORS"]["proxies"]["{option}"]' in messages[0].msg
    assert fragment in messages[0].msg


# -- requests ----------------------------------------------------------------------


@pytest.mark.django_db  # closing a response closes old database connections
def test_a_request_gets_a_key_bound_to_its_identity(configured: None) -> None:
    seen: list[AllocatedKey] = []

    @with_resource("proxies", identity=lambda request: request.GET["user"])
    def view(request: Any) -> HttpResponse:
        key = request.resources["proxies"]
        seen.append(key)
        return HttpResponse(str(key))

    proxies = get_allocator("proxies")
    proxies.report_unhealthy("fast", cooldown=60)  # three keys of one priority left
    first = view(RequestFactory().get("/", {"user": "alice"}))
    first.close()  # alice's key goes to the back of the line
    assert proxies.get_soft_bind("alice") == seen[0]
    bob = view(RequestFactory().get("/", {"user": "bob"}))
    next_in_line = proxies.snapshot().available[0]
    assert next_in_line != seen[0], "the order alone would not give alice her key"
    again = view(RequestFactory().get("/", {"user": "alice"}))
    assert again.content.decode() == seen[0], "alice keeps her key while it is free"
    assert isinstance(seen[1], AllocatedKey) and seen[1].holder == "bob"
    bob.close()
    again.close()
    keys = ("fast", "proxy-1", "proxy-2", "proxy-3")
    assert not any(proxies.is_locked(k) for k in keys), "freed after the response"


@pytest.mark.django_db
def test_a_request_that_finds_every_key_taken_is_refused_at_once(configured: None) -> None:
    proxies = get_allocator("proxies")
    while proxies.malloc_key() is not None:
        pass

    @with_resource("proxies", timeout=30)
    def view(request: Any) -> HttpResponse:
        raise AssertionError("no key, no view")

    response = view(RequestFactory().get("/"))
    assert response.status_code == 503 and response["Retry-After"] == "30"


# -- commands ----------------------------------------------------------------------


def test_pool_sync_adds_keys_in_one_round_trip_per_thousand(
    settings: Any, redis_url: str, redis_client: redis.Redis
) -> None:
    keys = [f"k{i}" for i in range(2500)]
    settings.DJANGO_REDIS_POOL = {
        "CONNECTION": {"URL": redis_url},
        "ALLOCATORS": {"many": {"KEYS": keys}},
    }
    many = get_allocator("many")
    unload_scripts(redis_client)  # (their first calls are refused: not round trips of the work)
    output: list[str] = []
    ran = commands_run_by(redis_client, lambda: output.append(run("pool_sync")))
    assert "many: 2500 added, 0 already there" in output[0]
    assert script_calls(ran) == 4, "one read of the keys, then one write per 1,000"
    assert len(many) == 2500


def test_pool_sync_prunes_keys_no_longer_configured(configured: None) -> None:
    proxies = get_allocator("proxies")
    proxies.extend(["stale"])
    held = proxies.malloc_key()
    assert "proxies: 0 would be added, 4 already there, 1 would be removed" in run(
        "pool_sync", "--prune", "--dry-run"
    )
    assert "stale" in proxies
    assert "proxies: 0 added, 4 already there, 1 removed" in run("pool_sync", "--prune")
    assert "stale" not in proxies and proxies.is_locked(held) == (held != "stale")


def test_pool_status_lists_keys_holders_and_counts(configured: None) -> None:
    proxies = get_allocator("proxies")
    proxies.malloc_key(holder="crawler-1")
    proxies.report_unhealthy("proxy-3", cooldown=60)
    data = {p["name"]: p for p in json.loads(run("pool_status", "--json"))["primitives"]}
    assert (data["proxies"]["size"], data["proxies"]["held"], data["proxies"]["free"]) == (4, 1, 2)
    assert data["proxies"]["kind"] == "allocator"
    assert "held by crawler-1" in run("pool_status")


def test_pool_gc_runs_the_health_check(settings: Any, redis_url: str) -> None:
    settings.DJANGO_REDIS_POOL = setting(
        redis_url, HEALTH_CHECK="tests.django.test_allocator_django.probe", HEALTH_COOLDOWN=60
    )
    call_command("pool_sync", verbosity=0)
    dry = run("pool_gc", "--name", "proxies", "--dry-run")
    assert "health check: 2 of 4 keys failed (dry run, nothing changed)" in dry
    assert get_allocator("proxies").unhealthy()[0] == 0
    output = run("pool_gc", "--name", "proxies", "-v", "2")
    assert "health check: 2 of 4 keys failed" in output
    assert "unhealthy: proxy-2" in output and "unhealthy: proxy-3" in output
    proxies = get_allocator("proxies")
    assert [key for key, _ in proxies.unhealthy()[1]] == ["proxy-2", "proxy-3"]
    report = json.loads(run("pool_gc", "--name", "proxies", "--json"))
    assert report["unhealthy"] == 2


# -- admin -------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_detail_page_shows_keys_health_and_bindings(
    configured: None,
    viewer: Client,  # noqa: F811
) -> None:
    proxies = get_allocator("proxies")
    proxies.malloc_key(name="alice", holder="crawler-1")
    proxies.report_unhealthy("proxy-3", cooldown=60)
    page = viewer.get(detail_url("proxies")).content.decode()
    assert "crawler-1" in page and "Out of rotation (1)" in page
    assert 'data-resource="proxy-3"' in page
    assert "Soft bindings (1)" in page and 'data-binding="alice"' in page
    assert "Mark healthy" not in page, "a viewer gets no action links"


@pytest.mark.django_db
def test_the_actions_add_remove_heal_and_unbind(
    configured: None,
    operator: Client,  # noqa: F811
) -> None:
    proxies = get_allocator("proxies")
    post: Callable[..., Any] = lambda action, **data: operator.post(  # noqa: E731
        action_url("proxies", action), data
    )
    assert post("add", resource="proxy-9", priority=9).status_code == 302
    assert "proxy-9" in proxies and proxies.malloc_key() == "proxy-9"
    post("unhealthy", resource="proxy-1", cooldown=30)
    assert proxies.state("proxy-1") == "unhealthy"
    post("healthy", resource="proxy-1")
    assert proxies.state("proxy-1") == "free"
    proxies.update_soft_bind("bob", "proxy-2")
    post("unbind", binding="bob")
    assert proxies.get_soft_bind("bob") is None
    post("remove", resource="proxy-9")
    assert "proxy-9" not in proxies
    page = operator.get(detail_url("proxies")).content.decode()
    assert "Add a key" in page and "Mark unhealthy" in page


def test_pool_gc_reports_the_expired_bindings_it_dropped(settings: Any, redis_url: str) -> None:
    """It removed them, so it says so (not "nothing to reclaim")."""
    settings.DJANGO_REDIS_POOL = {
        "CONNECTION": {"URL": redis_url},
        "ALLOCATORS": {"binds": {"KEYS": ["k1"]}},
    }
    allocator = get_allocator("binds")
    allocator.update_soft_bind("gone", "k1", cache_timeout=0.01)
    wait_for(lambda: allocator.get_soft_bind("gone") is None, what="the binding to expire")
    out = io.StringIO()
    call_command("pool_gc", "--name", "binds", stdout=out, no_color=True)
    assert "1 expired soft bindings dropped" in out.getvalue()
    assert "nothing to reclaim" not in out.getvalue()
