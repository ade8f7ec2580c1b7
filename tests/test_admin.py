"""The admin dashboard (``django_redis_pool.admin``) through Django's test client,
against the harness's real Redis: who may see and do what, CSRF, every action
end to end, what the pages show, masked connection details, Redis being down,
pagination of a 100,000-resource pool (and what a page costs Redis), and the
extension point of :mod:`django_redis_pool.dashboard`.
"""

from __future__ import annotations

import html
import logging
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit
from zoneinfo import ZoneInfo

import pytest
import redis
from django import forms
from django.contrib.admin.utils import quote
from django.contrib.auth.models import Permission
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from django_redis_pool import Lease, get_lock, get_pool, get_semaphore
from django_redis_pool import dashboard as panels
from django_redis_pool.admin import connection_label
from django_redis_pool.conf.masking import MASK, masked_url
from django_redis_pool.dashboard import charts
from django_redis_pool.dashboard.tables import PAGE_SIZE
from django_redis_pool.exceptions import BackendUnavailable, NotOwned
from django_redis_pool.primitives.lock import Lock
from django_redis_pool.primitives.pool import ResourcePool
from django_redis_pool.primitives.semaphore import Semaphore
from django_redis_pool.primitives.validators import MAX_SECONDS
from django_redis_pool.registry import get_resource
from django_redis_pool.signals import lease_lost, lease_reclaimed

from .admin_helpers import (
    commands_run_by,
    confirm,
    dashboard_row,
    data_rows,
    fill_pool,
    form_inputs,
    has_module,
    messages_of,
    module,
    page_text,
    pager,
    redis_state,
    script_calls,
    table,
    text_of,
)
from .waiting import wait_for

pytestmark = pytest.mark.django_db

#: A port nothing listens on (privileged, never bound by the test run).
DOWN_PORT = 1
#: What the pages show for a count that does not apply, around page links, on
#: the confirming button.
NA = "\N{EN DASH}"
PREV = "\N{SINGLE LEFT-POINTING ANGLE QUOTATION MARK} previous"
NEXT = "next \N{SINGLE RIGHT-POINTING ANGLE QUOTATION MARK}"
SURE = "Yes, I\N{RIGHT SINGLE QUOTATION MARK}m sure"


# ====================================================================== fixtures


def lease_setting(url: str) -> dict[str, Any]:
    """Two pools, two semaphores, two locks (the empty/unsized/plain ones stay
    untouched unless a test uses them)."""
    return {
        "CONNECTION": {"URL": url},
        "POOLS": {
            "printers": {"RESOURCES": ["p1", "p2", "p3"], "LEASE_TIMEOUT": 30},
            "empty": {"LEASE_TIMEOUT": 30},
        },
        "SEMAPHORES": {
            "reports": {"MAX_SIZE": 2, "LEASE_TIMEOUT": 30},
            "unsized": {"LEASE_TIMEOUT": 30},
        },
        "LOCKS": {
            "imports": {"LEASE_TIMEOUT": 30, "REENTRANT": True},
            "plain": {"LEASE_TIMEOUT": None},
        },
    }


@dataclass
class World:
    """The configured primitives, each with one live hold (the extra ones free)."""

    redis: redis.Redis
    pool: ResourcePool
    semaphore: Semaphore
    lock: Lock
    pool_lease: Lease  #: of "worker-1" on pool "printers"
    semaphore_lease: Lease  #: of identity "job-1" on semaphore "reports"
    lock_lease: Lease  #: of holder "importer" on (reentrant) lock "imports"

    def state(self) -> dict[bytes, Any]:
        return redis_state(self.redis)


@pytest.fixture
def configured(settings: Any, redis_url: str) -> None:
    settings.DJANGO_REDIS_POOL = lease_setting(redis_url)
    call_command("pool_sync", verbosity=0)


@pytest.fixture
def world(configured: None, redis_client: redis.Redis) -> World:
    pool = get_pool("printers")
    semaphore = get_semaphore("reports")
    lock = get_lock("imports")
    pool_lease = pool.acquire(holder="worker-1")
    semaphore_lease = semaphore.acquire_lease("job-1")
    assert lock.acquire(holder="importer", blocking=False)
    assert pool_lease is not None and semaphore_lease is not None and lock.lease is not None
    return World(redis_client, pool, semaphore, lock, pool_lease, semaphore_lease, lock.lease)


def permission(codename: str) -> Permission:
    return Permission.objects.get(codename=codename, content_type__app_label="django_redis_pool")


