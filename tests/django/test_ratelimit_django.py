"""Rate limits in Django: the ``RATE_LIMITS`` setting and its checks (E034-E037,
W009), ``@with_resource`` and middleware rules answering 429 with
``Retry-After`` and the ``RateLimit-*`` headers, each ``KEY`` source,
``pool_status``, the metrics' gauges and the admin's page and reset action.

Every request goes through Django's test clients against the harness's real
Redis; the views are in :mod:`tests.urlconfs.ratelimit_views`.
"""

from __future__ import annotations

import io
import json
import logging
import math
import re
from collections.abc import Callable
from typing import Any

import pytest
import redis
from asgiref.sync import async_to_sync
from django.core.management import call_command
from django.http import HttpResponse
from django.test import AsyncClient, Client, RequestFactory

from django_redis_pool import get_ratelimit, registry
from django_redis_pool.checks import check_settings
from django_redis_pool.client_address import client_ip
from django_redis_pool.kinds import ratelimit as kind
from django_redis_pool.kinds.ratelimit import hashed, parse_rate
from tests.support.admin_fixtures import action_url, detail_url, login, operator, viewer  # noqa: F401
from tests.support.admin_pages import confirm, dashboard_row, form_inputs, messages_of, page_text
from tests.support.redis_inspect import redis_state
from tests.support.stoppable_servers import closed_port

pytestmark = pytest.mark.urls("tests.urlconfs.ratelimit_views")

RESOURCE_MIDDLEWARE = "django_redis_pool.middleware.ResourceMiddleware"
BASE_MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]


def configure(settings: Any, url: str, **api: Any) -> None:
    """One rate limit, "api": 2 a minute by the client's address unless ``api``
    says otherwise."""
    settings.DJANGO_REDIS_POOL = {
        "CONNECTION": {"URL": url},
        "RATE_LIMITS": {"api": {"RATE": "2/m", "KEY": "ip", **api}},
    }


def errors(settings: Any, **api: Any) -> list[Any]:
    """The check messages of a setting with the one rate limit ``api``."""
    settings.DJANGO_REDIS_POOL = {"RATE_LIMITS": {"api": api}}
    return check_settings()


def run(command: str, *args: str) -> str:
    out = io.StringIO()
    call_command(command, *args, stdout=out, no_color=True)
    return out.getvalue()


def ratelimit_headers(response: Any) -> dict[str, str]:
    return {h: v for h, v in response.headers.items() if h.lower().startswith("ratelimit-")}


# ==================================================================== settings


@pytest.mark.parametrize(
    ("rate", "count", "per"),
    [
        ("100/m", 100, 60),
        ("10/s", 10, 1),
        ("10/5s", 10, 5),
        ("1000/2h", 1000, 7200),
        ("5000/day", 5000, 86400),
        ("3/1.5s", 3, 1.5),
        (" 7 / minute ", 7, 60),
        ("10 per minute", 10, 60),
        ("10 per 5 seconds", 10, 5),
    ],
)
def test_rate_is_a_count_per_unit_or_per_several_units(rate: str, count: int, per: float) -> None:
    parsed = parse_rate(rate)
    assert (parsed.rate, parsed.per) == (count, per)


def test_settings_build_the_configured_rate_limit(settings: Any, redis_url: str) -> None:
    configure(settings, redis_url, RATE="100/m", BURST=20)
    api = get_ratelimit("api")
    assert (api.rate, api.per, api.burst) == (100, 60.0, 20)
    assert registry.get_resource("api") is api
    assert check_settings() == []


def test_burst_defaults_to_the_count_of_the_rate(settings: Any, redis_url: str) -> None:
    configure(settings, redis_url, RATE="10/5s")
    assert get_ratelimit("api").burst == 10


@pytest.mark.parametrize(
    "rate",
    ["100", 100, "100/fortnight", "0/m", "10/0s", "m/100", "1/-2s", "1/0.0001s", "10000000/s"],
)
def test_e034_a_malformed_rate_names_the_setting_and_the_forms(settings: Any, rate: Any) -> None:
    [message] = errors(settings, RATE=rate)
    assert message.id == "django_redis_pool.E034"
    assert 'DJANGO_REDIS_POOL["RATE_LIMITS"]["api"]["RATE"]' in message.msg
    assert '"100/m"' in message.hint


@pytest.mark.parametrize(
    ("key", "suggestion"),
    [("usr", "Did you mean 'user'?"), ("IP", "Did you mean 'ip'?"), ("headers", "header:")],
)
def test_e035_an_unknown_key_source_suggests_the_close_one(
    settings: Any, key: str, suggestion: str
) -> None:
    [message] = errors(settings, RATE="1/s", KEY=key)
    assert message.id == "django_redis_pool.E035"
    assert 'DJANGO_REDIS_POOL["RATE_LIMITS"]["api"]["KEY"]' in message.msg
    assert suggestion in message.hint and '"header:<Name>"' in message.hint


