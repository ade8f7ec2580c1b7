"""System checks of DJANGO_REDIS_POOL: one test per check id, and the guarantees
that ``manage.py check`` never crashes and never talks to Redis."""

from __future__ import annotations

import ast
import io
import socket
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from django.core.checks import run_checks
from django.core.management import call_command
from django.core.management.base import SystemCheckError

import django_redis_pool
from django_redis_pool.checks import TAG, check_settings
from tests.support.waiting import STALL, floor_of

URL = "redis://127.0.0.1:6379/0"
REDIS_CACHE = {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": URL}
DJANGO_REDIS_CACHE = {"BACKEND": "django_redis.cache.RedisCache", "LOCATION": URL}
LOCMEM_CACHE = {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}


def ours(settings: Any, value: Any) -> list[Any]:
    """The messages of our checks for DJANGO_REDIS_POOL = value."""
    settings.DJANGO_REDIS_POOL = value
    return [m for m in run_checks(tags=[TAG]) if m.id.startswith("django_redis_pool.")]


def only(messages: list[Any], check_id: str) -> Any:
    """The single message with ``check_id`` (and no other id present)."""
    assert [m.id for m in messages] == [f"django_redis_pool.{check_id}"], messages
    message = messages[0]
    assert message.hint, "every message carries a hint with the fix"
    return message


# ------------------------------------------------------------------ valid settings


@pytest.mark.parametrize(
    "value",
    [
        {},
        {"CONNECTION": {"URL": URL}},
        {
            "CONNECTION": {"URL": URL, "OPTIONS": {"socket_timeout": 2}},
            "KEY_PREFIX": "myapp",
            "POOLS": {
                "printers": {"RESOURCES": ["p1", "p2"], "LEASE_TIMEOUT": 30, "ORDER": "lifo"},
                "scanners": {"RESOURCES": ["s1"]},
            },
            "SEMAPHORES": {},
            "LOCKS": {},
            "ALLOCATORS": {},
            "QUEUES": {},
            "OBJECT_POOLS": {},
            "MIDDLEWARE": [],
        },
        {"CONNECTION": {"URL": "rediss://example.com:6380/1"}},
        {"CONNECTION": {"URL": "unix:///tmp/redis.sock"}},
        {"CONNECTION": {"URL": "redis://127.0.0.1:7000", "CLUSTER": True}},
        {
            "CONNECTION": {
                "SENTINELS": [["s1", 26379], ("s2", 26379)],
                "SERVICE_NAME": "mymaster",
                "OPTIONS": {"db": 1},
                "SENTINEL_OPTIONS": {"socket_timeout": 1},
            }
        },
        {"POOLS": {"p": {"LEASE_TIMEOUT": None, "ORDER": "random", "RESOURCES": ("r",)}}},
        {"POOLS": {"p": {"LEASE_TIMEOUT": 0.5, "RESOURCES": ["r"]}}},
    ],
)
def test_valid_settings_give_no_messages(settings: Any, value: Any) -> None:
    assert ours(settings, value) == []


def test_absent_setting_gives_no_messages(settings: Any) -> None:
    del settings.DJANGO_REDIS_POOL
    assert [m for m in run_checks(tags=[TAG]) if m.id.startswith("django_redis_pool.")] == []


@pytest.mark.parametrize("cache", [REDIS_CACHE, DJANGO_REDIS_CACHE])
def test_cache_form_accepts_redis_cache_backends(settings: Any, cache: dict[str, str]) -> None:
    settings.CACHES = {"default": LOCMEM_CACHE, "redis": cache}
    assert ours(settings, {"CONNECTION": {"CACHE": "redis"}}) == []


def test_check_is_registered_by_the_app_config(settings: Any) -> None:
    settings.DJANGO_REDIS_POOL = ["not a dict"]
    assert "django_redis_pool.E001" in [m.id for m in run_checks()]


# ------------------------------------------------------------------- one per id


def test_e001_setting_not_a_dict(settings: Any) -> None:
    message = only(ours(settings, [("POOLS", {})]), "E001")
    assert "DJANGO_REDIS_POOL must be a dict" in message.msg


def test_e002_unknown_top_level_key_suggests_close_match(settings: Any) -> None:
    message = only(ours(settings, {"POOL": {}}), "E002")
    assert 'DJANGO_REDIS_POOL["POOL"]' in message.msg
    assert "'POOLS'" in message.hint


def test_e003_connection_not_a_dict(settings: Any) -> None:
    message = only(ours(settings, {"CONNECTION": URL}), "E003")
    assert 'DJANGO_REDIS_POOL["CONNECTION"]' in message.msg


def test_e004_connection_says_nowhere(settings: Any) -> None:
    message = only(ours(settings, {"CONNECTION": {"OPTIONS": {}}}), "E004")
    assert 'DJANGO_REDIS_POOL["CONNECTION"]' in message.msg
    assert "URL" in message.hint


def test_e005_connection_with_both_url_and_cache(settings: Any) -> None:
    settings.CACHES = {"default": REDIS_CACHE}
    message = only(ours(settings, {"CONNECTION": {"URL": URL, "CACHE": "default"}}), "E005")
    assert 'DJANGO_REDIS_POOL["CONNECTION"] sets both URL and CACHE' in message.msg


def test_e005_cache_form_with_options(settings: Any) -> None:
    settings.CACHES = {"default": REDIS_CACHE}
    value = {"CONNECTION": {"CACHE": "default", "OPTIONS": {}}}
    message = only(ours(settings, value), "E005")
    assert 'DJANGO_REDIS_POOL["CONNECTION"]["OPTIONS"]' in message.msg


@pytest.mark.parametrize(
    ("connection", "key"),
    [
        ({"URL": URL, "OPTIONS": ["socket_timeout", 1]}, "OPTIONS"),
        ({"URL": URL, "OPTIONS": {1: 2}}, "OPTIONS"),
        (
            {"SENTINELS": [["s", 26379]], "SERVICE_NAME": "m", "SENTINEL_OPTIONS": "x"},
            "SENTINEL_OPTIONS",
        ),
    ],
)
def test_e006_options_not_a_dict(settings: Any, connection: Any, key: str) -> None:
    message = only(ours(settings, {"CONNECTION": connection}), "E006")
    assert f'DJANGO_REDIS_POOL["CONNECTION"]["{key}"]' in message.msg


@pytest.mark.parametrize(
    "connection",
    [
        {"URL": "http://127.0.0.1:6379"},
        {"URL": "127.0.0.1:6379"},
        {"URL": 6379},
        {"URL": "unix:///tmp/redis.sock", "CLUSTER": True},
    ],
)
def test_e007_bad_url_scheme(settings: Any, connection: Any) -> None:
    message = only(ours(settings, {"CONNECTION": connection}), "E007")
    assert 'DJANGO_REDIS_POOL["CONNECTION"]["URL"]' in message.msg
    assert "redis://" in message.hint


def test_e008_cache_alias_absent(settings: Any) -> None:
    settings.CACHES = {"default": REDIS_CACHE}
    message = only(ours(settings, {"CONNECTION": {"CACHE": "sessions"}}), "E008")
    assert 'DJANGO_REDIS_POOL["CONNECTION"]["CACHE"]' in message.msg
    assert "'default'" in message.hint


@pytest.mark.parametrize(
    "cache", [LOCMEM_CACHE, {"BACKEND": "no.such.module.Cache"}, {"LOCATION": URL}]
)
def test_e009_cache_is_not_a_redis_cache(settings: Any, cache: dict[str, str]) -> None:
    settings.CACHES = {"default": REDIS_CACHE, "other": cache}
    message = only(ours(settings, {"CONNECTION": {"CACHE": "other"}}), "E009")
    assert 'DJANGO_REDIS_POOL["CONNECTION"]["CACHE"]' in message.msg
    assert "django_redis.cache.RedisCache" in message.hint


def test_e010_unknown_connection_key_suggests_close_match(settings: Any) -> None:
    message = only(ours(settings, {"CONNECTION": {"URL": URL, "OPTION": {}}}), "E010")
    assert 'DJANGO_REDIS_POOL["CONNECTION"]["OPTION"]' in message.msg
    assert "'OPTIONS'" in message.hint


@pytest.mark.parametrize(
    ("connection", "key"),
    [
        ({"URL": URL, "CLUSTER": "yes"}, "CLUSTER"),
        ({"SENTINELS": [], "SERVICE_NAME": "m"}, "SENTINELS"),
        ({"SENTINELS": ["s1:26379"], "SERVICE_NAME": "m"}, "SENTINELS"),
        ({"SENTINELS": [["s1", "26379"]], "SERVICE_NAME": "m"}, "SENTINELS"),
        ({"SENTINELS": [["s1", 26379]]}, "SERVICE_NAME"),
        ({"SENTINELS": [["s1", 26379]], "SERVICE_NAME": ""}, "SERVICE_NAME"),
    ],
)
def test_e011_bad_cluster_or_sentinel_values(settings: Any, connection: Any, key: str) -> None:
    message = only(ours(settings, {"CONNECTION": connection}), "E011")
    assert f'DJANGO_REDIS_POOL["CONNECTION"]["{key}"]' in message.msg


@pytest.mark.parametrize("prefix", ["", "my app", "a{b}", 5, None, "x" * 201])
def test_e012_bad_key_prefix(settings: Any, prefix: Any) -> None:
    message = only(ours(settings, {"KEY_PREFIX": prefix}), "E012")
    assert 'DJANGO_REDIS_POOL["KEY_PREFIX"]' in message.msg


@pytest.mark.parametrize(
    "key", ["POOLS", "SEMAPHORES", "LOCKS", "ALLOCATORS", "QUEUES", "OBJECT_POOLS"]
)
def test_e013_kind_mapping_not_a_dict(settings: Any, key: str) -> None:
    message = only(ours(settings, {key: ["printers"]}), "E013")
    assert f'DJANGO_REDIS_POOL["{key}"] must be a dict' in message.msg


@pytest.mark.parametrize("name", ["my printers", "{printers}", "", 7])
def test_e014_bad_entry_name(settings: Any, name: Any) -> None:
    message = only(ours(settings, {"POOLS": {name: {}}}), "E014")
    assert 'DJANGO_REDIS_POOL["POOLS"] entry name' in message.msg


def test_e015_entry_not_a_dict(settings: Any) -> None:
    message = only(ours(settings, {"POOLS": {"printers": ["p1", "p2"]}}), "E015")
    assert 'DJANGO_REDIS_POOL["POOLS"]["printers"] must be a dict' in message.msg
    assert "RESOURCES" in message.hint


def test_e016_name_used_by_two_kinds(settings: Any) -> None:
    messages = ours(settings, {"POOLS": {"shared": {}}, "LOCKS": {"shared": {}}})
    errors = [m for m in messages if m.id == "django_redis_pool.E016"]
    assert len(errors) == 1
    assert 'DJANGO_REDIS_POOL["POOLS"]["shared"]' in errors[0].msg
    assert 'DJANGO_REDIS_POOL["LOCKS"]["shared"]' in errors[0].msg


def test_e017_unknown_option_suggests_close_match(settings: Any) -> None:
    value = {"POOLS": {"printers": {"lease_timeout": 30}}}
    message = only(ours(settings, value), "E017")
    assert 'DJANGO_REDIS_POOL["POOLS"]["printers"]["lease_timeout"]' in message.msg
    assert "Did you mean 'LEASE_TIMEOUT'?" in message.hint


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("ORDER", "lilo"),
        ("ORDER", None),
        ("LEASE_TIMEOUT", -1),
        ("LEASE_TIMEOUT", 0),
        ("LEASE_TIMEOUT", "30"),
        ("LEASE_TIMEOUT", True),
        ("LEASE_TIMEOUT", float("inf")),
        ("RESOURCES", "p1"),
        ("RESOURCES", ["p1", "p2", "p1"]),
        ("RESOURCES", ["ok", "not ok"]),
        ("RESOURCES", [1, 2]),
        ("RESOURCES", {"p1": 1}),
    ],
)
def test_e018_bad_option_value(settings: Any, option: str, value: Any) -> None:
    message = only(ours(settings, {"POOLS": {"printers": {option: value}}}), "E018")
    assert f'DJANGO_REDIS_POOL["POOLS"]["printers"]["{option}"]' in message.msg


