"""The admin dashboard's extension point (:mod:`django_redis_pool.dashboard`): a
registered section and action appear and run through the confirmation, a
section template gets its section, a section that cannot read Redis makes a
503, a registered summary replaces its kind's overview row, and an action that
fails with a Redis error is reported as an error.

Through Django's test client, against the harness's real Redis (the setting,
the users and the fixtures: :mod:`tests.support.admin_fixtures`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django import forms
from django.test import Client

from django_redis_pool import dashboard as panels
from django_redis_pool.exceptions import BackendUnavailable
from django_redis_pool.primitives.leased.lock import Lock
from django_redis_pool.primitives.leased.pool import ResourcePool
from django_redis_pool.primitives.leased.semaphore import Semaphore
from tests.support.admin_fixtures import NA, World, action_url, dashboard_url, detail_url
from tests.support.admin_pages import (
    confirm,
    dashboard_row,
    data_rows,
    health_icons,
    messages_of,
    page_text,
)

pytestmark = pytest.mark.django_db


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
