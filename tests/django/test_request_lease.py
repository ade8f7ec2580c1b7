"""A request's hold always ends.

On a primitive whose leases never expire (no ``LEASE_TIMEOUT``), the decorator
and the middleware hold with a lease of ``REQUEST_LEASE`` seconds, renewed
while the request runs (a watchdog): a worker killed mid-request leaves a hold
that ends within that lease, where it used to be held for ever.
"""

from __future__ import annotations

import io
import os
import signal
import time
from typing import Any

import pytest
from django.core.management import call_command
from django.test import RequestFactory

from django_redis_pool import DEFAULT, get_lock, get_pool, get_resource, get_semaphore, registry
from django_redis_pool.guard import Guard
from tests.support.primitive_helpers import slot_lease
from tests.support.waiting import wait_for

NAMES = ["printers", "reports", "imports"]


@pytest.fixture
def configured(settings: Any, redis_url: str) -> None:
    settings.DJANGO_REDIS_POOL = {
        "CONNECTION": {"URL": redis_url},
        "REQUEST_LEASE": 1,
        # none of them has a LEASE_TIMEOUT: their own leases never expire
        "POOLS": {"printers": {"RESOURCES": ["p1"]}},
        "SEMAPHORES": {"reports": {"MAX_SIZE": 1}},
        "LOCKS": {"imports": {"LEASE_TIMEOUT": None}},
    }


def is_taken(name: str) -> bool:
    """Whether another caller is refused ``name`` now."""
    if name == "printers":
        lease = get_pool(name).acquire(timeout=0)
    elif name == "reports":
        lease = slot_lease(get_semaphore(name), "someone-else")
    else:
        lock = get_lock(name).for_holder("someone-else")
        if not lock.acquire(blocking=False):
            return True
        lock.release()
        return False
    if lease is None:
        return True
    lease.release()
    return False


def holds_of(name: str) -> list[Any]:
    primitive = {"printers": get_pool, "reports": get_semaphore, "imports": get_lock}[name](name)
    snap = primitive.snapshot()
    return [(lease, snap.seconds_left(lease)) for lease in snap.leases]


@pytest.mark.parametrize("name", NAMES)
def test_a_request_holds_with_a_renewed_lease_while_it_runs(configured: None, name: str) -> None:
    guard, request = Guard(name, timeout=0), RequestFactory().get("/")
    held = guard.enter(request)  # what @with_resource and the middleware do
    assert held is not None
    ((_, left),) = holds_of(name)
    assert left is not None and 0 < left <= 1, "a lease of REQUEST_LEASE, not a hold for ever"
    started = time.monotonic()
    wait_for(lambda: time.monotonic() - started > 2.5, what="2.5 leases")
    assert is_taken(name), "renewed while the request runs"
    guard.exit(request, held)
    assert holds_of(name) == [] and not is_taken(name), "released at the end of the request"


