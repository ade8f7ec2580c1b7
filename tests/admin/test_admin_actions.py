"""The admin dashboard's actions end to end, through their confirmation pages:
force release (of a pool's, a semaphore's and a lock's hold; a stale fence
spares the new holder), adding and removing a pool's resources, a semaphore's
max size, gc; invalid parameters are form errors that change nothing; each
action is logged with its user; unknown primitives and actions are not found.

Through Django's test client, against the harness's real Redis (the setting,
the users and the fixtures: :mod:`tests.support.admin_fixtures`).
"""

from __future__ import annotations

import html
import logging
import re
from collections.abc import Callable
from typing import Any

import pytest
from django.core.management import call_command
from django.test import Client

from django_redis_pool import Lease, get_pool
from django_redis_pool.exceptions import NotOwned
from django_redis_pool.registry import get_resource
from django_redis_pool.signals import lease_lost, lease_reclaimed
from tests.support.admin_fixtures import (
    World,
    action_url,
    dashboard_url,
    detail_url,
    expired_hold,
)
from tests.support.admin_pages import (
    confirm,
    data_rows,
    form_inputs,
    messages_of,
    page_text,
    table,
)
from tests.support.primitive_helpers import own_lease, slot_lease
from tests.support.waiting import wait_for

pytestmark = pytest.mark.django_db


#: What the confirming button says.
SURE = "Yes, I\N{RIGHT SINGLE QUOTATION MARK}m sure"


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
        return "reports", "job-1", old, slot_lease(world.semaphore, "job-1")
    lock, old = world.lock, world.lock_lease
    lock.release(holder="importer")
    assert lock.acquire(holder="importer", blocking=False)
    return "imports", "importer", old, own_lease(lock)


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


def test_the_max_size_form_opens_with_the_current_max_size(world: World, operator: Client) -> None:
    detail = operator.get(detail_url("reports")).content.decode()
    assert f'href="{action_url("reports", "max-size")}"' in detail  # the button: no parameters

    opened = operator.get(action_url("reports", "max-size"))

    assert opened.context["question"] is None and not opened.context["form"].errors
    assert form_inputs(opened, "action-form") == {"max_size": "2"}  # MAX_SIZE, as stored
    confirm(operator, action_url("reports", "max-size"), {"max_size": 7})
    assert form_inputs(operator.get(action_url("reports", "max-size")), "action-form") == {
        "max_size": "7"
    }
    # a semaphore without a max size: nothing to show
    assert form_inputs(operator.get(action_url("unsized", "max-size")), "action-form") == {
        "max_size": ""
    }


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
        ("success", f"gc of {kind} {name!r}: reclaimed 1 expired hold, dropped 0 waiters.")
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
        ("success", "gc of lock 'imports': reclaimed 0 expired holds, dropped 0 waiters.")
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
