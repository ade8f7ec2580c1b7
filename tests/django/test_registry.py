"""get_connection / get_pool / get_resource against the harness's real Redis."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
import redis
from django.core.exceptions import ImproperlyConfigured

from django_redis_pool import (
    BackendUnavailable,
    Lock,
    NotConfigured,
    ResourcePool,
    Semaphore,
    conf,
    get_lock,
    get_pool,
    get_resource,
    get_semaphore,
    registry,
)
from django_redis_pool.checks import validate
from tests.support.stoppable_servers import closed_port
from tests.support.waiting import STALL, floor_of


def configure(settings: Any, url: str, **extra: Any) -> None:
    settings.DJANGO_REDIS_POOL = {
        "CONNECTION": {"URL": url},
        "POOLS": {"printers": {"RESOURCES": ["p1", "p2"], "LEASE_TIMEOUT": 30}},
        **extra,
    }


#: The longest the default retries of a refused connection sleep in all
RETRIES_BACKOFF = conf.DEFAULT_RETRIES * conf.DEFAULT_RETRY_CAP


def answering_floor(settings: Any, redis_url: str, call: Callable[[ResourcePool], object]) -> float:
    """The floor of a call that fails quickly when Redis is down: the same call
    of the pool ``printers`` on a Redis that answers (the test then configures
    the Redis that is down)."""
    configure(settings, redis_url)
    return floor_of(lambda: call(get_pool("printers")))


def test_get_pool_returns_a_working_pool_on_the_configured_redis(
    settings: Any, redis_url: str, redis_client: redis.Redis
) -> None:
    configure(settings, redis_url)
    pool = get_pool("printers")
    assert isinstance(pool, ResourcePool)
    assert pool.lease_timeout == 30
    assert pool.associate("p1") is True
    with pool.hold(timeout=1) as lease:
        assert lease.resource == "p1"
        assert pool.occupied_count() == 1
        assert lease.expires_at is not None
    assert pool.available() == ["p1"]
    assert redis_client.dbsize() > 0  # it really is the test Redis


def test_get_pool_is_cached_per_name(settings: Any, redis_url: str) -> None:
    configure(settings, redis_url, POOLS={"a": {}, "b": {}})
    assert get_pool("a") is get_pool("a")
    assert get_pool("a") is not get_pool("b")
    assert get_pool("a").client is get_pool("b").client is registry.get_connection()
    assert registry.get_connection() is registry.get_connection()


def test_get_resource_returns_the_same_object_as_get_pool(settings: Any, redis_url: str) -> None:
    configure(settings, redis_url)
    assert get_resource("printers") is get_pool("printers")


def test_pool_is_rebuilt_after_the_setting_changes(settings: Any, redis_url: str) -> None:
    configure(settings, redis_url)
    before = get_pool("printers")
    client_before = registry.get_connection()
    settings.DJANGO_REDIS_POOL = {
        "CONNECTION": {"URL": redis_url},
        "POOLS": {"printers": {"LEASE_TIMEOUT": 5, "ORDER": "lifo"}},
    }
    after = get_pool("printers")
    assert after is not before
    assert (after.lease_timeout, after.order) == (5, "lifo")
    assert registry.get_connection() is not client_before


def test_caches_are_cleared_when_caches_setting_changes(settings: Any, redis_url: str) -> None:
    configure(settings, redis_url)
    before = get_pool("printers")
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    assert get_pool("printers") is not before


def test_unknown_name_raises_not_configured_naming_the_configured_names(
    settings: Any, redis_url: str
) -> None:
    configure(settings, redis_url, POOLS={"printers": {}, "scanners": {}})
    with pytest.raises(NotConfigured) as info:
        get_pool("plotters")
    assert isinstance(info.value, TypeError)
    assert "'plotters'" in str(info.value)
    assert "'printers', 'scanners'" in str(info.value)
    with pytest.raises(NotConfigured, match=r"'plotters'.*'printers', 'scanners'"):
        get_resource("plotters")


def test_get_pool_of_a_name_of_another_kind_raises_not_configured(
    settings: Any, redis_url: str
) -> None:
    configure(settings, redis_url, LOCKS={"nightly": {}})
    with pytest.raises(NotConfigured, match=r"'nightly'.*it is a lock"):
        get_pool("nightly")


def test_get_semaphore_stores_max_size_on_first_acquire(settings: Any, redis_url: str) -> None:
    configure(settings, redis_url, SEMAPHORES={"api": {"MAX_SIZE": 2, "LEASE_TIMEOUT": 60}})
    semaphore = get_semaphore("api")
    assert isinstance(semaphore, Semaphore)
    assert semaphore.lease_timeout == 60
    assert semaphore.get_max_size() == 0, "building it does no I/O"
    assert semaphore.acquire("a") and semaphore.acquire("b") and not semaphore.acquire("c")
    assert semaphore.get_max_size() == 2
    assert get_resource("api") is semaphore


def test_get_semaphore_keeps_a_max_size_already_in_redis(settings: Any, redis_url: str) -> None:
    configure(settings, redis_url, SEMAPHORES={"api": {"MAX_SIZE": 2}})
    Semaphore(registry.get_connection(), "api").set_max_size(7)  # e.g. set by an operator
    semaphore = get_semaphore("api")
    assert semaphore.acquire("a")
    assert semaphore.get_max_size() == 7


def test_semaphore_without_max_size_setting_is_not_configured_until_set(
    settings: Any, redis_url: str
) -> None:
    configure(settings, redis_url, SEMAPHORES={"api": {}})
    semaphore = get_semaphore("api")
    with pytest.raises(NotConfigured, match="set_max_size"):
        semaphore.acquire("a")
    semaphore.set_max_size(1)
    assert semaphore.acquire("a") is True


def test_get_lock_applies_the_lock_options(settings: Any, redis_url: str) -> None:
    options = {"LEASE_TIMEOUT": 5, "REENTRANT": True, "AUTO_RENEW": True, "TIMEOUT": 0.2}
    configure(settings, redis_url, LOCKS={"nightly": options})
    lock = get_lock("nightly")
    assert isinstance(lock, Lock) and get_lock("nightly") is lock
    assert (lock.lease_timeout, lock.reentrant, lock.auto_renew, lock.timeout) == (
        5,
        True,
        True,
        0.2,
    )
    with lock, lock:  # reentrant
        assert lock.owned()
    assert not lock.locked()


def test_get_lock_defaults_to_a_30_second_lease(settings: Any, redis_url: str) -> None:
    configure(settings, redis_url, LOCKS={"nightly": {}})
    lock = get_lock("nightly")
    assert (lock.lease_timeout, lock.reentrant, lock.auto_renew, lock.timeout) == (
        30,
        False,
        False,
        None,
    )


def test_get_semaphore_of_a_lock_name_raises_not_configured(settings: Any, redis_url: str) -> None:
    configure(settings, redis_url, LOCKS={"nightly": {}})
    with pytest.raises(NotConfigured, match=r"'nightly'.*it is a lock"):
        get_semaphore("nightly")


def test_invalid_setting_raises_improperly_configured_with_the_check_message(
    settings: Any, redis_url: str
) -> None:
    value = {"CONNECTION": {"URL": redis_url}, "POOLS": {"printers": {"ORDER": "lilo"}}}
    settings.DJANGO_REDIS_POOL = value
    (message,) = validate(value, settings.CACHES)
    with pytest.raises(ImproperlyConfigured) as info:
        get_pool("printers")
    assert message.id in str(info.value)
    assert message.msg in str(info.value)
    assert message.hint in str(info.value)


def test_missing_connection_defaults_to_local_redis(settings: Any) -> None:
    settings.DJANGO_REDIS_POOL = {"POOLS": {"printers": {}}}
    kwargs = registry.get_connection().connection_pool.connection_kwargs
    assert (kwargs["host"], kwargs["port"], kwargs.get("db", 0)) == ("127.0.0.1", 6379, 0)


def test_url_connection_gets_a_short_timeout_and_retry_by_default(
    settings: Any, redis_url: str
) -> None:
    configure(settings, redis_url)
    kwargs = registry.get_connection().connection_pool.connection_kwargs
    assert kwargs["socket_timeout"] == 5
    retry = kwargs["retry"]
    # (redis-py 5's Retry has no get_retries(): the count is its _retries)
    assert (retry.get_retries() if hasattr(retry, "get_retries") else retry._retries) == 3


def test_url_connection_keeps_the_users_options(settings: Any, redis_url: str) -> None:
    settings.DJANGO_REDIS_POOL = {
        "CONNECTION": {"URL": redis_url, "OPTIONS": {"socket_timeout": 1, "decode_responses": True}}
    }
    client = registry.get_connection()
    kwargs = client.connection_pool.connection_kwargs
    assert kwargs["socket_timeout"] == 1
    assert kwargs["decode_responses"] is True


def test_blocking_acquire_longer_than_the_socket_timeout_just_waits(
    settings: Any, redis_url: str
) -> None:
    settings.DJANGO_REDIS_POOL = {
        "CONNECTION": {"URL": redis_url, "OPTIONS": {"socket_timeout": 1}},
        "POOLS": {"printers": {"LEASE_TIMEOUT": 30}},
    }
    pool = get_pool("printers")
    floor = floor_of(lambda: pool.acquire(timeout=0))  # refused at once: no resource
    started = time.monotonic()
    assert pool.acquire(timeout=2.5) is None
    assert 2.4 < time.monotonic() - started < 2.5 + 10 * floor + STALL


def test_key_prefix_is_honoured(settings: Any, redis_url: str, redis_client: redis.Redis) -> None:
    configure(settings, redis_url, KEY_PREFIX="myapp")
    get_pool("printers").associate("p1")
    keys = [k.decode() for k in redis_client.keys("*")]
    assert keys
    assert all(k.startswith("myapp:") for k in keys), keys


def test_cache_form_reuses_a_django_redis_caches_settings(
    settings: Any, redis_url: str, redis_client: redis.Redis
) -> None:
    """Its connections are built from the cache's settings (same server and
    database), in pools of their own (the waiters never take the cache's)."""
    from django_redis import get_redis_connection

    settings.CACHES = {
        "default": {"BACKEND": "django_redis.cache.RedisCache", "LOCATION": redis_url}
    }
    settings.DJANGO_REDIS_POOL = {"CONNECTION": {"CACHE": "default"}, "POOLS": {"printers": {}}}
    pool = get_pool("printers")
    cache_client = get_redis_connection("default")
    assert pool.client.connection_pool is not cache_client.connection_pool
    ours, theirs = pool.client.connection_pool, cache_client.connection_pool
    assert (ours.connection_kwargs["host"], ours.connection_kwargs["port"]) == (
        theirs.connection_kwargs["host"],
        theirs.connection_kwargs["port"],
    )
    assert pool.associate("p1") is True
    assert get_pool("printers").available() == ["p1"]
    assert redis_client.dbsize() > 0


def test_cache_form_reuses_djangos_builtin_redis_cache(
    settings: Any, redis_url: str, redis_client: redis.Redis
) -> None:
    settings.CACHES = {
        "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
        "redis": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": redis_url},
    }
    settings.DJANGO_REDIS_POOL = {"CONNECTION": {"CACHE": "redis"}, "POOLS": {"printers": {}}}
    pool = get_pool("printers")
    assert isinstance(pool.client, redis.Redis)
    assert pool.associate("p1") is True
    with pool.hold(timeout=1) as lease:
        assert lease.resource == "p1"
    assert redis_client.dbsize() > 0


def test_redis_down_raises_backend_unavailable_quickly(settings: Any, redis_url: str) -> None:
    floor = answering_floor(settings, redis_url, lambda pool: pool.available_count())
    configure(settings, f"redis://127.0.0.1:{closed_port()}/0")
    pool = get_pool("printers")  # building does no I/O
    started = time.monotonic()
    with pytest.raises(BackendUnavailable) as info:
        pool.available_count()
    assert time.monotonic() - started < 10 * floor + RETRIES_BACKOFF + STALL
    assert isinstance(info.value, ConnectionError)
    assert isinstance(info.value.__cause__, redis.RedisError)


def test_sentinel_down_raises_backend_unavailable_quickly(settings: Any, redis_url: str) -> None:
    floor = answering_floor(settings, redis_url, lambda pool: pool.total_count())
    settings.DJANGO_REDIS_POOL = {
        "CONNECTION": {"SENTINELS": [["127.0.0.1", closed_port()]], "SERVICE_NAME": "mymaster"},
        "POOLS": {"printers": {}},
    }
    pool = get_pool("printers")
    started = time.monotonic()
    with pytest.raises(BackendUnavailable):
        pool.total_count()
    assert time.monotonic() - started < 10 * floor + RETRIES_BACKOFF + STALL


@pytest.mark.cluster
def test_cluster_form_works_on_a_redis_cluster(
    settings: Any, redis_cluster: Any, cluster_client: Any
) -> None:
    from redis.cluster import RedisCluster

    settings.DJANGO_REDIS_POOL = {
        "CONNECTION": {"URL": redis_cluster.url, "CLUSTER": True},
        "POOLS": {"printers": {"LEASE_TIMEOUT": 30}},
    }
    pool = get_pool("printers")
    assert isinstance(pool.client, RedisCluster)
    assert pool.associate("p1") is True
    with pool.hold(timeout=1) as lease:
        assert lease.resource == "p1"
    assert pool.available() == ["p1"]
