"""The task queue's pages: ``/task/`` (a form that starts a "count" task, and
the visitor's recent tasks) and ``/task/<id>/`` (one task, its progress shown
in place until it ends; ``?format=json`` is its state for that page's script)."""

import json
import math
from typing import Any

from django.http import HttpRequest, HttpResponse, HttpResponseRedirect, JsonResponse
from django.middleware.csrf import get_token
from django.utils.html import format_html, format_html_join
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_http_methods

from django_redis_pool import BackendUnavailable, Task, get_queue

from .page_scripts import TASK_SCRIPT
from .pages import page, redis_down

#: How many of the tasks a visitor started ``/task/`` lists (kept in its session).
RECENT_TASKS = 10
#: The most a task may be asked to count to (``/task/``'s form).
MAX_COUNT = 50
#: A task's state while it has not ended.
UNDERWAY = ("queued", "running")


@require_http_methods(["GET", "POST"])
def tasks(request: HttpRequest) -> HttpResponse:
    """GET: the form that starts a "count" task, and the tasks this visitor
    started (kept in its session) as they are now. POST: enqueue one, and go to
    its page."""
    queue = get_queue("default")
    started: list[str] = request.session.get("tasks", [])
    if request.method == "POST":
        try:
            to = min(max(int(request.POST.get("to", 10)), 1), MAX_COUNT)
        except ValueError:
            to = 10
        try:
            task_id = queue.enqueue("count", {"to": to})
        except BackendUnavailable as exc:
            return redis_down(exc)
        request.session["tasks"] = [task_id, *started][:RECENT_TASKS]
        return HttpResponseRedirect(f"/task/{task_id}/", status=303)
    try:
        recent = [task for task in map(queue.get_task, started) if task is not None]
    except BackendUnavailable as exc:
        return redis_down(exc)
    rows = format_html_join(
        "",
        "<tr><td><a href='/task/{}/'>{}</a></td><td>{}</td><td>{}</td></tr>",
        ((task.id, task.id, task.status, outcome(task)) for task in recent),
    )
    body = format_html(
        "<form method='post' action='/task/'><input type='hidden' name='csrfmiddlewaretoken' "
        "value='{}'><label>Count to <input type='number' name='to' value='10' min='1' "
        "max='{}'></label> (a step every 0.2 s) <button id='start' type='submit'>Start a "
        "task</button></form><h2>Your recent tasks</h2>{}",
        get_token(request),
        MAX_COUNT,
        format_html(
            "<table id='recent' border='1'><tr><th>task</th><th>status</th><th>result</th>"
            "</tr>{}</table>",
            rows,
        )
        if recent
        else mark_safe("<p id='recent'>None yet (a task is kept 10 minutes after it ends).</p>"),
    )
    return page("Tasks", body)


def outcome(task: Task) -> str:
    """A task's result as JSON, or its error; empty while it has neither."""
    if task.status == "done":
        return json.dumps(task.result)
    return task.error or ""


def _number(value: object) -> float | None:
    """A progress figure read back from Redis, if it is a finite number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def task_state(task: Task) -> dict[str, Any]:
    """What the task page shows of ``task``: its status, its progress (the
    figures, and as text: "5 of 10", empty before the first report), its
    result or error once it ended, and whether it ended."""
    current, total = (_number(n) for n in task.progress or (None, None))
    reported = current is not None and total is not None and total > 0
    ended = task.status not in UNDERWAY
    if task.status == "done":
        result = f"result: {outcome(task)}"
    else:
        result = (task.error or "") if ended else ""
    return {
        "status": task.status,
        "current": current if reported else None,
        "total": total if reported else None,
        "progress": f"{current:g} of {total:g}" if reported else "",
        "result": result,
        "ended": ended,
    }


def task_status(request: HttpRequest, task_id: str) -> HttpResponse:
    """A task's status and progress, which the page's script keeps up to date
    (from ``?format=json``, the same state as JSON) until it ends."""
    try:
        task = get_queue("default").get_task(task_id)
    except BackendUnavailable as exc:
        return redis_down(exc)
    as_json = request.GET.get("format") == "json"
    if task is None:
        if as_json:
            return JsonResponse({"error": "no such task"}, status=404)
        return page("No such task", format_html("<p>{} is gone.</p>", task_id), status=404)
    state = task_state(task)
    if as_json:
        response = JsonResponse(state)
        response["Cache-Control"] = "no-store"
        return response
    if state["total"] is None:  # (indeterminate)
        bar = mark_safe("<progress id='progress'></progress>")
    else:
        bar = format_html(
            "<progress id='progress' value='{}' max='{}'></progress>",
            f"{state['current']:g}",
            f"{state['total']:g}",
        )
    body = format_html(
        "<div id='task' data-json='?format=json' data-ended='{}'><p id='status'>{}</p>"
        "<p>{} <span id='count'>{}</span></p><p id='result'>{}</p>"
        "<p id='queued'{}>Queued until a worker runs it: <code>python manage.py "
        "pool_worker</code> (<code>scripts/dev.py example</code> starts one).</p></div>"
        "<script>{}</script>",
        "true" if state["ended"] else "false",
        state["status"],
        bar,
        state["progress"],
        state["result"],
        "" if state["status"] == "queued" else mark_safe(" hidden"),
        TASK_SCRIPT,
    )
    return page(f"Task {task.name}", body)