@pytest.mark.parametrize(
    ("key", "option", "value"),
    [
        ("SEMAPHORES", "MAX_SIZE", -1),
        ("SEMAPHORES", "MAX_SIZE", 2.5),
        ("SEMAPHORES", "MAX_SIZE", "3"),
        ("SEMAPHORES", "MAX_SIZE", True),
        ("SEMAPHORES", "LEASE_TIMEOUT", 0),
        ("LOCKS", "LEASE_TIMEOUT", -5),
        ("LOCKS", "REENTRANT", "yes"),
        ("LOCKS", "AUTO_RENEW", 1),
        ("LOCKS", "TIMEOUT", -1),
        ("POOLS", "MAX_WAITING", -1),
        ("POOLS", "MAX_WAITING", 1.5),
        ("SEMAPHORES", "MAX_WAITING", "3"),
        ("LOCKS", "MAX_WAITING", True),
    ],
)
def test_e018_bad_semaphore_and_lock_options(
    settings: Any, key: str, option: str, value: Any
) -> None:
    message = only(ours(settings, {key: {"thing": {option: value}}}), "E018")
    assert f'DJANGO_REDIS_POOL["{key}"]["thing"]["{option}"]' in message.msg
    assert repr(value) in message.msg


@pytest.mark.parametrize("key", ["POOLS", "SEMAPHORES", "LOCKS"])
def test_e018_bad_max_waiting_names_the_values_it_takes(settings: Any, key: str) -> None:
    message = only(ours(settings, {key: {"thing": {"MAX_WAITING": -1}}}), "E018")
    assert f'DJANGO_REDIS_POOL["{key}"]["thing"]["MAX_WAITING"] must be an int >= 0' in message.msg
    assert "or None for no limit" in message.hint


