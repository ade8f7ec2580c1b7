"""Counts and Prometheus metrics (API.md, "Metrics").

Every process counts what each primitive did (:mod:`django_redis_pool.primitives.counts`)
and adds it into Redis in the background; ``activity()`` reads the site-wide
totals and the last minutes, and ``django_redis_pool.metrics`` exports them
with the primitives' state. Every test runs on a real redis-server (and the
Cluster where the ``client`` fixture is used); the exposition is parsed with
prometheus_client's own parser.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time
import uuid
from typing import Any

import pytest
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from django_redis_pool import Allocator, Lock, ResourcePool, ResourceUnavailable, Semaphore
from django_redis_pool.primitives import counts
from tests.support.primitive_helpers import ops, redis_time, slot_lease
from tests.support.stoppable_servers import closed_port, hung_server  # noqa: F401
from tests.support.waiting import wait_blocked, wait_for

mp = multiprocessing.get_context("fork")


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def totals(primitive: Any) -> dict[str, int]:
    """The primitive's site-wide totals once this process's counts are in Redis."""
    assert counts.flush() == 0
    return primitive.activity().totals


def test_grants_refusals_and_hold_times_are_counted_for_each_kind(client: Any) -> None:
    pool = ResourcePool(client, unique("p"), max_waiting=0)
    pool.associate("r1")
    sem = Semaphore(client, unique("s"), default_max_size=1, max_waiting=0)
    lock = Lock(client, unique("l"), max_waiting=0)
    for _ in range(3):
        with pool.hold(timeout=1):
            pass
        with sem.hold("me", timeout=1):
            pass
        with lock:
            pass
    held = [pool.acquire(holder="a"), slot_lease(sem, "a"), lock.acquire(holder="a")]
    assert all(held)
    assert pool.acquire(timeout=0) is None  # refused: its wait (none) timed out
    with pytest.raises(ResourceUnavailable), pool.hold(timeout=5):  # refused: max_waiting=0
        pass
    assert sem.acquire("b", timeout=0) is False
    assert lock.acquire(blocking=False, holder="b") is False
    for primitive in (pool, sem, lock):
        got = totals(primitive)
        assert got["acquired"] == 4, primitive
        assert got["refused_timeout"] == 1
        assert sum(got.get(f"hold_{i}", 0) for i in range(len(counts.BUCKETS) + 1)) == 3
        assert sum(got.get(f"wait_{i}", 0) for i in range(len(counts.BUCKETS) + 1)) == 4
    assert totals(pool)["refused_full"] == 1


def test_an_allocator_counts_its_grants_refusals_and_reclaims(client: Any) -> None:
    alloc = Allocator(client, unique("a"))
    alloc.extend(["k1"])
    key = alloc.malloc_key(lease_timeout=0.05)
    assert key is not None
    assert alloc.malloc_key() is None
    wait_for(lambda: alloc.gc() == 1, what="the expired lock to be reclaimed")
    got = totals(alloc)
    assert (got["acquired"], got["refused_timeout"], got["reclaimed"]) == (1, 1, 1)


def test_a_lease_found_lost_is_counted_once(client: Any) -> None:
    pool = ResourcePool(client, unique("p"))
    pool.associate("r1")
    lease = pool.acquire(lease_timeout=30)
    assert lease is not None
    assert pool.force_release("r1")
    assert not lease.renew()  # found lost
    assert not lease.release()  # already known lost: not counted again
    assert totals(pool)["lost"] == 1


def test_a_wait_is_observed_in_its_bucket(client: Any) -> None:
    pool = ResourcePool(client, unique("p"))
    pool.associate("r1")
    first = pool.acquire()
    assert first is not None
    got: list[Any] = []
    waiter = threading.Thread(target=lambda: got.append(pool.acquire(timeout=60)))
    waiter.start()
    wait_blocked(client, what="the second caller to wait")
    blocked = redis_time(client)  # (the waiter started waiting before this)
    wait_for(lambda: redis_time(client) > blocked + 0.3, what="0.3 s of waiting")
    assert first.release()
    waiter.join(60)
    assert got and got[0] is not None
    totals_ = totals(pool)
    # the second grant waited more than 0.3 s: it is in no bucket up to 0.25 s
    up_to = counts.BUCKETS.index(0.25)
    assert sum(totals_.get(f"wait_{i}", 0) for i in range(up_to + 1)) == 1  # the first, at once
    assert totals_["wait_us"] >= int(0.3e6)


def _cycles(url: str, name: str, n: int) -> None:
    import redis

    pool = ResourcePool(redis.Redis.from_url(url), name)
    for _ in range(n):
        with pool.hold(timeout=30):
            pass
    counts.flush()


def test_counts_of_every_process_add_up_exactly(redis_url: str) -> None:
    import redis

    name = unique("p")
    pool = ResourcePool(redis.Redis.from_url(redis_url), name)
    pool.associate_many(["r1", "r2"])
    workers = [mp.Process(target=_cycles, args=(redis_url, name, 200)) for _ in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(120)
        assert worker.exitcode == 0
    got = totals(pool)
    assert got["acquired"] == 800
    assert got["acquired"] == sum(got.get(f"hold_{i}", 0) for i in range(len(counts.BUCKETS) + 1))


def test_counts_reach_redis_without_a_flush(
    redis_client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(counts, "background", True)
    pool = ResourcePool(redis_client, unique("p"))
    pool.associate("r1")
    with pool.hold():
        pass
    wait_for(
        lambda: pool.activity().totals.get("acquired") == 1,
        timeout=3 * counts.FLUSH_EVERY + 5,
        what="the background flush",
    )


def _child_flushes(url: str, name: str) -> None:
    counts.flush()  # nothing of the parent's is pending here


def test_a_forked_child_never_adds_its_parents_counts(redis_url: str) -> None:
    import redis

    pool = ResourcePool(redis.Redis.from_url(redis_url), unique("p"))
    pool.associate("r1")
    assert counts.flush() == 0
    with pool.hold():
        pass
    child = mp.Process(target=_child_flushes, args=(redis_url, pool.name))
    child.start()
    child.join(60)
    assert child.exitcode == 0
    assert totals(pool)["acquired"] == 1


def test_a_retried_flush_adds_nothing_twice(redis_client: Any) -> None:
    pool = ResourcePool(redis_client, unique("p"))
    engine = ops(pool)
    assert int(engine.run("counts_add", "req-1", "acquired", 5)) == 1
    assert int(engine.run("counts_add", "req-1", "acquired", 5)) == 0
    assert pool.activity().totals == {"acquired": 5}


def test_activity_has_the_last_minutes_on_the_redis_clock(client: Any) -> None:
    pool = ResourcePool(client, unique("p"))
    pool.associate("r1")
    with pool.hold():
        pass
    counts.flush()
    activity = pool.activity(minutes=5)
    assert len(activity.minutes) == 5
    starts = [start for start, _ in activity.minutes]
    assert starts == sorted(starts) and starts[-1] - starts[0] == 4 * 60
    now = float(client.time()[0])
    assert starts[-1] <= now < starts[-1] + 60
    assert activity.minutes[-1][1]["acquired"] == 1
    assert all(not minute for _, minute in activity.minutes[:-1])
    assert len(pool.activity(minutes=10**6).minutes) == counts.HISTORY_MINUTES


def test_a_failed_flush_keeps_its_counts(redis_server: Any) -> None:
    import redis

    dead = ResourcePool(redis.Redis(port=closed_port(), socket_connect_timeout=0.5), unique("p"))
    ops(dead).counts.granted(0.0)
    assert counts.flush() >= 1
    assert ops(dead).counts.pending
    assert ops(dead).counts.take()[0][counts.ACQUIRED] == 1


# -- the Prometheus export --------------------------------------------------------


def configure(settings: Any, url: str) -> None:
    settings.DJANGO_REDIS_POOL = {
        "CONNECTION": {"URL": url},
        "POOLS": {"printers": {"RESOURCES": ["p1", "p2"], "MAX_WAITING": 0}},
        "SEMAPHORES": {"reports": {"MAX_SIZE": 2}},
        "LOCKS": {"imports": {}},
        "QUEUES": {"jobs": {}},
    }


def scrape() -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    response = Client().get("/metrics/")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain")
    samples = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def value(samples: dict[Any, float], metric: str, **labels: str) -> float:
    return samples[(metric, tuple(sorted(labels.items())))]


@pytest.mark.urls("tests.urlconfs.admin_and_metrics")
def test_the_metrics_view_exports_state_counters_and_histograms(
    settings: Any, redis_url: str
) -> None:
    from django_redis_pool import get_pool

    configure(settings, redis_url)
    printers = get_pool("printers")
    printers.associate_many(["p1", "p2"])
    with printers.hold():
        pass
    held = printers.acquire(holder="busy")
    assert held is not None
    samples = scrape()
    pool = {"name": "printers", "kind": "pool"}
    assert value(samples, "django_redis_pool_up", **pool) == 1
    assert value(samples, "django_redis_pool_size", **pool) == 2
    assert value(samples, "django_redis_pool_held", **pool) == 1
    assert value(samples, "django_redis_pool_free", **pool) == 1
    assert value(samples, "django_redis_pool_waiting", **pool) == 0
    assert value(samples, "django_redis_pool_oldest_hold_seconds", **pool) >= 0
    assert value(samples, "django_redis_pool_acquired_total", **pool) == 2
    assert value(samples, "django_redis_pool_refused_total", reason="full", **pool) == 0
    assert value(samples, "django_redis_pool_wait_seconds_count", **pool) == 2
    assert value(samples, "django_redis_pool_hold_seconds_count", **pool) == 1
    assert value(samples, "django_redis_pool_hold_seconds_bucket", le="+Inf", **pool) == 1
    sem = {"name": "reports", "kind": "semaphore"}
    assert value(samples, "django_redis_pool_size", **sem) == 2
    jobs = {"name": "jobs", "kind": "queue"}
    assert value(samples, "django_redis_pool_tasks", state="pending", **jobs) == 0
    assert value(samples, "django_redis_pool_tasks_completed_total", **jobs) == 0
    assert ("django_redis_pool_acquired_total", tuple(sorted(jobs.items()))) not in samples


@pytest.mark.urls("tests.urlconfs.admin_and_metrics")
def test_a_scraper_that_accepts_openmetrics_gets_openmetrics(settings: Any, redis_url: str) -> None:
    from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse

    configure(settings, redis_url)
    accept = "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5"
    response = Client().get("/metrics/", HTTP_ACCEPT=accept)
    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/openmetrics-text")
    text = response.content.decode()
    assert text.endswith("# EOF\n")
    names = {family.name for family in parse(text)}
    assert "django_redis_pool_up" in names and "django_redis_pool_acquired" in names


@pytest.mark.urls("tests.urlconfs.admin_and_metrics")
def test_a_primitive_that_cannot_be_read_is_exported_as_down(settings: Any) -> None:
    configure(settings, f"redis://127.0.0.1:{closed_port()}/0")
    samples = scrape()
    assert value(samples, "django_redis_pool_up", name="printers", kind="pool") == 0


def test_registering_the_collector_reads_nothing(settings: Any, redis_url: str) -> None:
    import redis
    from prometheus_client import CollectorRegistry

    from django_redis_pool.metrics import RedisPoolCollector

    configure(settings, redis_url)
    server = redis.Redis.from_url(redis_url)

    def commands() -> int:
        stats = server.info("commandstats")
        return sum(v["calls"] for k, v in stats.items() if k != "cmdstat_info")

    before = commands()
    CollectorRegistry().register(RedisPoolCollector())  # type: ignore[arg-type]
    assert commands() == before


def test_the_collector_is_registered_once_and_never_doubled(settings: Any, redis_url: str) -> None:
    from prometheus_client import CollectorRegistry, generate_latest

    from django_redis_pool.metrics import RedisPoolCollector, register_collector

    configure(settings, redis_url)
    target = CollectorRegistry()
    first = register_collector(target)
    assert register_collector(target) is first, "idempotent (AppConfig.ready run twice)"
    with pytest.raises(ValueError, match="Duplicated"):
        target.register(RedisPoolCollector())  # type: ignore[arg-type]
    text = generate_latest(target).decode()
    assert text.count('django_redis_pool_up{kind="pool",name="printers"}') == 1


@pytest.mark.urls("tests.urlconfs.admin_and_metrics")
@pytest.mark.parametrize("form", ["URL", "CACHE"])
def test_a_scrape_of_a_hung_redis_answers_within_its_deadline_with_up_0(
    settings: Any,
    hung_server: Any,  # noqa: F811
    form: str,
) -> None:
    """Redis accepts connections and never answers (SIGSTOP): the scrape still
    answers, well inside Prometheus's 10 s, every primitive down; also through
    a django-redis cache's settings (which set no socket timeout)."""
    configure(settings, hung_server.url)
    settings.DJANGO_REDIS_POOL["METRICS_DEADLINE"] = 1
    if form == "CACHE":
        settings.CACHES = {
            "default": {"BACKEND": "django_redis.cache.RedisCache", "LOCATION": hung_server.url}
        }
        settings.DJANGO_REDIS_POOL["CONNECTION"] = {"CACHE": "default"}
    os.kill(hung_server.pid, signal.SIGSTOP)
    watch = time.monotonic()
    samples = scrape()
    assert time.monotonic() - watch < 10, "inside Prometheus's scrape timeout"
    for name, kind in (("printers", "pool"), ("reports", "semaphore"), ("jobs", "queue")):
        assert value(samples, "django_redis_pool_up", name=name, kind=kind) == 0