#: Users of the permission matrix; the first three never get past the login page.
USERS = (
    "anonymous",
    "non_staff",
    "inactive_staff",
    "staff_no_perms",
    "staff_view",
    "staff_change",
    "superuser",
)
PERMS_OF = {
    "non_staff": ("view_dashboard", "change_dashboard"),
    "inactive_staff": ("view_dashboard", "change_dashboard"),
    "staff_no_perms": (),
    "staff_view": ("view_dashboard",),
    "staff_change": ("change_dashboard",),  # change implies view
}


@pytest.fixture
def login(django_user_model: Any) -> Callable[..., Client]:
    """``login(kind, **client_options)``: a Client logged in as a new user of that kind."""

    def make(kind: str, **options: Any) -> Client:
        client = Client(**options)
        if kind == "anonymous":
            return client
        if kind == "superuser":
            user = django_user_model.objects.create_superuser(kind, f"{kind}@example.com", None)
        else:
            user = django_user_model.objects.create_user(
                kind,
                f"{kind}@example.com",
                None,  # unusable: no slow hashing, and force_login needs none
                is_staff=kind != "non_staff",
                is_active=kind != "inactive_staff",
            )
            user.user_permissions.add(*(permission(code) for code in PERMS_OF[kind]))
        client.force_login(user)
        return client

    return make


@pytest.fixture
def operator(login: Callable[..., Client]) -> Client:
    """A staff user with only the change permission."""
    return login("staff_change")


@pytest.fixture
def viewer(login: Callable[..., Client]) -> Client:
    """A staff user with only the view permission."""
    return login("staff_view")


def dashboard_url() -> str:
    return reverse("admin:django_redis_pool_dashboard")


def detail_url(name: str) -> str:
    return reverse("admin:django_redis_pool_primitive", args=[quote(name)])


def action_url(name: str, action: str) -> str:
    return reverse("admin:django_redis_pool_action", args=[quote(name), action])


def expire(lease: Lease, still_held: Callable[[], bool]) -> None:
    """Make ``lease`` expire now without reclaiming it: renewing it to 50 ms
    touches only that lease (an acquire would reclaim expired holds)."""
    assert lease.renew(0.05)
    wait_for(lambda: not still_held(), what=f"the hold on {lease.resource!r} to expire")


@pytest.fixture
def waiter() -> Iterator[Callable[..., dict[str, Any]]]:
    """``waiter(acquire)`` runs the blocking ``acquire()`` in a thread; returns a
    dict that gets its result under "lease". The test must let it finish."""
    threads: list[threading.Thread] = []

    def start(acquire: Callable[[], Any]) -> dict[str, Any]:
        result: dict[str, Any] = {}

        def body() -> None:
            try:
                result["lease"] = acquire()
            except BaseException as exc:  # reported by the test
                result["error"] = exc

        thread = threading.Thread(target=body, daemon=True)
        thread.start()
        threads.append(thread)
        return result

    yield start
    for thread in threads:
        thread.join(timeout=10)
        assert not thread.is_alive(), "a waiter thread is still blocked"


@pytest.fixture
def utc(settings: Any) -> None:
    """The project's time zone is UTC (then any reading of "shown in UTC" agrees)."""
    settings.TIME_ZONE = "UTC"


def seconds_left(cell: str) -> float:
    found = re.fullmatch(r"(\d+\.\d) s", cell)
    assert found is not None, cell
    return float(found.group(1))


@pytest.fixture
def registries() -> Iterator[None]:
    """Lets a test register panels: the registries are restored afterwards."""
    summaries = dict(panels.SUMMARIES)
    sections = {kind: list(value) for kind, value in panels.SECTIONS.items()}
    actions = {kind: dict(value) for kind, value in panels.ACTIONS.items()}
    yield
    panels.SUMMARIES.clear()
    panels.SUMMARIES.update(summaries)
    panels.SECTIONS.clear()
    panels.SECTIONS.update(sections)
    panels.ACTIONS.clear()
    panels.ACTIONS.update(actions)


@pytest.fixture
def extra_templates(settings: Any, tmp_path: Path) -> Path:
    """A template directory added to the project's (holds ``drp_test/*.html``)."""
    directory = tmp_path / "templates"
    (directory / "drp_test").mkdir(parents=True)
    settings.TEMPLATES = [{**settings.TEMPLATES[0], "DIRS": [str(directory)]}]
    return directory


# ====================================================================== permissions


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


# ====================================================================== actions


def test_a_confirmation_page_with_a_stray_query_string_still_asks(
    world: World, operator: Client
) -> None:
    """A link shared with tracking parameters (utm_source...) once made the
    page of a form without fields a 500."""
    before = world.state()
    response = operator.get(action_url("printers", "gc"), {"utm_source": "mail"})
    assert response.status_code == 200
    assert response.context["question"].startswith("Reclaim the expired holds")
    assert world.state() == before