@pytest.mark.parametrize("key", ["header:", "header:X Api", 42])
def test_e035_a_header_source_must_name_a_header(settings: Any, key: Any) -> None:
    assert [m.id for m in errors(settings, RATE="1/s", KEY=key)] == ["django_redis_pool.E035"]


def test_e036_a_key_function_that_does_not_import(settings: Any) -> None:
    [message] = errors(settings, RATE="1/s", KEY="tests.urlconfs.ratelimit_views.no_such_function")
    assert message.id == "django_redis_pool.E036"
    assert "cannot be imported" in message.msg and "dotted path" in message.hint


@pytest.mark.parametrize(
    ("option", "value"),
    [("IP_HEADER", "X Forwarded For"), ("IP_HEADER", 1), ("TRUSTED_PROXIES", 0)],
)
def test_e037_bad_proxy_options(settings: Any, option: str, value: Any) -> None:
    [message] = errors(settings, RATE="1/s", **{option: value})
    assert message.id == "django_redis_pool.E037"
    assert f'["api"]["{option}"]' in message.msg


def test_e018_a_burst_the_primitive_cannot_count(settings: Any) -> None:
    [message] = errors(settings, RATE="1/d", BURST=2**40)
    assert message.id == "django_redis_pool.E018"
    assert "more than 71 years" in message.msg and "BURST" in message.hint


def test_e018_a_cost_above_the_burst_could_never_pass(settings: Any) -> None:
    [message] = errors(settings, RATE="10/m", BURST=3, COST=4)
    assert message.id == "django_redis_pool.E018"
    assert "COST 4 above its burst 3" in message.msg and "BURST" in message.hint


@pytest.mark.parametrize(
    ("option", "value"), [("BURST", 0), ("COST", 1.5), ("TIMEOUT", -1), ("TIMOUT", 1)]
)
def test_other_bad_options_are_e017_or_e018(settings: Any, option: str, value: Any) -> None:
    [message] = errors(settings, RATE="10/m", **{option: value})
    assert message.id == (
        "django_redis_pool.E017" if option == "TIMOUT" else "django_redis_pool.E018"
    )


def test_e024_a_rate_limit_needs_a_rate(settings: Any) -> None:
    [message] = errors(settings, KEY="ip")
    assert message.id == "django_redis_pool.E024"
    assert "RATE" in message.msg


def test_e016_a_rate_limit_name_is_unique_across_kinds(settings: Any) -> None:
    settings.DJANGO_REDIS_POOL = {
        "LOCKS": {"api": {}},
        "RATE_LIMITS": {"api": {"RATE": "1/s"}},
    }
    assert "django_redis_pool.E016" in [m.id for m in check_settings()]


@pytest.mark.parametrize("key", ["ip", "user", "header:X-Api-Key"])
@pytest.mark.parametrize(
    "proxy", [("USE_X_FORWARDED_HOST", True), ("SECURE_PROXY_SSL_HEADER", ("HTTP_X_P", "https"))]
)
def test_w009_a_key_by_address_behind_a_proxy_without_ip_header(
    settings: Any, key: str, proxy: tuple[str, Any]
) -> None:
    setattr(settings, *proxy)
    [message] = [m for m in errors(settings, RATE="1/s", KEY=key) if m.id.endswith("W009")]
    assert not message.is_serious()
    assert proxy[0] in message.msg
    assert '["IP_HEADER"]' in message.hint and "X-Forwarded-For" in message.hint


def test_w010_a_key_by_a_raw_header_says_invented_values_each_get_a_bucket(
    settings: Any,
) -> None:
    [message] = errors(settings, RATE="2/m", KEY="header:X-Api-Key")
    assert message.id == "django_redis_pool.W010" and not message.is_serious()
    assert "X-Api-Key" in message.msg and "never limited" in message.msg
    assert "KEY function" in message.hint and '"user"' in message.hint


def test_a_key_by_a_raw_header_is_bypassed_by_inventing_values_as_w010_says(
    settings: Any, redis_url: str
) -> None:
    """What W010 warns about, shown: the limit holds for one value only."""
    configure(settings, redis_url, RATE="2/m", KEY="header:X-Api-Key")
    client = Client()
    same = [client.get("/limited/", HTTP_X_API_KEY="k").status_code for _ in range(3)]
    assert same == [200, 200, 429]
    invented = [client.get("/limited/", HTTP_X_API_KEY=f"k{i}").status_code for i in range(6)]
    assert invented == [200] * 6


