"""``manage.py pool_sync`` against the harness's real Redis."""

from __future__ import annotations

import io
import re
import socket
import time
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from django_redis_pool import Semaphore, conf, get_pool, registry
from tests.support.waiting import STALL, floor_of


@pytest.fixture
def pools(settings: Any, redis_url: str) -> None:
    settings.DJANGO_REDIS_POOL = {
        "CONNECTION": {"URL": redis_url},
        "POOLS": {
            "printers": {"RESOURCES": ["p1", "p2", "p3"], "LEASE_TIMEOUT": 30},
            "scanners": {"RESOURCES": ["s1"]},
        },
    }


def sync(*args: str, **options: Any) -> str:
    out = io.StringIO()
    call_command("pool_sync", *args, stdout=out, stderr=out, **options)
    return out.getvalue()


def contents(name: str) -> set[str]:
    pool = get_pool(name)
    return set(pool.available()) | {lease.resource for lease in pool.leases()}


def test_adds_the_configured_resources(pools: None) -> None:
    output = sync()
    assert contents("printers") == {"p1", "p2", "p3"}
    assert contents("scanners") == {"s1"}
    assert "printers: 3 added, 0 already there" in output
    assert "scanners: 1 added, 0 already there" in output


def test_second_run_changes_nothing(pools: None) -> None:
    sync()
    with get_pool("printers").hold(timeout=0) as lease:
        output = sync()
        assert get_pool("printers").is_occupied(lease.resource)  # a holder keeps its lease
    assert "printers: 0 added, 3 already there" in output
    assert contents("printers") == {"p1", "p2", "p3"}


def test_without_prune_unconfigured_resources_stay(pools: None) -> None:
    get_pool("printers").associate("old")
    sync()
    assert contents("printers") == {"p1", "p2", "p3", "old"}


def test_without_prune_unconfigured_resources_are_counted_and_prune_is_suggested(
    pools: None,
) -> None:
    sync()
    get_pool("printers").associate("removed-from-settings")
    output = sync(verbosity=2)
    assert (
        "printers: 0 added, 3 already there, 1 in Redis but not in the settings (left there; "
        "manage.py pool_sync --prune removes them)" in output
    )
    assert "not in the settings: removed-from-settings" in output
    assert "scanners: 0 added, 1 already there\n" in output  # nothing to prune: no hint


@pytest.mark.parametrize(
    ("key", "entry", "option", "label"),
    [
        ("POOLS", {}, "RESOURCES", "Add a resource"),
        ("POOLS", {"RESOURCES": []}, "RESOURCES", "Add a resource"),
        ("ALLOCATORS", {"KEYS": {}}, "KEYS", "Add a key"),
    ],
)
def test_an_entry_listing_no_members_is_named_instead_of_a_silent_success(
    settings: Any, redis_url: str, key: str, entry: dict[str, Any], option: str, label: str
) -> None:
    settings.DJANGO_REDIS_POOL = {"CONNECTION": {"URL": redis_url}, key: {"empty": entry}}
    output = sync()
    assert (
        f'empty: 0 added, 0 already there (DJANGO_REDIS_POOL["{key}"]["empty"]["{option}"] '
        "lists none: list them there and run pool_sync again, or add them from the admin "
        f"('{label}' on its page))"
    ) in output


def test_without_prune_unconfigured_allocator_keys_are_counted_and_prune_is_suggested(
    settings: Any, redis_url: str
) -> None:
    from django_redis_pool import get_allocator

    settings.DJANGO_REDIS_POOL = {
        "CONNECTION": {"URL": redis_url},
        "ALLOCATORS": {"proxies": {"KEYS": ["a", "b"]}},
    }
    sync()
    get_allocator("proxies").extend(["gone"])
    output = sync()
    assert (
        "proxies: 0 added, 2 already there, 1 in Redis but not in the settings (left there; "
        "manage.py pool_sync --prune removes them)" in output
    )
    assert "proxies: 0 added, 2 already there, 1 removed" in sync("--prune")


def test_prune_removes_unconfigured_resources_including_leased_ones(pools: None) -> None:
    pool = get_pool("printers")
    pool.associate("old-free")
    pool.associate("old-leased")
    lease = pool.acquire(timeout=0)
    assert lease is not None and lease.resource == "old-free"
    leased = pool.acquire(timeout=0)
    assert leased is not None and leased.resource == "old-leased"
    output = sync("--prune")
    assert contents("printers") == {"p1", "p2", "p3"}
    assert "printers: 3 added, 0 already there, 2 removed" in output
    assert leased.release() is False  # its holder learns it is gone


def test_dry_run_changes_nothing(pools: None, redis_client: Any) -> None:
    get_pool("printers").associate("p1")
    get_pool("printers").associate("old")
    before = sorted(redis_client.keys("*"))
    output = sync("--dry-run", "--prune", verbosity=2)
    assert sorted(redis_client.keys("*")) == before
    assert "would be removed: old" in output
    assert "not in the settings" not in output  # listed once, as removed
    assert contents("printers") == {"p1", "old"}
    assert "printers: 2 would be added, 1 already there, 1 would be removed" in output
    assert "dry run" in output


def test_name_limits_the_pools(pools: None) -> None:
    output = sync("--name", "scanners")
    assert contents("scanners") == {"s1"}
    assert contents("printers") == set()
    assert "printers" not in output


def test_name_is_repeatable(pools: None) -> None:
    sync("--name", "scanners", "--name", "printers")
    assert contents("scanners") == {"s1"}
    assert contents("printers") == {"p1", "p2", "p3"}