@pytest.mark.parametrize("value", [None, 0, 1, 500])
def test_max_waiting_none_or_an_int_from_zero_passes(settings: Any, value: Any) -> None:
    entry = {"MAX_WAITING": value}
    setting = {
        "POOLS": {"p": {"RESOURCES": ["p1"], **entry}},
        "SEMAPHORES": {"s": {"MAX_SIZE": 1, **entry}},
    }
    assert ours(settings, {**setting, "LOCKS": {"l": entry}}) == []


def test_e017_unknown_lock_option_suggests_close_match(settings: Any) -> None:
    message = only(ours(settings, {"LOCKS": {"nightly": {"REENTRAN": True}}}), "E017")
    assert "Did you mean 'REENTRANT'?" in message.hint


def test_valid_semaphores_and_locks_pass(settings: Any) -> None:
    value = {
        "SEMAPHORES": {"api": {"MAX_SIZE": 3, "LEASE_TIMEOUT": 60}, "closed": {"MAX_SIZE": 0}},
        "LOCKS": {
            "nightly": {"LEASE_TIMEOUT": 10, "REENTRANT": True, "AUTO_RENEW": True},
            "forever": {"LEASE_TIMEOUT": None, "TIMEOUT": 5},
        },
    }
    assert ours(settings, value) == []


