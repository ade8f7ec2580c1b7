"""Holding a configured primitive while one request is served.

:class:`Guard` is the part shared by ``@with_resource`` and ``ResourceMiddleware``:
it acquires before the view (through the primitive's kind, :meth:`Kind.hold
<.kinds.Kind.hold>`), exposes the hold as ``request.resources[name]``, releases
once the response is closed (after its last chunk) or when the view raises, and
answers "nothing granted in time" with the response of :mod:`.refusals` (never
a 500). Async views wait on the event loop, holding no thread (kinds without
an ``ahold`` wait on threads of their own, :data:`WAITING_THREADS`).
"""

from __future__ import annotations

import asyncio
import contextlib
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
from django.dispatch import Signal
from django.http import HttpRequest
from django.http.response import HttpResponseBase

from . import conf, kinds, refusals, registry, signals
from .exceptions import BackendUnavailable, NotConfigured, PoolError, ResourceUnavailable
from .holders import request_holder, request_of, user_unread, username_of
from .kinds import Held
from .primitives.deadlines import DEADLINE_SLACK, deadline
from .primitives.text import escaped
from .primitives.validators import (
    check_holder,
    check_lease_timeout,
    check_name,
    check_permits,
    check_timeout,
)

__all__ = ["WAITING_THREADS", "Guard", "Refusal", "on_event_loop", "request_of"]

logger = logging.getLogger("django_redis_pool")

_HOST = socket.gethostname()


@dataclass
class Refusal:
    """Nothing was held: ``error`` says why (and carries name, status, retry_after;
    a :class:`ResourceUnavailable`'s ``reason`` tells a timeout from a refusal at
    once, ``max_waiting`` callers already waiting)."""

    error: PoolError


