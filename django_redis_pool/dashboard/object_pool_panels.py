"""The admin's panels of object pools: the overview's totals over the live
processes, and a section of one row per process, as each one published its
counters (:func:`~django_redis_pool.kinds.object_pool.published`)."""

from __future__ import annotations

from typing import Any

from django.template.defaultfilters import pluralize

from ..kinds.contract import Kind
from ..kinds.object_pool import published
from . import Summary, section, summary

__all__ = ["register_object_pool"]

TEMPLATE = "admin/django_redis_pool/kinds/object_pool_processes.html"


def register_object_pool(kind: Kind) -> None:
    """An object pool's panels: its summary and its processes."""
    summary(kind.name)(object_pool_summary)
    section(kind.name, title="Processes", template=TEMPLATE)(processes_section)


def object_pool_summary(pool: Any) -> Summary:
    """Totals over the live processes."""
    processes = published(pool)
    size = sum(p["size"] for p in processes)
    pending = sum(p["pending"] for p in processes)
    return Summary(
        size=size,
        held=sum(p["borrowed"] for p in processes),
        waiting=pending,
        health="warning" if pending else "ok",
        note=f"{len(processes)} process{pluralize(len(processes), 'es')}",
    )


def processes_section(pool: Any, request: Any) -> dict[str, Any]:
    """One row per live process."""
    return {"processes": published(pool)}