def test_e018_duplicates_are_named(settings: Any) -> None:
    value = {"POOLS": {"printers": {"RESOURCES": ["p1", "p2", "p1"]}}}
    message = only(ours(settings, value), "E018")
    assert "'p1' more than once" in message.msg


def test_e019_middleware_not_a_list(settings: Any) -> None:
    message = only(ours(settings, {"MIDDLEWARE": {"PATH": "^/"}}), "E019")
    assert 'DJANGO_REDIS_POOL["MIDDLEWARE"]' in message.msg


class _ExplodingDict(dict):
    def __iter__(self) -> Any:
        raise RuntimeError("boom")


def test_e099_unexpected_failure_is_reported_not_raised(settings: Any) -> None:
    message = only(ours(settings, _ExplodingDict(POOLS={})), "E099")
    assert "boom" in message.msg


PRINTERS = {"POOLS": {"printers": {"RESOURCES": ["p1"]}}}
MIDDLEWARE_INSTALLED = ["django_redis_pool.middleware.ResourceMiddleware"]


def test_valid_middleware_rules_pass(settings: Any) -> None:
    settings.MIDDLEWARE = MIDDLEWARE_INSTALLED
    rules = [
        {"PATH": "^/print/", "RESOURCE": "printers"},
        {
            "PATH": r"^/api/(?P<id>\d+)/",
            "METHODS": ["post", "PUT"],
            "RESOURCE": "printers",
            "TIMEOUT": 2.5,
            "LEASE_TIMEOUT": 30,
            "IDENTITY": "tests.django.test_checks.identity_of",
            "STATUS": 429,
            "RETRY_AFTER": 3,
        },
    ]
    assert ours(settings, {**PRINTERS, "MIDDLEWARE": rules}) == []


def identity_of(request: Any) -> str:
    return "someone"


@pytest.mark.parametrize(
    ("rule", "named"),
    [
        ("^/print/", "must be a dict"),
        ({"RESOURCE": "printers"}, "has no PATH"),
        ({"PATH": "^/print/"}, "has no RESOURCE"),
        ({"PATH": "^/print/", "RESOURCE": "printers", "TIMEUOT": 1}, "'TIMEUOT'"),
        ({"PATH": "^/print/(", "RESOURCE": "printers"}, "'^/print/('"),
        ({"PATH": 5, "RESOURCE": "printers"}, "5"),
        ({"PATH": "^/", "RESOURCE": "scanners"}, "'scanners'"),
        ({"PATH": "^/", "RESOURCE": "printers", "METHODS": "POST"}, "'POST'"),
        ({"PATH": "^/", "RESOURCE": "printers", "TIMEOUT": -1}, "-1"),
        ({"PATH": "^/", "RESOURCE": "printers", "LEASE_TIMEOUT": 0}, "0"),
        ({"PATH": "^/", "RESOURCE": "printers", "STATUS": 200}, "200"),
        ({"PATH": "^/", "RESOURCE": "printers", "RETRY_AFTER": "soon"}, "'soon'"),
        ({"PATH": "^/", "RESOURCE": "printers", "IDENTITY": "no.such.function"}, "no.such"),
    ],
)
def test_e020_bad_middleware_rule(settings: Any, rule: Any, named: str) -> None:
    settings.MIDDLEWARE = MIDDLEWARE_INSTALLED
    message = only(ours(settings, {**PRINTERS, "MIDDLEWARE": [rule]}), "E020")
    assert 'DJANGO_REDIS_POOL["MIDDLEWARE"][0]' in message.msg
    assert named in message.msg


@pytest.mark.parametrize("view", ["no.such.view", 42, ".000.", ".views.busy", "", "views"])
def test_e021_unavailable_view_not_importable(settings: Any, view: Any) -> None:
    message = only(ours(settings, {"UNAVAILABLE_VIEW": view}), "E021")
    assert 'DJANGO_REDIS_POOL["UNAVAILABLE_VIEW"]' in message.msg
    assert repr(view) in message.msg


def test_e022_fail_open_not_a_bool(settings: Any) -> None:
    message = only(ours(settings, {"FAIL_OPEN": "yes"}), "E022")
    assert "'yes'" in message.msg


