"""Prometheus metrics of every configured primitive (``pip install django-redis-pool[prometheus]``).

Site-wide: every process and host adds what it counted into Redis (within
about two seconds, :mod:`.primitives.counts`), so a scrape of any one process
shows the totals of all. Gauges are read from Redis at each scrape.

* :func:`metrics_view`: a view answering in Prometheus's text format, for your
  URLconf (``path("metrics/", metrics_view)``; protect it as your other
  internal views).
* :func:`register_collector`: the same metrics on ``prometheus_client``'s
  registry (the one django-prometheus serves), registered once however often
  it is called (from your ``AppConfig.ready``); :class:`RedisPoolCollector`
  for a registry of your own.
* :func:`flush`: add this process's counts into Redis now (a scrape does it
  for the process it reaches).

Every metric has the labels ``name`` and ``kind`` (the kind's name, as
``pool_status --json`` says). What a kind exports is its own: its gauges
(:meth:`Kind.gauges <.kinds.Kind.gauges>`) and the families of its counts
(:attr:`Kind.counted <.kinds.Kind.counted>`). ``docs/metrics.md`` lists them
with alerting rules.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Iterable, Iterator
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.http import HttpRequest, HttpResponse

from . import registry
from .exceptions import PoolError
from .primitives import counts
from .primitives.clients.deadlines import deadline

__all__ = ["RedisPoolCollector", "flush", "metrics_view", "register_collector"]

logger = logging.getLogger("django_redis_pool")

PREFIX = "django_redis_pool_"

#: Gauges read at scrape: the kind's gauge key (the metric's name) -> help.
GAUGES = {
    "size": "Resources or slots in all.",
    "free": "Holds that could be granted now.",
    "held": "Live holds (tasks running, objects borrowed).",
    "waiting": "Callers waiting for a hold (tasks ready to run).",
    "oldest_hold_seconds": "Age of the oldest live hold.",
}
#: States of the ``tasks`` gauge: (the kind's gauge key, state label).
TASK_STATES = (
    ("tasks_pending", "pending"),
    ("tasks_running", "running"),
    ("tasks_deferred", "deferred"),
    ("tasks_failed", "failed"),
)
#: Counter families (the names a kind lists in ``counted``): name without
#: _total -> (help, (counted field, extra label values)...).
COUNTERS = {
    "acquired": ("Holds granted.", (("acquired", ()),)),
    "refused": (
        "Callers refused: their wait timed out (reason timeout), max_waiting "
        "callers already waited (reason full) or their quota was spent (reason limited).",
        (
            ("refused_timeout", ("timeout",)),
            ("refused_full", ("full",)),
            ("refused_limited", ("limited",)),
        ),
    ),
    "lost": ("Leases their holder found lost (expired or taken away).", (("lost", ()),)),
    "reclaimed": ("Expired leases reclaimed by gc.", (("reclaimed", ()),)),
    "tasks_completed": ("Tasks that ran to completion.", (("completed", ()),)),
    "tasks_failed": ("Tasks that failed.", (("failed", ()),)),
}
#: Histogram families: name -> (help, the counted fields' stem).
HISTOGRAMS = {
    "wait_seconds": ("Seconds a caller waited for its grant (0: granted at once).", "wait"),
    "hold_seconds": ("Seconds a lease was held, observed when its holder released it.", "hold"),
}


#: The histograms' bucket bounds, as Prometheus writes them.
BOUNDS = [repr(float(bound)) for bound in counts.BUCKETS] + ["+Inf"]


def flush() -> int:
    """Add every count this process recorded into Redis now; returns how many
    primitives' counts could not be added (kept for the next try)."""
    return counts.flush()


class RedisPoolCollector:
    """A ``prometheus_client`` collector of every configured primitive (or of
    ``names`` only), reading Redis at each scrape: one round trip for each
    primitive's state and one for its counts."""

    def __init__(self, names: Iterable[str] | None = None) -> None:
        _require_client()
        self.names = None if names is None else list(names)

    def describe(self) -> Iterator[Any]:
        """The metric families, empty (registering the collector reads no
        Redis): a registry that has one already refuses a second
        (``ValueError: Duplicated timeseries``), so no series is doubled."""
        yield from _Families().all()

    def collect(self) -> Iterator[Any]:
        """Every metric, read now, within one deadline for the whole scrape
        (``METRICS_DEADLINE``): a primitive not read by then is ``up 0``."""
        families = _Families()
        with deadline(registry.get_config().metrics_deadline):
            for name, kind, primitive in self._primitives():
                families.read(name, kind, primitive)
        yield from families.all()

    def _primitives(self) -> Iterator[tuple[str, Any, Any]]:
        config = registry.get_config()
        for name in self.names if self.names is not None else config.names():
            entry = config.entries.get(name)
            if entry is None:
                logger.warning("metrics: %r is not a configured primitive", name)
                continue
            yield name, entry.kind, registry.get_resource(name)