@pytest.mark.parametrize(
    ("addresses", "prefix", "same"),
    [
        (["2001:db8:1:2::1", "2001:db8:1:2:ffff::9"], 64, True),
        (["2001:db8:1:2::1", "2001:db8:1:3::1"], 64, False),
        (["2001:db8:1:2::1", "2001:db8:1:2::2"], 128, False),
        (["10.0.0.1", "10.0.0.2"], 64, False),
    ],
)
def test_an_ipv6_client_is_counted_as_its_network(
    settings: Any, redis_url: str, addresses: list[str], prefix: int, same: bool
) -> None:
    configure(settings, redis_url, RATE="1/m", KEY="ip", IPV6_PREFIX=prefix)
    client = Client()
    first, second = (client.get("/limited/", REMOTE_ADDR=a).status_code for a in addresses)
    assert first == 200 and (second == 429) is same


def test_w009_is_not_reported_with_an_ip_header_or_a_key_function(settings: Any) -> None:
    settings.USE_X_FORWARDED_HOST = True
    assert errors(settings, RATE="1/s", KEY="ip", IP_HEADER="X-Forwarded-For") == []
    assert errors(settings, RATE="1/s", KEY="tests.urlconfs.ratelimit_views.tenant_of") == []


def test_w009_is_not_reported_without_a_proxy(settings: Any) -> None:
    assert errors(settings, RATE="1/s", KEY="ip") == []


# ============================================================ requests: decorator


def test_a_view_is_allowed_then_answered_429_with_retry_after_and_ratelimit_headers(
    settings: Any, redis_url: str
) -> None:
    configure(settings, redis_url)
    client = Client()
    first = client.get("/limited/")
    assert first.status_code == 200
    assert first.json()["decision"]["allowed"] is True
    assert ratelimit_headers(first) == {
        "RateLimit-Limit": "2",
        "RateLimit-Remaining": "1",
        "RateLimit-Reset": "30",
        "RateLimit-Policy": "2;w=60;burst=2",
    }
    assert client.get("/limited/").headers["RateLimit-Remaining"] == "0"

    refused = client.get("/limited/")

    assert refused.status_code == 429
    assert refused["Content-Type"] == "text/plain; charset=utf-8"
    assert b"Too many requests, please retry in 30 s." in refused.content
    assert refused["Retry-After"] == "30"
    assert refused["RateLimit-Remaining"] == "0"
    assert refused["RateLimit-Policy"] == "2;w=60;burst=2"
    assert int(refused["RateLimit-Reset"]) in (59, 60)


def stack(settings: Any, url: str, api: str, hourly: str) -> None:
    """Two rate limits on ``/stacked/``: "hourly" outside, "api" inside."""
    settings.DJANGO_REDIS_POOL = {
        "CONNECTION": {"URL": url},
        "RATE_LIMITS": {"api": {"RATE": api, "KEY": "ip"}, "hourly": {"RATE": hourly, "KEY": "ip"}},
    }


@pytest.mark.parametrize(
    ("api", "hourly", "shown"),
    [("2/m", "10/h", ("2", "1", "30")), ("5/m", "2/h", ("2", "1", "1800"))],
    ids=["the-inner-one-is-tighter", "the-outer-one-is-tighter"],
)
def test_stacked_limits_tell_the_tightest_quota_and_every_policy(
    settings: Any, redis_url: str, api: str, hourly: str, shown: tuple[str, str, str]
) -> None:
    stack(settings, redis_url, api, hourly)
    response = Client().get("/stacked/")
    assert response.status_code == 200
    headers = ratelimit_headers(response)
    assert (headers["RateLimit-Limit"], headers["RateLimit-Remaining"]) == shown[:2]
    assert headers["RateLimit-Reset"] == shown[2]
    burst_api, burst_hourly = api.split("/")[0], hourly.split("/")[0]
    assert headers["RateLimit-Policy"] == (
        f"{burst_api};w=60;burst={burst_api}, {burst_hourly};w=3600;burst={burst_hourly}"
    )


def test_a_stacked_inner_refusal_tells_its_quota_and_both_policies(
    settings: Any, redis_url: str
) -> None:
    stack(settings, redis_url, "1/m", "10/h")
    client = Client()
    assert client.get("/stacked/").status_code == 200
    refused = client.get("/stacked/")
    assert refused.status_code == 429 and refused["Retry-After"] == "60"
    assert refused["RateLimit-Limit"] == "1" and refused["RateLimit-Remaining"] == "0"
    assert refused["RateLimit-Policy"] == "1;w=60;burst=1, 10;w=3600;burst=10"


def test_a_view_that_sets_its_own_ratelimit_headers_keeps_them() -> None:
    response = HttpResponse()
    response["RateLimit-Remaining"] = "7"
    headers = {"RateLimit-Limit": "2", "RateLimit-Remaining": "0", "RateLimit-Reset": "30"}
    kind.QuotaHeaders({**headers, "RateLimit-Policy": "2;w=60"}).add_to(response)
    assert response["RateLimit-Remaining"] == "7" and response["RateLimit-Policy"] == "2;w=60"


