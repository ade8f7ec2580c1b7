"""Holding a configured primitive while one request is served, or while a
task, a command or a script runs (``holding()``).

:class:`Guard` is the one hold shared by ``@with_resource``,
``ResourceMiddleware`` and :func:`~django_redis_pool.holds.holding` (which
passes ``request=None`` and names its ``caller``): it acquires before the view
(through the primitive's kind, :meth:`Kind.grant <.kinds.Kind.grant>`),
exposes the hold as ``request.resources[name]``, releases once the response is
closed (after its last chunk) or when the view raises, and
answers "nothing granted in time" with the response of :mod:`.refusals` (never
a 500). Async views wait on the event loop, holding no thread (kinds without
an ``ahold`` wait on threads of their own, :data:`WAITING_THREADS`).

What each outcome (a hold, a refusal, a release) logs and signals is
:mod:`.outcomes`'; where a hold crosses between the event loop and threads
(a kind held from a thread, a response closed on another thread) is
:mod:`.event_loop`'s.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import math
import os
import socket
import sys
import time
import uuid
import weakref
from collections.abc import Callable
from typing import Any

from asgiref.sync import sync_to_async
from django.core.exceptions import BadRequest
from django.http import HttpRequest
from django.http.response import HttpResponseBase

from . import conf, kinds, outcomes, refusals, registry, tracing
from .event_loop import WAITING_THREADS, enter_in_thread, on_event_loop, release_soon, start_task
from .exceptions import NotConfigured, PoolError, ResourceUnavailable
from .holder_names import request_holder, request_of, task_holder, user_unread, username_of
from .kinds import Grant
from .outcomes import Refusal
from .primitives.clients.deadlines import DEADLINE_SLACK, deadline
from .primitives.clients.waits import Wait
from .primitives.text import escaped
from .primitives.validators import (
    DEFAULT,
    Seconds,
    check_holder,
    check_lease_timeout,
    check_name,
    check_permits,
    check_timeout,
)

__all__ = ["WAITING_THREADS", "Guard", "Refusal", "on_event_loop", "request_of"]

logger = logging.getLogger("django_redis_pool")

_HOST = socket.gethostname()


class Guard:
    """Holds the primitive ``name`` around a view (see :func:`with_resource`)."""

    def __init__(
        self,
        name: str,
        *,
        timeout: Seconds = DEFAULT,
        lease_timeout: Seconds = DEFAULT,
        identity: Callable[[HttpRequest], str] | str | None = None,
        status: int | None = None,
        retry_after: float | None = None,
        permits: int | None = None,
        caller: str | None = None,
    ) -> None:
        self.name = check_name(name, "resource name")
        #: Who holds outside a request (``holding()``: the function or module
        #: holding, e.g. "myapp.tasks.send"); None: a request's guard. Outside
        #: a request ``identity`` is the identity itself (what a keyed kind counts).
        self.caller = caller
        #: The permits each request's hold takes, for a kind whose holds take
        #: permits (None: the kind decides, e.g. from its entry's ``PERMITS``).
        self.permits = None if permits is None else check_permits(permits)
        self.timeout = timeout if timeout is DEFAULT else check_timeout(timeout)
        self.lease_timeout = (
            lease_timeout if lease_timeout is DEFAULT else check_lease_timeout(lease_timeout)
        )
        if caller is not None:
            if identity is not None and not isinstance(identity, str):
                raise TypeError(f"identity must be a str, got {identity!r}")
            if identity:
                check_holder(identity, f"identity of {name!r}")
        elif identity is not None and not (callable(identity) or isinstance(identity, str)):
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

    def holder_of(self, request: HttpRequest | None) -> str:
        """Who holds for ``request``: ``identity(request)``, else a unique id
        naming the host, process and request: its method, path and user
        (:func:`~django_redis_pool.holder_names.request_holder`; :func:`request_of`
        reads them back). An identity that is not a valid holder (empty, not a
        str, over 200 characters, control characters) is the client's fault:
        ``BadRequest`` (a 400), logged as a warning. Outside a request
        (``request`` None): the identity, else a unique id naming the host, the
        process and the :attr:`caller` (:func:`~django_redis_pool.holder_names.task_holder`)."""
        if request is None:
            if isinstance(self._identity, str) and self._identity:
                return self._identity
            process = f"{_HOST}:{os.getpid()}:{uuid.uuid4().hex[:12]}"
            return task_holder(process, self.caller or "-")
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

    def enter(
        self, request: HttpRequest | None, holder: str | None = None
    ) -> Grant | Refusal | None:
        """Acquire for ``request`` (blocking; never on the event loop) as
        ``holder`` (default: :meth:`holder_of`). None when Redis fails and
        ``FAIL_OPEN`` lets the view run without a hold. ``request`` None: a
        hold outside a request (``holding()``)."""
        started = time.monotonic()
        span = tracing.start(self.name, started, self.caller is not None)
        primitive: Any = None
        outcome: Grant | Refusal | None = None
        held: Grant | None = None
        failure: PoolError | None = None
        kind = ask = None
        watched = False
        try:
            try:
                primitive = registry.get_resource(self.name)  # a Cluster client connects here
                holder = holder or self.holder_of(request)
                kind, ask, watched = self._ask(request, primitive, holder)
                with ask.timeout.bound():  # (the wait's one deadline)
                    held = kind.grant(primitive, ask)
            except NotConfigured:
                raise  # a configuration error, not a busy resource
            except PoolError as exc:  # refused at once, or Redis failed (see _outcome_of)
                failure = exc
            turn = self.turn_of(kind, primitive, ask, held, failure)
            outcome, signal = self._outcome_of(
                request, primitive, held, failure, watched, started, turn
            )
        finally:
            if span is not None:
                tracing.finish(span, primitive, outcome, started, sys.exc_info()[1])
        if signal is not None:
            signal.send()
        return outcome

    async def aenter(self, request: HttpRequest | None) -> Grant | Refusal | None:
        """:meth:`enter` on the event loop: the wait holds no thread (for a kind
        that has :meth:`Kind.agrant <.kinds.Kind.agrant>`; else it runs in a
        thread). Cancelled while waiting, it leaves nothing held."""
        started = time.monotonic()
        primitive: Any = registry.cached(self.name)
        outcome: Grant | Refusal | None = None
        held: Grant | None = None
        failure: PoolError | None = None
        span = None
        kind = ask = None
        watched = False
        try:
            try:
                if primitive is None:  # built off the loop: a Cluster client connects then
                    primitive = await sync_to_async(registry.get_resource, thread_sensitive=False)(
                        self.name
                    )
                if not registry.by_name()[primitive.kind].holds_on_loop:
                    return await enter_in_thread(self, request)  # (enter() traces it)
                span = tracing.start(self.name, started, self.caller is not None)
                kind, ask, watched = self._ask(request, primitive, await self.aholder_of(request))
                with ask.timeout.bound():
                    held = await kind.agrant(primitive, ask)
            except NotConfigured:
                raise
            except PoolError as exc:
                failure = exc
            turn = await self.aturn_of(kind, primitive, ask, held, failure)
            outcome, signal = self._outcome_of(
                request, primitive, held, failure, watched, started, turn
            )
        finally:
            if span is not None:
                tracing.finish(span, primitive, outcome, started, sys.exc_info()[1])
        if signal is not None:
            await signal.asend()
        return outcome

    async def aholder_of(self, request: HttpRequest | None) -> str:
        """:meth:`holder_of` from the event loop: in a thread when it may use
        the ORM (an identity function, or a ``request.user`` not read yet)."""
        if request is None or (self._identity is None and not user_unread(request)):
            return self.holder_of(request)
        return await sync_to_async(self.holder_of)(request)

    def _outcome_of(
        self,
        request: HttpRequest | None,
        primitive: Any,
        held: Grant | None,
        failure: PoolError | None,
        watched: bool,
        started: float,
        turn: float | None,
    ) -> tuple[Grant | Refusal | None, outcomes.PendingSignal | None]:
        """What one attempt to hold means for ``request`` (the outcome
        :meth:`enter` and :meth:`aenter` return) and the signal to send about
        it: the attempt answered ``held`` (None: nothing granted in time), or
        raised ``failure``: a :class:`ResourceUnavailable` is a refusal at once
        (``max_waiting`` callers wait), any other :class:`PoolError` is Redis
        unreachable or refusing (OOM, ...). ``turn``: a refusal's estimated turn."""
        if isinstance(failure, ResourceUnavailable):
            return outcomes.refused_at_once(self, request, primitive, failure, started, turn)
        if failure is not None:
            return outcomes.redis_failed(self, request, primitive, failure, started)
        return outcomes.held_or_refused(self, request, primitive, held, watched, started, turn)

    def _ask(
        self, request: HttpRequest | None, primitive: Any, holder: str
    ) -> tuple[kinds.Kind[Any], kinds.Ask, bool]:
        """(the primitive's kind, what to ask of it, whether the hold needs a
        watchdog lease)."""
        lease_timeout, watched = self.lease_timeout, False
        if lease_timeout is DEFAULT:
            no_expiry = getattr(primitive, "lease_timeout", 0) is None
        else:  # (None asked of a kind whose holds have no lease: nothing to watch)
            no_expiry = lease_timeout is None and hasattr(primitive, "lease_timeout")
        if no_expiry:
            # No lease would ever end it: a watchdog lease, renewed while the
            # request runs (as long as it runs: no expiry before), ends a
            # killed worker's hold instead.
            lease_timeout, watched = registry.get_config().request_lease, True
        kind = registry.by_name()[primitive.kind]
        if self.permits is not None and not kind.takes_permits:
            raise NotConfigured(
                f"{self.name!r} is {kind.a_label}, whose holds take no permits, but its "
                f"request hold asks for permits={self.permits}"
            )
        ask = kinds.Ask(
            holder=holder,
            identity=self.identity_of(holder),
            timeout=Wait.of(self.wait_of(primitive)),  # (checked once: a number or None)
            lease_timeout=lease_timeout,
            request=request,
            permits=self.permits,
        )
        return kind, ask, watched

    def identity_of(self, holder: str) -> str | None:
        """What the kind is asked to hold for (``Ask.identity``): outside a
        request the identity given ("" included: a keyed kind's key), else the
        holder when the view names an identity, else None."""
        if self.caller is not None:
            return self._identity if isinstance(self._identity, str) else None
        return None if self._identity is None else holder

    def wait_of(self, primitive: Any) -> float | None:
        """How long to wait for ``primitive``: ``timeout``, else its kind's
        default (:meth:`Kind.request_timeout <.kinds.Kind.request_timeout>`: the
        primitive's ``TIMEOUT`` option), else forever (None)."""
        if self.timeout is not DEFAULT:
            return self.timeout
        if primitive is None:
            return None
        return registry.by_name()[primitive.kind].request_timeout(primitive)

    def turn_of(
        self,
        kind: kinds.Kind[Any] | None,
        primitive: Any,
        ask: kinds.Ask | None,
        held: Grant | None = None,
        failure: PoolError | None = None,
    ) -> float | None:
        """When a hold refused now can expect its turn, in seconds, as its kind
        estimates it (:meth:`Kind.turn <.kinds.Kind.turn>`: for a kind on the
        lease engine, from its holds and the callers waiting); None when the
        attempt was not refused (it answered ``held``, or its ``failure`` is
        not a :class:`ResourceUnavailable`), when the guard's ``retry_after``
        or the refusal's own (``failure``'s) answers instead, or when the kind
        cannot tell. Never raises."""
        if not self._turn_wanted(kind, ask, held, failure):
            return None
        try:
            return kind.turn(primitive, ask)  # type: ignore[union-attr,arg-type]
        except Exception as exc:  # (a kind's estimate never turns a refusal into an error)
            logger.debug("estimating the turn of %r failed: %s", self.name, exc)
            return None

    async def aturn_of(
        self,
        kind: kinds.Kind[Any] | None,
        primitive: Any,
        ask: kinds.Ask | None,
        held: Grant | None = None,
        failure: PoolError | None = None,
    ) -> float | None:
        """:meth:`turn_of` on the event loop."""
        if not self._turn_wanted(kind, ask, held, failure):
            return None
        try:
            return await kind.aturn(primitive, ask)  # type: ignore[union-attr,arg-type]
        except Exception as exc:
            logger.debug("estimating the turn of %r failed: %s", self.name, exc)
            return None

    def _turn_wanted(
        self, kind: Any, ask: Any, held: Grant | None, failure: PoolError | None
    ) -> bool:
        """Whether the attempt was refused (nothing ``held`` and no ``failure``
        but a :class:`ResourceUnavailable`) and its turn is to be estimated: no
        ``retry_after`` of the guard's nor of the refusal's."""
        if held is not None:
            return False
        if failure is not None and not isinstance(failure, ResourceUnavailable):
            return False  # Redis failed: no turn to tell
        told = None if failure is None else failure.retry_after
        return self.retry_after is None and told is None and kind is not None and ask is not None

    def retry_after_for(self, primitive: Any) -> int:
        """``Retry-After`` seconds when the kind estimated no turn:
        ``retry_after``, else the ceiling of the wait, else 1."""
        if self.retry_after is not None:
            return self.retry_after
        timeout = self.wait_of(primitive)
        return math.ceil(timeout) if timeout else 1

    def turn_after(self, primitive: Any) -> float:
        """When a refused hold outside a request may expect its turn, in
        seconds, when its kind does not tell (on the error): ``retry_after``,
        else the wait it was refused after (the ``Retry-After`` a request would
        get, not rounded up), else 1 s for a caller that did not wait."""
        if self.retry_after is not None:
            return float(self.retry_after)
        timeout = self.wait_of(primitive)
        return float(timeout) if timeout else 1.0

    # -- releasing -------------------------------------------------------------

    def exit(self, request: HttpRequest | None, held: Grant) -> None:
        """Release ``held`` now, waiting at most ``DEADLINE_SLACK`` for Redis;
        never raises. A lease's release that Redis does not answer by then goes
        on in the background (:mod:`.primitives.leased.releases`); a hold that cannot
        be released at all is reclaimed when its lease expires."""
        if held.lease is not None:
            held.lease.stop_auto_renew()
        try:
            with deadline(DEADLINE_SLACK):
                ok = held.release()
        except Exception as exc:
            ok = outcomes.release_failed(self, request, exc)
        outcomes.released(self, request, held, ok).send()

    async def aexit(self, request: HttpRequest | None, held: Grant) -> None:
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
            ok = outcomes.release_failed(self, request, exc)
        await outcomes.released(self, request, held, ok).asend()

    def exit_after(
        self,
        request: HttpRequest,
        response: Any,
        held: Grant | None,
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> Any:
        """Release ``held`` once ``response`` is closed: after its last chunk is
        sent (or when it is garbage collected unclosed); at once if it is not a
        response. ``loop``: the event loop the request is served on (then the
        release runs there, when the hold has ``arelease``)."""
        if held is None:
            return response
        closers = getattr(response, "_resource_closers", None)  # Django's, run by close()
        if not isinstance(response, HttpResponseBase) or not isinstance(closers, list):
            release_soon(self, request, held, loop)
            return response
        release = weakref.finalize(response, release_soon, self, request, held, loop)
        release.atexit = False
        closers.append(release)
        return response

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
                    start_task(asyncio.get_running_loop(), self.aexit(request, outcome))
                )
            raise
        response = refusals.with_headers(response, outcome)
        return self.exit_after(request, response, outcome, asyncio.get_running_loop())
