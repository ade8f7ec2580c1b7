"""Odd but valid input in the admin dashboard: the longest lease, an identity
with spaces, a name with a slash or "actions" in it, and the names an action
may not have (not a slug, or its form's fields shadowing the question's).

Through Django's test client, against the harness's real Redis (the setting,
the users and the fixtures: :mod:`tests.support.admin_fixtures`).
"""

from __future__ import annotations

from typing import Any

import pytest
from django import forms
from django.core.management import call_command
from django.test import Client

from django_redis_pool import dashboard as panels
from django_redis_pool.primitives.validators import MAX_SECONDS
from tests.support.admin_fixtures import World, action_url, dashboard_url, detail_url
from tests.support.admin_pages import confirm, data_rows, messages_of, page_text
from tests.support.primitive_helpers import slot_lease

pytestmark = pytest.mark.django_db


def test_a_hold_of_the_longest_lease_still_renders(world: World, operator: Client) -> None:
    far = world.pool.acquire(holder="forever-ish", lease_timeout=MAX_SECONDS)
    assert far is not None

    response = operator.get(detail_url("printers"))

    assert response.status_code == 200
    assert far.resource in data_rows(response, "holders")


def test_an_identity_with_spaces_can_be_found_and_force_released(
    world: World, operator: Client
) -> None:
    spaced = slot_lease(world.semaphore, " job 2 ")
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