def test_retry_after_is_the_next_turn_rounded_up(settings: Any, redis_url: str) -> None:
    configure(settings, redis_url, RATE="1/5s")
    client = Client()
    assert client.get("/limited/").status_code == 200
    refused = client.get("/limited/")
    assert refused.status_code == 429
    remaining, retry_after = get_ratelimit("api").status("ip:127.0.0.1")
    assert remaining < 1 and 4 < retry_after <= 5
    assert refused["Retry-After"] == "5" == str(math.ceil(retry_after))


def test_an_async_view_is_decided_on_the_event_loop(settings: Any, redis_url: str) -> None:
    configure(settings, redis_url)
    client = AsyncClient()
    responses = [async_to_sync(client.get)("/alimited/") for _ in range(3)]
    assert [r.status_code for r in responses] == [200, 200, 429]
    assert responses[0].json()["type"] == "Decision"
    assert [r["RateLimit-Remaining"] for r in responses] == ["1", "0", "0"]
    assert responses[2]["Retry-After"] == "30"


def test_request_resources_holds_the_decision(settings: Any, redis_url: str) -> None:
    configure(settings, redis_url, RATE="5/m")
    seen = Client().get("/limited/").json()
    assert seen["type"] == "Decision"
    decision = seen["decision"]
    assert decision["allowed"] is True and decision["remaining"] == 4 and decision["limit"] == 5
    assert decision["retry_after"] == 0 and 11 < decision["reset_after"] <= 12


def test_the_unavailable_view_gets_the_refusal_and_its_headers_are_added(
    settings: Any, redis_url: str
) -> None:
    configure(settings, redis_url, RATE="1/m")
    settings.DJANGO_REDIS_POOL = {
        **settings.DJANGO_REDIS_POOL,
        "UNAVAILABLE_VIEW": "tests.urlconfs.ratelimit_views.unavailable",
    }
    client = Client()
    assert client.get("/limited/").status_code == 200
    refused = client.get("/limited/")
    assert refused.status_code == 429
    headers = ["RateLimit-Limit", "RateLimit-Policy", "RateLimit-Remaining", "RateLimit-Reset"]
    assert refused.content.decode() == f"limited 429 60 False {headers}"
    assert refused["Retry-After"] == "60" and refused["RateLimit-Remaining"] == "0"


def test_an_explicit_status_and_retry_after_win(settings: Any, redis_url: str) -> None:
    configure(settings, redis_url, RATE="1/m")
    client = Client()
    assert client.get("/custom/").status_code == 200
    refused = client.get("/custom/")
    assert refused.status_code == 418
    assert refused["Retry-After"] == "7"
    assert refused["RateLimit-Remaining"] == "0"


def test_a_request_waits_for_its_turn_within_the_timeout(settings: Any, redis_url: str) -> None:
    configure(settings, redis_url, RATE="1/s")
    client = Client()
    assert client.get("/limited/").status_code == 200
    assert client.get("/limited/").status_code == 429, "TIMEOUT 0: refused at once"
    waited = client.get("/patient/")  # timeout=3: waits for the next turn
    assert waited.status_code == 200
    assert 0.5 < waited.json()["decision"]["waited"] < 1.5


def test_the_timeout_option_is_the_default_wait(settings: Any, redis_url: str) -> None:
    configure(settings, redis_url, RATE="1/s", TIMEOUT=3)
    client = Client()
    assert client.get("/limited/").status_code == 200
    assert client.get("/limited/").status_code == 200


def test_cost_spends_several_units_per_request(settings: Any, redis_url: str) -> None:
    configure(settings, redis_url, RATE="10/m", COST=4)
    client = Client()
    assert [client.get("/limited/")["RateLimit-Remaining"] for _ in range(2)] == ["6", "2"]
    assert client.get("/limited/").status_code == 429


def test_redis_down_answers_503_not_429(settings: Any) -> None:
    configure(settings, f"redis://127.0.0.1:{closed_port()}/0")
    response = Client().get("/limited/")
    assert response.status_code == 503
    assert "RateLimit-Remaining" not in response


def test_redis_down_with_fail_open_runs_the_view_unlimited(settings: Any) -> None:
    configure(settings, f"redis://127.0.0.1:{closed_port()}/0")
    settings.DJANGO_REDIS_POOL = {**settings.DJANGO_REDIS_POOL, "FAIL_OPEN": True}
    response = Client().get("/limited/")
    assert response.status_code == 200 and response.json()["decision"] is None


# ================================================================== KEY sources


def test_ip_key_counts_each_client_address_apart(settings: Any, redis_url: str) -> None:
    configure(settings, redis_url, RATE="1/m")
    client = Client()
    assert client.get("/limited/", REMOTE_ADDR="10.0.0.1").status_code == 200
    assert client.get("/limited/", REMOTE_ADDR="10.0.0.1").status_code == 429
    assert client.get("/limited/", REMOTE_ADDR="10.0.0.2").status_code == 200
    keys = {state.key for state in get_ratelimit("api").busiest()}
    assert keys == {"ip:10.0.0.1", "ip:10.0.0.2"}