def test_the_confirmation_page_asks_before_anything_changes(world: World, operator: Client) -> None:
    lease = world.pool_lease
    before = world.state()

    response = operator.get(
        action_url("printers", "release"), {"resource": lease.resource, "fence": lease.fence}
    )

    assert response.status_code == 200
    assert response.context["question"] == (
        f"Force-release the hold on {lease.resource!r} (fence {lease.fence}) of pool 'printers'? "
        "Its holder is not told until its next renewal or release."
    )
    assert response.context["question"] in page_text(response)
    assert f'value="{SURE}"' in response.content.decode()
    fields = form_inputs(response, "confirm-form")
    assert fields["resource"] == lease.resource
    assert fields["fence"] == str(lease.fence)
    assert 'type="hidden" name="resource"' in response.content.decode()
    assert world.state() == before


def test_row_links_work_for_names_and_resources_with_url_characters(
    settings: Any, redis_url: str, operator: Client
) -> None:
    odd = ["a%2Fb", "x&y", "q?z=1#f", "caf\N{LATIN SMALL LETTER E WITH ACUTE}"]
    settings.DJANGO_REDIS_POOL = {
        "CONNECTION": {"URL": redis_url},
        "POOLS": {"team/printers": {"RESOURCES": odd}},
    }
    call_command("pool_sync", verbosity=0)
    pool = get_pool("team/printers")
    lease = pool.acquire(holder="h&h")
    assert lease is not None
    page = operator.get(detail_url("team/printers"))
    assert page.status_code == 200
    assert detail_url("team/printers") in operator.get(dashboard_url()).content.decode()
    links = [
        html.unescape(href)
        for href in re.findall(
            r'href="([^"]*/actions/(?:remove|release)/[^"]*)"', page.content.decode()
        )
    ]
    assert len(links) == len(odd) + 1  # a Remove per resource, a Force-release per hold

    for link in links:
        response = operator.get(link)
        assert response.context["question"], link
        done = operator.post(
            link.partition("?")[0], form_inputs(response, "confirm-form"), follow=True
        )
        assert messages_of(done)[0][0] == "success", (link, messages_of(done))

    assert pool.total_count() == 0
    assert lease.renew() is False


def test_an_action_without_its_parameters_shows_an_editable_form(
    world: World, operator: Client
) -> None:
    response = operator.get(action_url("printers", "release"))

    assert response.status_code == 200
    assert response.context["question"] is None
    assert not response.context["form"].errors  # not submitted yet: nothing to correct
    fields = form_inputs(response, "action-form")
    assert set(fields) == {"resource", "fence"}
    assert 'value="Continue"' in response.content.decode()
    assert 'id="confirm-form"' not in response.content.decode()


def test_an_action_without_parameters_asks_at_once(world: World, operator: Client) -> None:
    response = operator.get(action_url("reports", "gc"))

    assert response.status_code == 200
    assert response.context["question"] == (
        "Reclaim the expired holds and drop the dead waiters of semaphore 'reports' now?"
    )
    assert set(form_inputs(response, "confirm-form")) == {"csrfmiddlewaretoken"}


def test_force_release_of_a_pool_hold_frees_the_resource_and_loses_the_lease(
    world: World, operator: Client
) -> None:
    lease = world.pool_lease

    response = confirm(
        operator,
        action_url("printers", "release"),
        {"resource": lease.resource, "fence": lease.fence},
    )

    assert response.redirect_chain == [(detail_url("printers"), 302)]
    assert messages_of(response) == [
        ("success", f"Released the hold on {lease.resource!r} (fence {lease.fence}).")
    ]
    assert world.pool.is_available(lease.resource)
    assert lease.resource in data_rows(response, "available")
    assert data_rows(response, "holders") == []
    lost: list[dict[str, Any]] = []

    def receiver(sender: Any, **kwargs: Any) -> None:
        lost.append(kwargs)

    lease_lost.connect(receiver)
    try:
        assert lease.renew() is False  # the holder finds out at its next renewal
    finally:
        lease_lost.disconnect(receiver)
    assert lease.lost
    assert [(event["name"], event["lease"]) for event in lost] == [("printers", lease)]