def test_unknown_name_is_a_command_error(pools: None) -> None:
    with pytest.raises(CommandError, match=r"'plotters'.*'printers', 'scanners'"):
        sync("--name", "plotters")


def test_a_redis_error_reply_is_a_command_error_not_a_traceback(
    pools: None, redis_client: Any
) -> None:
    redis_client.set("drp:{pool:printers}:avail", "not a sorted set")  # e.g. another app
    with pytest.raises(CommandError, match=r"Redis rejected the operation.*WRONGTYPE.*Check the"):
        sync()


def test_redis_down_is_a_command_error(settings: Any, redis_url: str) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    pools = {"printers": {"RESOURCES": ["p1"]}}
    # The floor: the same command on a Redis that answers
    settings.DJANGO_REDIS_POOL = {"CONNECTION": {"URL": redis_url}, "POOLS": pools}
    floor = floor_of(sync)
    settings.DJANGO_REDIS_POOL = {
        "CONNECTION": {"URL": f"redis://127.0.0.1:{port}/0"},
        "POOLS": pools,
    }
    started = time.monotonic()
    with pytest.raises(
        CommandError, match=r"Start Redis or fix DJANGO_REDIS_POOL\[\"CONNECTION\"\]"
    ):
        sync()
    # a refused connection, retried after the default backoff: no timeout waited
    backoff = conf.DEFAULT_RETRIES * conf.DEFAULT_RETRY_CAP
    assert time.monotonic() - started < 10 * floor + backoff + STALL


def test_invalid_setting_is_a_command_error(settings: Any, redis_url: str) -> None:
    settings.DJANGO_REDIS_POOL = {"CONNECTION": {"URL": redis_url}, "POOLS": {"p": {"ORDER": 1}}}
    with pytest.raises(CommandError, match=re.escape("django_redis_pool.E018")):
        sync()


def test_verbosity_0_prints_nothing(pools: None) -> None:
    assert sync("--prune", verbosity=0) == ""
    assert contents("printers") == {"p1", "p2", "p3"}
    assert sync("--dry-run", verbosity=0) == ""


def test_verbosity_2_lists_each_resource(pools: None) -> None:
    output = sync("--name", "printers", verbosity=2)
    assert "added: p1" in output
    assert "added: p3" in output


def test_no_pools_configured_says_so(settings: Any, redis_url: str) -> None:
    settings.DJANGO_REDIS_POOL = {"CONNECTION": {"URL": redis_url}}
    assert "No pools" in sync()


# ------------------------------------------------------------------ semaphores


@pytest.fixture
def semaphores(settings: Any, redis_url: str) -> None:
    settings.DJANGO_REDIS_POOL = {
        "CONNECTION": {"URL": redis_url},
        "POOLS": {"printers": {"RESOURCES": ["p1"]}},
        "SEMAPHORES": {"api": {"MAX_SIZE": 3}, "unsized": {}},
    }


def raw_semaphore(name: str) -> Semaphore:
    """The semaphore without the registry (which stores MAX_SIZE on first use)."""
    return Semaphore(registry.get_connection(), name)


def test_stores_the_configured_max_size(semaphores: None) -> None:
    output = sync()
    assert raw_semaphore("api").get_max_size() == 3
    assert "api: max size set to 3 (was 0)" in output
    assert "unsized: no MAX_SIZE configured" in output
    assert 'set DJANGO_REDIS_POOL["SEMAPHORES"]["unsized"]["MAX_SIZE"]' in output
    assert "or set it from the admin ('Set max size' on its page))" in output
    assert raw_semaphore("unsized").get_max_size() == 0


def test_overwrites_a_different_max_size_without_evicting(semaphores: None) -> None:
    semaphore = raw_semaphore("api")
    semaphore.set_max_size(5)
    for identity in "abcde":
        assert semaphore.acquire(identity)
    output = sync()
    assert "api: max size set to 3 (was 5)" in output
    assert semaphore.get_max_size() == 3
    assert semaphore.get_current_size() == 5, "lowering the max evicts nobody"
    assert "api: max size 3 already set" in sync()


def test_dry_run_leaves_the_max_size_alone(semaphores: None) -> None:
    output = sync("--dry-run")
    assert "api: max size would be set to 3 (was 0) (dry run, nothing changed)" in output
    assert raw_semaphore("api").get_max_size() == 0


def test_name_selects_a_semaphore(semaphores: None) -> None:
    output = sync("--name", "api")
    assert "api: max size set to 3" in output
    assert "printers" not in output
    assert not get_pool("printers").has("p1")


def test_many_resources_are_added_in_one_round_trip_per_thousand(
    settings: Any, redis_url: str, redis_client: Any
) -> None:
    from tests.support.redis_inspect import commands_run_by, script_calls, unload_scripts

    settings.DJANGO_REDIS_POOL = {
        "CONNECTION": {"URL": redis_url},
        "POOLS": {"big": {"RESOURCES": [f"r{i}" for i in range(2500)]}},
    }
    pool = get_pool("big")
    unload_scripts(redis_client)  # (their first calls are refused: not round trips of the work)
    output: list[str] = []
    ran = commands_run_by(redis_client, lambda: output.append(sync()))
    assert "big: 2500 added, 0 already there" in output[0]
    assert script_calls(ran) == 2 + 3, "two reads of what is there, one write per 1,000"
    assert pool.total_count() == 2500