def test_w002_middleware_rules_without_the_middleware_installed(settings: Any) -> None:
    settings.MIDDLEWARE = []
    rules = [{"PATH": "^/print/", "RESOURCE": "printers"}]
    message = only(ours(settings, {**PRINTERS, "MIDDLEWARE": rules}), "W002")
    assert message.level < 40
    assert "ResourceMiddleware" in message.msg


@pytest.mark.parametrize(
    ("key", "entry", "option"),
    [
        ("POOLS", {}, "RESOURCES"),
        ("POOLS", {"RESOURCES": []}, "RESOURCES"),
        ("ALLOCATORS", {}, "KEYS"),
        ("ALLOCATORS", {"KEYS": {}}, "KEYS"),
    ],
)
def test_w006_plain_check_warns_of_a_pool_or_allocator_without_members(
    settings: Any, key: str, entry: dict[str, Any], option: str
) -> None:
    message = only(ours(settings, {key: {"empty": entry}}), "W006")
    assert message.level < 40
    assert f'DJANGO_REDIS_POOL["{key}"]["empty"]["{option}"] is empty or absent' in message.msg
    assert "503" in message.msg
    assert option in message.hint and "pool_sync" in message.hint
    assert "admin" in message.hint and "SILENCED_SYSTEM_CHECKS" in message.hint


def test_w006_plain_check_warns_of_a_semaphore_without_max_size(settings: Any) -> None:
    message = only(ours(settings, {"SEMAPHORES": {"unsized": {"LEASE_TIMEOUT": 30}}}), "W006")
    assert 'DJANGO_REDIS_POOL["SEMAPHORES"]["unsized"]["MAX_SIZE"] is not set' in message.msg
    assert "NotConfigured" in message.msg
    assert "pool_sync" in message.hint and "Set max size" in message.hint
    assert "SILENCED_SYSTEM_CHECKS" in message.hint


def test_w006_is_not_repeated_by_the_deploy_checks(settings: Any) -> None:
    settings.DJANGO_REDIS_POOL = {"POOLS": {"empty": {}}}
    ids = [m.id for m in run_checks(tags=[TAG], include_deployment_checks=True)]
    assert ids.count("django_redis_pool.W006") == 1


@pytest.mark.parametrize("rules", [None, []])
def test_w007_middleware_installed_without_rules(settings: Any, rules: Any) -> None:
    settings.MIDDLEWARE = MIDDLEWARE_INSTALLED
    value = dict(PRINTERS) if rules is None else {**PRINTERS, "MIDDLEWARE": rules}
    message = only(ours(settings, value), "W007")
    assert message.level < 40
    assert "ResourceMiddleware" in message.msg and "has no rules" in message.msg
    assert "@with_resource" in message.hint


AUTH = "django.contrib.auth.middleware.AuthenticationMiddleware"


def test_w008_middleware_before_authentication_with_an_identity_rule(settings: Any) -> None:
    rules = [{"PATH": "^/print/", "RESOURCE": "printers", "IDENTITY": f"{__name__}.identity_of"}]
    settings.MIDDLEWARE = [*MIDDLEWARE_INSTALLED, AUTH]
    message = only(ours(settings, {**PRINTERS, "MIDDLEWARE": rules}), "W008")
    assert "request.user" in message.msg and "after" in message.hint
    settings.MIDDLEWARE = [AUTH, *MIDDLEWARE_INSTALLED]
    assert ours(settings, {**PRINTERS, "MIDDLEWARE": rules}) == []
    settings.MIDDLEWARE = [*MIDDLEWARE_INSTALLED, AUTH]  # no IDENTITY: no user is read
    plain = [{"PATH": "^/", "RESOURCE": "printers"}]
    assert ours(settings, {**PRINTERS, "MIDDLEWARE": plain}) == []


# ------------------------------------------------------ never crash, never connect


@pytest.mark.parametrize(
    ("value", "check_id"),
    [
        ("redis://127.0.0.1:6379/0", "E001"),
        ({"CONNECTION": None}, "E003"),
        ({"CONNECTION": {"URL": None}}, "E007"),
        ({"POOLS": {"printers": {"RESOURCES": 5}}}, "E018"),
        ({"POOLS": {"printers": None}}, "E015"),
        ({"POOLS": None, "KEY_PREFIX": b"\xff"}, "E013"),
        (_ExplodingDict(), "E099"),
    ],
)
def test_manage_py_check_reports_broken_settings_instead_of_crashing(
    settings: Any, value: Any, check_id: str
) -> None:
    settings.DJANGO_REDIS_POOL = value
    with pytest.raises(SystemCheckError) as info:
        call_command("check")
    assert f"django_redis_pool.{check_id}" in str(info.value)