@pytest.mark.django_db
def test_user_key_counts_a_user_by_pk_and_an_anonymous_request_by_address(
    settings: Any, redis_url: str, django_user_model: Any
) -> None:
    configure(settings, redis_url, RATE="1/m", KEY="user")
    ann = django_user_model.objects.create_user("ann")
    signed_in = Client()
    signed_in.force_login(ann)
    assert signed_in.get("/limited/", REMOTE_ADDR="10.0.0.1").status_code == 200
    assert signed_in.get("/limited/", REMOTE_ADDR="10.0.0.2").status_code == 429, "same user"
    assert Client().get("/limited/", REMOTE_ADDR="10.0.0.1").status_code == 200, "anonymous"
    keys = {state.key for state in get_ratelimit("api").busiest()}
    assert keys == {f"user:{ann.pk}", "ip:10.0.0.1"}


@pytest.mark.django_db
def test_user_key_on_an_async_view(settings: Any, redis_url: str, django_user_model: Any) -> None:
    configure(settings, redis_url, RATE="1/m", KEY="user")
    ann = django_user_model.objects.create_user("ann")
    client = AsyncClient()
    client.force_login(ann)
    assert async_to_sync(client.get)("/alimited/").status_code == 200
    assert async_to_sync(client.get)("/alimited/").status_code == 429
    assert [state.key for state in get_ratelimit("api").busiest()] == [f"user:{ann.pk}"]


def test_header_key_counts_the_hash_of_the_header_never_the_value(
    settings: Any, redis_url: str, redis_client: redis.Redis
) -> None:
    configure(settings, redis_url, RATE="1/m", KEY="header:X-Api-Key")
    secret = "sk-live-0123456789abcdef"
    client = Client()
    assert client.get("/limited/", HTTP_X_API_KEY=secret).status_code == 200
    assert client.get("/limited/", HTTP_X_API_KEY=secret).status_code == 429
    assert client.get("/limited/", HTTP_X_API_KEY="another").status_code == 200
    keys = {state.key for state in get_ratelimit("api").busiest()}
    assert keys == {f"header:{hashed(secret)}", f"header:{hashed('another')}"}
    assert secret.encode() not in repr(redis_state(redis_client)).encode()


def test_header_key_falls_back_to_the_address_without_the_header(
    settings: Any, redis_url: str
) -> None:
    configure(settings, redis_url, RATE="1/m", KEY="header:X-Api-Key")
    assert Client().get("/limited/", REMOTE_ADDR="10.0.0.9").status_code == 200
    assert [state.key for state in get_ratelimit("api").busiest()] == ["ip:10.0.0.9"]


def test_a_key_function_names_the_key_and_none_exempts_the_request(
    settings: Any, redis_url: str
) -> None:
    configure(settings, redis_url, RATE="1/m", KEY="tests.urlconfs.ratelimit_views.tenant_of")
    client = Client()
    assert client.get("/limited/", HTTP_X_TENANT="acme").status_code == 200
    assert client.get("/limited/", HTTP_X_TENANT="acme").status_code == 429
    assert client.get("/alimited/", HTTP_X_TENANT="initech").status_code == 200
    for _ in range(3):
        exempt = client.get("/limited/", HTTP_X_TENANT="acme", HTTP_X_STAFF="1")
        assert exempt.status_code == 200
        assert exempt.json()["decision"] is None and ratelimit_headers(exempt) == {}
    keys = {state.key for state in get_ratelimit("api").busiest()}
    assert keys == {"tenant:acme", "tenant:initech"}


def test_a_key_over_1000_characters_is_counted_as_its_hash(settings: Any, redis_url: str) -> None:
    configure(settings, redis_url, KEY="tests.urlconfs.ratelimit_views.huge_key")
    assert Client().get("/limited/").status_code == 200
    [state] = get_ratelimit("api").busiest()
    assert state.key == f"sha256:{hashed('k' * 5000)}"


def test_a_key_function_returning_no_str_is_a_server_error(settings: Any, redis_url: str) -> None:
    configure(settings, redis_url, KEY="tests.urlconfs.ratelimit_views.not_a_str")
    with pytest.raises(TypeError, match="returned 42, not a str or None"):
        Client().get("/limited/")


def test_the_views_identity_is_the_key(settings: Any, redis_url: str) -> None:
    configure(settings, redis_url, RATE="1/m")
    client = Client()
    assert client.get("/team/", {"team": "red"}).status_code == 200
    assert client.get("/team/", {"team": "red"}).status_code == 429
    assert client.get("/team/", {"team": "blue"}).status_code == 200
    assert {s.key for s in get_ratelimit("api").busiest()} == {"team:red", "team:blue"}