def test_a_force_released_resource_goes_to_the_first_waiter(
    world: World, operator: Client, waiter: Callable[..., dict[str, Any]]
) -> None:
    pool, lease = world.pool, world.pool_lease
    rest = [pool.acquire(holder="worker-2"), pool.acquire(holder="worker-3")]
    queued = waiter(lambda: pool.acquire(timeout=5, holder="waiter"))
    wait_for(lambda: pool.waiting_count() == 1, what="the waiter to queue")

    response = confirm(
        operator,
        action_url("printers", "release"),
        {"resource": lease.resource, "fence": lease.fence},
    )

    wait_for(lambda: "lease" in queued or "error" in queued, what="the waiter to be served")
    assert messages_of(response) == [
        ("success", f"Released the hold on {lease.resource!r} (fence {lease.fence}).")
    ]
    granted = queued.get("lease")
    assert granted is not None and granted.resource == lease.resource
    assert granted.fence > lease.fence
    assert granted.release()
    assert all(other is not None and other.release() for other in rest)


def test_force_release_of_a_semaphore_slot_frees_it(world: World, operator: Client) -> None:
    lease = world.semaphore_lease

    response = confirm(
        operator, action_url("reports", "release"), {"resource": "job-1", "fence": lease.fence}
    )

    assert messages_of(response) == [
        ("success", f"Released the hold on 'job-1' (fence {lease.fence}).")
    ]
    assert not world.semaphore.is_holding("job-1")
    assert world.semaphore.get_current_size() == 0
    assert lease.renew() is False
    assert lease.lost


@pytest.mark.parametrize("acquisitions", [1, 2], ids=["held-once", "reentrant-held-twice"])
def test_force_release_of_a_lock_frees_it_entirely(
    world: World, operator: Client, acquisitions: int
) -> None:
    lock, lease = world.lock, world.lock_lease
    for _ in range(acquisitions - 1):
        assert lock.acquire(holder="importer", blocking=False)  # reentrant: the same hold
    assert [[row[0], row[2]] for row in table(operator.get(detail_url("imports")), "holders")] == [
        ["importer", str(lease.fence)]
    ]

    response = confirm(
        operator, action_url("imports", "release"), {"resource": "importer", "fence": lease.fence}
    )

    assert messages_of(response) == [
        ("success", f"Released the hold on 'importer' (fence {lease.fence}).")
    ]
    assert not lock.locked()
    with pytest.raises(NotOwned):
        lock.release(holder="importer")
    assert lock.for_holder("someone-else").acquire(blocking=False)


def regranted(world: World, kind: str) -> tuple[str, str, Lease, Lease | None]:
    """(primitive name, resource, the hold an operator saw, the hold granted
    since to the same resource, with a new fence)."""
    if kind == "pool":
        pool, old = world.pool, world.pool_lease
        for resource in pool.available():  # leave only the held resource in the pool
            assert pool.disassociate(resource)
        assert old.release()
        return "printers", old.resource, old, pool.acquire(holder="worker-2")
    if kind == "semaphore":
        old = world.semaphore_lease
        assert old.release()
        return "reports", "job-1", old, world.semaphore.acquire_lease("job-1")
    lock, old = world.lock, world.lock_lease
    lock.release(holder="importer")
    assert lock.acquire(holder="importer", blocking=False)
    return "imports", "importer", old, lock.lease


@pytest.mark.parametrize("kind", ["pool", "semaphore", "lock"])
def test_force_release_with_a_stale_fence_warns_and_spares_the_new_holder(
    world: World, operator: Client, kind: str
) -> None:
    name, resource, old, new = regranted(world, kind)
    assert new is not None and new.resource == resource and new.fence > old.fence
    before = world.state()

    response = confirm(
        operator, action_url(name, "release"), {"resource": resource, "fence": old.fence}
    )

    assert response.redirect_chain == [(detail_url(name), 302)]
    assert messages_of(response) == [
        (
            "warning",
            f"Nothing released: {resource!r} no longer has a hold with fence {old.fence} "
            "(it was released, expired or granted again).",
        )
    ]
    assert world.state() == before
    assert new.renew()


def test_each_action_is_logged_with_the_user_and_its_parameters(
    world: World, operator: Client, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="django_redis_pool"):
        confirm(operator, action_url("printers", "add"), {"resource": "p9"})
        confirm(operator, action_url("reports", "max-size"), {"max_size": 4})

    logged = [
        record.getMessage()
        for record in caplog.records
        if record.name == "django_redis_pool" and record.levelno == logging.WARNING
    ]
    assert logged == [
        "admin: staff_change ran 'add' on pool 'printers' with {'resource': 'p9'}",
        "admin: staff_change ran 'max-size' on semaphore 'reports' with {'max_size': 4}",
    ]


def test_adding_a_resource_makes_it_available(world: World, operator: Client) -> None:
    response = confirm(operator, action_url("printers", "add"), {"resource": "p9"})

    assert response.redirect_chain == [(detail_url("printers"), 302)]
    assert messages_of(response) == [("success", "Added 'p9' to pool 'printers'.")]
    assert world.pool.is_available("p9")
    assert "p9" in data_rows(response, "available")


