"""``ResourceMiddleware`` through Django's test clients, against the harness's Redis.

Both ``django.test.Client`` (a sync middleware chain) and ``AsyncClient`` (an async
chain) are used; the views in ``tests/urlconfs/middleware_views.py`` are plain, so every
hold seen here is the middleware's.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from django.core.exceptions import ImproperlyConfigured
from django.test import AsyncClient, Client

from django_redis_pool import ResourcePool, get_lock, get_pool, get_semaphore, registry
from django_redis_pool.guard import request_of
from tests import settings as base_settings
from tests.support.waiting import STALL, cancel, floor_of, wait_for
from tests.urlconfs.middleware_views import PROBE

pytestmark = pytest.mark.urls("tests.urlconfs.middleware_views")

RESOURCE_MIDDLEWARE = "django_redis_pool.middleware.ResourceMiddleware"
PRINT_POST = {"PATH": r"^/print/", "METHODS": ["POST"], "RESOURCE": "printers", "TIMEOUT": 0}

#: send(method, path, **kwargs) -> response, through one client kept for the test.
Send = Callable[..., Any]


def configure(
    settings: Any,
    url: str,
    rules: list[dict[str, Any]],
    printers: tuple[str, ...] = ("p1",),
    **extra: Any,
) -> ResourcePool:
    """Install the middleware with ``rules``; returns the printers pool with its
    resources associated."""
    settings.MIDDLEWARE = [*base_settings.MIDDLEWARE, RESOURCE_MIDDLEWARE]
    settings.DJANGO_REDIS_POOL = {
        "CONNECTION": {"URL": url},
        "POOLS": {
            "printers": {"RESOURCES": list(printers), "LEASE_TIMEOUT": 30},
            "scanners": {"RESOURCES": ["s1"], "LEASE_TIMEOUT": 30},
        },
        "MIDDLEWARE": rules,
        **extra,
    }
    for name in ("printers", "scanners"):
        pool = get_pool(name)
        for resource in settings.DJANGO_REDIS_POOL["POOLS"][name]["RESOURCES"]:
            pool.associate(resource)
    return get_pool("printers")


def held_names(response: Any) -> list[str] | None:
    """The names in ``request.resources`` as the view saw them (None: no attribute)."""
    resources = response.json()["resources"]
    return None if resources is None else sorted(resources)


def on_event_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


async def eventually(check: Callable[[], object], what: str, timeout: float = 30) -> None:
    """``wait_for`` for coroutines run by ``async_to_sync``: ``check`` runs in the
    calling thread (thread-sensitive), never on the loop or its default executor."""
    deadline = time.monotonic() + timeout
    while not await sync_to_async(check)():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


def record_redis_calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str, bool]]:
    """Instrument the configured client (shared by every primitive): each
    ``evalsha``/``execute_command`` call is noted as (method, first argument,
    whether the calling thread runs an event loop), then made as usual."""
    connection = registry.get_connection()
    calls: list[tuple[str, str, bool]] = []

    def recorded(name: str, method: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            calls.append((name, str(args[0]) if args else "", on_event_loop()))
            return method(*args, **kwargs)

        return call

    for name in ("evalsha", "execute_command"):
        monkeypatch.setattr(connection, name, recorded(name, getattr(connection, name)))
    return calls


@pytest.fixture(autouse=True)
def _reset_probe() -> Iterator[None]:
    PROBE.reset()
    yield
    PROBE.gate.set()  # never leave a gated view waiting


@pytest.fixture(params=["Client", "AsyncClient"])
def send(request: pytest.FixtureRequest) -> Send:
    """Requests through ``Client`` (sync chain) or ``AsyncClient`` (async chain),
    answering 500 for a view that raises."""
    if request.param == "Client":
        client = Client(raise_request_exception=False)

        def send_sync(method: str, path: str, **kwargs: Any) -> Any:
            return getattr(client, method.lower())(path, **kwargs)

        return send_sync
    aclient = AsyncClient(raise_request_exception=False)

    def send_async(method: str, path: str, **kwargs: Any) -> Any:
        return async_to_sync(getattr(aclient, method.lower()))(path, **kwargs)

    return send_async


# ------------------------------------------------------------ holding and passing


def test_matching_rule_holds_the_resource_during_the_view_and_releases_it_after(
    settings: Any, redis_url: str, send: Send
) -> None:
    pool = configure(settings, redis_url, [PRINT_POST])
    response = send("POST", "/print/")
    assert response.status_code == 200
    seen = response.json()
    assert seen["resources"]["printers"]["type"] == "Lease"
    assert seen["resources"]["printers"]["kind"] == "pool"
    assert seen["resources"]["printers"]["resource"] == "p1"
    assert seen["printers_available"] == 0, "held while the view ran"
    assert pool.available_count() == 1 and pool.occupied_count() == 0, "released after"


@pytest.mark.parametrize(
    ("method", "path"),
    [("POST", "/x/print/"), ("POST", "/free/"), ("GET", "/print/"), ("PUT", "/print/")],
    ids=["path-not-at-start", "other-path", "GET-not-in-METHODS", "PUT-not-in-METHODS"],
)
def test_request_no_rule_matches_passes_through_untouched(
    settings: Any, redis_url: str, send: Send, method: str, path: str
) -> None:
    pool = configure(settings, redis_url, [PRINT_POST])
    response = send(method, path)
    assert response.status_code == 200
    assert held_names(response) is None, "no request.resources attribute at all"
    assert response.json()["printers_available"] == 1
    assert pool.available_count() == 1


def test_requests_no_rule_matches_never_call_redis(
    settings: Any, redis_url: str, send: Send, monkeypatch: pytest.MonkeyPatch
) -> None:
    configure(settings, redis_url, [PRINT_POST, {"PATH": r"^/scan/", "RESOURCE": "scanners"}])
    calls = record_redis_calls(monkeypatch)
    for method in ("GET", "POST", "DELETE"):
        response = send(method, "/plain/")
        assert response.json() == {"resources": None}
    assert calls == []


def test_path_regex_is_matched_from_the_start_of_path_info(settings: Any, redis_url: str) -> None:
    configure(settings, redis_url, [{"PATH": r"^/print/", "RESOURCE": "printers", "TIMEOUT": 0}])
    client = Client()
    assert held_names(client.get("/print/a/")) == ["printers"], "a prefix match is enough"
    assert held_names(client.get("/x/print/")) is None
    # Under a script prefix, request.path is /app/print/ but path_info is /print/.
    response = client.get("/print/", SCRIPT_NAME="/app")
    assert response.json()["path"] == "/app/print/"
    assert held_names(response) == ["printers"]
    # Without a leading ^ the pattern is still anchored at the start.
    settings.DJANGO_REDIS_POOL = {
        **settings.DJANGO_REDIS_POOL,
        "MIDDLEWARE": [{"PATH": r"/print/", "RESOURCE": "printers", "TIMEOUT": 0}],
    }
    assert held_names(client.get("/print/")) == ["printers"]
    assert held_names(client.get("/x/print/")) is None


def test_methods_are_matched_case_insensitively(settings: Any, redis_url: str) -> None:
    rule = {"PATH": r"^/print/", "METHODS": ["post", "Put"], "RESOURCE": "printers", "TIMEOUT": 0}
    configure(settings, redis_url, [rule])
    client = Client()
    assert held_names(client.post("/print/")) == ["printers"]
    assert held_names(client.put("/print/")) == ["printers"]
    assert held_names(client.get("/print/")) is None


def test_rule_without_methods_matches_every_method(settings: Any, redis_url: str) -> None:
    configure(settings, redis_url, [{"PATH": r"^/print/", "RESOURCE": "printers", "TIMEOUT": 0}])
    client = Client()
    for method in ("get", "post", "put", "patch", "delete"):
        assert held_names(getattr(client, method)("/print/")) == ["printers"], method


def test_first_matching_rule_wins(settings: Any, redis_url: str) -> None:
    printers = {"PATH": r"^/print/", "RESOURCE": "printers", "TIMEOUT": 0}
    anything = {"PATH": r"^/", "RESOURCE": "scanners", "TIMEOUT": 0}
    configure(settings, redis_url, [printers, anything])
    client = Client()
    assert held_names(client.get("/print/")) == ["printers"], "only the first rule's resource"
    assert held_names(client.get("/scan/")) == ["scanners"], "the next rule when it does not"
    settings.DJANGO_REDIS_POOL = {**settings.DJANGO_REDIS_POOL, "MIDDLEWARE": [anything, printers]}
    assert held_names(client.get("/print/")) == ["scanners"]


def test_rule_lease_timeout_and_identity_shape_the_lease(settings: Any, redis_url: str) -> None:
    rules = [
        {**PRINT_POST, "LEASE_TIMEOUT": 5, "IDENTITY": "tests.urlconfs.middleware_views.user_of"},
        {"PATH": r"^/scan/", "RESOURCE": "scanners", "TIMEOUT": 0},
    ]
    configure(settings, redis_url, rules)
    client = Client()
    lease = client.post("/print/", headers={"X-User": "alice"}).json()["resources"]["printers"]
    assert (lease["holder"], lease["lease_timeout"]) == ("alice", 5)
    lease = client.get("/scan/").json()["resources"]["scanners"]
    assert lease["lease_timeout"] == 30, "the pool's own LEASE_TIMEOUT by default"
    assert request_of(lease["holder"]) == {"method": "GET", "path": "/scan/", "user": None}, (
        "a unique holder naming the request"
    )


def test_async_view_holds_the_resource_and_it_is_released_after(
    settings: Any, redis_url: str
) -> None:
    pool = configure(
        settings, redis_url, [{"PATH": r"^/async/print/", "RESOURCE": "printers", "TIMEOUT": 0}]
    )
    response = async_to_sync(AsyncClient().get)("/async/print/")
    assert response.status_code == 200
    seen = response.json()
    assert seen["resources"]["printers"]["resource"] == "p1"
    assert seen["printers_available"] == 0
    assert pool.available_count() == 1


def test_sync_chain_holds_the_resource_around_an_async_view(settings: Any, redis_url: str) -> None:
    pool = configure(
        settings, redis_url, [{"PATH": r"^/async/print/", "RESOURCE": "printers", "TIMEOUT": 0}]
    )
    response = Client().get("/async/print/")
    assert response.status_code == 200
    assert response.json()["printers_available"] == 0
    assert pool.available_count() == 1


# ------------------------------------------------------------------- refusing


@pytest.mark.parametrize(
    ("options", "retry_after"),
    [
        ({"TIMEOUT": 0, "RETRY_AFTER": 7}, "7"),
        ({"TIMEOUT": 1.2}, "2"),  # the ceiling of TIMEOUT
        ({"TIMEOUT": 0}, "1"),
    ],
    ids=["RETRY_AFTER", "ceil-TIMEOUT", "default-1"],
)
def test_exhausted_pool_answers_503_with_retry_after_and_skips_the_view(
    settings: Any, redis_url: str, send: Send, options: dict[str, Any], retry_after: str
) -> None:
    pool = configure(settings, redis_url, [{**PRINT_POST, **options}])
    taken = pool.acquire(timeout=0, holder="someone-else")
    assert taken is not None
    started = time.monotonic()
    response = send("POST", "/print/")
    assert response.status_code == 503
    assert response["Retry-After"] == retry_after
    assert PROBE.calls == 0, "the view did not run"
    if options["TIMEOUT"]:
        assert time.monotonic() - started >= options["TIMEOUT"] - 0.1, "it waited first"
    assert [lease.holder for lease in pool.leases()] == ["someone-else"]


def test_rule_status_is_used_when_nothing_is_granted(
    settings: Any, redis_url: str, send: Send
) -> None:
    pool = configure(settings, redis_url, [{**PRINT_POST, "STATUS": 429, "RETRY_AFTER": 3}])
    assert pool.acquire(timeout=0, holder="someone-else") is not None
    response = send("POST", "/print/")
    assert response.status_code == 429
    assert response["Retry-After"] == "3"
    assert PROBE.calls == 0


def test_past_max_waiting_a_request_is_refused_at_once_with_the_rule_status(
    settings: Any, redis_url: str, send: Send
) -> None:
    refuse_now = {**PRINT_POST, "PATH": r"^/print/a/"}
    wait = {**PRINT_POST, "TIMEOUT": 20, "STATUS": 429}
    pools = {
        "printers": {"RESOURCES": ["p1"], "LEASE_TIMEOUT": 30, "MAX_WAITING": 1},
        "scanners": {"RESOURCES": ["s1"], "LEASE_TIMEOUT": 30},
    }
    pool = configure(settings, redis_url, [refuse_now, wait], POOLS=pools)
    taken = pool.acquire(timeout=0, holder="someone-else")
    assert taken is not None
    waiting: list[Any] = []
    thread = threading.Thread(target=lambda: waiting.append(Client().post("/print/")))
    thread.start()
    try:
        wait_for(lambda: pool.waiting_count() == 1, 30, "one request to wait (MAX_WAITING 1)")
        floor = floor_of(lambda: send("POST", "/print/a/"))  # TIMEOUT 0: refused at once
        started = time.monotonic()
        response = send("POST", "/print/")  # would wait 20 s: one more than MAX_WAITING
        assert time.monotonic() - started < 10 * floor + STALL, "refused at once"
        assert response.status_code == 429
        assert response["Retry-After"] == "20"
        assert PROBE.calls == 0, "no view ran"
        assert pool.waiting_count() == 1
    finally:
        assert taken.release()
        thread.join(30)
    (served,) = waiting
    assert served.status_code == 200, "the request that waited got the printer"
    assert PROBE.calls == 1


# ------------------------------------------------------------ semaphores and locks


def test_semaphore_rule_with_identity_shares_a_slot_per_user_and_limits_users(
    settings: Any, redis_url: str
) -> None:
    rule = {
        "PATH": r"^/gate/",
        "RESOURCE": "per_user",
        "TIMEOUT": 0,
        "IDENTITY": "tests.urlconfs.middleware_views.user_of",
    }
    configure(settings, redis_url, [rule], SEMAPHORES={"per_user": {"MAX_SIZE": 2}})
    semaphore = get_semaphore("per_user")

    def request_as(user: str) -> Any:
        return Client().get("/gate/", headers={"X-User": user})

    with ThreadPoolExecutor(3) as executor:
        try:
            inside = [executor.submit(request_as, u) for u in ("alice", "alice", "bob")]
            wait_for(lambda: PROBE.calls == 3, 30, "three requests inside the view")
            assert semaphore.get_current_size() == 2, "alice's two requests share one slot"
            assert sorted(lease.holder for lease in semaphore.holders()) == ["alice", "bob"]
            refused = request_as("carol")
            assert refused.status_code == 503, "a third user is beyond MAX_SIZE"
            assert PROBE.calls == 3
        finally:
            PROBE.gate.set()
        responses = [future.result(timeout=30) for future in inside]
    assert [r.status_code for r in responses] == [200, 200, 200]
    assert [r.json()["resources"]["per_user"]["kind"] for r in responses] == ["semaphore"] * 3
    assert semaphore.get_current_size() == 0
    assert request_as("carol").status_code == 200, "a slot is free again"


def test_lock_rule_gives_the_view_a_lock_it_owns(settings: Any, redis_url: str, send: Send) -> None:
    rule = {"PATH": r"^/print/", "RESOURCE": "report", "TIMEOUT": 0}
    configure(settings, redis_url, [rule], LOCKS={"report": {}})
    response = send("POST", "/print/")
    assert response.status_code == 200
    assert response.json()["resources"] == {
        "report": {"type": "Lock", "name": "report", "owned": True}
    }
    assert get_lock("report").locked() is False, "released after the response"


def test_lock_rule_without_timeout_waits_the_locks_timeout_then_refuses(
    settings: Any, redis_url: str
) -> None:
    rule = {"PATH": r"^/print/", "RESOURCE": "report"}
    configure(settings, redis_url, [rule], LOCKS={"report": {"TIMEOUT": 1.5}})
    assert get_lock("report").acquire(holder="nightly-job", timeout=0)
    response = Client().post("/print/")
    assert response.status_code == 503
    assert response["Retry-After"] == "2", "the ceiling of the lock's TIMEOUT"
    assert PROBE.calls == 0
    assert get_lock("report").holder() == "nightly-job"


# ------------------------------------------------------- streaming and failures


def test_streaming_response_holds_until_its_last_chunk_is_consumed(
    settings: Any, redis_url: str, send: Send
) -> None:
    pool = configure(settings, redis_url, [{"PATH": r"^/stream/", "RESOURCE": "printers"}])
    response = send("GET", "/stream/print/")
    assert response.streaming
    assert PROBE.seen[0]["printers_available"] == 0
    chunks = iter(response.streaming_content)
    assert next(chunks) == b"one,"
    assert pool.available_count() == 0, "held after the view returned"
    assert next(chunks) == b"two,"
    assert next(chunks) == b"three"
    assert pool.available_count() == 0, "held until the stream is finished"
    assert list(chunks) == []
    assert pool.available_count() == 1, "released once the last chunk is sent"


def test_async_streaming_response_holds_until_its_last_chunk_is_consumed(
    settings: Any, redis_url: str
) -> None:
    rule = {"PATH": r"^/async/stream/", "RESOURCE": "printers"}
    pool = configure(settings, redis_url, [rule])
    available = sync_to_async(pool.available_count, thread_sensitive=False)

    async def scenario() -> tuple[list[bytes], list[int]]:
        response = await AsyncClient().get("/async/stream/print/")
        assert response.streaming and response.is_async
        chunks, counts = [], []
        async for chunk in response.streaming_content:
            chunks.append(chunk)
            counts.append(await available())
        return chunks, counts

    chunks, counts = async_to_sync(scenario)()
    assert chunks == [b"one,", b"two,", b"three"]
    assert counts == [0, 0, 0]
    assert pool.available_count() == 1


def test_view_that_raises_still_releases_the_resource(
    settings: Any, redis_url: str, send: Send
) -> None:
    pool = configure(settings, redis_url, [{"PATH": r"^/(async/)?boom/", "RESOURCE": "printers"}])
    response = send("GET", "/boom/print/")
    assert response.status_code == 500
    assert PROBE.seen[0]["printers_available"] == 0, "the view ran holding it"
    assert pool.available_count() == 1
    response = send("GET", "/async/boom/print/")
    assert response.status_code == 500
    assert pool.available_count() == 1


def test_view_exception_reraised_by_the_client_still_releases(
    settings: Any, redis_url: str
) -> None:
    pool = configure(settings, redis_url, [{"PATH": r"^/boom/", "RESOURCE": "printers"}])
    with pytest.raises(RuntimeError, match="the view failed"):
        Client().get("/boom/print/")
    assert pool.available_count() == 1
    assert Client().get("/print/").status_code == 200


# -------------------------------------------------------------------- settings


def test_rule_changes_apply_on_the_next_request_without_a_new_client(
    settings: Any, redis_url: str, send: Send
) -> None:
    configure(settings, redis_url, [PRINT_POST])
    assert held_names(send("POST", "/print/")) == ["printers"]
    settings.DJANGO_REDIS_POOL = {**settings.DJANGO_REDIS_POOL, "MIDDLEWARE": []}
    assert held_names(send("POST", "/print/")) is None, "the rule is gone"
    settings.DJANGO_REDIS_POOL = {
        **settings.DJANGO_REDIS_POOL,
        "MIDDLEWARE": [{"PATH": r"^/scan/", "RESOURCE": "scanners", "STATUS": 429, "TIMEOUT": 0}],
    }
    assert held_names(send("GET", "/scan/")) == ["scanners"]
    assert get_pool("scanners").acquire(timeout=0, holder="someone-else") is not None
    response = send("GET", "/scan/")
    assert (response.status_code, response["Retry-After"]) == (429, "1")


@pytest.mark.parametrize(
    "rule",
    [
        {"PATH": r"^/print/", "RESOURCE": "plotters"},
        {"PATH": r"^/print/(", "RESOURCE": "printers"},
        {"PATH": r"^/print/", "RESOURCE": "printers", "TIMOUT": 5},
        {"PATH": r"^/print/", "RESOURCE": "printers", "METHODS": "POST"},
        {"PATH": r"^/print/", "RESOURCE": "printers", "IDENTITY": "tests.nowhere.user"},
    ],
    ids=["unknown-resource", "bad-regex", "unknown-key", "methods-str", "bad-identity"],
)
@pytest.mark.parametrize("client_class", [Client, AsyncClient])
def test_invalid_rule_makes_every_request_raise_improperly_configured(
    settings: Any, redis_url: str, rule: dict[str, Any], client_class: type
) -> None:
    configure(settings, redis_url, [])
    settings.DJANGO_REDIS_POOL = {**settings.DJANGO_REDIS_POOL, "MIDDLEWARE": [rule]}
    client = client_class()
    get = client.get if client_class is Client else async_to_sync(client.get)
    with pytest.raises(ImproperlyConfigured, match=r'DJANGO_REDIS_POOL\["MIDDLEWARE"\]\[0\]'):
        get("/free/")  # even a path the rule would not match
    assert PROBE.calls == 0


# ---------------------------------------------------------------- async chain


def test_async_chain_never_calls_redis_on_the_event_loop_thread(
    settings: Any, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    rules = [
        {"PATH": r"^/async/(print|boom)/", "RESOURCE": "printers", "TIMEOUT": 0},
        {"PATH": r"^/async/scan/", "RESOURCE": "report", "TIMEOUT": 0},
    ]
    pool = configure(settings, redis_url, rules, LOCKS={"report": {}})
    calls = record_redis_calls(monkeypatch)
    client = AsyncClient(raise_request_exception=False)
    get = async_to_sync(client.get)

    response = get("/async/print/")
    assert response.status_code == 200
    assert response.json()["printers_available"] == 0
    assert pool.available_count() == 1
    taken = pool.acquire(timeout=0, holder="someone-else")
    assert taken is not None
    assert get("/async/print/").status_code == 503
    taken.release()
    assert get("/async/boom/print/").status_code == 500
    assert pool.available_count() == 1
    response = get("/async/scan/")
    assert response.json()["resources"]["report"] == {
        "type": "Lock",
        "name": "report",
        "owned": True,
    }
    assert get_lock("report").locked() is False
    assert any(
        name == "evalsha" or first.upper() in ("EVALSHA", "FCALL") for name, first, _ in calls
    ), "the recorder saw the scripts"
    on_loop = [(name, command) for name, command, looped in calls if looped]
    assert on_loop == [], f"Redis was called on the event loop thread: {on_loop}"


def test_async_client_gone_during_the_view_releases_the_hold_at_once(
    settings: Any, redis_url: str
) -> None:
    rule = {"PATH": r"^/async/hang/", "RESOURCE": "printers", "TIMEOUT": 0}
    pool = configure(settings, redis_url, [rule])
    available = sync_to_async(pool.available_count)

    async def scenario() -> None:
        request = asyncio.ensure_future(AsyncClient().get("/async/hang/print/"))
        await eventually(lambda: PROBE.calls == 1, "the view to start")
        assert await available() == 0
        request.cancel()  # what an ASGI server does when the client disconnects
        with contextlib.suppress(asyncio.CancelledError):
            await request
        assert request.cancelled()
        assert await available() == 1, "released before the cancellation propagated"

    async_to_sync(scenario)()
    assert pool.leases() == []


def test_async_client_gone_while_waiting_gives_a_late_grant_back(
    settings: Any, redis_url: str
) -> None:
    rule = {"PATH": r"^/async/print/", "RESOURCE": "printers", "TIMEOUT": 20}
    pool = configure(settings, redis_url, [rule])
    taken = pool.acquire(timeout=0, holder="someone-else")
    assert taken is not None

    async def scenario() -> None:
        request = asyncio.ensure_future(AsyncClient().get("/async/print/"))
        await eventually(lambda: pool.waiting_count() == 1, "the request to wait in Redis")
        await cancel(request)
        with contextlib.suppress(asyncio.CancelledError):
            await request
        assert request.cancelled()
        await sync_to_async(taken.release)()  # the grant now goes to the gone request
        await eventually(
            lambda: pool.available_count() == 1 and pool.waiting_count() == 0,
            "the late grant to be given back",
        )

    async_to_sync(scenario)()
    assert PROBE.calls == 0, "the view never ran"
    assert pool.leases() == []


# Async requests waiting for a hold each occupy a thread of the guard's own pool,
# never one of the event loop's default executor, so requests for a free resource
# (and the releases) are not queued behind them.
def test_async_requests_waiting_for_a_full_pool_do_not_stall_requests_for_a_free_one(
    settings: Any, redis_url: str
) -> None:
    printers_wait = 60  # the wait the scan must not queue behind: long
    rules = [
        {"PATH": r"^/async/print/", "RESOURCE": "printers", "TIMEOUT": printers_wait},
        {"PATH": r"^/async/scan/", "RESOURCE": "scanners", "TIMEOUT": 0},
    ]
    pool = configure(settings, redis_url, rules)
    taken = pool.acquire(timeout=0, holder="someone-else")
    assert taken is not None
    with ThreadPoolExecutor() as sizing:  # the size asyncio gives its default executor
        waiters = sizing._max_workers

    async def scenario() -> tuple[int | None, int]:
        client = AsyncClient()
        printing = [asyncio.ensure_future(client.get("/async/print/")) for _ in range(waiters)]
        try:
            await eventually(lambda: pool.waiting_count() == waiters, "the printers waiters")
            try:
                scanned = await asyncio.wait_for(client.get("/async/scan/"), printers_wait / 2)
                status: int | None = scanned.status_code
            except asyncio.TimeoutError:
                status = None
            still_waiting = sum(not task.done() for task in printing)
        finally:
            await sync_to_async(taken.release)()
            await asyncio.gather(*printing, return_exceptions=True)
        return status, still_waiting

    status, still_waiting = async_to_sync(scenario)()
    assert status == 200, "the free scanner was not granted while printers requests waited"
    assert still_waiting == waiters
    wait_for(lambda: pool.available_count() == 1, 30, "every hold to be given back")


# ----------------------------------------------------------------- concurrency


def test_concurrent_requests_never_exceed_the_pool(settings: Any, redis_url: str) -> None:
    rule = {"PATH": r"^/busy/", "RESOURCE": "printers", "TIMEOUT": 10}
    pool = configure(settings, redis_url, [rule], printers=("p1", "p2"))
    assert pool.available_count() == 2
    start = threading.Barrier(10)

    def worker() -> list[int]:
        client = Client()
        start.wait(timeout=30)
        return [client.get("/busy/").status_code for _ in range(5)]

    with ThreadPoolExecutor(10) as executor:
        futures = [executor.submit(worker) for _ in range(10)]
        statuses = [status for future in futures for status in future.result(timeout=120)]
    assert statuses == [200] * 50
    assert PROBE.calls == 50
    assert 1 <= PROBE.max_active <= 2, "never more requests inside than printers"
    assert PROBE.overlaps == [], "no printer was held by two requests at once"
    assert pool.available_count() == 2


def test_concurrent_async_requests_never_exceed_the_pool(settings: Any, redis_url: str) -> None:
    rule = {"PATH": r"^/async/busy/", "RESOURCE": "printers", "TIMEOUT": 10}
    pool = configure(settings, redis_url, [rule], printers=("p1", "p2"))
    assert pool.available_count() == 2

    async def scenario() -> list[int]:
        client = AsyncClient()
        statuses: list[int] = []
        # Rounds of 8 at once: more waiters than the loop's default executor has
        # threads (6 on two cores), which the waits must not occupy.
        for _ in range(2):
            responses = await asyncio.gather(*(client.get("/async/busy/") for _ in range(8)))
            statuses += [response.status_code for response in responses]
        return statuses

    assert async_to_sync(scenario)() == [200] * 16
    assert PROBE.calls == 16
    assert 1 <= PROBE.max_active <= 2
    assert PROBE.overlaps == []
    assert pool.available_count() == 2