@pytest.mark.parametrize(
    ("forwarded", "trusted", "expected"),
    [
        ("203.0.113.9", 1, "203.0.113.9"),
        ("6.6.6.6, 203.0.113.9", 1, "203.0.113.9"),  # a forged left-most entry is ignored
        ("6.6.6.6, 203.0.113.9, 10.0.0.2", 2, "203.0.113.9"),  # two proxies appended
        ("203.0.113.9", 3, "203.0.113.9"),  # fewer entries than proxies: the left-most
        ("203.0.113.9:51234", 1, "203.0.113.9"),  # a port is dropped
        ("[2001:db8::1]:443", 1, "2001:db8::1"),
        ("not-an-address", 1, "10.0.0.1"),  # not an address: REMOTE_ADDR
        ("", 1, "10.0.0.1"),
    ],
)
def test_the_client_address_behind_proxies(forwarded: str, trusted: int, expected: str) -> None:
    request = RequestFactory().get("/", REMOTE_ADDR="10.0.0.1", HTTP_X_FORWARDED_FOR=forwarded)
    assert client_ip(request, "X-Forwarded-For", trusted) == expected
    assert client_ip(request) == "10.0.0.1", "without IP_HEADER, the header is not read"


def test_ip_key_behind_a_proxy_reads_the_configured_header(settings: Any, redis_url: str) -> None:
    configure(settings, redis_url, RATE="1/m", IP_HEADER="X-Forwarded-For", TRUSTED_PROXIES=1)
    client = Client(REMOTE_ADDR="10.0.0.254")  # the proxy
    assert client.get("/limited/", HTTP_X_FORWARDED_FOR="198.51.100.7").status_code == 200
    forged = client.get("/limited/", HTTP_X_FORWARDED_FOR="1.2.3.4, 198.51.100.7")
    assert forged.status_code == 429, "the client cannot pick its address"
    assert client.get("/limited/", HTTP_X_FORWARDED_FOR="198.51.100.8").status_code == 200
    keys = {state.key for state in get_ratelimit("api").busiest()}
    assert keys == {"ip:198.51.100.7", "ip:198.51.100.8"}


# ================================================================== middleware


@pytest.fixture
def rules(settings: Any, redis_url: str) -> Callable[..., None]:
    """``rules(*rules, **api)``: the middleware installed with ``rules``."""

    def install(*rules: dict[str, Any], **api: Any) -> None:
        settings.MIDDLEWARE = [*BASE_MIDDLEWARE, RESOURCE_MIDDLEWARE]
        configure(settings, redis_url, **api)
        settings.DJANGO_REDIS_POOL = {**settings.DJANGO_REDIS_POOL, "MIDDLEWARE": list(rules)}

    return install


@pytest.mark.parametrize("path", ["/plain/", "/aplain/"])
def test_a_middleware_rule_limits_the_requests_it_matches(
    rules: Callable[..., None], path: str
) -> None:
    rules({"PATH": r"^/a?plain/", "RESOURCE": "api"}, RATE="1/m")
    client = Client()
    allowed = client.get(path)
    assert allowed.status_code == 200 and allowed["RateLimit-Remaining"] == "0"
    assert allowed.json()["decision"]["allowed"] is True
    refused = client.get(path)
    assert refused.status_code == 429 and refused["Retry-After"] == "60"
    assert client.get("/limited/").status_code == 429, "the view's own limit, the same key"
    assert Client().get(path, REMOTE_ADDR="10.0.0.3").status_code == 200


def test_a_middleware_rule_status_and_identity_override_the_kinds(
    rules: Callable[..., None],
) -> None:
    rules(
        {
            "PATH": r"^/plain/",
            "RESOURCE": "api",
            "STATUS": 503,
            "IDENTITY": "tests.urlconfs.ratelimit_views.tenant_of",
        },
        RATE="1/m",
    )
    client = Client()
    assert client.get("/plain/", HTTP_X_TENANT="acme").status_code == 200
    assert client.get("/plain/", HTTP_X_TENANT="acme").status_code == 503
    assert [s.key for s in get_ratelimit("api").busiest()] == ["tenant:acme"]


@pytest.mark.parametrize("path", ["/plain/", "/aplain/"])
def test_a_rules_permits_are_the_units_its_requests_spend(
    rules: Callable[..., None], path: str
) -> None:
    rules({"PATH": r"^/a?plain/", "RESOURCE": "api", "PERMITS": 3}, RATE="4/m")
    client = Client()
    first = client.get(path)
    assert first.status_code == 200 and first["RateLimit-Remaining"] == "1", "3 of 4 spent"
    assert client.get(path).status_code == 429, "3 more are not there"


def test_a_rules_permits_above_the_burst_are_e039(settings: Any) -> None:
    settings.DJANGO_REDIS_POOL = {
        "RATE_LIMITS": {"api": {"RATE": "10/m", "BURST": 2}},
        "MIDDLEWARE": [{"PATH": r"^/", "RESOURCE": "api", "PERMITS": 3}],
    }
    [message] = [m for m in check_settings() if m.id.endswith("E039")]
    assert "= 3 is more than the 2 permits of 'api'" in message.msg
    assert '["api"]["BURST"]' in message.msg


