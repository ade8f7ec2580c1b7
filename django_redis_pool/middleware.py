"""``ResourceMiddleware``: hold a primitive for the requests a rule matches.

Rules come from ``DJANGO_REDIS_POOL["MIDDLEWARE"]``, a list of
``{"PATH": regex, "METHODS": [...], "RESOURCE": name, "TIMEOUT": s}`` (plus the
other ``with_resource`` options in upper case: ``LEASE_TIMEOUT``, ``IDENTITY``,
``STATUS``, ``RETRY_AFTER``, ``PERMITS``). ``PATH`` is matched from the start of
``request.path_info``; no ``METHODS`` means any method. The first matching rule
applies; a request no rule matches passes through untouched.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.http import HttpRequest

from . import conf, registry
from .guard import Guard

__all__ = ["ResourceMiddleware"]


class ResourceMiddleware:
    """Holds the resource of the first matching rule while the request is served
    (sync and async capable)."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Callable[[HttpRequest], Any]) -> None:
        self.get_response = get_response
        self.async_mode = iscoroutinefunction(get_response)
        if self.async_mode:
            markcoroutinefunction(self)
        self._guards: tuple[conf.Config | None, list[tuple[conf.Rule, Guard]]] = (None, [])

    def guard_for(self, request: HttpRequest) -> Guard | None:
        """The guard of the first rule matching ``request`` (None: no rule does)."""
        config = registry.get_config()
        built_for, guards = self._guards
        if built_for is not config:  # first request, or the setting changed
            guards = [(rule, Guard(rule.resource, **rule.options)) for rule in config.middleware]
            self._guards = (config, guards)
        for rule, guard in guards:
            if rule.matches(request.path_info, request.method):
                return guard
        return None

    def __call__(self, request: HttpRequest) -> Any:
        if self.async_mode:
            return self.__acall__(request)
        guard = self.guard_for(request)
        if guard is None:
            return self.get_response(request)
        return guard.call(request, self.get_response, (), {})

    async def __acall__(self, request: HttpRequest) -> Any:
        guard = self.guard_for(request)
        get_response: Callable[[HttpRequest], Awaitable[Any]] = self.get_response
        if guard is None:
            return await get_response(request)
        return await guard.acall(request, get_response, (), {})