@pytest.mark.parametrize("which", ["available", "held"])
def test_adding_a_resource_already_in_the_pool_warns(
    world: World, operator: Client, which: str
) -> None:
    resource = world.pool.available()[0] if which == "available" else world.pool_lease.resource
    before = world.state()

    response = confirm(operator, action_url("printers", "add"), {"resource": resource})

    assert messages_of(response) == [("warning", f"{resource!r} is already in pool 'printers'.")]
    assert world.state() == before


def test_add_page_is_an_editable_form_until_a_resource_is_given(
    world: World, operator: Client
) -> None:
    response = operator.get(action_url("printers", "add"))

    assert response.context["question"] is None
    assert set(form_inputs(response, "action-form")) == {"resource"}
    assert "Up to 200 characters, without braces or whitespace." in page_text(response)


def test_removing_an_available_resource_takes_it_out_of_the_pool(
    world: World, operator: Client
) -> None:
    resource = world.pool.available()[0]

    response = confirm(operator, action_url("printers", "remove"), {"resource": resource})

    assert messages_of(response) == [("success", f"Removed {resource!r} from pool 'printers'.")]
    assert not world.pool.has(resource)
    assert resource not in data_rows(response, "available")
    assert world.pool.total_count() == 2


def test_removing_a_held_resource_means_it_is_never_handed_out_again(
    world: World, operator: Client
) -> None:
    lease = world.pool_lease
    others = world.pool.available()

    response = confirm(operator, action_url("printers", "remove"), {"resource": lease.resource})

    assert messages_of(response) == [
        ("success", f"Removed {lease.resource!r} from pool 'printers'.")
    ]
    assert lease.release() is False  # the holder's release does not bring it back
    assert not world.pool.has(lease.resource)
    taken = [world.pool.acquire(holder="greedy") for _ in range(3)]
    assert [t.resource if t else None for t in taken] == [*others, None]
    assert world.pool.total_count() == 2


def test_removing_a_held_resource_ends_the_hold_and_says_so_first(
    world: World, operator: Client
) -> None:
    lease = world.pool_lease
    url = action_url("printers", "remove")
    question = operator.get(url, {"resource": lease.resource}).context["question"]
    assert "the hold ends now and its holder finds its lease lost" in question

    response = confirm(operator, url, {"resource": lease.resource})

    assert lease.resource not in data_rows(response, "holders")
    assert lease.renew() is False and lease.lost


def test_removing_a_resource_not_in_the_pool_warns(world: World, operator: Client) -> None:
    before = world.state()

    response = confirm(operator, action_url("printers", "remove"), {"resource": "p404"})

    assert messages_of(response) == [("warning", "'p404' is not in pool 'printers'.")]
    assert world.state() == before


INVALID_RESOURCES = ["{p1}", "bad name", "tab\tbed", "x" * 201, ""]


@pytest.mark.parametrize("resource", INVALID_RESOURCES, ids=repr)
@pytest.mark.parametrize("action", ["add", "remove"])
def test_an_invalid_resource_is_a_form_error_and_changes_nothing(
    world: World, operator: Client, action: str, resource: str
) -> None:
    url = action_url("printers", action)
    before = world.state()

    asked = operator.get(url, {"resource": resource})
    posted = operator.post(url, {"resource": resource})

    for response in (asked, posted):
        assert response.status_code == 200
        assert response.context["question"] is None
        assert response.context["form"].errors["resource"]
        assert "Please correct the error below." in page_text(response)
        assert 'id="action-form"' in response.content.decode()
        assert list(response.context["messages"]) == []
    assert world.state() == before


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"resource": "p1", "fence": "abc"}, "fence"),
        ({"resource": "p1", "fence": "-1"}, "fence"),
        ({"resource": "p1"}, "fence"),
        ({"fence": "3"}, "resource"),
    ],
)
def test_force_release_with_invalid_parameters_is_a_form_error(
    world: World, operator: Client, params: dict[str, str], field: str
) -> None:
    url = action_url("printers", "release")
    before = world.state()

    for response in (operator.get(url, params), operator.post(url, params)):
        assert response.status_code == 200
        assert response.context["question"] is None
        assert list(response.context["form"].errors) == [field]
    assert world.state() == before


def test_setting_the_max_size_of_a_semaphore_stores_it(world: World, operator: Client) -> None:
    asked = operator.get(action_url("reports", "max-size"), {"max_size": 5})
    assert asked.context["question"] == "Set the max size of semaphore 'reports' to 5?"

    response = confirm(operator, action_url("reports", "max-size"), {"max_size": 5})

    assert response.redirect_chain == [(detail_url("reports"), 302)]
    assert messages_of(response) == [("success", "The max size of semaphore 'reports' is now 5.")]
    assert world.semaphore.get_max_size() == 5
    assert "size 5" in page_text(response)


