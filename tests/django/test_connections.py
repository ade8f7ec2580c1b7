"""The registry's connections (seed 004): a bounded, blocking connection pool
from ``MAX_CONNECTIONS``/``POOL_TIMEOUT`` whose connections blocking waits can
never starve, and clients that stay usable in a forked child."""

from __future__ import annotations

import os
import threading
import time
from typing import Any

import pytest
import redis

from django_redis_pool import get_pool, registry
from django_redis_pool.checks import check_settings
from tests.support.waiting import wait_for


def setting(url: str, **connection: Any) -> dict[str, Any]:
    return {
        "CONNECTION": {"URL": url, **connection},
        "POOLS": {"printers": {"RESOURCES": ["p1"], "LEASE_TIMEOUT": 30}},
    }


def test_max_connections_bounds_the_pool_and_waits_get_their_own(
    settings: Any, redis_url: str
) -> None:
    settings.DJANGO_REDIS_POOL = setting(redis_url, MAX_CONNECTIONS=3, POOL_TIMEOUT=1.5)
    client = registry.get_connection()
    pool = client.connection_pool
    assert isinstance(pool, redis.BlockingConnectionPool)
    assert (pool.max_connections, pool.timeout) == (3, 1.5)
    assert client.drp_waits_client.connection_pool is not pool


def test_blocked_waiters_never_starve_the_release_that_wakes_them(
    settings: Any, redis_url: str
) -> None:
    settings.DJANGO_REDIS_POOL = setting(redis_url, MAX_CONNECTIONS=2, POOL_TIMEOUT=1)
    printers = get_pool("printers")
    printers.associate("p1")
    held = printers.acquire()
    served: list[str] = []
    errors: list[BaseException] = []

    def wait() -> None:
        try:
            lease = printers.acquire(timeout=15)
            served.append(lease.resource)
            lease.release()
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=wait) for _ in range(4)]
    for thread in threads:
        thread.start()
    wait_for(lambda: printers.waiting_count() == 4, what="four blocked waiters")
    held.release()  # two connections only, four blocked readers: still served
    for thread in threads:
        thread.join(20)
    assert errors == [] and served == ["p1"] * 4


@pytest.mark.parametrize(
    ("connection", "fragment"),
    [
        ({"MAX_CONNECTIONS": 0}, "must be an int >= 1"),
        ({"MAX_CONNECTIONS": "50"}, "must be an int >= 1"),
        ({"POOL_TIMEOUT": 5}, "without MAX_CONNECTIONS"),
        ({"MAX_CONNECTIONS": 5, "POOL_TIMEOUT": -1}, "seconds >= 0"),
        ({"MAX_CONNECTIONS": 5, "CLUSTER": True}, "cannot be combined with CLUSTER"),
    ],
)
def test_bad_pool_settings_are_reported(
    settings: Any, redis_url: str, connection: dict[str, Any], fragment: str
) -> None:
    settings.DJANGO_REDIS_POOL = setting(redis_url, **connection)
    messages = [m for m in check_settings() if m.is_serious()]
    assert [m.id for m in messages] == ["django_redis_pool.E025"]
    assert fragment in messages[0].msg


def test_a_forked_child_uses_the_registry_without_sharing_its_parents_connections(
    settings: Any, redis_url: str
) -> None:
    settings.DJANGO_REDIS_POOL = setting(redis_url, MAX_CONNECTIONS=4)
    printers = get_pool("printers")
    printers.associate("p1")
    lease = printers.acquire()
    lease.release()
    pid = os.fork()
    if pid == 0:  # redis-py sees the new pid and opens the child's own connections
        code = 1
        try:
            child_lease = get_pool("printers").acquire(timeout=5)
            code = 0 if child_lease is not None and child_lease.release() else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    again = printers.acquire(timeout=5)
    assert again is not None and again.release(), "the parent's connections still work"


