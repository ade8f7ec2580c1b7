"""The management command of ``docs/background-work.md``, read from the page
(``tests/support/recipe_app``'s ``rebuild_index``), run by ``call_command``:
a lock "reindex" configured without ``LEASE_TIMEOUT``, held with
``timeout=0``; a run while it is held is refused with a ``CommandError``
saying when to try again; a run with it free rebuilds once; a long rebuild
keeps it past ``REQUEST_LEASE``."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from django.core.management import call_command
from django.core.management.base import CommandError

from django_redis_pool import ResourceUnavailable, holding
from tests.support.primitive_helpers import redis_time
from tests.support.recipe_app.management.commands import rebuild_index as command
from tests.support.waiting import STARTUP, wait_for

REQUEST_LEASE = 1


@pytest.fixture(autouse=True)
def configured(settings: Any, redis_url: str) -> Iterator[None]:
    settings.INSTALLED_APPS = [*settings.INSTALLED_APPS, "tests.support.recipe_app"]
    settings.DJANGO_REDIS_POOL = {
        "CONNECTION": {"URL": redis_url},
        "REQUEST_LEASE": REQUEST_LEASE,
        "LOCKS": {"reindex": {}},  # no LEASE_TIMEOUT: held on REQUEST_LEASE, renewed
    }
    command.CALLS.clear()
    command.inside.clear()
    command.proceed.set()
    yield
    command.proceed.set()


def is_free() -> bool:
    """Whether another caller is given "reindex" now."""
    try:
        with holding("reindex", timeout=0):
            return True
    except ResourceUnavailable:
        return False


def test_a_rebuild_while_the_lock_is_held_elsewhere_is_refused_with_a_command_error() -> None:
    refused = pytest.raises(CommandError, match=r"another rebuild is running; try again in 1 s$")
    with holding("reindex", timeout=0), refused:
        call_command("rebuild_index")
    assert command.CALLS == [], "the refused run did not rebuild"


def test_a_rebuild_with_the_lock_free_rebuilds_once_and_frees_the_lock() -> None:
    call_command("rebuild_index")
    assert command.CALLS == ["rebuild"]
    assert is_free()


def test_a_second_rebuild_is_refused_while_a_long_first_one_runs_past_request_lease(
    redis_client: redis.Redis,
) -> None:
    command.proceed.clear()
    errors: list[BaseException] = []

    def first() -> None:
        try:
            call_command("rebuild_index")
        except BaseException as exc:
            errors.append(exc)

    runner = threading.Thread(target=first)
    runner.start()
    try:
        assert command.inside.wait(STARTUP), "the first rebuild started"
        started = redis_time(redis_client)
        # past 2 leases of REQUEST_LEASE (Redis clock): only renewals keep it
        wait_for(
            lambda: redis_time(redis_client) > started + 2.5 * REQUEST_LEASE,
            what="2 leases to pass",
            interval=0.05,
        )
        with pytest.raises(CommandError, match="try again in"):
            call_command("rebuild_index")
    finally:
        command.proceed.set()
        runner.join(STARTUP)
    assert not runner.is_alive() and errors == []
    assert command.CALLS == ["rebuild"], "one rebuild ran; the second was refused"
    assert is_free()
