"""``@with_resource``: holding a configured primitive while a view runs.

Every request goes through Django's test clients (or, for cancellation, the
decorated view is called directly) against the harness's real Redis. The views
live in :mod:`tests.urlconfs.decorated_views`.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import threading
import time
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import pytest
from django.test import AsyncClient, Client, RequestFactory

from django_redis_pool import (
    BackendUnavailable,
    Lease,
    Lock,
    NotConfigured,
    ResourcePool,
    ResourceUnavailable,
    Semaphore,
    get_lock,
    get_pool,
    get_semaphore,
    registry,
    signals,
)
from django_redis_pool.decorators import with_resource
from django_redis_pool.guard import request_of
from django_redis_pool.primitives.wire.channel import Channel
from django_redis_pool.testing import EmbeddedRedis
from tests.support.primitive_helpers import ops, own_lease, slot_lease
from tests.support.stoppable_servers import closed_port
from tests.support.waiting import STALL, cancel, floor_of, wait_for
from tests.urlconfs import decorated_views as views

pytestmark = pytest.mark.urls("tests.urlconfs.decorated_views")

T = TypeVar("T")


def configure(settings: Any, url: str, **extra: Any) -> None:
    settings.DJANGO_REDIS_POOL = {
        "CONNECTION": {"URL": url},
        "POOLS": {"printers": {"RESOURCES": ["p1"], "LEASE_TIMEOUT": 30}},
        "SEMAPHORES": {"reports": {"MAX_SIZE": 2}},
        "LOCKS": {"imports": {}},
        **extra,
    }


def arun(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run ``coroutine`` in a fresh event loop (pytest-asyncio is not installed)."""
    return asyncio.run(coroutine)


async def aget(path: str, **client_options: Any) -> Any:
    return await AsyncClient(**client_options).get(path)


@pytest.fixture(autouse=True)
def _reset_record() -> Iterator[None]:
    views.RECORD.reset()
    yield
    views.RECORD.gate.set()  # never leave a view thread blocked


@pytest.fixture
def pool(settings: Any, redis_url: str) -> ResourcePool:
    """The ``printers`` pool with its one resource ``p1`` associated."""
    configure(settings, redis_url)
    printers = get_pool("printers")
    printers.associate("p1")
    return printers


@dataclass
class Sent:
    signal: str
    sender: type
    kwargs: dict[str, Any]


@pytest.fixture
def sent() -> Iterator[list[Sent]]:
    """Every resource_acquired / released / unavailable / lease_lost sent during the test."""
    log: list[Sent] = []
    connected = []
    for name in ("resource_acquired", "resource_released", "resource_unavailable", "lease_lost"):
        signal = getattr(signals, name)

        def receiver(sender: type, _name: str = name, **kwargs: Any) -> None:
            kwargs.pop("signal", None)
            log.append(Sent(_name, sender, kwargs))

        signal.connect(receiver, weak=False)
        connected.append((signal, receiver))
    yield log
    for signal, receiver in connected:
        signal.disconnect(receiver)


def named(log: list[Sent], signal: str) -> list[Sent]:
    return [s for s in log if s.signal == signal]


# ------------------------------------------------------------- holding and freeing


def test_pool_view_sees_its_lease_and_the_resource_is_free_after_the_response(
    pool: ResourcePool,
) -> None:
    response = Client().get("/pool/")
    assert response.status_code == 200
    assert response.content == b"printing on p1"
    (seen,) = views.RECORD.seen
    lease = seen["resources"]["printers"]
    assert isinstance(lease, Lease)
    assert lease.resource == "p1"
    assert lease.fence > 0
    assert request_of(lease.holder) == {"method": "GET", "path": "/pool/", "user": None}
    assert seen["occupied"] is True, "p1 was leased while the view ran"
    assert pool.available_count() == 1
    assert pool.occupied_count() == 0


def test_each_request_holds_under_its_own_holder_and_gets_a_new_fence(pool: ResourcePool) -> None:
    client = Client()
    assert client.get("/pool/").status_code == 200
    assert client.get("/pool/").status_code == 200
    first, second = (seen["resources"]["printers"] for seen in views.RECORD.seen)
    assert first.holder != second.holder
    assert second.fence > first.fence
    assert pool.available_count() == 1