def test_more_waiters_than_redis_py_s_default_pool_cap_are_all_served(
    settings: Any, redis_url: str
) -> None:
    """redis-py 8 caps a client's pool at 100 connections; each blocked waiter
    holds one, so the registry's client has no cap unless one is configured."""
    settings.DJANGO_REDIS_POOL = setting(redis_url)
    pool = get_pool("printers")
    held = pool.acquire(timeout=0)
    assert held is not None
    served: list[bool] = []

    def wait() -> None:
        lease = pool.acquire(timeout=30)
        served.append(lease is not None)
        if lease is not None:
            lease.release()

    threads = [threading.Thread(target=wait) for _ in range(150)]
    for thread in threads:
        thread.start()
    wait_for(lambda: pool.waiting_count() == 150, 30, "150 waiters")
    held.release()
    for thread in threads:
        thread.join(60)
    assert served == [True] * 150


# -- a shared django-redis cache (CONNECTION = {"CACHE": ...}) ---------------------


def cache_setting(settings: Any, url: str, **pool_kwargs: Any) -> None:
    """A django-redis cache "default" with ``pool_kwargs``, on a database of
    its own (django-redis keeps one pool per URL for the process: another
    test's pool of the same URL, without the cap, would be reused), emptied."""
    url = url.rsplit("/", 1)[0] + "/7"
    redis.Redis.from_url(url).flushdb()
    settings.CACHES = {
        "default": {
            "BACKEND": "django_redis.cache.RedisCache",
            "LOCATION": url,
            "OPTIONS": {"CONNECTION_POOL_KWARGS": pool_kwargs} if pool_kwargs else {},
        }
    }
    settings.DJANGO_REDIS_POOL = {
        "CONNECTION": {"CACHE": "default"},
        "SEMAPHORES": {"reports": {"MAX_SIZE": 1}},
    }


def test_waiters_never_starve_the_cache_whose_settings_they_share(
    settings: Any, redis_url: str
) -> None:
    """django-redis capped at 3 connections: three callers wait on a full
    semaphore while the site's own cache keeps working, and the permit freed
    reaches a waiter at once (not at the end of its wait)."""
    from django.core.cache import caches

    from django_redis_pool import get_semaphore

    cache_setting(settings, redis_url, max_connections=3)
    cache = caches["default"]
    reports = get_semaphore("reports")
    assert reports.acquire("holder")
    served: list[float] = []
    errors: list[BaseException] = []

    def wait(identity: str) -> None:
        try:
            started = time.monotonic()
            if reports.acquire(identity, timeout=30):
                served.append(time.monotonic() - started)
                reports.release(identity)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=wait, args=(f"w{i}",)) for i in range(3)]
    for thread in threads:
        thread.start()
    wait_for(lambda: reports.waiting_count() == 3, what="three waiting callers")
    cache.set("site", "works")  # (the cache's own three connections are free)
    assert cache.get("site") == "works"
    reports.release("holder")
    for thread in threads:
        thread.join(40)
    assert errors == [] and len(served) == 3
    assert min(served) < 15, "the freed permit reached a waiter, not its timeout"


def test_the_shared_cache_form_uses_pools_of_its_own_with_the_caches_cap(
    settings: Any, redis_url: str
) -> None:
    from django_redis import get_redis_connection

    cache_setting(settings, redis_url, max_connections=3)
    client = registry.get_connection()
    cache_pool = get_redis_connection("default").connection_pool
    assert client.connection_pool is not cache_pool
    assert client.connection_pool.max_connections == 3
    assert client.drp_waits_client.connection_pool not in (cache_pool, client.connection_pool)
    messages = [m for m in check_settings() if m.id == "django_redis_pool.W012"]
    assert len(messages) == 1 and "at most 3" in messages[0].msg


def test_django_redis_shard_client_is_a_check_error(settings: Any, redis_url: str) -> None:
    settings.CACHES = {
        "default": {
            "BACKEND": "django_redis.cache.RedisCache",
            "LOCATION": [redis_url, redis_url],
            "OPTIONS": {"CLIENT_CLASS": "django_redis.client.ShardClient"},
        }
    }
    settings.DJANGO_REDIS_POOL = {"CONNECTION": {"CACHE": "default"}}
    [message] = [m for m in check_settings() if m.id == "django_redis_pool.E042"]
    assert "ShardClient" in message.msg and '"URL"' in message.hint