@dataclass
class Sending:
    """A signal to send, once the outcome it reports is settled."""

    signal: Signal
    sender: Any
    kwargs: dict[str, Any]

    def send(self) -> None:
        signals.send(self.signal, self.sender, **self.kwargs)

    async def asend(self) -> None:
        await signals.asend(self.signal, self.sender, **self.kwargs)


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
        status: int | None = None,
        retry_after: float | None = None,
        permits: int | None = None,
    ) -> None:
        self.name = check_name(name, "resource name")
        #: The permits each request's hold takes, for a kind whose holds take
        #: permits (None: the kind decides, e.g. from its entry's ``PERMITS``).
        self.permits = None if permits is None else check_permits(permits)
        self.timeout = check_timeout(timeout)
        self.lease_timeout = check_lease_timeout(lease_timeout)
        if identity is not None and not (callable(identity) or isinstance(identity, str)):
            raise TypeError(
                f"identity must be a function of the request returning a str (or its dotted "
                f"path), got {identity!r}"
            )
        self._identity = identity
        self.status = None if status is None else conf.check_status(status)
        self.retry_after = conf.check_retry_after(retry_after)

    def __repr__(self) -> str:
        permits = "" if self.permits is None else f" permits={self.permits}"
        return f"<Guard {self.name!r} timeout={self.timeout} status={self.status}{permits}>"

    # -- acquiring -------------------------------------------------------------

    def holder_of(self, request: HttpRequest) -> str:
        """Who holds for ``request``: ``identity(request)``, else a unique id
        naming the host, process and request: its method, path and user
        (:func:`~django_redis_pool.holders.request_holder`; :func:`request_of`
        reads them back). An identity that is not a valid holder (empty, not a
        str, over 200 characters, control characters) is the client's fault:
        ``BadRequest`` (a 400), logged as a warning."""
        if self._identity is None:
            process = f"{_HOST}:{os.getpid()}:{uuid.uuid4().hex[:12]}"
            return request_holder(process, request.method, request.path, username_of(request))
        identity = self._identity
        if isinstance(identity, str):
            identity = self._identity = conf.import_callable(identity, "identity")
        value = identity(request)
        try:
            return check_holder(value, f"identity(request) for {self.name!r}")
        except ValueError as exc:  # identities are often built from client input
            logger.warning("%s %s answered 400: %s", request.method, escaped(request.path), exc)
            raise BadRequest(str(exc)) from exc

    def enter(self, request: HttpRequest, holder: str | None = None) -> Held | Refusal | None:
        """Acquire for ``request`` (blocking; never on the event loop) as
        ``holder`` (default: :meth:`holder_of`). None when Redis fails and
        ``FAIL_OPEN`` lets the view run without a hold."""
        started = time.monotonic()
        primitive: Any = None
        try:
            primitive = registry.get_resource(self.name)  # a Cluster client connects here
            kind, ask, watched = self._ask(request, primitive, holder or self.holder_of(request))
            with deadline(None if ask.timeout is None else ask.timeout + DEADLINE_SLACK):
                held = kind.hold(primitive, ask)
        except NotConfigured:
            raise  # a configuration error, not a busy resource
        except ResourceUnavailable as exc:  # refused at once: max_waiting callers wait
            outcome, signal = self._full(request, primitive, exc, started)
        except PoolError as exc:  # Redis unreachable, or refusing (OOM, ...)
            outcome, signal = self._failed(request, primitive, exc, started)
        else:
            outcome, signal = self._held_or_refused(request, primitive, held, watched, started)
        if signal is not None:
            signal.send()
        return outcome

    async def aenter(self, request: HttpRequest) -> Held | Refusal | None:
        """:meth:`enter` on the event loop: the wait holds no thread (for a kind
        that has :meth:`Kind.ahold <.kinds.Kind.ahold>`; else it runs in a
        thread). Cancelled while waiting, it leaves nothing held."""
        started = time.monotonic()
        primitive: Any = registry.cached(self.name)
        try:
            if primitive is None:  # built off the loop: a Cluster client connects then
                primitive = await sync_to_async(registry.get_resource, thread_sensitive=False)(
                    self.name
                )
            if not kinds.by_name()[primitive.kind].holds_on_loop:
                return await self._aenter_in_thread(request)
            kind, ask, watched = self._ask(request, primitive, await self._aholder_of(request))
            with deadline(None if ask.timeout is None else ask.timeout + DEADLINE_SLACK):
                held = await kind.ahold(primitive, ask)
        except NotConfigured:
            raise
        except ResourceUnavailable as exc:
            outcome, signal = self._full(request, primitive, exc, started)
        except PoolError as exc:
            outcome, signal = self._failed(request, primitive, exc, started)
        else:
            outcome, signal = self._held_or_refused(request, primitive, held, watched, started)
        if signal is not None:
            await signal.asend()
        return outcome

    async def _aholder_of(self, request: HttpRequest) -> str:
        """:meth:`holder_of` from the event loop: in a thread when it may use
        the ORM (an identity function, or a ``request.user`` not read yet)."""
        if self._identity is None and not user_unread(request):
            return self.holder_of(request)
        return await sync_to_async(self.holder_of)(request)

    def _ask(
        self, request: HttpRequest, primitive: Any, holder: str
    ) -> tuple[kinds.Kind, kinds.Ask, bool]:
        """(the primitive's kind, what to ask of it, whether the hold needs a
        watchdog lease)."""
        lease_timeout, watched = self.lease_timeout, False
        if lease_timeout is None and getattr(primitive, "lease_timeout", 0) is None:
            # No lease would ever end it: a watchdog lease, renewed while the
            # request runs, ends a killed worker's hold instead.
            lease_timeout, watched = registry.get_config().request_lease, True
        kind = kinds.by_name()[primitive.kind]
        if self.permits is not None and not kind.takes_permits:
            raise NotConfigured(
                f"{self.name!r} is {kind.a_label}, whose holds take no permits, but its "
                f"request hold asks for permits={self.permits}"
            )
        ask = kinds.Ask(
            holder=holder,
            identity=None if self._identity is None else holder,
            timeout=self.wait_of(primitive),
            lease_timeout=lease_timeout,
            request=request,
            permits=self.permits,
        )
        return kind, ask, watched

    def _held_or_refused(
        self, request: HttpRequest, primitive: Any, held: Held | None, watched: bool, started: float
    ) -> tuple[Held | Refusal, Sending]:
        """What an acquire that answered ``held`` means for the request, and
        the signal to send about it."""
        if held is None:
            error = ResourceUnavailable(
                f"{primitive.kind} {self.name!r}: nothing was granted within "
                f"{self.wait_of(primitive)} s"
            )
            logger.info(
                "%s %s refused (%s): %s", request.method, escaped(request.path), error.reason, error
            )
            return self._refusal(request, primitive, error, started)
        if watched and held.lease is not None:
            held.lease.start_auto_renew()
        waited = held.granted_at - started
        held.primitive = primitive
        _resources_of(request)[self.name] = held.hold
        logger.debug(
            "%s %s holds %s %r (fence %s) after waiting %.1f ms",
            request.method,
            escaped(request.path),
            primitive.kind,
            self.name,
            held.lease.fence if held.lease else None,
            waited * 1000,
        )
        return held, Sending(
            signals.resource_acquired,
            type(primitive),
            {
                "name": self.name,
                "hold": held.hold,
                "lease": held.lease,
                "request": request,
                "waited": waited,
            },
        )

    def _full(
        self, request: HttpRequest, primitive: Any, error: ResourceUnavailable, started: float
    ) -> tuple[Refusal, Sending]:
        """The kind refused the request at once (``error.reason``: ``max_waiting``
        callers already wait): the refusal, without waiting."""
        logger.info(
            "%s %s refused (%s): %s", request.method, escaped(request.path), error.reason, error
        )
        return self._refusal(request, primitive, error, started)

    def _failed(
        self, request: HttpRequest, primitive: Any, exc: PoolError, started: float
    ) -> tuple[Refusal | None, Sending | None]:
        """Redis failed (unreachable, or refusing: OOM...): None when
        ``FAIL_OPEN`` lets the view run without a hold, else the refusal (and
        its signal)."""
        failed = "failed"
        if isinstance(exc, BackendUnavailable):
            failed = (
                "answered, but this process was too busy to read the reply in time"
                if exc.answered
                else "is unreachable"
            )
        if registry.get_config().fail_open:
            logger.warning(
                "%s %s runs without holding %r: Redis %s and FAIL_OPEN is set (%s)",
                request.method,
                escaped(request.path),
                self.name,
                failed,
                exc,
            )
            _resources_of(request)[self.name] = None
            return None, None
        status = self.status or 503  # Redis failed: not the kind's refusal
        logger.error(
            "%s %s answered %s without holding %r: Redis %s (%s)",
            request.method,
            escaped(request.path),
            status,
            self.name,
            failed,
            exc,
        )
        return self._refusal(request, primitive, exc, started, status)

    def _refusal(
        self,
        request: HttpRequest,
        primitive: Any,
        error: PoolError,
        started: float,
        status: int | None = None,
    ) -> tuple[Refusal, Sending]:
        """The refusal carrying ``error``, and its ``resource_unavailable``
        signal. ``primitive`` is None when Redis failed before it could be built.
        ``status``: the guard's, else its kind's ``refusal_status``; the
        ``Retry-After`` seconds are the guard's ``retry_after``, else the
        kind's on ``error`` (when it tells when to retry), else the wait's."""
        error.name = self.name  # type: ignore[attr-defined]
        if status is None:
            status = self.status or kinds.by_name()[primitive.kind].refusal_status
        error.status = status  # type: ignore[attr-defined]
        told = getattr(error, "retry_after", None) if self.retry_after is None else None
        error.retry_after = told or self.retry_after_for(primitive)  # type: ignore[attr-defined]
        if primitive is not None:
            sender: type = type(primitive)
        else:
            entry = registry.get_config().entries.get(self.name)
            sender = (entry.kind.primitive if entry else None) or object
        kwargs = {
            "name": self.name,
            "request": request,
            "error": error,
            "waited": time.monotonic() - started,
        }
        return Refusal(error), Sending(signals.resource_unavailable, sender, kwargs)

    def wait_of(self, primitive: Any) -> float | None:
        """How long to wait for ``primitive``: ``timeout``, else its kind's
        default (:meth:`Kind.request_timeout <.kinds.Kind.request_timeout>`: the
        primitive's ``TIMEOUT`` option), else forever (None)."""
        if self.timeout is not None or primitive is None:
            return self.timeout
        return kinds.by_name()[primitive.kind].request_timeout(primitive)

    def retry_after_for(self, primitive: Any) -> int:
        """``Retry-After`` seconds: ``retry_after``, else the ceiling of the wait,
        else 1."""
        if self.retry_after is not None:
            return self.retry_after
        timeout = self.wait_of(primitive)
        return math.ceil(timeout) if timeout else 1

    # -- releasing -------------------------------------------------------------

    def exit(self, request: HttpRequest, held: Held) -> None:
        """Release ``held`` now, waiting at most ``DEADLINE_SLACK`` for Redis;
        never raises. A lease's release that Redis does not answer by then goes
        on in the background (:mod:`.primitives.releases`); a hold that cannot
        be released at all is reclaimed when its lease expires."""
        if held.lease is not None:
            held.lease.stop_auto_renew()
        try:
            with deadline(DEADLINE_SLACK):
                ok = held.release()
        except Exception as exc:
            ok = self._release_failed(request, exc)
        self._released(request, held, ok).send()

    async def aexit(self, request: HttpRequest, held: Held) -> None:
        """:meth:`exit` on the event loop (in a thread for a hold without ``arelease``)."""
        if held.arelease is None:
            await sync_to_async(self.exit, thread_sensitive=False)(request, held)
            return
        if held.lease is not None:
            held.lease.stop_auto_renew()
        try:
            with deadline(DEADLINE_SLACK):
                ok = await held.arelease()
        except asyncio.CancelledError:
            # The loop is shutting down (it cancels its tasks): release it
            # here and now, blocking, rather than leave it to its lease.
            self.exit(request, held)
            raise
        except Exception as exc:
            ok = self._release_failed(request, exc)
        await self._released(request, held, ok).asend()

    def _release_failed(self, request: HttpRequest, exc: Exception) -> bool:
        logger.error(
            "releasing %r for %s %s failed; it stays held until its lease expires: %s",
            self.name,
            request.method,
            escaped(request.path),
            exc,
        )
        return False

    def _released(self, request: HttpRequest, held: Held, ok: bool) -> Sending:
        held_for = time.monotonic() - held.granted_at
        logger.debug(
            "%s %s released %r after holding it %.1f ms%s",
            request.method,
            escaped(request.path),
            self.name,
            held_for * 1000,
            "" if ok else " (it was already gone)",
        )
        return Sending(
            signals.resource_released,
            type(held.primitive),
            {
                "name": self.name,
                "hold": held.hold,
                "lease": held.lease,
                "request": request,
                "held": held_for,
                "lost": not ok,
            },
        )

    def exit_after(
        self,
        request: HttpRequest,
        response: Any,
        held: Held | None,
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> Any:
        """Release ``held`` once ``response`` is closed: after its last chunk is
        sent (or when it is garbage collected unclosed); at once if it is not a
        response. ``loop``: the event loop the request is served on (then the
        release runs there, when the hold has ``arelease``)."""
        if held is None:
            return response
        closers = getattr(response, "_resource_closers", None)
        if not isinstance(response, HttpResponseBase) or not isinstance(closers, list):
            self._exit_soon(request, held, loop)
            return response
        release = weakref.finalize(response, self._exit_soon, request, held, loop)
        release.atexit = False
        closers.append(release)
        return response

    def _exit_soon(
        self, request: HttpRequest, held: Held, loop: asyncio.AbstractEventLoop | None
    ) -> None:
        """Release ``held`` as its request's ``loop`` does (:meth:`aexit`) while
        that loop runs: from another thread (Django closes an async response
        in a worker thread), waiting until it is done, so that the hold has
        ended when ``close()`` returns; on the loop's own thread, as a task.
        Else :meth:`exit`: in a thread of its own when called on an event
        loop's thread."""
        if loop is not None and held.arelease is not None and loop.is_running():
            if not on_event_loop():
                done = asyncio.run_coroutine_threadsafe(self.aexit(request, held), loop)
                with contextlib.suppress(Exception):  # (aexit logs its own failures)
                    done.result(timeout=DEADLINE_SLACK + 1)
                return
            if asyncio.get_running_loop() is loop:
                _keep(loop, self.aexit(request, held))
                return
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
        return self.exit_after(request, refusals.with_headers(response, outcome), outcome)

    async def acall(
        self, request: HttpRequest, view: Callable[..., Any], args: Any, kwargs: Any
    ) -> Any:
        """Run ``view`` (async, or sync returning an awaitable) holding the
        primitive, waiting for it on the event loop (:meth:`aenter`)."""
        outcome = await self.aenter(request)
        if isinstance(outcome, Refusal):
            return await refusals.arespond(request, outcome.error)
        try:
            response = view(request, *args, **kwargs)
            if inspect.isawaitable(response):
                response = await response
        except BaseException:
            if outcome is not None:  # (completes even if the request is cancelled again)
                await asyncio.shield(
                    _keep(asyncio.get_running_loop(), self.aexit(request, outcome))
                )
            raise
        response = refusals.with_headers(response, outcome)
        return self.exit_after(request, response, outcome, asyncio.get_running_loop())

    async def _aenter_in_thread(self, request: HttpRequest) -> Held | Refusal | None:
        """:meth:`enter` in a thread, for a kind without :meth:`Kind.ahold
        <.kinds.Kind.ahold>` (:data:`WAITING_THREADS`)."""
        holder = await self._aholder_of(request)
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


#: Releases running as tasks (an event loop keeps only weak references to tasks).
_releasing: set[asyncio.Task[Any]] = set()


def _keep(loop: asyncio.AbstractEventLoop, coro: Any) -> asyncio.Task[Any]:
    """Run ``coro`` as a task of ``loop``, kept alive until it ends."""
    task = loop.create_task(coro)
    _releasing.add(task)
    task.add_done_callback(_releasing.discard)
    return task


def _resources_of(request: HttpRequest) -> dict[str, Any]:
    resources: dict[str, Any] | None = getattr(request, "resources", None)
    if resources is None:
        resources = {}
        request.resources = resources  # type: ignore[attr-defined]
    return resources
