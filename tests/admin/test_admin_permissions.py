"""Who may see and do what in the admin dashboard: each page and action lets
in exactly the users with its permission, a detail page offers the actions of
its kind only with the change permission, the admin index lists the dashboard
for those who may view it, and an action's POST needs its CSRF token.

Through Django's test client, against the harness's real Redis (the setting,
the users and the fixtures: :mod:`tests.support.admin_fixtures`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from django.test import Client
from django.urls import reverse

from tests.support.admin_fixtures import (
    PERMS_OF,
    USERS,
    World,
    action_url,
    dashboard_url,
    detail_url,
)
from tests.support.admin_pages import form_inputs, page_text

pytestmark = pytest.mark.django_db


@dataclass(frozen=True)
class Page:
    """One page of the dashboard, and what it needs to do its job."""

    view: str  #: "dashboard", "detail" or "action"
    name: str = ""
    action: str = ""
    method: str = "get"
    params: Callable[[World], dict[str, Any]] = lambda world: {}

    def __str__(self) -> str:
        if self.view == "dashboard":
            return "dashboard"
        if self.view == "detail":
            return f"detail-{self.name}"
        return f"{self.method}-{self.action}-{self.name}"

    def url(self) -> str:
        if self.view == "dashboard":
            return dashboard_url()
        if self.view == "detail":
            return detail_url(self.name)
        return action_url(self.name, self.action)


#: Every action of every kind, with parameters that make it do something.
ACTIONS: list[tuple[str, str, Callable[[World], dict[str, Any]]]] = [
    (
        "printers",
        "release",
        lambda w: {"resource": w.pool_lease.resource, "fence": w.pool_lease.fence},
    ),
    ("reports", "release", lambda w: {"resource": "job-1", "fence": w.semaphore_lease.fence}),
    ("imports", "release", lambda w: {"resource": "importer", "fence": w.lock_lease.fence}),
    ("printers", "remove", lambda w: {"resource": w.pool.available()[0]}),
    ("printers", "add", lambda w: {"resource": "p9"}),
    ("reports", "max-size", lambda w: {"max_size": 5}),
    ("printers", "gc", lambda w: {}),
    ("reports", "gc", lambda w: {}),
    ("imports", "gc", lambda w: {}),
]


PAGES = [
    Page("dashboard"),
    *(Page("detail", name) for name in ("printers", "reports", "imports")),
    *(
        Page("action", name, action, method, params)
        for name, action, params in ACTIONS
        for method in ("get", "post")
    ),
]


def outcome(user: str, page: Page) -> str:
    """What ``user`` gets on ``page``: "login", "forbidden" or "ok"."""
    if user in ("anonymous", "non_staff", "inactive_staff"):
        return "login"
    needs = "change_dashboard" if page.view == "action" else "view_dashboard"
    if user == "superuser" or needs in PERMS_OF[user] or "change_dashboard" in PERMS_OF[user]:
        return "ok"
    return "forbidden"


@pytest.mark.parametrize("page", PAGES, ids=str)
@pytest.mark.parametrize("user", USERS)
def test_each_page_lets_in_exactly_the_users_with_its_permission(
    world: World, login: Callable[..., Client], user: str, page: Page
) -> None:
    client = login(user)
    before = world.state()
    send = client.post if page.method == "post" else client.get
    response = send(page.url(), page.params(world))

    expected = outcome(user, page)
    if expected == "login":
        assert response.status_code == 302
        login_url = urlsplit(response.url)
        assert login_url.path == reverse("admin:login")
        assert parse_qs(login_url.query)["next"] == [response.wsgi_request.get_full_path()]
        assert response.wsgi_request.path == page.url()
    elif expected == "forbidden":
        assert response.status_code == 403
    elif page.method == "post":
        assert response.status_code == 302
        assert response.url == detail_url(page.name)
    else:
        assert response.status_code == 200
    if expected != "ok" or page.method == "get":
        assert world.state() == before, "a refused or read-only request changed Redis"


@pytest.mark.parametrize("name", ["printers", "reports", "imports"])
def test_the_detail_page_offers_no_action_without_the_change_permission(
    world: World, viewer: Client, name: str
) -> None:
    response = viewer.get(detail_url(name))

    assert response.status_code == 200
    content = response.content.decode()
    assert "/actions/" not in content
    assert 'class="object-tools"' not in content
    assert "Force-release" not in content
    assert "Actions" not in page_text(response)


@pytest.mark.parametrize(
    ("name", "page_actions", "row_actions"),
    [
        ("printers", ["add", "gc"], ["release", "remove"]),
        ("reports", ["max-size", "gc"], ["release"]),
        ("imports", ["gc"], ["release"]),
    ],
)
def test_the_detail_page_offers_each_action_of_its_kind_with_the_change_permission(
    world: World, operator: Client, name: str, page_actions: list[str], row_actions: list[str]
) -> None:
    content = operator.get(detail_url(name)).content.decode()

    assert re.findall(r'data-action="([^"]+)"', content) == page_actions
    linked = set(re.findall(rf'href="{re.escape(detail_url(name))}actions/([\w-]+)/', content))
    assert linked == {*page_actions, *row_actions}


def test_the_admin_index_lists_the_dashboard_for_users_who_may_view_it(
    configured: None, login: Callable[..., Client]
) -> None:
    index = reverse("admin:index")
    for user in ("staff_view", "staff_change", "superuser"):
        response = login(user).get(index)
        assert response.status_code == 200
        assert "Redis pools" in page_text(response)
        assert f'href="{dashboard_url()}"' in response.content.decode()

    response = login("staff_no_perms").get(index)
    assert "Redis pools" not in page_text(response)
    assert dashboard_url() not in response.content.decode()


# ====================================================================== CSRF


def test_an_action_post_without_the_csrf_token_is_refused(
    world: World, login: Callable[..., Client]
) -> None:
    client = login("staff_change", enforce_csrf_checks=True)
    url = action_url("printers", "release")
    lease = world.pool_lease
    params = {"resource": lease.resource, "fence": lease.fence}
    assert client.get(url, params).status_code == 200  # sets the CSRF cookie

    response = client.post(url, params)

    assert response.status_code == 403
    assert world.pool.is_occupied(lease.resource)
    assert lease.renew()


def test_an_action_post_with_the_token_of_the_confirmation_page_runs(
    world: World, login: Callable[..., Client]
) -> None:
    client = login("staff_change", enforce_csrf_checks=True)
    lease = world.pool_lease
    url = action_url("printers", "release")
    page = client.get(url, {"resource": lease.resource, "fence": lease.fence})
    data = form_inputs(page, "confirm-form")
    assert data["csrfmiddlewaretoken"]

    response = client.post(url, data)

    assert response.status_code == 302
    assert response.url == detail_url("printers")
    assert world.pool.is_available(lease.resource)