def test_manage_py_check_passes_with_warnings_only(settings: Any) -> None:
    settings.DJANGO_REDIS_POOL = {"LOCKS": {"nightly": {}}, "POOLS": {"printers": {}}}
    out = io.StringIO()
    call_command("check", tags=[TAG], stdout=out, stderr=out)  # a Warning is not a failure
    assert "django_redis_pool.W006" in out.getvalue(), "the Warning is reported"


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_checks_never_touch_redis(
    settings: Any, monkeypatch: pytest.MonkeyPatch, redis_url: str
) -> None:
    connects: list[Any] = []
    real_connect = socket.socket.connect

    def spy(sock: socket.socket, address: Any) -> Any:
        connects.append(address)
        return real_connect(sock, address)

    monkeypatch.setattr(socket.socket, "connect", spy)
    pools = {"printers": {"RESOURCES": ["p1"], "LEASE_TIMEOUT": 30}}

    def check() -> None:
        assert check_settings() == []
        call_command("check", tags=[TAG])

    # The floor: the same checks on a Redis that answers (no retry could slow them)
    settings.DJANGO_REDIS_POOL = {"CONNECTION": {"URL": redis_url}, "POOLS": pools}
    floor = floor_of(check)
    url = f"redis://127.0.0.1:{_closed_port()}/0"
    settings.CACHES = {"default": {**REDIS_CACHE, "LOCATION": url}}
    for connection in ({"URL": url}, {"CACHE": "default"}):
        settings.DJANGO_REDIS_POOL = {"CONNECTION": connection, "POOLS": pools}
        started = time.monotonic()
        check()
        # no connection refused and retried (with backoff), no timeout waited
        assert time.monotonic() - started < 10 * floor + STALL
    assert connects == []


@pytest.mark.urls("tests.urlconfs.url_check_views")
def test_e023_with_resource_on_a_routed_view_names_an_unconfigured_primitive(
    settings: Any,
) -> None:
    settings.DJANGO_REDIS_POOL = PRINTERS
    messages = [m for m in run_checks(tags=[TAG]) if m.id == "django_redis_pool.E023"]
    named = sorted((m.msg.split(" is decorated")[0], m.msg.split("'")[1]) for m in messages)
    assert named == [
        ("tests.urlconfs.url_check_views.PlotView", "plotters"),
        ("tests.urlconfs.url_check_views.misspelt", "scanners"),
    ], "each misnamed view once, the configured one not at all"
    assert all("'printers'" in m.hint for m in messages)


@pytest.mark.urls("tests.urlconfs.url_check_views")
def test_e023_with_resource_naming_a_primitive_a_request_cannot_hold(settings: Any) -> None:
    settings.DJANGO_REDIS_POOL = {**PRINTERS, "QUEUES": {"scanners": {}}}
    messages = [m for m in run_checks(tags=[TAG]) if m.id == "django_redis_pool.E023"]
    held = [m for m in messages if "'scanners'" in m.msg]
    assert len(held) == 1
    assert "'scanners' is a queue, which a request cannot hold" in held[0].msg
    assert "'printers'" in held[0].hint


