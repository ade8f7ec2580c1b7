"""The admin tests' world (``tests/admin/``, and the Django tests that visit the
admin): the setting of two pools, two semaphores and two locks, each with one
live hold; the users of the permission matrix, logged in; the dashboard's
URLs; a thread for a blocking acquire; and a hold expired on purpose.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import redis
from django.contrib.admin.utils import quote
from django.contrib.auth.models import Permission
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from django_redis_pool import Lease, get_lock, get_pool, get_semaphore
from django_redis_pool.primitives.leased.lock import Lock
from django_redis_pool.primitives.leased.pool import ResourcePool
from django_redis_pool.primitives.leased.semaphore import Semaphore
from tests.support.primitive_helpers import own_lease, slot_lease
from tests.support.redis_inspect import redis_state
from tests.support.waiting import wait_for

#: What the pages show for a count that does not apply.
NA = "\N{EN DASH}"


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
    semaphore_lease = slot_lease(semaphore, "job-1")
    assert lock.acquire(holder="importer", blocking=False)
    assert pool_lease is not None and semaphore_lease is not None and own_lease(lock) is not None
    return World(redis_client, pool, semaphore, lock, pool_lease, semaphore_lease, own_lease(lock))


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


def expired_hold(world: World, kind: str) -> tuple[str, Lease]:
    """An expired, not yet reclaimed hold of "crashed" on a primitive of ``kind``."""
    if kind == "pool":
        lease = world.pool.acquire(holder="crashed")
        assert lease is not None
        expire(lease, lambda: world.pool.is_occupied(lease.resource))
        return "printers", lease
    if kind == "semaphore":
        lease = slot_lease(world.semaphore, "crashed")
        assert lease is not None
        expire(lease, lambda: world.semaphore.is_holding("crashed"))
        return "reports", lease
    lock = get_lock("plain")
    assert lock.acquire(holder="crashed", blocking=False)
    assert own_lease(lock) is not None
    lease = own_lease(lock)
    expire(lease, lambda: lock.owned(holder="crashed"))
    return "plain", lease