def test_semaphore_view_holds_a_slot_named_after_a_unique_request_id(
    settings: Any, redis_url: str
) -> None:
    configure(settings, redis_url)
    client = Client()
    assert client.get("/semaphore/").status_code == 200
    assert client.get("/semaphore/").status_code == 200
    first, second = views.RECORD.seen
    assert first["size"] == second["size"] == 1, "one slot taken while each view ran"
    lease_a, lease_b = first["resources"]["reports"], second["resources"]["reports"]
    assert isinstance(lease_a, Lease) and isinstance(lease_b, Lease)
    assert lease_a.resource == lease_a.holder, "a semaphore slot is named after its identity"
    assert lease_a.resource != lease_b.resource
    assert get_semaphore("reports").get_current_size() == 0


def test_requests_with_the_same_identity_share_one_semaphore_slot(
    settings: Any, redis_url: str
) -> None:
    configure(settings, redis_url, SEMAPHORES={"reports": {"MAX_SIZE": 1}})
    semaphore = get_semaphore("reports")
    statuses: list[int] = []

    def request() -> None:
        statuses.append(Client().get("/semaphore-identity/", {"user": "alice"}).status_code)

    threads = [threading.Thread(target=request) for _ in range(2)]
    for thread in threads:
        thread.start()
    # Both are inside the view at once although the semaphore has one slot (timeout=0).
    wait_for(lambda: views.RECORD.entered == 2, 15, "both requests to enter the view")
    assert semaphore.get_current_size() == 1
    assert [lease.resource for lease in semaphore.holders()] == ["user-alice"]
    views.RECORD.gate.set()
    for thread in threads:
        thread.join(15)
    assert statuses == [200, 200]
    assert semaphore.get_current_size() == 0


def test_identity_given_as_a_dotted_path_names_the_semaphore_slot(
    settings: Any, redis_url: str
) -> None:
    configure(settings, redis_url, SEMAPHORES={"reports": {"MAX_SIZE": 1}})
    semaphore = get_semaphore("reports")
    assert slot_lease(semaphore, "user-alice", timeout=0) is not None  # alice's other tab
    client = Client()
    assert client.get("/semaphore-dotted-identity/", {"user": "bob"}).status_code == 503
    assert client.get("/semaphore-dotted-identity/", {"user": "alice"}).status_code == 200
    (seen,) = views.RECORD.seen
    assert seen["resources"]["reports"].resource == "user-alice"


def test_lock_view_holds_a_lock_it_owns_with_a_fence(settings: Any, redis_url: str) -> None:
    configure(settings, redis_url)
    assert Client().get("/lock/").status_code == 200
    (seen,) = views.RECORD.seen
    lock = seen["resources"]["imports"]
    assert isinstance(lock, Lock)
    assert seen["owned"] is True and seen["locked"] is True
    assert isinstance(seen["fence"], int) and seen["fence"] > 0
    assert not get_lock("imports").locked()
    assert own_lease(lock) is None, "the request's hold was released"


def test_decorated_view_lists_its_guards_outermost_first() -> None:
    assert [g.name for g in views.stacked_view.resource_guards] == ["printers", "imports"]
    assert views.pool_view.__name__ == "pool_view"


# -------------------------------------------------------------------- exhaustion


def test_exhausted_pool_answers_503_with_retry_after_1_without_waiting(
    pool: ResourcePool,
) -> None:
    held = pool.acquire(timeout=0)
    assert held is not None
    response = Client().get("/pool/")
    assert response.status_code == 503
    assert response["Retry-After"] == "1"
    assert b"retry in 1 s" in response.content
    assert response["Content-Type"] == "text/plain; charset=utf-8"
    assert views.RECORD.seen == [], "the view did not run"
    assert pool.waiting_count() == 0
    assert held.release() is True


@pytest.mark.parametrize(("path", "retry_after"), [("/pool-short/", "1"), ("/pool-longer/", "3")])
def test_retry_after_defaults_to_the_ceiling_of_the_timeout(
    pool: ResourcePool, path: str, retry_after: str
) -> None:
    held = pool.acquire(timeout=0)
    response = Client().get(path)
    assert response.status_code == 503
    assert response["Retry-After"] == retry_after
    assert pool.waiting_count() == 0
    assert held is not None and held.release()


def test_custom_status_and_retry_after_are_used_when_exhausted(pool: ResourcePool) -> None:
    held = pool.acquire(timeout=0)
    response = Client().get("/pool-custom-status/")
    assert response.status_code == 429
    assert response["Retry-After"] == "7"
    assert held is not None and held.release()