@pytest.mark.parametrize("name", NAMES)
def test_a_hold_of_a_killed_worker_ends_within_the_request_lease(
    configured: None, name: str
) -> None:
    pid = os.fork()
    if pid == 0:  # the worker: holds for a request, then dies without releasing
        try:
            held = Guard(name, timeout=0).enter(RequestFactory().get("/"))
            assert held is not None
        finally:
            os.kill(os.getpid(), signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
    assert holds_of(name), "the dead worker's hold is there"
    wait_for(lambda: not holds_of(name), timeout=10, what="the dead worker's hold to end")


def test_an_explicit_lease_is_not_renewed(configured: None) -> None:
    guard = Guard("printers", timeout=0, lease_timeout=0.5)
    held = guard.enter(RequestFactory().get("/"))
    assert held is not None and held.lease is not None
    assert not held.lease._renewing, "the view asked for this lease: it is kept as asked"
    guard.exit(RequestFactory().get("/"), held)


def test_request_lease_and_long_hold_are_checked(settings: Any, redis_url: str) -> None:
    from django_redis_pool.checks import validate

    for bad in (0, -1, "30", True, None):
        settings.DJANGO_REDIS_POOL = {"CONNECTION": {"URL": redis_url}, "REQUEST_LEASE": bad}
        ids = [message.id for message in validate(settings.DJANGO_REDIS_POOL, {})]
        assert ids == ["django_redis_pool.E026"], (bad, ids)
    for bad in (0, -1, "1h", True, float("inf")):
        settings.DJANGO_REDIS_POOL = {"CONNECTION": {"URL": redis_url}, "LONG_HOLD": bad}
        ids = [message.id for message in validate(settings.DJANGO_REDIS_POOL, {})]
        assert ids == ["django_redis_pool.E031"], (bad, ids)
    settings.DJANGO_REDIS_POOL = {
        "CONNECTION": {"URL": redis_url},
        "REQUEST_LEASE": 2.5,
        "LONG_HOLD": None,
    }
    call_command("check")


def test_a_hold_older_than_long_hold_is_flagged(settings: Any, redis_url: str) -> None:
    """A holder stuck while its process keeps renewing never lets go: the
    dashboard's health, pool_status and pool_gc say so past LONG_HOLD."""
    from django_redis_pool.dashboard.lease_panels import lease_summary

    settings.DJANGO_REDIS_POOL = {
        "CONNECTION": {"URL": redis_url},
        "LONG_HOLD": 0.5,
        "POOLS": {"printers": {"RESOURCES": ["p1", "p2"], "LEASE_TIMEOUT": 30}},
    }
    pool = get_pool("printers")
    pool.collect()  # its resources are there
    assert lease_summary(pool).health == "ok"
    lease = pool.acquire(timeout=0)
    assert lease is not None
    snap = pool.snapshot(limit=0)
    assert snap.oldest_since == lease.acquired_at
    wait_for(lambda: pool.snapshot(limit=0).now - snap.oldest_since > 0.6, what="LONG_HOLD to pass")
    summary = lease_summary(pool)
    assert summary.health == "warning" and "over LONG_HOLD" in summary.note
    out = io.StringIO()
    call_command("pool_status", stdout=out, verbosity=1)
    assert "over LONG_HOLD" in out.getvalue()
    out = io.StringIO()
    call_command("pool_gc", stdout=out)
    assert "over LONG_HOLD" in out.getvalue()
    lease.release()
    assert lease_summary(pool).health == "ok"


def test_lease_timeout_none_asks_a_renewed_request_lease_even_of_a_leased_primitive(
    settings: Any, redis_url: str
) -> None:
    settings.DJANGO_REDIS_POOL = {
        "CONNECTION": {"URL": redis_url},
        "REQUEST_LEASE": 1,
        "POOLS": {"printers": {"RESOURCES": ["p1"], "LEASE_TIMEOUT": 60}},
    }
    call_command("pool_sync", stdout=io.StringIO())
    request = RequestFactory().get("/")
    for lease_timeout, expected in ((None, 1), (DEFAULT, 60)):
        guard = Guard("printers", timeout=0, lease_timeout=lease_timeout)
        held = guard.enter(request)
        assert held is not None and held.lease is not None
        assert held.lease.lease_timeout == expected, lease_timeout
        assert held.lease._renewing is (lease_timeout is None), "None: renewed while it runs"
        guard.exit(request, held)


def test_timeout_default_waits_the_kinds_own_and_none_for_ever(
    settings: Any, redis_url: str
) -> None:
    settings.DJANGO_REDIS_POOL = {
        "CONNECTION": {"URL": redis_url},
        "LOCKS": {"imports": {"TIMEOUT": 5}},
        "OBJECT_POOLS": {"clients": {"FACTORY": "builtins.object", "ACQUIRE_TIMEOUT": 3}},
        "MIDDLEWARE": [{"PATH": "^/", "RESOURCE": "imports"}],
    }
    lock, objects = get_lock("imports"), get_resource("clients")
    assert Guard("imports").wait_of(lock) == 5, "DEFAULT: the lock's TIMEOUT"
    assert Guard("imports", timeout=None).wait_of(lock) is None, "None: for ever"
    assert Guard("clients").wait_of(objects) == 3, "DEFAULT: the pool's ACQUIRE_TIMEOUT"
    (rule,) = registry.get_config().middleware
    assert rule.options["timeout"] is DEFAULT and rule.options["lease_timeout"] is DEFAULT
