"""Holding a configured primitive while one request is served.

:class:`Guard` is the part shared by ``@with_resource`` and ``ResourceMiddleware``:
it acquires before the view (through the primitive's kind, :meth:`Kind.hold
<.kinds.Kind.hold>`), exposes the hold as ``request.resources[name]``, releases
once the response is closed (after its last chunk) or when the view raises, and
answers "nothing granted in time" with the response of :mod:`.refusals` (never
a 500). Async views wait on threads of their own (:data:`WAITING_THREADS`).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
import math
import os
import socket
import threading
import time
import uuid
import weakref
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from asgiref.sync import sync_to_async
from django.core.exceptions import BadRequest
from django.http import HttpRequest
from django.http.response import HttpResponseBase

from . import conf, kinds, refusals, registry, signals
from .exceptions import BackendUnavailable, NotConfigured, PoolError, ResourceUnavailable
from .kinds import Held
from .primitives.deadlines import deadline
from .primitives.engine import DEADLINE_SLACK
from .primitives.validators import check_holder, check_lease_timeout, check_name, check_timeout

__all__ = ["WAITING_THREADS", "Guard", "Refusal", "on_event_loop"]

logger = logging.getLogger("django_redis_pool")

_HOST = socket.gethostname()


@dataclass
class Refusal:
    """Nothing was held: ``error`` says why (and carries name, status, retry_after)."""

    error: PoolError


def on_event_loop() -> bool:
    """Whether this thread runs an asyncio event loop now."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