@pytest.mark.urls("tests.urlconfs.admin_and_metrics")
def test_e043_a_routed_metrics_view_without_prometheus_client(
    settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.DJANGO_REDIS_POOL = PRINTERS
    assert [m for m in run_checks(tags=[TAG]) if m.id == "django_redis_pool.E043"] == []
    monkeypatch.setitem(sys.modules, "prometheus_client", None)  # (not importable)
    [message] = [m for m in run_checks(tags=[TAG]) if m.id == "django_redis_pool.E043"]
    assert "'metrics/'" in message.msg and "prometheus_client is not installed" in message.msg
    assert "django-redis-pool[prometheus]" in message.hint


def test_e020_middleware_rule_naming_a_primitive_a_request_cannot_hold(settings: Any) -> None:
    settings.MIDDLEWARE = MIDDLEWARE_INSTALLED
    rules = [{"PATH": "^/jobs/", "RESOURCE": "jobs"}]
    value = {**PRINTERS, "QUEUES": {"jobs": {}}, "MIDDLEWARE": rules}
    message = only(ours(settings, value), "E020")
    assert "'jobs' is a queue, which a request cannot hold" in message.msg
    assert "'printers'" in message.msg


@pytest.mark.urls("tests.urlconfs.url_check_views")
def test_e023_is_not_reported_while_the_setting_itself_is_invalid(settings: Any) -> None:
    settings.DJANGO_REDIS_POOL = {"POOLS": "nope"}
    ids = [m.id for m in run_checks(tags=[TAG])]
    assert "django_redis_pool.E023" not in ids
    assert "django_redis_pool.E013" in ids


# ---------------------------------------------------- client options, without I/O


@pytest.mark.parametrize(
    "options, fragment",
    [
        ({"socket_timout": 5}, "Did you mean 'socket_timeout'?"),
        ({"no_such_argument": 1}, "is not an argument of redis-py's client"),
        ({"socket_timeout": "5"}, "must be int or float or None, got '5'"),
        ({"db": "1"}, "must be int, got '1'"),
        ({"db": True}, "must be int, got True"),
        ({"retry_on_timeout": "yes"}, "must be bool, got 'yes'"),
    ],
)
def test_e027_bad_client_options_are_caught_without_connecting(
    settings: Any, options: dict[str, Any], fragment: str
) -> None:
    """A bad OPTIONS used to pass the checks and make every request a 500."""
    message = only(ours(settings, {"CONNECTION": {"URL": URL, "OPTIONS": options}}), "E027")
    assert fragment in message.msg + message.hint


@pytest.mark.parametrize(
    "options, secret",
    [
        ({"password": b"hunter2-bytes"}, "hunter2-bytes"),
        ({"password": ["hunter2-list"]}, "hunter2-list"),
        ({"username": 73519246}, "73519246"),
    ],
)
def test_e027_never_shows_a_secret(settings: Any, options: dict[str, Any], secret: str) -> None:
    """A password (or username) of the wrong type is named by its type only: the
    message is shown by manage.py check, in logs and on the admin's page."""
    message = only(ours(settings, {"CONNECTION": {"URL": URL, "OPTIONS": options}}), "E027")
    assert "must be str or None, got a " in message.msg
    assert secret not in message.msg + message.hint
    settings.DJANGO_REDIS_POOL = {
        "CONNECTION": {"SENTINELS": [["s1", 26379]], "SERVICE_NAME": "m", "OPTIONS": options}
    }
    for message in run_checks(tags=[TAG]):
        assert secret not in f"{message.msg} {message.hint}"


def test_e027_covers_sentinel_options(settings: Any) -> None:
    value = {
        "CONNECTION": {
            "SENTINELS": [["s1", 26379]],
            "SERVICE_NAME": "m",
            "SENTINEL_OPTIONS": {"sockt_timeout": 1},
        }
    }
    assert "SENTINEL_OPTIONS" in only(ours(settings, value), "E027").msg


def test_common_client_options_pass(settings: Any) -> None:
    options = {
        "socket_timeout": 2.5,
        "socket_connect_timeout": 1,
        "health_check_interval": 30,
        "retry_on_timeout": True,
        "password": "secret",
        "username": None,
        "ssl_cert_reqs": "required",
        "client_name": "web",
    }
    assert ours(settings, {"CONNECTION": {"URL": URL, "OPTIONS": options}}) == []


# ---------------------------------------------------- manage.py check --deploy


def deploy(settings: Any, value: Any, caches: Any = None) -> list[Any]:
    """The messages of our deploy checks (they connect to Redis)."""
    settings.DJANGO_REDIS_POOL = value
    if caches is not None:
        settings.CACHES = caches
    return [
        m
        for m in run_checks(tags=[TAG], include_deployment_checks=True)
        if m.id.startswith("django_redis_pool.")
    ]


def test_deploy_checks_a_production_like_redis(settings: Any, redis_url: str, redis_client) -> None:
    redis_client.config_set("appendonly", "yes")
    try:
        value = {"CONNECTION": {"URL": redis_url}, "POOLS": {"printers": {"RESOURCES": ["p1"]}}}
        assert deploy(settings, value) == []
    finally:
        redis_client.config_set("appendonly", "no")


def test_w004_no_persistence(settings: Any, redis_url: str) -> None:
    # the harness's Redis runs with --save '' --appendonly no
    message = only(deploy(settings, {"CONNECTION": {"URL": redis_url}}), "W004")
    assert "a restart loses every hold" in message.msg and "appendonly" in message.hint


def test_e029_allkeys_eviction_names_the_double_grant(
    settings: Any, redis_url: str, redis_client
) -> None:
    redis_client.config_set("appendonly", "yes")
    redis_client.config_set("maxmemory", "1gb")
    redis_client.config_set("maxmemory-policy", "allkeys-lru")
    try:
        message = only(deploy(settings, {"CONNECTION": {"URL": redis_url}}), "E029")
        assert "allkeys-lru" in message.msg and "double grant" in message.msg
        redis_client.config_set("maxmemory-policy", "volatile-lru")
        assert deploy(settings, {"CONNECTION": {"URL": redis_url}}) == []
    finally:
        redis_client.config_set("maxmemory-policy", "noeviction")
        redis_client.config_set("maxmemory", "0")
        redis_client.config_set("appendonly", "no")


@pytest.mark.parametrize("form", ["CACHE", "URL"])
def test_w005_sharing_a_caches_database(
    settings: Any, redis_url: str, redis_client, form: str
) -> None:
    caches = {
        "default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": redis_url}
    }
    connection = {"CACHE": "default"} if form == "CACHE" else {"URL": redis_url}
    messages = [
        m for m in deploy(settings, {"CONNECTION": connection}, caches) if m.id[-4:] != "W004"
    ]
    assert "cache.clear()" in only(messages, "W005").msg
    other = {"URL": redis_url.rstrip("0123456789").rstrip("/") + "/5"}
    assert not [m for m in deploy(settings, {"CONNECTION": other}, caches) if m.id[-4:] == "W005"]


