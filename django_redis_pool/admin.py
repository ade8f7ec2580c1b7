"""The admin dashboard: live contents of every configured primitive, and
operator actions behind confirmation pages.

URLs (in the ``admin`` namespace), under ``<admin>/django_redis_pool/dashboard/``;
a ``name`` in them is quoted like the admin's object ids
(``django.contrib.admin.utils.quote``, which leaves plain names as they are):

- ``django_redis_pool_dashboard``: every primitive with its counts and health;
- ``django_redis_pool_primitive`` (``name``): one primitive's detail page;
- ``django_redis_pool_action`` (``name``, ``action``): an action's confirmation
  page (GET) and the action itself (POST, then a redirect to the detail page).

Viewing needs a staff user with ``django_redis_pool.view_dashboard`` (or the
change permission); actions need ``django_redis_pool.change_dashboard``. Others
get 403, anonymous users the login page. What each kind shows and can do is
registered in :mod:`.dashboard`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from types import SimpleNamespace
from typing import Any

from django.contrib import admin, messages
from django.contrib.admin.utils import quote, unquote
from django.core.exceptions import ImproperlyConfigured, PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.loader import render_to_string
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse

from . import conf, dashboard, registry
from .conf.masking import masked_text, masked_url
from .dashboard import charts
from .exceptions import BackendUnavailable, PoolError
from .models import Dashboard

logger = logging.getLogger("django_redis_pool")

PRIMITIVE_TEMPLATE = "admin/django_redis_pool/primitive.html"
DASHBOARD_TEMPLATE = "admin/django_redis_pool/dashboard.html"
#: An overview row's note while Redis cannot be reached (the page says why once).
UNREAD = "not read: Redis could not be reached (see above)"


def connection_label(connection: Mapping[str, Any]) -> str:
    """Where the primitives live, for people: passwords masked, options left out."""
    if "CACHE" in connection:
        return f"the Redis of Django cache {connection['CACHE']!r}"
    if "SENTINELS" in connection:
        sentinels = ", ".join(f"{host}:{port}" for host, port in connection["SENTINELS"])
        return f"Sentinel service {connection['SERVICE_NAME']!r} via {sentinels}"
    label = masked_url(str(connection.get("URL", "")))
    return f"Redis Cluster {label}" if connection.get("CLUSTER") else label


def read_error(exc: Exception) -> str:
    """What a page says when Redis could not be read: what failed, and what to do."""
    message = str(exc).rstrip(".")
    if not message.startswith("Redis"):
        message = f"Redis could not be read: {message}"
    if isinstance(exc, BackendUnavailable):
        return (
            f"{message}. Nothing can be shown or changed until it answers: start Redis, or fix "
            f"{conf.setting_path('CONNECTION')}, then reload this page."
        )
    return f"{message}. Nothing can be shown or changed until it reads; reload this page to retry."


@admin.register(Dashboard)
class DashboardAdmin(admin.ModelAdmin):
    """Serves the dashboard instead of a change list; nothing is stored in SQL."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def get_urls(self) -> list[URLPattern]:
        wrap = self.admin_site.admin_view  # staff only, CSRF-protected, never cached
        return [
            path("", wrap(self.dashboard_view), name="django_redis_pool_dashboard"),
            path("", wrap(self.dashboard_view), name="django_redis_pool_dashboard_changelist"),
            path(
                "<str:name>/actions/<slug:action>/",
                wrap(self.action_view),
                name="django_redis_pool_action",
            ),
            path("<str:name>/", wrap(self.primitive_view), name="django_redis_pool_primitive"),
        ]

    # -- views --------------------------------------------------------------------

    def dashboard_view(self, request: HttpRequest) -> HttpResponse:
        """Every configured primitive: kind, counts, health and a sparkline of
        its last hour (two round trips each: its summary, its activity)."""
        self._require(request, self.has_view_permission)
        refused = self._invalid_setting(request)
        if refused is not None:
            return refused
        config = registry.get_config()
        rows = []
        down: BackendUnavailable | None = None  # every primitive shares one client: fail once
        for name in config.names():
            entry = config.entries[name]
            summarize = dashboard.SUMMARIES.get(entry.kind.name)
            row: dict[str, Any] = {"name": name, "kind": entry.kind.label, "sparkline": None}
            row["summarized"] = summarize is not None
            if summarize is not None and down is not None:
                row["summary"] = dashboard.Summary(health="error", note=UNREAD)
            elif summarize is not None:
                try:
                    primitive = registry.get_resource(name)
                    row["summary"] = summarize(primitive)
                    row["sparkline"] = charts.sparkline_of(primitive)  # (None if unread)
                except BackendUnavailable as exc:  # said once, above the table
                    row["summary"] = dashboard.Summary(health="error", note=UNREAD)
                    down = exc
                except PoolError as exc:
                    row["summary"] = dashboard.Summary(health="error", note=str(exc))
            rows.append(row)
        context = {
            **self._context(request, "Redis pools"),
            "error": None if down is None else read_error(down),
            "rows": rows,
            "connection": connection_label(config.connection),
            "key_prefix": config.key_prefix,
            "kinds": registry.plurals(),
        }
        return TemplateResponse(request, DASHBOARD_TEMPLATE, context)

    def primitive_view(self, request: HttpRequest, name: str) -> HttpResponse:
        """One primitive: the sections its kind registered, and its page actions."""
        self._require(request, self.has_view_permission)
        refused = self._invalid_setting(request)
        if refused is not None:
            return refused
        name = unquote(name)
        entry = self._entry(name)
        try:
            primitive = registry.get_resource(name)
        except PoolError as exc:  # a Redis Cluster that cannot be reached
            stand_in = SimpleNamespace(kind=entry.kind.name, name=name)
            context = {
                **self._context(request, self._title(stand_in), stand_in),
                "error": read_error(exc),
            }
            return TemplateResponse(request, PRIMITIVE_TEMPLATE, context, status=503)
        actions = dashboard.ACTIONS.get(primitive.kind, {})
        context = {
            **self._context(request, self._title(primitive), primitive),
            "page_actions": [a for a in actions.values() if a.placement == "page"],
            "row_actions": actions,
            # reversed once, not per row: sections append the query string
            "action_urls": {
                slug: reverse("admin:django_redis_pool_action", args=[quote(name), slug])
                for slug in actions
            },
        }
        sections, error = [], None
        try:
            for section in dashboard.SECTIONS.get(primitive.kind, []):
                data = {**context, **section.context(primitive, request), "section": section}
                sections.append((section, render_to_string(section.template, data, request)))
        except PoolError as exc:
            # Show nothing read and offer no action: the state is unknown.
            sections, error = [], read_error(exc)
            context.update(page_actions=[], row_actions={}, action_urls={})
        context.update(sections=sections, error=error)
        return TemplateResponse(request, PRIMITIVE_TEMPLATE, context, status=503 if error else 200)

    def action_view(self, request: HttpRequest, name: str, action: str) -> HttpResponse:
        """GET: the confirmation page. POST: run the action, then redirect."""
        self._require(request, self.has_change_permission)
        refused = self._invalid_setting(request)
        if refused is not None:
            return refused
        name = unquote(name)
        entry = self._entry(name)
        chosen = dashboard.ACTIONS.get(entry.kind.name, {}).get(action)
        if chosen is None:
            raise Http404(f"{entry.kind.label} {name!r} has no action {action!r}")
        detail = reverse("admin:django_redis_pool_primitive", args=[quote(name)])
        try:
            primitive = registry.get_resource(name)
        except PoolError as exc:  # a Redis Cluster that cannot be reached
            messages.error(request, f"{chosen.label} on {entry.kind.label} {name!r} failed: {exc}")
            return HttpResponseRedirect(detail)
        if request.method == "POST":
            form = chosen.form(request.POST)
            if form.is_valid():
                self._run_action(request, chosen, primitive, form.cleaned_data)
                return HttpResponseRedirect(detail)
        elif request.GET:  # row links arrive with their parameters in the query string
            form = chosen.form(request.GET)
        else:
            form = chosen.form(initial=self._initial(request, chosen, primitive))
        # Ask only once every parameter is valid; until then the form is edited
        # and submitted with GET, which changes nothing.
        question = None
        if not form.fields or (form.is_bound and form.is_valid()):
            # (a form without fields, bound to a stray query string, is valid too)
            data = form.cleaned_data if form.is_bound and form.is_valid() else {}
            question = chosen.question.format(primitive=primitive, label=chosen.label, **data)
            for field in form.fields.values():
                field.widget = field.hidden_widget()
        context = {
            **self._context(request, chosen.label, primitive),
            "action": chosen,
            "form": form,
            "question": question,
            "detail_url": detail,
        }
        return TemplateResponse(request, "admin/django_redis_pool/confirm.html", context)

    # -- helpers ------------------------------------------------------------------

    def _require(self, request: HttpRequest, permission: Any) -> None:
        if not permission(request):
            raise PermissionDenied

    def _invalid_setting(self, request: HttpRequest) -> HttpResponse | None:
        """The dashboard saying what is wrong if the setting is invalid (a 500
        that names the problem, not a traceback), else None."""
        try:
            registry.get_config()
        except ImproperlyConfigured as exc:
            context = {
                **self._context(request, "Redis pools"),
                "config_error": masked_text(
                    f"{conf.SETTING_NAME} is invalid, so nothing can be shown: {exc}"
                ),
            }
            return TemplateResponse(request, DASHBOARD_TEMPLATE, context, status=500)
        return None

    def _entry(self, name: str) -> conf.Entry:
        entry = registry.get_config().entries.get(name)
        if entry is None:
            raise Http404(f"No primitive named {name!r} is configured.")
        return entry

    @staticmethod
    def _title(primitive: Any) -> str:
        kind = registry.by_name().get(primitive.kind)
        label = kind.label if kind is not None else primitive.kind.replace("_", " ")
        return f"{label.capitalize()} {primitive.name}"

    @staticmethod
    def _initial(request: HttpRequest, chosen: dashboard.Action, primitive: Any) -> dict[str, Any]:
        """The values the action's form opens with, as read from the primitive
        (none if Redis cannot tell them now: the form opens empty, with a warning)."""
        if chosen.initial is None:
            return {}
        try:
            return chosen.initial(primitive)
        except PoolError as exc:
            messages.warning(request, f"The current values could not be read: {exc}")
            return {}

    def _run_action(
        self, request: HttpRequest, chosen: dashboard.Action, primitive: Any, data: dict[str, Any]
    ) -> None:
        where = f"{primitive.kind} {primitive.name!r}"
        try:
            message = chosen.run(primitive, data)
        except dashboard.ActionFailed as exc:
            messages.warning(request, str(exc))
            return
        except (PoolError, ValueError) as exc:
            messages.error(request, f"{chosen.label} on {where} failed: {exc}")
            return
        logger.warning("admin: %s ran %r on %s with %r", request.user, chosen.name, where, data)
        messages.success(request, message)

    def _context(self, request: HttpRequest, title: str, primitive: Any = None) -> dict[str, Any]:
        return {
            **self.admin_site.each_context(request),
            "title": title,
            "opts": self.model._meta,
            "primitive": primitive,
            "can_change": self.has_change_permission(request),
            "dashboard_url": reverse("admin:django_redis_pool_dashboard"),
        }