# ==================================================================== commands


def test_pool_status_shows_the_rate_the_active_keys_and_the_busiest(
    settings: Any, redis_url: str
) -> None:
    configure(settings, redis_url, RATE="3/m", BURST=2)
    api = get_ratelimit("api")
    assert api.acquire("ip:10.0.0.1", cost=2) and api.acquire("ip:10.0.0.2")

    table = run("pool_status")

    assert re.search(r"api\s+ratelimit\s+2\s+-\s+-\s+2", table), table
    assert "3 per 60 s, burst 2; 2 active keys" in table
    assert re.search(r"ip:10\.0\.0\.1\s+0 left\s+next in \d+\.\d s", table), table
    [data] = json.loads(run("pool_status", "--json"))["primitives"]
    assert data["kind"] == "ratelimit" and data["name"] == "api"
    assert (data["rate"], data["per"], data["burst"], data["active_keys"]) == (3, 60, 2, 2)
    assert (data["held"], data["free"], data["waiting"], data["size"]) == (2, None, None, 2)
    busiest = data["busiest"]
    assert [row["key"] for row in busiest] == ["ip:10.0.0.1", "ip:10.0.0.2"]
    assert busiest[0]["remaining"] < 1 and busiest[0]["retry_after"] > 0
    assert set(busiest[0]) == {"key", "remaining", "retry_after", "reset_after"}


def test_pool_status_escapes_control_characters_of_keys(settings: Any, redis_url: str) -> None:
    """A key is whatever a request sent (a header): it can neither clear the
    operator's terminal nor forge a line of the table."""
    configure(settings, redis_url, RATE="3/m", BURST=2)
    api = get_ratelimit("api")
    assert api.acquire("header:\x1b[2J\x1b[Hpwned\nforged  0 left", cost=2)

    table = run("pool_status")

    assert "\x1b" not in table and "\nforged" not in table
    assert "\\x1b[2J\\x1b[Hpwned\\nforged" in table


def test_pool_sync_and_pool_gc_have_nothing_to_do(settings: Any, redis_url: str) -> None:
    configure(settings, redis_url)
    assert "api: a rate limit, nothing to sync" in run("pool_sync")
    assert "api: nothing to reclaim" in run("pool_gc")


# ===================================================================== metrics


def test_the_metrics_are_the_burst_the_active_keys_and_the_decisions(
    settings: Any, redis_url: str
) -> None:
    from prometheus_client.parser import text_string_to_metric_families

    configure(settings, redis_url, RATE="10/m", BURST=4)
    api = get_ratelimit("api")
    assert kind.KIND.gauges(api) == {"size": 4, "held": 0}
    for key in ("a", "b", "c"):
        assert api.acquire(key)
    assert api.acquire("a", cost=4) is False
    response = Client().get("/metrics/")
    samples = {
        (sample.name, sample.labels.get("reason") or sample.labels.get("le") or "api"): sample.value
        for family in text_string_to_metric_families(response.content.decode())
        for sample in family.samples
        if sample.labels.get("kind") == "ratelimit"
    }
    assert samples[("django_redis_pool_up", "api")] == 1
    assert samples[("django_redis_pool_size", "api")] == 4
    assert samples[("django_redis_pool_held", "api")] == 3
    assert ("django_redis_pool_free", "api") not in samples
    assert ("django_redis_pool_waiting", "api") not in samples
    assert samples[("django_redis_pool_acquired_total", "api")] == 3
    assert samples[("django_redis_pool_refused_total", "limited")] == 1
    assert samples[("django_redis_pool_wait_seconds_count", "api")] == 3


# ======================================================================= admin


@pytest.mark.django_db
def test_the_dashboard_row_shows_the_burst_and_the_active_keys(
    settings: Any,
    redis_url: str,
    viewer: Client,  # noqa: F811
) -> None:
    from tests.support.admin_fixtures import dashboard_url

    configure(settings, redis_url, RATE="10/m", BURST=4)
    get_ratelimit("api").acquire("ip:10.0.0.1", cost=3)
    row = dashboard_row(viewer.get(dashboard_url()), "api")
    assert row[:6] == ["api", "rate limit", "4", "\N{EN DASH}", "1", "\N{EN DASH}"]
    assert "10 per 60 s, burst 4; busiest: ip:10.0.0.1, 1 left" in row[6]