def test_lowering_the_max_size_below_the_holders_evicts_nobody(
    world: World, operator: Client
) -> None:
    response = confirm(operator, action_url("reports", "max-size"), {"max_size": 0})

    assert messages_of(response) == [("success", "The max size of semaphore 'reports' is now 0.")]
    assert world.semaphore.get_max_size() == 0
    assert world.semaphore.is_holding("job-1")
    assert world.semaphore_lease.renew()
    assert not world.semaphore.acquire("job-2")


@pytest.mark.parametrize("max_size", ["-1", "abc", "1.5", "", str(2**52 + 1)], ids=repr)
def test_an_invalid_max_size_is_a_form_error_and_changes_nothing(
    world: World, operator: Client, max_size: str
) -> None:
    url = action_url("reports", "max-size")
    before = world.state()

    for response in (
        operator.get(url, {"max_size": max_size}),
        operator.post(url, {"max_size": max_size}),
    ):
        assert response.status_code == 200
        assert response.context["question"] is None
        assert response.context["form"].errors["max_size"]
    assert world.state() == before
    assert world.semaphore.get_max_size() == 2


def expired_hold(world: World, kind: str) -> tuple[str, Lease]:
    """An expired, not yet reclaimed hold of "crashed" on a primitive of ``kind``."""
    if kind == "pool":
        lease = world.pool.acquire(holder="crashed")
        assert lease is not None
        expire(lease, lambda: world.pool.is_occupied(lease.resource))
        return "printers", lease
    if kind == "semaphore":
        lease = world.semaphore.acquire_lease("crashed")
        assert lease is not None
        expire(lease, lambda: world.semaphore.is_holding("crashed"))
        return "reports", lease
    lock = get_lock("plain")
    assert lock.acquire(holder="crashed", blocking=False)
    assert lock.lease is not None
    lease = lock.lease
    expire(lease, lambda: lock.owned(holder="crashed"))
    return "plain", lease


@pytest.mark.parametrize("kind", ["pool", "semaphore", "lock"])
def test_run_gc_reclaims_the_expired_hold_and_says_so(
    world: World, operator: Client, kind: str
) -> None:
    name, lease = expired_hold(world, kind)
    reclaimed: list[dict[str, Any]] = []

    def receiver(sender: Any, **kwargs: Any) -> None:
        reclaimed.append({"sender": sender, **kwargs})

    lease_reclaimed.connect(receiver)
    try:
        response = confirm(operator, action_url(name, "gc"))
    finally:
        lease_reclaimed.disconnect(receiver)

    assert response.redirect_chain == [(detail_url(name), 302)]
    assert messages_of(response) == [
        ("success", f"gc of {kind} {name!r}: reclaimed 1 expired hold(s), dropped 0 waiter(s).")
    ]
    assert [(r["name"], r["lease"].resource, r["lease"].fence) for r in reclaimed] == [
        (name, lease.resource, lease.fence)
    ]
    assert reclaimed[0]["sender"] is type(get_resource(name))
    assert get_resource(name).snapshot(limit=0).expired_count == 0
    # the live holds are untouched
    assert world.pool_lease.renew() and world.semaphore_lease.renew() and world.lock_lease.renew()


def test_run_gc_with_nothing_expired_reclaims_nothing(world: World, operator: Client) -> None:
    before = world.state()

    response = confirm(operator, action_url("imports", "gc"))

    assert messages_of(response) == [
        ("success", "gc of lock 'imports': reclaimed 0 expired hold(s), dropped 0 waiter(s).")
    ]
    assert world.state() == before


@pytest.mark.parametrize("method", ["get", "post"])
@pytest.mark.parametrize(
    "url",
    [
        lambda: detail_url("nope"),
        lambda: action_url("nope", "gc"),
        lambda: action_url("printers", "nope"),
        lambda: action_url("printers", "max-size"),
        lambda: action_url("reports", "add"),
        lambda: action_url("reports", "remove"),
        lambda: action_url("imports", "add"),
        lambda: action_url("imports", "max-size"),
    ],
    ids=[
        "detail-of-unknown",
        "action-of-unknown",
        "unknown-action",
        "max-size-of-pool",
        "add-of-semaphore",
        "remove-of-semaphore",
        "add-of-lock",
        "max-size-of-lock",
    ],
)
def test_an_unknown_primitive_or_action_is_not_found(
    world: World, operator: Client, url: Callable[[], str], method: str
) -> None:
    before = world.state()
    response = getattr(operator, method)(url(), {"resource": "p9", "max_size": 7})

    assert response.status_code == 404
    assert world.state() == before


