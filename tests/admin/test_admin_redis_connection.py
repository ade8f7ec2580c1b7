"""Where Redis is, and Redis being down, in the admin dashboard: connection
details masked (no password, in the URL or in its query string, and never the
connection options), an invalid setting named on a page rather than a
traceback, and a Redis or Redis Cluster that cannot be reached: pages that are
503s with one clear error and no actions, actions that report an error.

Through Django's test client, against the harness's real Redis (the setting,
the users and the fixtures: :mod:`tests.support.admin_fixtures`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.test import Client

from django_redis_pool.admin import connection_label
from django_redis_pool.conf.masking import MASK, masked_url
from django_redis_pool.exceptions import BackendUnavailable
from tests.support.admin_fixtures import NA, action_url, dashboard_url, detail_url, lease_setting
from tests.support.admin_pages import (
    dashboard_row,
    form_inputs,
    health_icons,
    messages_of,
    page_text,
)

pytestmark = pytest.mark.django_db


#: A port nothing listens on (privileged, never bound by the test run).
DOWN_PORT = 1


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"),
        ("redis://user@127.0.0.1:6379/0", "redis://user@127.0.0.1:6379/0"),
        ("redis://:s3cret@127.0.0.1:6379/0", f"redis://:{MASK}@127.0.0.1:6379/0"),
        ("redis://user:s3cret@127.0.0.1:6379/0", f"redis://user:{MASK}@127.0.0.1:6379/0"),
        ("redis://user:@127.0.0.1:6379/0", f"redis://user:{MASK}@127.0.0.1:6379/0"),
        ("redis://:s3c@ret@127.0.0.1:6379/0", f"redis://:{MASK}@127.0.0.1:6379/0"),
        ("redis://us%40er:s3%40cret@host:1/2", f"redis://us%40er:{MASK}@host:1/2"),
        (
            "rediss://user:s3cret@redis.example.com:6380/1",
            f"rediss://user:{MASK}@redis.example.com:6380/1",
        ),
        ("redis://:s3cret@[::1]:6379/0", f"redis://:{MASK}@[::1]:6379/0"),
        ("unix://:s3cret@/run/redis.sock?db=0", f"unix://:{MASK}@/run/redis.sock?db=0"),
        ("unix:///run/redis.sock?db=0", "unix:///run/redis.sock?db=0"),
        ("rediss://h:6380/0?ssl_password=k3y", f"rediss://h:6380/0?ssl_password={MASK}"),
    ],
)
def test_masked_url_hides_the_password(url: str, shown: str) -> None:
    assert masked_url(url) == shown


@pytest.mark.parametrize(
    "url",
    [
        "redis://127.0.0.1:6379/0?password=s3cret",
        "unix:///run/redis.sock?db=0&password=s3cret",
        "rediss://user@redis.example.com:6380/0?ssl_cert_reqs=none&password=s3cret",
    ],
)
def test_masked_url_hides_a_password_given_in_the_query_string(url: str) -> None:
    # redis-py's from_url() takes a password from a ``password=`` query argument
    # too (the documented form for unix sockets).
    shown = masked_url(url)

    assert "s3cret" not in shown
    assert MASK in shown


@pytest.mark.parametrize(
    ("connection", "label"),
    [
        ({"URL": "redis://:s3cret@10.0.0.1:6379/0"}, f"redis://:{MASK}@10.0.0.1:6379/0"),
        (
            {"URL": "redis://user:s3cret@10.0.0.1:7000", "CLUSTER": True, "OPTIONS": {"x": 1}},
            f"Redis Cluster redis://user:{MASK}@10.0.0.1:7000",
        ),
        ({"URL": "redis://10.0.0.1:7000", "CLUSTER": False}, "redis://10.0.0.1:7000"),
        (
            {
                "SENTINELS": [("10.0.0.1", 26379), ["10.0.0.2", 26380]],
                "SERVICE_NAME": "mymaster",
                "SENTINEL_OPTIONS": {"password": "s3cret"},
                "OPTIONS": {"password": "s3cret"},
            },
            "Sentinel service 'mymaster' via 10.0.0.1:26379, 10.0.0.2:26380",
        ),
        ({"CACHE": "default"}, "the Redis of Django cache 'default'"),
    ],
    ids=["url", "cluster", "not-cluster", "sentinel", "cache"],
)
def test_connection_label_says_where_redis_is_without_secrets(
    connection: dict[str, Any], label: str
) -> None:
    assert connection_label(connection) == label
    assert "s3cret" not in connection_label(connection)


def down_setting(
    *, retries: bool = True, url: str = f"redis://:s3cret@127.0.0.1:{DOWN_PORT}/0"
) -> dict[str, Any]:
    """The primitives on a Redis that refuses connections. ``retries=False``
    sets the client's OPTIONS, which drops the library's default retries: the
    same error, without the backoff (about 0.7 s per Redis call)."""
    setting = lease_setting(url)
    del setting["POOLS"]["empty"], setting["SEMAPHORES"]["unsized"], setting["LOCKS"]["plain"]
    if not retries:
        setting["CONNECTION"]["OPTIONS"] = {"socket_timeout": 5}
    return setting


def test_the_dashboard_of_an_unreachable_redis_masks_its_password_and_shows_errors(
    settings: Any, viewer: Client
) -> None:
    settings.DJANGO_REDIS_POOL = down_setting()

    response = viewer.get(dashboard_url())

    assert response.status_code == 200
    content = response.content.decode()
    assert "s3cret" not in content
    assert f"Redis: redis://:{MASK}@127.0.0.1:{DOWN_PORT}/0 · key prefix drp" in page_text(response)
    assert health_icons(response) == {"printers": "Error", "reports": "Error", "imports": "Error"}
    for name in ("printers", "reports", "imports"):
        row = dashboard_row(response, name)
        assert row[2:6] == [NA, NA, NA, NA]
        assert row[6] == "not read: Redis could not be reached (see above)"
    # one note above the table says what failed and what to do
    assert content.count('class="errornote"') == 1
    assert page_text(response).count(f"127.0.0.1:{DOWN_PORT}. Connection refused") == 1
    assert 'start Redis, or fix DJANGO_REDIS_POOL["CONNECTION"], then reload' in page_text(response)


def test_the_dashboard_never_shows_the_connection_options(settings: Any, viewer: Client) -> None:
    settings.DJANGO_REDIS_POOL = down_setting(retries=False)
    settings.DJANGO_REDIS_POOL["CONNECTION"]["OPTIONS"]["password"] = "0pt-s3cret"

    response = viewer.get(dashboard_url())

    assert response.status_code == 200
    assert "0pt-s3cret" not in response.content.decode()
    assert "socket_timeout" not in response.content.decode()


def test_the_dashboard_never_shows_a_password_given_in_the_query_string(
    settings: Any, viewer: Client
) -> None:
    url = f"redis://127.0.0.1:{DOWN_PORT}/0?password=s3cret"
    settings.DJANGO_REDIS_POOL = down_setting(retries=False, url=url)

    response = viewer.get(dashboard_url())

    assert response.status_code == 200
    assert "s3cret" not in response.content.decode()


@pytest.mark.parametrize(
    "url",
    [
        lambda: dashboard_url(),
        lambda: detail_url("printers"),
        lambda: action_url("printers", "gc"),
    ],
    ids=["dashboard", "detail", "action"],
)
def test_an_invalid_setting_gives_a_page_naming_the_problem_not_a_traceback(
    settings: Any, operator: Client, url: Callable[[], str]
) -> None:
    settings.DJANGO_REDIS_POOL = {
        "CONNECTION": {"URL": "http://user:s3cret@127.0.0.1:6379/0"},
        "POOLS": {"printers": {"RESOURCES": ["p1"]}},
    }

    response = operator.get(url())

    assert response.status_code == 500
    text = page_text(response)
    assert "DJANGO_REDIS_POOL is invalid" in text
    assert "(django_redis_pool.E007)" in text and 'DJANGO_REDIS_POOL["CONNECTION"]["URL"]' in text
    assert "manage.py check" in text
    assert "s3cret" not in response.content.decode()
    assert MASK in text


# ====================================================================== Redis down


@pytest.mark.parametrize("name", ["printers", "reports", "imports"])
def test_the_detail_page_of_an_unreachable_redis_is_a_503_with_one_clear_error_and_no_actions(
    settings: Any, operator: Client, name: str
) -> None:
    settings.DJANGO_REDIS_POOL = down_setting(retries=False)

    response = operator.get(detail_url(name))

    assert response.status_code == 503
    content = response.content.decode()
    assert content.count('class="errornote"') == 1
    text = page_text(response)
    assert text.count("Redis could not be") == 1, text  # the message is not doubled
    assert "Redis could not be reached:" in text
    assert 'start Redis, or fix DJANGO_REDIS_POOL["CONNECTION"], then reload' in text
    # the state is unknown: no action is offered
    assert "object-tools" not in content and "data-action" not in content
    assert "/actions/" not in content
    assert "<form" not in content.split('id="content-main"', 1)[1]
    assert f"127.0.0.1:{DOWN_PORT}" in page_text(response)
    assert "Traceback" not in response.content.decode()
    assert "s3cret" not in response.content.decode()


@pytest.mark.parametrize(
    ("name", "action", "params", "label"),
    [
        ("printers", "release", {"resource": "p1", "fence": 1}, "Force-release"),
        ("printers", "add", {"resource": "p9"}, "Add a resource"),
        ("printers", "remove", {"resource": "p1"}, "Remove"),
        ("reports", "max-size", {"max_size": 3}, "Set max size"),
        ("imports", "gc", {}, "Run gc now"),
    ],
)
def test_an_action_while_redis_is_down_reports_an_error_and_redirects(
    settings: Any,
    operator: Client,
    name: str,
    action: str,
    params: dict[str, Any],
    label: str,
) -> None:
    settings.DJANGO_REDIS_POOL = down_setting(retries=False)
    kind = {"printers": "pool", "reports": "semaphore", "imports": "lock"}[name]

    response = operator.post(action_url(name, action), params, follow=True)

    assert response.redirect_chain == [(detail_url(name), 302)]
    assert response.status_code == 503  # the detail page cannot read Redis either
    [(level, message)] = messages_of(response)
    assert level == "error"
    assert message.startswith(f"{label} on {kind} {name!r} failed: ")
    assert f"127.0.0.1:{DOWN_PORT}" in message


def test_the_detail_page_of_an_unreachable_redis_cluster_is_a_503(
    settings: Any, viewer: Client
) -> None:
    # A Redis Cluster client contacts the cluster when it is built.
    settings.DJANGO_REDIS_POOL = {
        "CONNECTION": {"URL": f"redis://127.0.0.1:{DOWN_PORT}/0", "CLUSTER": True},
        "POOLS": {"printers": {}},
    }

    response = viewer.get(detail_url("printers"))

    assert response.status_code == 503
    assert page_text(response).count("Redis could not be") == 1


def test_an_action_while_a_redis_cluster_is_unreachable_reports_an_error(
    settings: Any, operator: Client
) -> None:
    settings.DJANGO_REDIS_POOL = {
        "CONNECTION": {"URL": f"redis://127.0.0.1:{DOWN_PORT}/0", "CLUSTER": True},
        "POOLS": {"printers": {}},
    }

    try:
        response = operator.post(action_url("printers", "gc"))
    except BackendUnavailable as exc:
        pytest.fail(f"the action raised instead of reporting: {exc!r}")

    assert response.status_code == 302
    assert response.url == detail_url("printers")


def test_the_dashboard_of_an_unreachable_redis_cluster_shows_errors(
    settings: Any, viewer: Client
) -> None:
    settings.DJANGO_REDIS_POOL = {
        "CONNECTION": {"URL": f"redis://:s3cret@127.0.0.1:{DOWN_PORT}/0", "CLUSTER": True},
        "POOLS": {"printers": {}},
    }

    response = viewer.get(dashboard_url())

    assert response.status_code == 200
    assert health_icons(response) == {"printers": "Error"}
    assert 'class="errornote"' in response.content.decode()
    assert "s3cret" not in response.content.decode()
    assert f"Redis Cluster redis://:{MASK}@127.0.0.1:{DOWN_PORT}/0" in page_text(response)


def test_the_max_size_form_opens_empty_with_a_warning_while_redis_is_down(
    settings: Any, operator: Client
) -> None:
    settings.DJANGO_REDIS_POOL = down_setting(retries=False)

    response = operator.get(action_url("reports", "max-size"))

    assert response.status_code == 200
    assert response.context["question"] is None
    assert form_inputs(response, "action-form") == {"max_size": ""}
    [(level, message)] = messages_of(response)
    assert level == "warning" and message.startswith("The current values could not be read: ")
    assert f"127.0.0.1:{DOWN_PORT}" in message
    assert "s3cret" not in response.content.decode()
