"""The admin's panels of task queues: the overview's running and pending
tasks, the chart of the tasks completed and failed, a section of the counts
and one page of the failed tasks, and the retry, delete and gc actions."""

from __future__ import annotations

from typing import Any

from django import forms
from django.template.defaultfilters import pluralize

from .. import registry
from ..kinds.contract import Kind
from . import Summary, action, charts, message_or_fail, section, summary
from .tables import PAGE_SIZE, as_datetime, page_number, paged_table

__all__ = ["TaskForm", "register_queue"]

TEMPLATE = "admin/django_redis_pool/kinds/queue_failed.html"
#: A queue's chart: the tasks that completed and those that failed, each minute.
TASKS = charts.Series(
    granted=("completed",),
    refused=("failed",),
    granted_word="completed",
    refused_word="failed",
    wait=False,
    peaks=False,  # (nothing is held: its flushes sample no holds or waiters)
)


class TaskForm(forms.Form):
    """Names one task."""

    task_id = forms.CharField(max_length=200)


def register_queue(kind: Kind) -> None:
    """A queue's panels: its summary, the chart of its tasks, its failed
    tasks, retry, delete and gc."""
    summary(kind.name)(queue_summary)
    charts.register(kind.name, TASKS)
    section(kind.name, title="Failed tasks", template=TEMPLATE)(failed_section)
    action(
        kind.name,
        "retry",
        label="Retry",
        form=TaskForm,
        placement="row",
        question="Queue the failed task {task_id} of queue {primitive.name!r} again?",
    )(retry_task)
    action(
        kind.name,
        "delete",
        label="Delete",
        form=TaskForm,
        placement="row",
        dangerous=True,
        question="Delete task {task_id} of queue {primitive.name!r}?",
    )(delete_task)
    action(
        kind.name,
        "gc",
        label="Run gc now",
        question="Requeue the tasks of dead workers of queue {primitive.name!r} now?",
    )(run_gc)


def queue_summary(queue: Any) -> Summary:
    """Running and pending tasks; a warning when tasks wait with no worker, or failed."""
    counts = queue.counts()
    notes, health = [], "ok"
    if counts["pending"] and not counts["workers"]:
        health = "warning"
        notes.append(f"{counts['pending']} pending, no live worker: run manage.py pool_worker")
    if counts["failed"]:
        health = "warning"
        notes.append(f"{counts['failed']} failed")
    workers = counts["workers"]
    notes.append(f"{workers} worker{pluralize(workers)}, {counts['scheduled']} deferred")
    return Summary(
        held=counts["running"], waiting=counts["pending"], health=health, note="; ".join(notes)
    )


def failed_section(queue: Any, request: Any) -> dict[str, Any]:
    """Counts, and one page of the failed tasks (the latest first)."""
    number = page_number(request, "failed")
    total, tasks = queue.failed(offset=(number - 1) * PAGE_SIZE, limit=PAGE_SIZE)
    rows = [
        {
            "task_id": t.id,
            "name": t.name,
            "error": t.error,
            "attempts": t.attempts,
            "finished": as_datetime(t.finished_at),
        }
        for t in tasks
    ]
    return {"counts": queue.counts(), "failed": paged_table(request, "failed", rows, total, number)}


def retry_task(queue: Any, data: dict[str, Any]) -> str:
    """Queue a failed task again (its attempts start over)."""
    task_id = data["task_id"]
    retried = queue.retry(task_id)
    return message_or_fail(
        retried, f"Task {task_id} is queued again.", f"Task {task_id} is not failed (any more)."
    )


def delete_task(queue: Any, data: dict[str, Any]) -> str:
    """Remove a task that is not running."""
    task_id = data["task_id"]
    deleted = queue.delete(task_id)
    return message_or_fail(
        deleted, f"Task {task_id} was deleted.", f"Task {task_id} is gone or running."
    )


def run_gc(queue: Any, data: dict[str, Any]) -> str:
    """What ``manage.py pool_gc --name`` does, for one queue."""
    counts = registry.by_name()[queue.kind].collect(queue, dry_run=False).counts
    requeued, failed = counts.get("requeued", 0), counts.get("failed", 0)
    return (
        f"gc of queue {queue.name!r}: requeued {requeued} task{pluralize(requeued)}, "
        f"failed {failed} past their last attempt."
    )
