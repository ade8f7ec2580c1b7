"""The URLconf scan: every ``@with_resource(name)`` on a routed view names a
primitive that is configured and that a request can hold (E023), its
``permits=`` suits that primitive (E038, E039), and a routed
``metrics_view`` finds ``prometheus_client`` installed (E043).

:func:`findings` gives them as :class:`~.conf.Finding` objects;
:func:`.checks.check_view_resources` reports them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from . import conf, registry

__all__ = ["findings"]


def findings(config: conf.Config) -> list[conf.Finding]:
    """E023 for each routed view whose ``@with_resource`` name ``config`` (a valid
    setting) cannot serve, E038/E039 for one whose ``permits=`` the primitive
    cannot take. Nothing when the URLconf cannot be loaded (Django's URL checks
    report that)."""
    from django.urls import get_resolver

    try:
        patterns = get_resolver().url_patterns
        found = set(_routed_guards(patterns))
        metrics_routes = sorted(_routed_metrics_views(patterns))
    except Exception:
        return []
    usable = {name: entry.kind for name, entry in config.entries.items()}
    result = conf.Findings()
    for view, guard in sorted(found, key=lambda item: (item[0], item[1].name)):
        if guard.name not in usable:
            result.add(
                "E023",
                f"{view} is decorated with @with_resource({guard.name!r}), but "
                f"{guard.name!r} is not configured in {conf.SETTING_NAME}.",
                f"Fix the name, or configure it, e.g. in "
                f"{conf.setting_path(registry.example_key())}. Configured: "
                f"{', '.join(map(repr, sorted(usable))) or 'none'}.",
                obj=view,
            )
        elif not usable[guard.name].holds_requests:
            kind = usable[guard.name]
            holdable = conf.holdable_names(usable)
            result.add(
                "E023",
                f"{view} is decorated with @with_resource({guard.name!r}), but "
                f"{guard.name!r} is {kind.a_label}, which a request cannot hold "
                "(every request would fail with NotConfigured).",
                "Name a primitive a request can hold: "
                f"{', '.join(map(repr, holdable)) or 'none is configured'}.",
                obj=view,
            )
        elif guard.permits is not None:
            problem = conf.permits_problem(
                guard.permits,
                f"The permits of @with_resource({guard.name!r}) on {view}",
                guard.name,
                usable[guard.name],
                config.entries,
                kinds=registry.KINDS,
            )
            if problem is not None:
                result.add(problem.id, f"{problem}.", problem.hint or "", obj=view)
    if metrics_routes and not _has_prometheus_client():
        result.add(
            "E043",
            f"django_redis_pool.metrics.metrics_view is routed ({', '.join(metrics_routes)}), "
            "but prometheus_client is not installed: every scrape would fail.",
            "pip install 'django-redis-pool[prometheus]', or remove the route.",
            obj="django_redis_pool.metrics.metrics_view",
        )
    return result


def _routed_metrics_views(patterns: Iterable[Any], prefix: str = "") -> Iterable[str]:
    """The routes (as written in the URLconf) that serve ``metrics_view``."""
    for pattern in patterns:
        route = f"{prefix}{getattr(pattern, 'pattern', '')}"
        if hasattr(pattern, "url_patterns"):  # an include()
            yield from _routed_metrics_views(pattern.url_patterns, route)
            continue
        callback = getattr(pattern, "callback", None)
        if (
            getattr(callback, "__module__", None) == "django_redis_pool.metrics"
            and getattr(callback, "__name__", None) == "metrics_view"
        ):
            yield repr(route)


def _has_prometheus_client() -> bool:
    try:
        import prometheus_client  # noqa: F401
    except ImportError:
        return False
    return True


def _routed_guards(patterns: Iterable[Any]) -> Iterable[tuple[str, Any]]:
    """(view label, guard) of every ``@with_resource`` on views in ``patterns``."""
    for pattern in patterns:
        if hasattr(pattern, "url_patterns"):  # an include()
            yield from _routed_guards(pattern.url_patterns)
            continue
        callback = getattr(pattern, "callback", None)
        view_class = getattr(callback, "view_class", None)
        targets = [callback]
        if view_class is not None:  # method_decorator on a class-based view's methods
            targets += [
                getattr(view_class, m, None) for m in ("dispatch", *view_class.http_method_names)
            ]
        label = getattr(callback, "__qualname__", repr(callback))
        if view_class is not None:
            label = view_class.__qualname__
        label = f"{getattr(callback, '__module__', '?')}.{label}"
        for target in targets:
            for guard in getattr(target, "resource_guards", ()):
                yield label, guard