def test_lock_timeout_setting_is_the_default_wait_and_retry_after(
    settings: Any, redis_url: str
) -> None:
    configure(settings, redis_url, LOCKS={"imports": {"TIMEOUT": 1.5}})
    outside = get_lock("imports")
    assert outside.acquire(timeout=0)
    response = Client().get("/lock-default-timeout/")
    assert response.status_code == 503
    assert response["Retry-After"] == "2"
    outside.release()


def test_waiting_request_is_woken_by_the_release_not_by_its_timeout(
    settings: Any, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Long blocking reads: only the release's hand-off can wake the waiter
    # before its 20 s timeout (and then it would answer 503).
    monkeypatch.setattr(Channel, "wait_chunk", 30.0)
    configure(settings, redis_url, CONNECTION={"URL": redis_url, "OPTIONS": {"socket_timeout": 60}})
    pool = get_pool("printers")
    pool.associate("p1")
    held = pool.acquire(timeout=0)
    assert held is not None
    responses: list[Any] = []
    thread = threading.Thread(target=lambda: responses.append(Client().get("/pool-wait/")))
    thread.start()
    wait_for(lambda: pool.waiting_count() == 1, 15, "the request to queue for p1")
    released_at = time.monotonic()
    assert held.release()
    thread.join(25)
    (response,) = responses
    assert response.status_code == 200
    (seen,) = views.RECORD.seen
    assert seen["resources"]["printers"].resource == "p1"
    served = seen["at"] - released_at
    assert served < views.POOL_WAIT_TIMEOUT / 2, "served by the hand-off, long before its timeout"
    assert pool.available_count() == 1


@pytest.mark.parametrize(
    ("kind", "floor_path", "path", "retry_after"),
    [
        ("pool", "/pool/", "/pool-wait/", str(views.POOL_WAIT_TIMEOUT)),
        ("pool", "/async/", "/async-wait/", "5"),
        ("semaphore", "/semaphore/", "/semaphore-wait/", str(views.POOL_WAIT_TIMEOUT)),
        ("lock", "/lock/", "/lock-default-timeout/", "20"),
    ],
    ids=["pool", "async-pool", "semaphore", "lock"],
)
def test_max_waiting_zero_answers_the_refusal_at_once_instead_of_waiting(
    settings: Any,
    redis_url: str,
    sent: list[Sent],
    kind: str,
    floor_path: str,
    path: str,
    retry_after: str,
) -> None:
    configure(
        settings,
        redis_url,
        POOLS={"printers": {"RESOURCES": ["p1"], "LEASE_TIMEOUT": 30, "MAX_WAITING": 0}},
        SEMAPHORES={"reports": {"MAX_SIZE": 1, "MAX_WAITING": 0}},
        LOCKS={"imports": {"TIMEOUT": 20, "MAX_WAITING": 0}},
    )
    primitive: Any = {"pool": get_pool, "semaphore": get_semaphore, "lock": get_lock}[kind](
        {"pool": "printers", "semaphore": "reports", "lock": "imports"}[kind]
    )
    if kind == "pool":
        primitive.associate("p1")
        assert primitive.acquire(timeout=0, holder="outside") is not None
    elif kind == "semaphore":
        assert primitive.acquire("outside")
    else:
        assert primitive.acquire(timeout=0, holder="outside")
    get = (lambda p: arun(aget(p))) if path.startswith("/async") else Client().get
    floor = floor_of(lambda: get(floor_path))  # a view that does not wait, refused
    started = time.monotonic()
    response = get(path)  # a view that would wait 5 or 20 s
    assert time.monotonic() - started < 10 * floor + STALL, "refused at once, not after waiting"
    assert response.status_code == 503
    assert response["Retry-After"] == retry_after
    assert views.RECORD.seen == [], "no view ran"
    assert primitive.waiting_count() == 0
    timed_out, full = (s.kwargs["error"] for s in named(sent, "resource_unavailable"))
    assert (timed_out.reason, full.reason) == ("timeout", "full")
    assert isinstance(full, ResourceUnavailable) and "max_waiting" in str(full)
    assert (full.name, full.status, full.retry_after) == (primitive.name, 503, int(retry_after))


# ---------------------------------------------------------------- UNAVAILABLE_VIEW


def test_unavailable_view_body_is_used_and_retry_after_added(
    settings: Any, redis_url: str, pool: ResourcePool
) -> None:
    configure(
        settings, redis_url, UNAVAILABLE_VIEW="tests.urlconfs.decorated_views.unavailable_sync"
    )
    held = pool.acquire(timeout=0)
    response = Client().get("/pool/")
    assert response.status_code == 503
    assert response.content == b"sync busy: printers 503 1"
    assert response["Retry-After"] == "1"
    response = Client().get("/pool-custom-status/")
    assert response.status_code == 429
    assert response.content == b"sync busy: printers 429 7"
    assert response["Retry-After"] == "7"
    assert held is not None and held.release()


def test_unavailable_view_retry_after_header_is_kept(
    settings: Any, redis_url: str, pool: ResourcePool
) -> None:
    configure(
        settings,
        redis_url,
        UNAVAILABLE_VIEW="tests.urlconfs.decorated_views.unavailable_with_header",
    )
    held = pool.acquire(timeout=0)
    response = Client().get("/pool-custom-status/")
    assert response.status_code == 429
    assert response.content == b"come back later"
    assert response["Retry-After"] == "99"
    assert held is not None and held.release()


@pytest.mark.parametrize("broken", ["unavailable_broken", "unavailable_not_a_response"])
def test_a_failing_unavailable_view_falls_back_to_the_default_503(
    settings: Any, redis_url: str, pool: ResourcePool, broken: str, caplog: Any
) -> None:
    configure(settings, redis_url, UNAVAILABLE_VIEW=f"tests.urlconfs.decorated_views.{broken}")
    held = pool.acquire(timeout=0)
    try:
        with caplog.at_level(logging.ERROR, logger="django_redis_pool"):
            response = Client(raise_request_exception=True).get("/pool/")
        assert response.status_code == 503, "never a 500 when nothing was granted"
        assert response["Retry-After"] == "1"
        assert any("UNAVAILABLE_VIEW" in r.getMessage() for r in caplog.records)
    finally:
        assert held is not None and held.release()


@pytest.mark.parametrize(
    ("unavailable_view", "body"),
    [
        ("tests.urlconfs.decorated_views.unavailable_async", b"async busy: printers 503 1"),
        ("tests.urlconfs.decorated_views.unavailable_sync", b"sync busy: printers 503 1"),
    ],
)
def test_unavailable_view_answers_an_async_view(
    settings: Any, redis_url: str, pool: ResourcePool, unavailable_view: str, body: bytes
) -> None:
    configure(settings, redis_url, UNAVAILABLE_VIEW=unavailable_view)
    held = pool.acquire(timeout=0)
    response = arun(aget("/async/"))
    assert response.status_code == 503
    assert response.content == body
    assert response["Retry-After"] == "1"
    assert held is not None and held.release()


def test_async_unavailable_view_answers_a_sync_view(
    settings: Any, redis_url: str, pool: ResourcePool
) -> None:
    # A sync request runs an async UNAVAILABLE_VIEW to completion (async_to_sync).
    configure(
        settings, redis_url, UNAVAILABLE_VIEW="tests.urlconfs.decorated_views.unavailable_async"
    )
    held = pool.acquire(timeout=0)
    try:
        response = Client(raise_request_exception=False).get("/pool/")
        assert response.status_code == 503
        assert response.content == b"async busy: printers 503 1"
        assert response["Retry-After"] == "1"
    finally:
        assert held is not None and held.release()


# --------------------------------------------------------------- views that raise


def test_sync_view_that_raises_releases_the_resource(pool: ResourcePool, sent: list[Sent]) -> None:
    with pytest.raises(views.Boom, match="sync view failed"):
        Client(raise_request_exception=True).get("/raising/")
    assert len(views.RECORD.seen) == 1, "it held p1 when it raised"
    assert pool.available_count() == 1
    (released,) = named(sent, "resource_released")
    assert released.kwargs["lost"] is False


def test_async_view_that_raises_releases_the_resource(pool: ResourcePool) -> None:
    with pytest.raises(views.Boom, match="async view failed"):
        arun(aget("/async-raising/", raise_request_exception=True))
    assert len(views.RECORD.seen) == 1
    assert pool.available_count() == 1


# -------------------------------------------------------------------- streaming


def test_streaming_response_holds_the_resource_until_its_last_chunk(pool: ResourcePool) -> None:
    response = Client().get("/stream/")
    assert response.status_code == 200
    chunks = iter(response.streaming_content)
    assert next(chunks) == b"chunk0\n"
    assert pool.is_occupied("p1"), "held while the body is sent"
    assert next(chunks) == b"chunk1\n"
    assert next(chunks) == b"chunk2\n"
    assert pool.is_occupied("p1")
    assert list(chunks) == []
    assert pool.available_count() == 1


def test_file_response_holds_the_resource_until_its_last_chunk(pool: ResourcePool) -> None:
    response = Client().get("/file/")
    assert response.status_code == 200
    chunks = iter(response.streaming_content)
    assert next(chunks) == b"xxxx"
    assert pool.is_occupied("p1")
    assert next(chunks) == b"xxxx"
    assert pool.is_occupied("p1")
    assert list(chunks) == [b"xx"]
    assert pool.available_count() == 1


@pytest.mark.django_db  # closing a response closes DB connections (after any DB test)
def test_closing_a_streaming_response_early_releases_the_resource(pool: ResourcePool) -> None:
    response = Client().get("/stream/")
    chunks = iter(response.streaming_content)
    assert next(chunks) == b"chunk0\n"
    assert pool.is_occupied("p1")
    response.close()
    assert pool.available_count() == 1


def test_response_never_closed_releases_once_garbage_collected(pool: ResourcePool) -> None:
    response = views.pool_view(RequestFactory().get("/pool/"))
    assert response.status_code == 200
    assert pool.is_occupied("p1"), "a response not yet closed still holds"
    del response
    gc.collect()
    assert pool.available_count() == 1


# -------------------------------------------------------------------- async views


def test_async_view_holds_the_lease_and_releases_it_after_the_response(
    pool: ResourcePool,
) -> None:
    response = arun(aget("/async/"))
    assert response.status_code == 200
    assert response.content == b"printing on p1"
    (seen,) = views.RECORD.seen
    assert isinstance(seen["resources"]["printers"], Lease)
    assert seen["occupied"] is True
    assert pool.available_count() == 1


@dataclass
class RedisCall:
    thread: int
    on_loop: bool
    command: Any


@pytest.fixture
def redis_calls(pool: ResourcePool, monkeypatch: pytest.MonkeyPatch) -> list[RedisCall]:
    """Every ``execute_command``/``evalsha`` of the registry's client, with the
    calling thread and whether an event loop was running in it (instrumentation:
    the real method still runs)."""
    calls: list[RedisCall] = []
    client = registry.get_connection()
    assert pool.client is client

    def recording(method: Callable[..., Any]) -> Callable[..., Any]:
        def record(*args: Any, **kwargs: Any) -> Any:
            try:
                asyncio.get_running_loop()
                on_loop = True
            except RuntimeError:
                on_loop = False
            calls.append(RedisCall(threading.get_ident(), on_loop, args[0] if args else None))
            return method(*args, **kwargs)

        return record

    monkeypatch.setattr(client, "execute_command", recording(client.execute_command))
    monkeypatch.setattr(client, "evalsha", recording(client.evalsha))
    return calls


@pytest.mark.parametrize(
    ("path", "exhausted", "status"),
    [
        ("/async/", False, 200),
        ("/async/", True, 503),
        ("/async-raising/", False, None),
        ("/async-stacked/", False, 200),
        ("/cbv/async-get/", False, 200),
        ("/cbv/async-dispatch/", False, 200),
        ("/cbv/async-dispatch/", True, 503),
    ],
)
def test_async_requests_never_block_the_event_loop_on_redis(
    pool: ResourcePool,
    redis_calls: list[RedisCall],
    path: str,
    exhausted: bool,
    status: int | None,
) -> None:
    held = pool.acquire(timeout=0) if exhausted else None
    loop_threads: list[int] = []

    async def request() -> Any:
        loop_threads.append(threading.get_ident())
        redis_calls.clear()
        try:
            return await AsyncClient(raise_request_exception=True).get(path)
        except views.Boom:
            return None

    response = arun(request())
    assert (None if response is None else response.status_code) == status
    # they wait and release on the loop through the asyncio twin of the client:
    # a blocking call there would stall every request of the process
    on_loop = [c for c in redis_calls if c.on_loop or c.thread in loop_threads]
    assert on_loop == [], f"a blocking Redis call on the event loop thread: {on_loop}"
    if held is not None:
        assert held.release()
    assert pool.available_count() == 1
    assert not get_lock("imports").locked()


@pytest.mark.parametrize("how", ["cancel", "wait_for"])
def test_cancelled_async_request_leaves_the_queue_at_once(
    pool: ResourcePool, sent: list[Sent], how: str
) -> None:
    held = pool.acquire(timeout=0)
    assert held is not None

    async def scenario() -> None:
        request = RequestFactory().get("/async-wait/")
        if how == "cancel":
            task = asyncio.ensure_future(views.async_pool_wait_view(request))
            await asyncio.to_thread(wait_for, lambda: pool.waiting_count() == 1, 15, "it to queue")
            await cancel(task)
            with pytest.raises(asyncio.CancelledError):
                await task
        else:
            # (asyncio.TimeoutError: the builtin TimeoutError only from Python 3.11)
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(views.async_pool_wait_view(request), timeout=0.3)
        # gone from the queue before the cancellation reached the caller
        assert await asyncio.to_thread(pool.waiting_count) == 0
        assert await asyncio.to_thread(held.release)
        assert await asyncio.to_thread(pool.available_count) == 1

    arun(scenario())
    assert views.RECORD.seen == [], "the cancelled request's view never ran"
    assert named(sent, "resource_acquired") == []
    assert pool.client.keys(f"{ops(pool).wake_prefix}*") == []


# --------------------------------------------------------------- class-based views


def test_method_decorator_on_dispatch_of_a_sync_view(pool: ResourcePool) -> None:
    response = Client().get("/cbv/sync-dispatch/")
    assert response.status_code == 200
    assert response.content == b"sync cbv"
    (seen,) = views.RECORD.seen
    assert seen["resources"]["printers"].resource == "p1"
    assert seen["occupied"] is True
    assert pool.available_count() == 1
    held = pool.acquire(timeout=0)
    assert Client().get("/cbv/sync-dispatch/").status_code == 503
    assert held is not None and held.release()


@pytest.mark.parametrize(
    ("path", "body"),
    [("/cbv/async-get/", b"async get"), ("/cbv/async-dispatch/", b"async dispatch")],
)
def test_method_decorator_on_an_async_class_based_view(
    pool: ResourcePool, path: str, body: bytes
) -> None:
    response = arun(aget(path))
    assert response.status_code == 200
    assert response.content == body
    (seen,) = views.RECORD.seen
    assert seen["resources"]["printers"].resource == "p1"
    assert seen["occupied"] is True
    assert pool.available_count() == 1
    held = pool.acquire(timeout=0)
    response = arun(aget(path))
    assert response.status_code == 503
    assert response["Retry-After"] == "1"
    assert held is not None and held.release()


# ------------------------------------------------------------------------- stacking


def test_stacked_decorators_hold_both_and_release_both(pool: ResourcePool) -> None:
    assert Client().get("/stacked/").status_code == 200
    (seen,) = views.RECORD.seen
    assert set(seen["resources"]) == {"printers", "imports"}
    assert seen["owned"] is True and seen["occupied"] is True
    assert pool.available_count() == 1
    assert not get_lock("imports").locked()


@pytest.mark.parametrize("path", ["/stacked/", "/async-stacked/"])
def test_exhausted_inner_resource_answers_503_and_releases_the_outer_one(
    pool: ResourcePool, sent: list[Sent], path: str
) -> None:
    outside = get_lock("imports")
    assert outside.acquire(timeout=0)
    response = Client().get(path) if path == "/stacked/" else arun(aget(path))
    assert response.status_code == 503
    assert response["Retry-After"] == "1"
    assert views.RECORD.seen == []
    assert pool.available_count() == 1, "the outer pool lease was given back"
    assert outside.owned(), "the lock still belongs to its outside holder"
    assert [s.kwargs["name"] for s in named(sent, "resource_released")] == ["printers"]
    outside.release()


# -------------------------------------------------------------------------- signals


def test_acquired_and_released_signals_describe_the_hold(
    pool: ResourcePool, sent: list[Sent]
) -> None:
    assert Client().get("/pool/").status_code == 200
    (seen,) = views.RECORD.seen
    hold = seen["resources"]["printers"]
    acquired, released = sent
    assert (acquired.signal, acquired.sender) == ("resource_acquired", ResourcePool)
    assert acquired.kwargs["name"] == "printers"
    assert acquired.kwargs["hold"] is hold and acquired.kwargs["lease"] is hold
    assert acquired.kwargs["request"].path == "/pool/"
    assert acquired.kwargs["waited"] >= 0
    assert (released.signal, released.sender) == ("resource_released", ResourcePool)
    assert released.kwargs["hold"] is hold
    assert released.kwargs["request"] is acquired.kwargs["request"]
    assert released.kwargs["held"] >= 0
    assert released.kwargs["lost"] is False


@pytest.mark.parametrize(
    ("path", "name", "sender"),
    [("/semaphore/", "reports", Semaphore), ("/lock/", "imports", Lock)],
)
def test_signal_senders_are_the_primitive_classes(
    settings: Any, redis_url: str, sent: list[Sent], path: str, name: str, sender: type
) -> None:
    configure(settings, redis_url)
    assert Client().get(path).status_code == 200
    assert [(s.signal, s.sender, s.kwargs["name"]) for s in sent] == [
        ("resource_acquired", sender, name),
        ("resource_released", sender, name),
    ]
    acquired = sent[0]
    assert isinstance(acquired.kwargs["lease"], Lease)
    if sender is Lock:
        assert isinstance(acquired.kwargs["hold"], Lock)
        assert acquired.kwargs["lease"].fence == views.RECORD.seen[0]["fence"]


def test_resource_unavailable_signal_carries_the_error(
    pool: ResourcePool, sent: list[Sent]
) -> None:
    held = pool.acquire(timeout=0)
    assert Client().get("/pool-custom-status/").status_code == 429
    (unavailable,) = sent
    assert (unavailable.signal, unavailable.sender) == ("resource_unavailable", ResourcePool)
    error = unavailable.kwargs["error"]
    assert isinstance(error, ResourceUnavailable)
    assert (error.name, error.status, error.retry_after) == ("printers", 429, 7)
    assert unavailable.kwargs["name"] == "printers"
    assert unavailable.kwargs["request"].path == "/pool-custom-status/"
    assert unavailable.kwargs["waited"] >= 0
    assert held is not None and held.release()


def test_force_released_lease_is_reported_lost_on_release(
    pool: ResourcePool, sent: list[Sent]
) -> None:
    assert Client().get("/pool-force-released/").status_code == 200
    (released,) = named(sent, "resource_released")
    assert released.sender is ResourcePool
    assert released.kwargs["lost"] is True
    (lost,) = named(sent, "lease_lost")
    assert lost.sender is ResourcePool
    assert lost.kwargs["name"] == "printers"
    assert lost.kwargs["lease"] == released.kwargs["lease"]
    assert pool.available_count() == 1


def test_expired_lock_lease_is_reported_lost_on_release(
    settings: Any, redis_url: str, sent: list[Sent]
) -> None:
    configure(settings, redis_url)
    assert Client().get("/lock-expiring/").status_code == 200
    (released,) = named(sent, "resource_released")
    assert released.sender is Lock
    assert released.kwargs["lost"] is True
    (lost,) = named(sent, "lease_lost")
    assert (lost.sender, lost.kwargs["name"]) == (Lock, "imports")
    assert not get_lock("imports").locked()


def test_receiver_that_raises_does_not_break_the_request(
    pool: ResourcePool, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(sender: type, **kwargs: Any) -> None:
        raise RuntimeError("receiver is broken")

    signals.resource_acquired.connect(broken, weak=False)
    signals.resource_released.connect(broken, weak=False)
    try:
        with caplog.at_level(logging.ERROR, logger="django_redis_pool"):
            response = Client().get("/pool/")
    finally:
        signals.resource_acquired.disconnect(broken)
        signals.resource_released.disconnect(broken)
    assert response.status_code == 200
    assert pool.available_count() == 1
    failures = [r for r in caplog.records if "signal receiver" in r.getMessage()]
    assert len(failures) == 2
    assert all(r.levelno == logging.ERROR for r in failures)


# --------------------------------------------------------------------- Redis down


@pytest.fixture
def own_redis() -> Iterator[EmbeddedRedis]:
    """A private redis-server that the test may stop."""
    server = EmbeddedRedis().start()
    try:
        yield server
    finally:
        server.stop()


def test_redis_down_answers_503_and_logs_an_error(
    settings: Any,
    own_redis: EmbeddedRedis,
    caplog: pytest.LogCaptureFixture,
    sent: list[Sent],
) -> None:
    configure(settings, own_redis.url)
    assert get_pool("printers").associate("p1")
    own_redis.stop()
    with caplog.at_level(logging.WARNING, logger="django_redis_pool"):
        response = Client().get("/plain/")
    assert response.status_code == 503
    assert response["Retry-After"] == "1"
    assert views.RECORD.seen == []
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert any("Redis is unreachable" in r.getMessage() for r in errors)
    (unavailable,) = named(sent, "resource_unavailable")
    assert isinstance(unavailable.kwargs["error"], BackendUnavailable)


def test_redis_down_with_fail_open_runs_the_view_without_a_hold(
    settings: Any, own_redis: EmbeddedRedis, caplog: pytest.LogCaptureFixture
) -> None:
    configure(settings, own_redis.url, FAIL_OPEN=True)
    assert get_pool("printers").associate("p1")
    own_redis.stop()
    with caplog.at_level(logging.WARNING, logger="django_redis_pool"):
        response = Client().get("/plain/")
    assert response.status_code == 200
    (seen,) = views.RECORD.seen
    assert seen["resources"] == {"printers": None}
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert any("FAIL_OPEN" in r.getMessage() for r in warnings)
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


@pytest.mark.parametrize(("fail_open", "status"), [(False, 503), (True, 200)])
def test_unreachable_redis_port_follows_fail_open_for_async_views(
    settings: Any, fail_open: bool, status: int
) -> None:
    configure(settings, f"redis://127.0.0.1:{closed_port()}/0", FAIL_OPEN=fail_open)
    response = arun(aget("/async-stacked/"))
    assert response.status_code == status
    if fail_open:
        (seen,) = views.RECORD.seen
        assert seen["resources"] == {"printers": None, "imports": None}
    else:
        assert response["Retry-After"] == "1"


# --------------------------------------------------------------------- concurrency


def test_a_pool_of_two_never_serves_more_than_two_requests_at_once(
    settings: Any, redis_url: str
) -> None:
    configure(settings, redis_url, POOLS={"printers": {"RESOURCES": ["p1", "p2"]}})
    pool = get_pool("printers")
    pool.associate("p1")
    pool.associate("p2")
    statuses: list[int] = []
    errors: list[BaseException] = []

    def requests() -> None:
        client = Client()
        try:
            for _ in range(4):
                statuses.append(client.get("/concurrent/").status_code)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=requests) for _ in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []
    assert statuses == [200] * 48
    assert views.RECORD.max_active == 2
    assert views.RECORD.overlaps == [], "a resource was leased to two requests at once"
    assert pool.available_count() == 2
    assert pool.waiting_count() == 0


# ---------------------------------------------------------------- bad arguments


@pytest.mark.parametrize(
    ("name", "options", "error", "message"),
    [
        ("bad name", {}, ValueError, "'bad name'"),
        ("printers", {"timeout": -1}, ValueError, "timeout.*-1"),
        ("printers", {"status": 200}, ValueError, "status.*200"),
        ("printers", {"identity": 5}, TypeError, "identity.*5"),
        ("printers", {"retry_after": -2}, ValueError, "retry_after.*-2"),
        ("printers", {"lease_timeout": 0}, ValueError, "lease_timeout.*0"),
    ],
)
def test_bad_arguments_raise_at_decoration_time_naming_the_value(
    name: str, options: dict[str, Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        with_resource(name, **options)


def test_unknown_name_raises_not_configured_at_request_time(pool: ResourcePool) -> None:
    with pytest.raises(NotConfigured, match="'nowhere'"):
        Client(raise_request_exception=True).get("/unknown-name/")


def test_request_sharing_the_identity_of_the_lock_holder_waits_its_turn_not_500(
    settings: Any, redis_url: str
) -> None:
    # On a plain (non-reentrant) lock, requests with one identity are separate
    # holders that take turns, never "waiting for themselves" (a 500).
    configure(settings, redis_url)
    outside = get_lock("imports").for_holder("same-user")
    assert outside.acquire(timeout=0)
    try:
        response = Client(raise_request_exception=False).get("/lock-identity/")
        assert response.status_code == 503
        assert response["Retry-After"] == "1"
    finally:
        outside.release()


@pytest.mark.parametrize("user", ["x" * 200, "tab\there"])
def test_an_invalid_identity_answers_400_not_500(
    settings: Any, redis_url: str, user: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Identities are often built from client input: one that cannot name a
    holder (empty, over 200 characters, control characters) is a bad request."""
    configure(settings, redis_url, SEMAPHORES={"reports": {"MAX_SIZE": 1}})
    response = Client().get("/semaphore-identity/", {"user": user})
    assert response.status_code == 400
    assert "answered 400: identity(request) for 'reports'" in caplog.text
    assert get_semaphore("reports").get_current_size() == 0


def test_an_identity_that_is_not_a_str_answers_400(settings: Any, redis_url: str) -> None:
    configure(settings, redis_url, SEMAPHORES={"reports": {"MAX_SIZE": 1}})
    response = Client().get("/semaphore-number-identity/")
    assert response.status_code == 400