# ====================================================================== dashboard contents


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


def health_icons(response: Any) -> dict[str, str]:
    """Primitive name -> the alt text of its health icon."""
    return dict(
        re.findall(
            r'<tr class="drp-row" data-name="([^"]+)">.*?'
            r'<td class="drp-health">\s*<img [^>]*alt="(\w+)"',
            response.content.decode(),
            re.S,
        )
    )


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
    assert [row[:2] for row in rows] == [["waiter-7", "7"], ["waiter-1", "1"]]
    for _holder, _priority, since, waited, gives_up_at in rows:
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
    identity, holder, request, fence, permits, held_since, left = row
    assert (identity, holder, request, fence) == ("job-1", "job-1", NA, str(lease.fence))
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
    assert "1 expired hold(s) will be reclaimed by the next acquire or gc." in page_text(detail)


def test_empty_tables_say_so(configured: None, viewer: Client) -> None:
    response = viewer.get(detail_url("empty"))

    assert table(response, "available") == [["Nothing is available."]]
    assert table(response, "holders") == [["Nothing is held."]]
    assert table(response, "waiters") == [["Nobody is waiting."]]
    assert pager(response, "available") is None


# ====================================================================== connection details


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


# ====================================================================== pagination, find, cost


def ids(count: int) -> list[str]:
    return [f"r{index:06d}" for index in range(count)]


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


# ====================================================================== extension point


class NoteForm(forms.Form):
    note = forms.SlugField(max_length=20)


def test_a_registered_section_and_action_appear_and_run_through_the_confirmation(
    world: World,
    operator: Client,
    login: Callable[..., Client],
    registries: None,
    extra_templates: Path,
) -> None:
    (extra_templates / "drp_test" / "notes.html").write_text(
        '<div class="module" id="notes"><h2>{{ section_title }}</h2>'
        "<p>{{ primitive.name }} has {{ total }} resources; notes: {{ notes|join:',' }}</p>"
        "{% if can_change %}<a href=\"{% url 'admin:django_redis_pool_action' primitive.name "
        "'note' %}?note=hello\">Note</a>{% endif %}</div>"
    )
    notes: list[tuple[str, str]] = []

    @panels.section("pool", title="Notes", template="drp_test/notes.html")
    def notes_section(pool: ResourcePool, request: Any) -> dict[str, Any]:
        return {
            "section_title": "Notes",
            "total": pool.total_count(),
            "notes": [n for _, n in notes],
        }

    @panels.action(
        "pool",
        "note",
        label="Add a note",
        form=NoteForm,
        question="Note {note!r} on {primitive.name}?",
    )
    def add_note(pool: ResourcePool, data: dict[str, Any]) -> str:
        if data["note"] in [note for _, note in notes]:
            raise panels.ActionFailed(f"{data['note']!r} is noted already.")
        notes.append((pool.name, data["note"]))
        return f"Noted {data['note']!r}."

    page = operator.get(detail_url("printers"))
    assert "printers has 3 resources; notes:" in page_text(page)
    assert 'data-action="note"' in page.content.decode()  # a page action's button
    assert data_rows(page, "available")  # the built-in section is still there, first
    assert page.content.decode().index('id="available"') < page.content.decode().index('id="notes"')
    assert "Notes" not in page_text(operator.get(detail_url("reports")))  # pools only

    asked = operator.get(action_url("printers", "note"), {"note": "hello"})
    assert asked.context["question"] == "Note 'hello' on printers?"
    response = confirm(operator, action_url("printers", "note"), {"note": "hello"})
    assert response.redirect_chain == [(detail_url("printers"), 302)]
    assert messages_of(response) == [("success", "Noted 'hello'.")]
    assert notes == [("printers", "hello")]
    assert "notes: hello" in page_text(response)

    again = confirm(operator, action_url("printers", "note"), {"note": "hello"})
    assert messages_of(again) == [("warning", "'hello' is noted already.")]
    invalid = operator.post(action_url("printers", "note"), {"note": "not a slug"})
    assert invalid.status_code == 200 and invalid.context["form"].errors["note"]
    assert notes == [("printers", "hello")]
    assert operator.get(action_url("reports", "note")).status_code == 404
    viewer = login("staff_view")
    assert viewer.get(action_url("printers", "note"), {"note": "x"}).status_code == 403
    assert viewer.post(action_url("printers", "note"), {"note": "x"}).status_code == 403
    assert notes == [("printers", "hello")]