class _Families:
    """Every metric family of one scrape, filled by :meth:`read`."""

    def __init__(self) -> None:
        from prometheus_client.core import (
            CounterMetricFamily,
            GaugeMetricFamily,
            HistogramMetricFamily,
        )

        labels = ["name", "kind"]
        self.up = GaugeMetricFamily(
            PREFIX + "up",
            "1 if the primitive's state was read from Redis at this scrape.",
            labels=labels,
        )
        self.gauges = {
            key: GaugeMetricFamily(PREFIX + key, help_text, labels=labels)
            for key, help_text in GAUGES.items()
        }
        self.tasks = GaugeMetricFamily(
            PREFIX + "tasks", "Tasks by state.", labels=[*labels, "state"]
        )
        self.counters = {
            metric: CounterMetricFamily(
                PREFIX + metric,
                text,
                labels=labels + (["reason"] if metric == "refused" else []),
            )
            for metric, (text, _) in COUNTERS.items()
        }
        self.histograms = {
            metric: HistogramMetricFamily(PREFIX + metric, text, labels=labels)
            for metric, (text, _) in HISTOGRAMS.items()
        }

    def all(self) -> list[Any]:
        return [
            self.up,
            *self.gauges.values(),
            self.tasks,
            *self.counters.values(),
            *self.histograms.values(),
        ]

    def read(self, name: str, kind: Any, primitive: Any) -> None:
        """Add the metrics of one primitive (``up 0`` if it cannot be read)."""
        key = [name, kind.name]
        try:
            state = kind.gauges(primitive)
            activity = primitive.activity() if kind.counted else None
        except PoolError as exc:
            logger.warning("metrics: %s %r could not be read: %s", kind.name, name, exc)
            self.up.add_metric(key, 0)
            return
        self.up.add_metric(key, 1)
        for gauge_key, family in self.gauges.items():
            if state.get(gauge_key) is not None:
                family.add_metric(key, float(state[gauge_key]))  # type: ignore[arg-type]
        for gauge_key, state_label in TASK_STATES:
            if state.get(gauge_key) is not None:
                self.tasks.add_metric([*key, state_label], float(state[gauge_key]))  # type: ignore[arg-type]
        if activity is None:
            return  # (the kind counts nothing)
        totals = activity.totals
        for metric in kind.counted:
            if metric in COUNTERS:
                for field, extra in COUNTERS[metric][1]:
                    self.counters[metric].add_metric([*key, *extra], totals.get(field, 0))
            else:
                stem = HISTOGRAMS[metric][1]
                self.histograms[metric].add_metric(
                    key,
                    buckets=list(zip(BOUNDS, activity.histogram(stem), strict=True)),
                    sum_value=totals.get(f"{stem}_us", 0) / 1e6,
                )


#: The prometheus_client registry that :func:`metrics_view` serves (made on first use).
_view_registry: Any = None


def metrics_view(request: HttpRequest) -> HttpResponse:
    """Every configured primitive's metrics in Prometheus's text format, or in
    OpenMetrics when the scraper's ``Accept`` header asks for it (this
    process's counts are added into Redis first)."""
    global _view_registry
    _require_client()
    from prometheus_client import CollectorRegistry
    from prometheus_client.exposition import choose_encoder

    if _view_registry is None:
        fresh = CollectorRegistry(auto_describe=False)
        fresh.register(RedisPoolCollector())  # type: ignore[arg-type]
        _view_registry = fresh
    encode, content_type = choose_encoder(request.headers.get("Accept", ""))
    with deadline(registry.get_config().metrics_deadline):  # (the flush and the reads)
        flush()
        body = encode(_view_registry)
    return HttpResponse(body, content_type=content_type)


def register_collector(target: Any = None) -> RedisPoolCollector:
    """Register a :class:`RedisPoolCollector` with the ``prometheus_client``
    registry ``target`` (default: ``prometheus_client.REGISTRY``, the one
    django-prometheus serves) once, and return it: calling it again, e.g. from
    ``AppConfig.ready`` run twice, returns the same collector and adds no
    series. (Registering a second collector by hand is refused by the
    registry, ``ValueError: Duplicated timeseries``.)"""
    _require_client()
    from prometheus_client import REGISTRY

    target = REGISTRY if target is None else target
    with _registering_lock:
        collector = _registered_collectors.get(target)
        if collector is None:
            collector = _registered_collectors[target] = RedisPoolCollector()
            target.register(collector)
        return collector


_registering_lock = threading.Lock()
#: prometheus_client registry -> the collector :func:`register_collector` gave it.
_registered_collectors: weakref.WeakKeyDictionary[Any, RedisPoolCollector] = (
    weakref.WeakKeyDictionary()
)


def _require_client() -> None:
    try:
        import prometheus_client  # noqa: F401
    except ImportError:
        raise ImproperlyConfigured(
            "django_redis_pool.metrics needs prometheus_client: "
            "pip install 'django-redis-pool[prometheus]'"
        ) from None