class Guard:
    """Holds the primitive ``name`` around a view (see :func:`with_resource`)."""

    def __init__(
        self,
        name: str,
        *,
        timeout: float | None = None,
        lease_timeout: float | None = None,
        identity: Callable[[HttpRequest], str] | str | None = None,
        status: int = 503,
        retry_after: float | None = None,
    ) -> None:
        self.name = check_name(name, "resource name")
        self.timeout = check_timeout(timeout)
        self.lease_timeout = check_lease_timeout(lease_timeout)
        if identity is not None and not (callable(identity) or isinstance(identity, str)):
            raise TypeError(
                f"identity must be a function of the request returning a str (or its dotted "
                f"path), got {identity!r}"
            )
        self._identity = identity
        self.status = conf.check_status(status)
        self.retry_after = conf.check_retry_after(retry_after)

    def __repr__(self) -> str:
        return f"<Guard {self.name!r} timeout={self.timeout} status={self.status}>"

    # -- acquiring -------------------------------------------------------------

    def holder_of(self, request: HttpRequest) -> str:
        """Who holds for ``request``: ``identity(request)``, else a unique id
        naming the host, process and request. An identity that is not a valid
        holder (empty, not a str, over 200 characters, control characters) is
        the client's fault: ``BadRequest`` (a 400), logged as a warning."""
        if self._identity is None:
            label = f"{_HOST}:{os.getpid()}:{uuid.uuid4().hex[:12]} {request.method} {request.path}"
            return label[:200]
        identity = self._identity
        if isinstance(identity, str):
            identity = self._identity = conf.import_callable(identity, "identity")
        value = identity(request)
        try:
            return check_holder(value, f"identity(request) for {self.name!r}")
        except ValueError as exc:  # identities are often built from client input
            logger.warning("%s %s answered 400: %s", request.method, request.path, exc)
            raise BadRequest(str(exc)) from exc

    def enter(self, request: HttpRequest, holder: str | None = None) -> Held | Refusal | None:
        """Acquire for ``request`` (blocking; never on the event loop) as
        ``holder`` (default: :meth:`holder_of`). None when Redis fails and
        ``FAIL_OPEN`` lets the view run without a hold."""
        started = time.monotonic()
        resources = _resources_of(request)
        primitive: Any = None
        try:
            primitive = registry.get_resource(self.name)  # a Cluster client connects here
            holder = holder or self.holder_of(request)
            lease_timeout, watched = self.lease_timeout, False
            if lease_timeout is None and getattr(primitive, "lease_timeout", 0) is None:
                # No lease would ever end it: a watchdog lease, renewed while the
                # request runs, ends a killed worker's hold instead.
                lease_timeout, watched = registry.get_config().request_lease, True
            ask = kinds.Ask(
                holder=holder,
                identity=None if self._identity is None else holder,
                timeout=self.wait_of(primitive),
                lease_timeout=lease_timeout,
            )
            wait = ask.timeout
            with deadline(None if wait is None else wait + DEADLINE_SLACK):
                held = kinds.by_name()[primitive.kind].hold(primitive, ask)
            if watched and held is not None and held.lease is not None:
                held.lease.start_auto_renew()
        except NotConfigured:
            raise  # a configuration error, not a busy resource
        except PoolError as exc:  # Redis unreachable, or refusing (OOM, ...)
            failed = "is unreachable" if isinstance(exc, BackendUnavailable) else "failed"
            if registry.get_config().fail_open:
                logger.warning(
                    "%s %s runs without holding %r: Redis %s and FAIL_OPEN is set (%s)",
                    request.method,
                    request.path,
                    self.name,
                    failed,
                    exc,
                )
                resources[self.name] = None
                return None
            logger.error(
                "%s %s answered %s without holding %r: Redis %s (%s)",
                request.method,
                request.path,
                self.status,
                self.name,
                failed,
                exc,
            )
            return self._refuse(request, primitive, exc, started)
        if held is None:
            error = ResourceUnavailable(
                f"{primitive.kind} {self.name!r}: nothing was granted within "
                f"{self.wait_of(primitive)} s"
            )
            logger.info("%s %s: %s", request.method, request.path, error)
            return self._refuse(request, primitive, error, started)
        waited = held.granted_at - started
        held.primitive = primitive
        resources[self.name] = held.hold
        logger.debug(
            "%s %s holds %s %r (fence %s) after waiting %.1f ms",
            request.method,
            request.path,
            primitive.kind,
            self.name,
            held.lease.fence if held.lease else None,
            waited * 1000,
        )
        signals.send(
            signals.resource_acquired,
            type(primitive),
            name=self.name,
            hold=held.hold,
            lease=held.lease,
            request=request,
            waited=waited,
        )
        return held

    def _refuse(
        self, request: HttpRequest, primitive: Any, error: PoolError, started: float
    ) -> Refusal:
        """``primitive`` is None when Redis failed before it could be built."""
        error.name = self.name  # type: ignore[attr-defined]
        error.status = self.status  # type: ignore[attr-defined]
        error.retry_after = self.retry_after_for(primitive)  # type: ignore[attr-defined]
        if primitive is not None:
            sender: type = type(primitive)
        else:
            entry = registry.get_config().entries.get(self.name)
            sender = (entry.kind.primitive if entry else None) or object
        signals.send(
            signals.resource_unavailable,
            sender,
            name=self.name,
            request=request,
            error=error,
            waited=time.monotonic() - started,
        )
        return Refusal(error)

    def wait_of(self, primitive: Any) -> float | None:
        """How long to wait for ``primitive``: ``timeout``, else the primitive's
        own wait (its ``timeout``, from a ``TIMEOUT`` option), else forever (None)."""
        return self.timeout if self.timeout is not None else getattr(primitive, "timeout", None)

    def retry_after_for(self, primitive: Any) -> int:
        """``Retry-After`` seconds: ``retry_after``, else the ceiling of the wait,
        else 1."""
        if self.retry_after is not None:
            return self.retry_after
        timeout = self.wait_of(primitive)
        return math.ceil(timeout) if timeout else 1

    # -- releasing -------------------------------------------------------------

    def exit(self, request: HttpRequest, held: Held) -> None:
        """Release ``held`` now; never raises (a hold that cannot be released is
        reclaimed when its lease expires)."""
        if held.lease is not None:
            held.lease.stop_auto_renew()
        try:
            with deadline(DEADLINE_SLACK):  # a hung Redis: the hold ends with its lease
                ok = held.release()
        except Exception as exc:
            logger.error(
                "releasing %r for %s %s failed; it stays held until its lease expires: %s",
                self.name,
                request.method,
                request.path,
                exc,
            )
            ok = False
        held_for = time.monotonic() - held.granted_at
        logger.debug(
            "%s %s released %r after holding it %.1f ms%s",
            request.method,
            request.path,
            self.name,
            held_for * 1000,
            "" if ok else " (it was already gone)",
        )
        signals.send(
            signals.resource_released,
            type(held.primitive),
            name=self.name,
            hold=held.hold,
            lease=held.lease,
            request=request,
            held=held_for,
            lost=not ok,
        )

    def exit_after(self, request: HttpRequest, response: Any, held: Held | None) -> Any:
        """Release ``held`` once ``response`` is closed: after its last chunk is
        sent (or when it is garbage collected unclosed); at once if it is not a
        response."""
        if held is None:
            return response
        closers = getattr(response, "_resource_closers", None)
        if not isinstance(response, HttpResponseBase) or not isinstance(closers, list):
            self._exit_off_loop(request, held)
            return response
        release = weakref.finalize(response, self._exit_off_loop, request, held)
        release.atexit = False
        closers.append(release)
        return response

    def _exit_off_loop(self, request: HttpRequest, held: Held) -> None:
        """:meth:`exit`, in a thread of its own when called on an event loop's
        thread (an async response closed there, or collected there unclosed)."""
        if on_event_loop():
            threading.Thread(
                target=self.exit, args=(request, held), name="drp-release", daemon=True
            ).start()
        else:
            self.exit(request, held)

    # -- running a view --------------------------------------------------------

    def call(self, request: HttpRequest, view: Callable[..., Any], args: Any, kwargs: Any) -> Any:
        """Run the sync ``view`` holding the primitive."""
        outcome = self.enter(request)
        if isinstance(outcome, Refusal):
            return refusals.respond(request, outcome.error)
        try:
            response = view(request, *args, **kwargs)
        except BaseException:
            if outcome is not None:
                self.exit(request, outcome)
            raise
        return self.exit_after(request, response, outcome)

    async def acall(
        self, request: HttpRequest, view: Callable[..., Any], args: Any, kwargs: Any
    ) -> Any:
        """Run ``view`` (async, or sync returning an awaitable) holding the
        primitive; Redis is only called from worker threads."""
        outcome = await self._aenter(request)
        if isinstance(outcome, Refusal):
            return await refusals.arespond(request, outcome.error)
        try:
            response = view(request, *args, **kwargs)
            if inspect.isawaitable(response):
                response = await response
        except BaseException:
            if outcome is not None:
                await sync_to_async(self.exit, thread_sensitive=False)(request, outcome)
            raise
        return self.exit_after(request, response, outcome)

    async def _aenter(self, request: HttpRequest) -> Held | Refusal | None:
        holder = None
        if self._identity is not None:  # it may use the ORM (request.user)
            holder = await sync_to_async(self.holder_of)(request)
        abandoned = threading.Event()
        enter = sync_to_async(
            self._enter_unless_abandoned, thread_sensitive=False, executor=_waiting_threads()
        )
        task = asyncio.ensure_future(enter(request, abandoned, holder))
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            # The client went away (or the loop is shutting down) while the worker
            # thread waits: whatever it still gets is given back at once, by the
            # thread itself, or here if it got it just before we gave up.
            abandoned.set()
            task.add_done_callback(functools.partial(self._release_late, request))
            raise

    def _enter_unless_abandoned(
        self, request: HttpRequest, abandoned: threading.Event, holder: str | None
    ) -> Held | Refusal | None:
        if abandoned.is_set():  # given up while queued for a thread
            return None
        outcome = self.enter(request, holder)
        if isinstance(outcome, Held) and abandoned.is_set():
            self.exit(request, outcome)
            return None
        return outcome

    def _release_late(self, request: HttpRequest, task: asyncio.Future[Any]) -> None:
        if task.cancelled() or task.exception() is not None:
            return
        held = task.result()
        if isinstance(held, Held):
            asyncio.get_running_loop().run_in_executor(None, self.exit, request, held)


#: Most async requests of one process that may wait for a hold at once; more
#: wait for a thread. Their own executor, so that waiting requests never starve the
#: event loop's default executor (used by sync_to_async everywhere else).
WAITING_THREADS = 512
_waiting: ThreadPoolExecutor | None = None
_waiting_lock = threading.Lock()


def _waiting_threads() -> ThreadPoolExecutor:
    global _waiting
    with _waiting_lock:
        if _waiting is None:  # threads are started on demand, up to the maximum
            _waiting = ThreadPoolExecutor(WAITING_THREADS, thread_name_prefix="drp-wait")
        return _waiting


def _resources_of(request: HttpRequest) -> dict[str, Any]:
    resources: dict[str, Any] | None = getattr(request, "resources", None)
    if resources is None:
        resources = {}
        request.resources = resources  # type: ignore[attr-defined]
    return resources