def test_each_minute_keeps_the_peak_of_holds_and_waiters_its_flushes_saw(client: Any) -> None:
    pool = ResourcePool(client, unique("p"))
    pool.associate_many(["r1", "r2", "r3"])
    held = [pool.acquire() for _ in range(3)]
    counts.flush()  # sees 3 held
    for lease in held:
        assert lease is not None and lease.release()
    counts.flush()  # sees 0 held: the peak stays 3
    minute = pool.activity(minutes=1).minutes[-1][1]
    assert (minute["held_max"], minute["waiting_max"]) == (3, 0)


def test_quantiles_are_estimated_from_the_buckets_as_prometheus_does() -> None:
    activity = counts.Activity()
    assert activity.quantile("wait", 0.95) is None
    i = counts.BUCKETS.index(0.1)  # 100 waits in (0.05, 0.1]
    activity.totals = {f"wait_{i}": 100}
    assert activity.quantile("wait", 0.5) == pytest.approx(0.075)
    assert activity.quantile("wait", 1.0) == pytest.approx(0.1)
    activity.totals = {f"wait_{len(counts.BUCKETS)}": 1}  # beyond the last bound
    assert activity.quantile("wait", 0.5) == counts.BUCKETS[-1]


def test_the_counts_of_a_primitive_dropped_before_the_flush_are_added(redis_client: Any) -> None:
    import gc

    name = unique("p")
    pool = ResourcePool(redis_client, name)
    pool.associate("r1")
    with pool.hold():
        pass
    del pool
    gc.collect()
    counts.flush()
    assert ResourcePool(redis_client, name).activity().totals["acquired"] == 1


def _count_in_child(url: str, name: str) -> None:
    import redis

    pool = _POOLS[name]
    ops(pool).client = redis.Redis.from_url(url)
    with pool.hold(timeout=5):
        pass
    counts.flush()


_POOLS: dict[str, ResourcePool] = {}


def test_a_child_forked_while_a_count_was_being_recorded_can_count(redis_url: str) -> None:
    import redis

    pool = ResourcePool(redis.Redis.from_url(redis_url), unique("p"))
    pool.associate("r1")
    _POOLS[pool.name] = pool
    ops(pool).counts._lock.acquire()  # as if a thread was recording at the fork
    try:
        child = mp.Process(target=_count_in_child, args=(redis_url, pool.name))
        child.start()
        child.join(60)
    finally:
        ops(pool).counts._lock.release()
        del _POOLS[pool.name]
    assert child.exitcode == 0
    assert totals(pool)["acquired"] == 1