def test_a_section_template_gets_its_section(
    world: World, viewer: Client, registries: None, extra_templates: Path
) -> None:
    (extra_templates / "drp_test" / "titled.html").write_text(
        '<h2 id="titled">{{ section.title|default:"no section" }}</h2>'
    )

    @panels.section("semaphore", title="Slots by team", template="drp_test/titled.html")
    def titled(semaphore: Semaphore, request: Any) -> dict[str, Any]:
        return {}

    response = viewer.get(detail_url("reports"))

    heading = re.search(r'<h2 id="titled">(.*?)</h2>', response.content.decode())
    assert heading is not None  # the section is rendered...
    assert heading.group(1) == "Slots by team"  # ...with its Section


def test_a_registered_section_that_cannot_read_redis_makes_a_503(
    world: World, viewer: Client, registries: None, extra_templates: Path
) -> None:
    (extra_templates / "drp_test" / "never.html").write_text("never rendered")

    @panels.section("lock", title="Broken", template="drp_test/never.html")
    def broken(lock: Lock, request: Any) -> dict[str, Any]:
        raise BackendUnavailable("the extra store is down")

    response = viewer.get(detail_url("imports"))

    assert response.status_code == 503
    assert "Redis could not be read: the extra store is down" in page_text(response)
    content = response.content.decode()
    assert "object-tools" not in content and "/actions/" not in content


def test_a_registered_summary_replaces_the_overview_row_of_its_kind(
    world: World, viewer: Client, registries: None
) -> None:
    @panels.summary("lock")
    def lock_summary(lock: Lock) -> panels.Summary:
        return panels.Summary(size=7, health="warning", note=f"custom for {lock.name}")

    response = viewer.get(dashboard_url())

    assert dashboard_row(response, "imports") == [
        "imports", "lock", "7", NA, NA, NA, "custom for imports"
    ]  # fmt: skip
    assert health_icons(response)["imports"] == "Warning"
    assert dashboard_row(response, "printers")[6] == "OK"  # other kinds keep theirs


def test_an_action_that_fails_with_a_redis_error_is_reported_as_an_error(
    world: World, operator: Client, registries: None
) -> None:
    @panels.action("semaphore", "explode", label="Explode")
    def explode(semaphore: Semaphore, data: dict[str, Any]) -> str:
        raise BackendUnavailable("boom")

    response = confirm(operator, action_url("reports", "explode"))

    assert response.redirect_chain == [(detail_url("reports"), 302)]
    assert messages_of(response) == [("error", "Explode on semaphore 'reports' failed: boom")]


# ====================================================================== odd but valid input


def test_a_hold_of_the_longest_lease_still_renders(world: World, operator: Client) -> None:
    far = world.pool.acquire(holder="forever-ish", lease_timeout=MAX_SECONDS)
    assert far is not None

    response = operator.get(detail_url("printers"))

    assert response.status_code == 200
    assert far.resource in data_rows(response, "holders")


def test_an_identity_with_spaces_can_be_found_and_force_released(
    world: World, operator: Client
) -> None:
    spaced = world.semaphore.acquire_lease(" job 2 ")
    assert spaced is not None

    found = operator.get(detail_url("reports"), {"find": " job 2 "})
    assert "job 2 : held" in page_text(found)
    response = confirm(
        operator, action_url("reports", "release"), {"resource": " job 2 ", "fence": spaced.fence}
    )

    assert messages_of(response)[0][0] == "success"
    assert not world.semaphore.is_holding(" job 2 ")


def test_a_name_with_a_slash_or_actions_in_it_gets_its_own_pages(
    settings: Any, redis_url: str, operator: Client
) -> None:
    settings.DJANGO_REDIS_POOL = {
        "CONNECTION": {"URL": redis_url},
        "POOLS": {"a": {}, "a/actions/gc": {"RESOURCES": ["r1"]}},
    }
    call_command("pool_sync", verbosity=0)

    overview = operator.get(dashboard_url())
    link = detail_url("a/actions/gc")
    assert f'href="{link}"' in overview.content.decode()
    detail = operator.get(link)

    assert detail.status_code == 200
    assert detail.context["title"] == "Pool a/actions/gc"
    assert data_rows(detail, "available") == ["r1"]


@pytest.mark.parametrize("name", ["a b", "x/y", ""])
def test_an_action_name_must_be_a_slug(name: str) -> None:
    with pytest.raises(ValueError, match="must be a slug"):
        panels.action("pool", name, label="Nope")(lambda primitive, data: "")


def test_an_action_form_may_not_shadow_the_question_names() -> None:
    class Shadowing(forms.Form):
        label = forms.CharField()

    with pytest.raises(ValueError, match="rename them"):
        panels.action("pool", "shadow", label="Nope", form=Shadowing)(lambda p, d: "")