@pytest.mark.django_db
def test_the_page_lists_the_busiest_keys_with_units_left_and_next_turn(
    settings: Any,
    redis_url: str,
    viewer: Client,  # noqa: F811
) -> None:
    configure(settings, redis_url, RATE="2/m")
    api = get_ratelimit("api")
    assert api.acquire("ip:10.0.0.1", cost=2) and api.acquire("ip:10.0.0.2")

    page = viewer.get(detail_url("api"))

    assert page.status_code == 200
    text = page_text(page)
    assert "Rate limit api" in text
    assert "2 per 60 s, burst 2 · 2 active keys" in text
    rows = re.findall(r'<tr data-key="([^"]*)"', page.content.decode())
    assert rows == ["ip:10.0.0.1", "ip:10.0.0.2"], "fewest units left first"
    assert re.search(r"ip:10\.0\.0\.1 0 \d+\.\d s \d+\.\d s", text), text
    assert re.search(r"ip:10\.0\.0\.2 1 now \d+\.\d s", text), text
    assert "Reset" not in re.sub(r"<[^>]+>", "", page.content.decode().split('id="keys"')[1])
    assert "Activity in the last hour" in text

    found = viewer.get(detail_url("api"), {"find": "ip:10.0.0.1"})
    assert re.search(r"ip:10\.0\.0\.1: limited, next turn in \d+\.\d s", page_text(found))
    fresh = viewer.get(detail_url("api"), {"find": "ip:10.9.9.9"})
    assert "ip:10.9.9.9: passes now" in page_text(fresh)


@pytest.mark.django_db
def test_an_operator_resets_a_key_from_its_row(
    settings: Any,
    redis_url: str,
    operator: Client,  # noqa: F811
) -> None:
    configure(settings, redis_url, RATE="1/m")
    api = get_ratelimit("api")
    assert api.acquire("ip:10.0.0.1") and not api.acquire("ip:10.0.0.1")
    page = operator.get(detail_url("api"))
    link = f"{action_url('api', 'reset')}?key=ip%3A10.0.0.1"
    assert f'href="{link}"' in page.content.decode()

    done = confirm(operator, action_url("api", "reset"), {"key": "ip:10.0.0.1"})

    assert done.redirect_chain[-1][0] == detail_url("api")
    assert messages_of(done) == [
        ("success", "Key 'ip:10.0.0.1' of rate limit 'api' has its whole burst again.")
    ]
    assert api.acquire("ip:10.0.0.1")
    again = confirm(operator, action_url("api", "reset"), {"key": "ip:10.0.0.2"})
    assert messages_of(again)[0][0] == "warning"


@pytest.mark.django_db
def test_resetting_needs_the_change_permission(
    settings: Any,
    redis_url: str,
    viewer: Client,  # noqa: F811
) -> None:
    configure(settings, redis_url, RATE="1/m")
    api = get_ratelimit("api")
    assert api.acquire("k")
    url = action_url("api", "reset")
    assert viewer.get(url, {"key": "k"}).status_code == 403
    assert viewer.post(url, {"key": "k"}).status_code == 403
    assert not api.acquire("k"), "still limited"


@pytest.mark.django_db
def test_resetting_needs_the_csrf_token(
    settings: Any,
    redis_url: str,
    login: Callable[..., Client],  # noqa: F811
) -> None:
    configure(settings, redis_url, RATE="1/m")
    api = get_ratelimit("api")
    assert api.acquire("k")
    client = login("staff_change", enforce_csrf_checks=True)
    url = action_url("api", "reset")
    page = client.get(url, {"key": "k"})
    assert client.post(url, {"key": "k"}).status_code == 403
    assert not api.acquire("k"), "still limited"
    assert client.post(url, form_inputs(page, "confirm-form")).status_code == 302
    assert api.acquire("k")


def test_a_refusal_is_logged_once_with_its_reason_and_not_as_a_server_error(
    settings: Any, redis_url: str, caplog: Any
) -> None:
    """Load shedding and spent quotas are by design: one INFO line of ours
    (with the reason), nothing from django.request (which logs every 5xx at
    ERROR, each one reported by an error tracker)."""
    configure(settings, redis_url, RATE="1/m")
    client = Client()
    assert client.get("/limited/").status_code == 200
    with caplog.at_level(logging.DEBUG):
        assert client.get("/limited/").status_code == 429
    assert not [r for r in caplog.records if r.name == "django.request"]
    ours = [r for r in caplog.records if "refused (limited)" in r.getMessage()]
    assert len(ours) == 1 and ours[0].levelno == logging.INFO


def test_redis_down_is_still_a_server_error_for_django_request(settings: Any, caplog: Any) -> None:
    configure(settings, f"redis://127.0.0.1:{closed_port()}/0")
    with caplog.at_level(logging.DEBUG):
        assert Client().get("/limited/").status_code == 503
    assert [r.levelno for r in caplog.records if r.name == "django.request"] == [logging.ERROR]


def test_a_limiter_built_outside_the_registry_counts_requests_by_address(redis_client):
    from django_redis_pool import RateLimiter
    from django_redis_pool.kinds.ratelimit_keys import policy_of

    policy = policy_of(RateLimiter(redis_client, "outside", rate=5, per=60))
    assert (policy.source, policy.ip_header, policy.ipv6_prefix, policy.cost) == ("ip", None, 64, 1)
    assert policy.timeout == 0 and not policy.blocks