def test_w005_knows_two_names_of_one_host(settings: Any, redis_url: str) -> None:
    port = redis_url.rsplit(":", 1)[1].split("/")[0]
    caches = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": f"redis://localhost:{port}/0",
        }
    }
    connection = {"URL": f"redis://127.0.0.1:{port}/0"}
    ids = [m.id[-4:] for m in deploy(settings, {"CONNECTION": connection}, caches)]
    assert "W005" in ids


def test_w003_unreachable_redis(settings: Any) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    value = {"CONNECTION": {"URL": f"redis://127.0.0.1:{port}/0", "OPTIONS": {"socket_timeout": 1}}}
    assert "could not be reached" in only(deploy(settings, value), "W003").msg


def test_deploy_checks_say_nothing_while_the_setting_is_invalid(settings: Any) -> None:
    ids = [m.id for m in deploy(settings, {"CONNECTION": 5})]
    assert ids == ["django_redis_pool.E003"]


# ------------------------------------------------------------- one place, no circle


def _imported(module: Path) -> set[str]:
    """The modules of the package that ``module`` imports, anywhere in it
    (``conf`` for ``from . import conf``, ``conf.schema`` for ``from .schema``)."""
    package = Path(django_redis_pool.__file__).parent
    here = module.parent.relative_to(package).parts
    names: set[str] = set()
    for node in ast.walk(ast.parse(module.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = list(here[: len(here) - node.level + 1])
            target = [*base, *(node.module.split(".") if node.module else [])]
            names.add(".".join(target))
            names.update(".".join([*target, alias.name]) for alias in node.names)
    return names


def test_the_setting_is_read_in_conf_which_imports_neither_checks_nor_registry() -> None:
    """The checks report what conf finds and the registry builds what conf reads:
    neither is imported by conf, and the registry imports no check."""
    package = Path(django_redis_pool.__file__).parent
    checks = {"checks", "deploy_checks", "url_checks"}
    for module in sorted((package / "conf").glob("*.py")):
        assert not _imported(module) & (checks | {"registry"}), module.name
    assert "conf" in _imported(package / "registry.py")
    assert not _imported(package / "registry.py") & checks


@pytest.mark.parametrize(
    ("value", "check_id", "says"),
    [
        ({"LOCKS": {"big": {"LEASE_TIMEOUT": 1e20}}}, "E018", '["big"]["LEASE_TIMEOUT"]'),
        ({"POOLS": {"p": {"LEASE_TIMEOUT": 1e12}}}, "E018", '["p"]["LEASE_TIMEOUT"]'),
        ({"QUEUES": {"q": {"RESULT_TTL": 1e12}}}, "E018", '["q"]["RESULT_TTL"]'),
        ({"QUEUES": {"q": {"VISIBILITY_TIMEOUT": 1e12}}}, "E018", '["VISIBILITY_TIMEOUT"]'),
        ({"REQUEST_LEASE": 1e12}, "E026", '["REQUEST_LEASE"]'),
        ({"LONG_HOLD": 1e12}, "E031", '["LONG_HOLD"]'),
    ],
)
def test_a_duration_redis_cannot_count_is_an_error_naming_the_option(
    settings: Any, value: dict[str, Any], check_id: str, says: str
) -> None:
    message = only(ours(settings, {"CONNECTION": {"URL": URL}, **value}), check_id)
    assert says in message.msg and "10 years" in message.msg


def test_a_payload_limit_over_what_redis_holds_is_an_error(settings: Any) -> None:
    value = {"CONNECTION": {"URL": URL}, "QUEUES": {"q": {"MAX_PAYLOAD": 10**12}}}
    message = only(ours(settings, value), "E018")
    assert '["MAX_PAYLOAD"]' in message.msg and "512 MiB" in message.msg


def test_e007_never_shows_the_password_of_the_url(settings: Any) -> None:
    value = {"CONNECTION": {"URL": "http://:s3cret@127.0.0.1:6379/0"}}
    message = only(ours(settings, value), "E007")
    assert "s3cret" not in message.msg and "s3cret" not in message.hint
    assert "********" in message.msg


@pytest.mark.parametrize(
    ("url", "check_id", "says"),
    [
        ("redis://:s3cret@host:notaport/0", "E007", "port"),
        ("redis://:s3cret@host:6379/0?socket_timeout=abc", "E027", "socket_timeout"),
        ("redis://:s3cret@host:6379/0?sockettimeout=5", "E027", "socket_timeout"),
    ],
)
def test_bad_url_parts_are_errors_without_connecting(
    settings: Any, url: str, check_id: str, says: str
) -> None:
    message = only(ours(settings, {"CONNECTION": {"URL": url}}), check_id)
    assert says in message.msg + message.hint
    assert "s3cret" not in message.msg + message.hint


def test_good_url_options_pass(settings: Any) -> None:
    url = "redis://127.0.0.1:6379/0?socket_timeout=5&health_check_interval=10"
    assert ours(settings, {"CONNECTION": {"URL": url}}) == []
