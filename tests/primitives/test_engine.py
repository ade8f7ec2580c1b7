"""The lease engine itself: how its Lua runs (function library or EVALSHA) on
either Redis line, retries that change nothing twice, waits that never block
forever, and the clients it accepts."""

from __future__ import annotations

import asyncio
import random
import re
import threading
import time
from typing import Any

import pytest
import redis

from django_redis_pool import Lock, ResourcePool, Semaphore
from django_redis_pool.primitives.clients.async_clients import async_client_for
from django_redis_pool.primitives.leased.primitive import LeasedPrimitive
from django_redis_pool.primitives.wire.protocol import Mode, Reply, Restore, TaskStatus
from django_redis_pool.primitives.wire.scripts import (
    FAST,
    LIBRARY_NAME,
    LUA_FILES,
    library_source,
    load_lua,
    runner_for,
    script_sha,
    script_source,
)
from tests.support.primitive_helpers import expire_now, finish, in_thread, ops, pool_of
from tests.support.waiting import wait_for

# -- raw state, with what moves with the clock blanked out ----------------------------


def state_of(client: Any, primitive: LeasedPrimitive) -> dict[bytes, Any]:
    """Every key of ``primitive`` with its contents. Expiry times (lease scores,
    the expiry field of lease records) and waiters' liveness times are blanked:
    they move with the clock whether or not anything else changes."""
    base = ops(primitive).base
    state: dict[bytes, Any] = {}
    for key in client.scan_iter(match=f"{base}*"):
        kind = client.type(key)
        if kind == b"zset":
            pairs = client.zrange(key, 0, -1, withscores=True)
            scored = key.endswith((b":leases", b":walive"))
            state[key] = [(m, "t" if scored and s != float("inf") else s) for m, s in pairs]
        elif kind == b"hash":
            fields = client.hgetall(key)
            if key.endswith(b":info"):
                # (records blanked; token entries and counters such as "\1extra" kept)
                fields = {
                    f: v if f.startswith((b"\0", b"\1")) else _blank(v, 3)
                    for f, v in fields.items()
                }
            elif key.endswith(b":winfo"):
                fields = {f: _blank(v, 5) for f, v in fields.items()}
            state[key] = fields
        elif kind == b"list":
            state[key] = client.lrange(key, 0, -1)
        else:
            state[key] = client.get(key)
    return state


def _blank(record: bytes, field: int) -> bytes:
    parts = record.split(b"|")
    parts[field] = b"*"
    return b"|".join(parts)


def twice(client: Any, primitive: LeasedPrimitive, op: str, *args: Any) -> Any:
    """Run ``op`` twice with the same arguments (what redis-py's retry after a
    dropped connection does); assert that the second run changed nothing and
    answered like the first. Returns the answer."""
    engine = ops(primitive)
    first = engine.run(op, *args)
    after_first = state_of(client, primitive)
    again = engine.run(op, *args)
    assert state_of(client, primitive) == after_first, f"a second {op} changed the state"
    return first, again


# -- retries: every state-changing operation, run twice -------------------------------


def test_a_retried_acquire_returns_the_same_grant(client: Any) -> None:
    pool = pool_of(client, "retry-acquire", "r1", "r2")
    first, again = twice(client, pool, "acquire", "tok-1", 30000, 0, 0, -1, 2000, "", 1, "h")
    assert first == again and "\n" in first, "a grant: resource and record"
    assert pool.available_count() == 1, "one resource granted, not two"


def test_a_retried_queued_acquire_keeps_one_place(client: Any) -> None:
    pool = pool_of(client, "retry-queue", "r1")
    assert pool.acquire(holder="holder")
    first, again = twice(client, pool, "acquire", "tok-q", 30000, 0, 60000, -1, 2000, "", 1, "w")
    assert isinstance(first, int) and isinstance(again, int)
    assert pool.waiting_count() == 1


@pytest.mark.parametrize("kind", ["semaphore", "rlock"])
def test_a_retried_reacquire_by_the_same_identity_counts_once(client: Any, kind: str) -> None:
    primitive: LeasedPrimitive
    if kind == "semaphore":
        primitive = Semaphore(client, "retry-sem")
        primitive.set_max_size(2)
        assert primitive.acquire("me")
    else:
        primitive = Lock(client, "retry-rlock", reentrant=True, holder="me")
        assert primitive.acquire()
    args = ("tok-2", 30000, 0, 0, -1, 2000, "", 1, "me")
    first, again = twice(client, primitive, "acquire", *args)
    assert first == again
    if kind == "rlock":
        assert isinstance(primitive, Lock)
        primitive.release()  # two acquisitions, two releases
        assert primitive.locked()
        primitive.release()
        assert not primitive.locked()


def queue(primitive: LeasedPrimitive, token: str, holder: str) -> None:
    """Queue a waiter as ``LeaseEngine.acquire`` does, without blocking on its
    wake list (so that nothing but the operation under test changes state)."""
    reply = ops(primitive).run("acquire", token, 30000, 0, 60000, -1, 2000, "", 1, holder)
    assert isinstance(reply, int), reply


def test_a_retried_release_answers_the_same_and_ends_nothing_else(client: Any) -> None:
    pool = pool_of(client, "retry-release", "r1")
    lease = pool.acquire(holder="a")
    assert lease is not None
    queue(pool, "tok-b", "b")
    # the first run hands r1 to b; the retry must neither end b's hold nor say 0
    first, again = twice(client, pool, "release", lease.token, "req-1", "", 0, "r1")
    assert (first, again) == (1, 1)
    handed = pool.lease_of("r1")
    assert handed is not None and handed.holder == "b" and handed.fence > lease.fence
    assert client.llen(f"{ops(pool).wake_prefix}tok-b") == 1, "b was woken once"


def test_a_retried_release_by_identity_never_ends_the_next_hold(client: Any) -> None:
    sem = Semaphore(client, "retry-identity")
    sem.set_max_size(1)
    assert sem.acquire("a")
    queue(sem, "tok-b", "b")
    first, again = twice(client, sem, "release", "", "req-2", "", 0, "a")
    assert (first, again) == (1, 1)
    assert [lease.holder for lease in sem.holders()] == ["b"]


def test_a_retried_reentrant_count_down_counts_down_once(client: Any) -> None:
    lock = Lock(client, "retry-down", reentrant=True, holder="h")
    assert lock.acquire() and lock.acquire()
    first, again = twice(client, lock, "release", "", "req-3", "", 0, "h")
    assert (first, again) == (2, 2)
    lock.release()
    assert not lock.locked()


def test_a_retried_force_release_answers_the_same(client: Any) -> None:
    pool = pool_of(client, "retry-force", "r1")
    lease = pool.acquire(holder="a")
    assert lease is not None
    first, again = twice(client, pool, "release", "", "req-4", lease.fence, 1, "r1")
    assert (first, again) == (1, 1)


def test_a_retried_renew_and_wait_and_withdraw_change_nothing_more(client: Any) -> None:
    pool = pool_of(client, "retry-misc", "r1")
    lease = pool.acquire(holder="a", lease_timeout=30)
    assert lease is not None
    first, again = twice(client, pool, "renew", lease.token, 60000, "r1")
    assert first > 0 and again > 0
    ops(pool).run("acquire", "tok-w", 30000, 0, 60000, -1, 2000, "", 1, "w")
    first, again = twice(client, pool, "wait", "tok-w", 2000)
    assert isinstance(first, int) and isinstance(again, int)
    assert twice(client, pool, "withdraw", "tok-w") == (0, 0)
    assert pool.waiting_count() == 0


def test_retried_gc_associate_disassociate_and_set_max_change_nothing_more(client: Any) -> None:
    pool = pool_of(client, "retry-admin", "r1")
    lease = pool.acquire(holder="a", lease_timeout=30)
    assert lease is not None
    expire_now(lease)
    reclaimed, again = twice(client, pool, "gc", 100, 0)
    assert len(reclaimed[0]) == 2 and again[0] == []
    assert twice(client, pool, "pool_associate", "r2", "r3") == (2, 0)
    assert twice(client, pool, "pool_disassociate", "r2") == (1, 0)
    sem = Semaphore(client, "retry-max")
    assert twice(client, sem, "sem_set_max", 3, 0) == (1, 1)
    assert sem.get_max_size() == 3


def test_remembered_replies_are_bounded_and_kept_as_a_hash_table(
    redis_client: Any,
) -> None:
    # Retries need the replies of recent releases; thousands of releases must
    # not leave thousands of keys (or an ever-growing hash) behind.
    pool = pool_of(redis_client, "many-releases", "r1")
    for _ in range(2500):
        lease = pool.acquire(timeout=0)
        assert lease is not None and lease.release()
    base = ops(pool).base
    keys = set(redis_client.scan_iter(match=f"{base}*"))
    assert keys <= {f"{base}:{s}".encode() for s in ("avail", "seq", "done", "done:old")}
    assert redis_client.hlen(f"{base}:done") <= 1000
    assert redis_client.hlen(f"{base}:done:old") <= 1001
    assert 0 < redis_client.pttl(f"{base}:done") <= 60_000, "and they expire"
    # A small hash would be a listpack, scanned whole by every HSET of a new field.
    assert redis_client.object("encoding", f"{base}:done") == b"hashtable"


# -- the EVALSHA path's common-case scripts agree with the whole operations ---------


def _normalized(client: Any, primitive: LeasedPrimitive) -> dict[bytes, Any]:
    """``state_of`` with the primitive's name taken out of the keys and the
    times (acquired, available since) blanked, to compare two primitives."""
    base = ops(primitive).base.encode()
    state = {}
    for key, value in state_of(client, primitive).items():
        if key.endswith(b":avail"):
            value = [member for member, _ in value]  # the order, not the times
        elif key.endswith(b":info"):  # tokens and times blanked
            value = (
                sorted(
                    (f, _blank(_blank(v, 0), 2))
                    for f, v in value.items()
                    if f[:1] not in (b"\0", b"\1")
                ),
                sorted(v for f, v in value.items() if f[:1] == b"\0"),
                sorted((f, v) for f, v in value.items() if f[:1] == b"\1"),  # "\1extra"
            )
        state[key.replace(base, b"")] = value
    return state


def _grant_times_blanked(grant: str) -> tuple[str, bytes]:
    """A grant ("resource\nrecord") with its record's times blanked."""
    resource, record = grant.split("\n", 1)
    return resource, _blank(_blank(record.encode(), 2), 3)


def _fast_and_full(client: Any, kind: str, setup: Any, op: str, *args: Any) -> bool:
    """Build two identical primitives with ``setup``; run ``op``'s common-case
    script on one and the whole operation on the other: the fast one either
    answers and changes exactly what the whole one does, or says 'slow' and
    changes nothing. True if it answered."""
    made = []
    for name in ("fast", "full"):
        primitive: LeasedPrimitive
        if kind == "pool":
            primitive = pool_of(client, f"{kind}-{name}", "r1", "r2")
        elif kind == "semaphore":
            primitive = Semaphore(client, f"{kind}-{name}")
            primitive.set_max_size(2)
        else:
            primitive = Lock(client, f"{kind}-{name}", reentrant=kind == "rlock", holder="h")
        # the same fences and waiter ids in both: a counter ahead of the clock
        # counts on from itself (it otherwise follows the clock)
        client.set(f"{ops(primitive).base}:seq", 8_000_000_000_000_000)
        setup(primitive)
        made.append(primitive)
    fast, full = made
    engine = ops(fast)
    packed = "|".join(map(str, args)).encode()
    before = _normalized(client, fast)
    script = client.register_script(script_source(FAST[op]))
    answer = script([engine.channel.key], (engine.channel.encoded_mode, packed))
    if answer == b"slow":
        assert _normalized(client, fast) == before, "'slow' changed something"
        return False
    expected = ops(full).run(op, *args)
    if isinstance(answer, bytes):
        answer = answer.decode()
    if isinstance(answer, str) and "\n" in answer:  # a grant: its times blanked
        answer, expected = _grant_times_blanked(answer), _grant_times_blanked(expected)
    if op == "renew" and answer >= 0:  # each its own new expiry, on the Redis clock
        for primitive, expires_ms in ((fast, answer), (full, expected)):
            lease = primitive.lease_of(args[-1])
            assert lease is not None and lease.expires_at == expires_ms / 1000
    else:
        assert answer == expected
    assert _normalized(client, fast) == _normalized(client, full)
    return True


def _nothing(primitive: LeasedPrimitive) -> None:
    pass


def _exhaust(primitive: LeasedPrimitive) -> None:
    if isinstance(primitive, Semaphore):
        assert primitive.acquire("x") and primitive.acquire("y")
    elif isinstance(primitive, Lock):
        assert primitive.acquire(holder="other")
    else:
        assert primitive.acquire(holder="x") and primitive.acquire(holder="y")


def _hold(primitive: LeasedPrimitive) -> None:
    ops(primitive).run("acquire", "held-tok", 30000, 0, 0, -1, 2000, "", 1, "h")


def _hold_and_queue(primitive: LeasedPrimitive) -> None:
    _exhaust(primitive)
    ops(primitive).run("acquire", "queued-tok", 30000, 0, 60000, -1, 2000, "", 1, "w")


def _hold_weighted(primitive: LeasedPrimitive) -> None:
    """``_hold``, of two permits in a semaphore."""
    ops(primitive).run("acquire", "held-tok", 30000, 0, 0, -1, 2000, "", 2, "h")


def _hold_two(primitive: LeasedPrimitive) -> None:
    """A semaphore's holder of two permits (the others' holder of one)."""
    ops(primitive).run("acquire", "two-tok", 30000, 0, 0, -1, 2000, "", 2, "two")


@pytest.mark.parametrize("kind", ["pool", "semaphore", "lock", "rlock"])
@pytest.mark.parametrize(
    ("setup", "wait_ms", "token"),
    [
        (_nothing, 0, "new"),  # granted
        (_exhaust, 0, "new"),  # none (or held)
        (_exhaust, 60000, "new"),  # would queue: slow
        (_hold, 0, "held-tok"),  # a retried request: slow
        (_hold, 0, "new"),  # the holder asking again: held, or slow (a refresh)
        (_hold_and_queue, 0, "new"),  # somebody queued: slow
        (_hold_two, 0, "new"),  # two permits held: a semaphore's newcomer finds none free
    ],
    ids=["free", "exhausted", "wait", "retry", "again", "queued", "weighted"],
)
@pytest.mark.parametrize("max_waiting", [-1, 0], ids=["unbounded", "max-waiting-0"])
@pytest.mark.parametrize("permits", [1, 2, 3], ids=["1-permit", "2-permits", "3-permits"])
def test_the_fast_acquire_agrees_with_acquire(
    client: Any, kind: str, setup: Any, wait_ms: int, token: str, max_waiting: int, permits: int
) -> None:
    # (a semaphore of 2 permits: 3 is more than its max; every other kind takes 1)
    answered = _fast_and_full(
        client,
        kind,
        setup,
        "acquire",
        *(token, 30000, 0, wait_ms, max_waiting, 2000, "", permits, "h"),
    )
    if setup in (_nothing, _exhaust, _hold_two) and wait_ms == 0:
        assert answered, "the common case is the fast script's to answer"
    if setup is _exhaust and wait_ms > 0:
        assert not answered, "a caller that would wait is the whole script's (max_waiting too)"


@pytest.mark.parametrize("kind", ["pool", "semaphore", "lock", "rlock"])
@pytest.mark.parametrize(
    ("setup", "token", "fence", "force"),
    [
        (_hold, "held-tok", "", 0),  # released
        (_hold, "", "", 0),  # by whoever holds it
        (_hold, "other-tok", "", 0),  # not that lease: slow
        (_hold, "held-tok", 1, 0),  # fenced: slow
        (_hold, "", "", 1),  # force: slow
        (_nothing, "held-tok", "", 0),  # nothing held: slow
        (_hold_weighted, "held-tok", "", 0),  # a semaphore's two permits released
        (_hold_weighted, "", "", 1),  # force: slow
    ],
    ids=["token", "whoever", "other", "fenced", "forced", "nothing", "weighted", "weighted-forced"],
)
def test_the_fast_release_agrees_with_release(
    client: Any, kind: str, setup: Any, token: str, fence: Any, force: int
) -> None:
    resource = "r1" if kind == "pool" else "h"
    answered = _fast_and_full(client, kind, setup, "release", token, "req", fence, force, resource)
    if token in ("held-tok", "") and fence == "" and not force and setup is not _nothing:
        assert answered, "the common case is the fast script's to answer"


@pytest.mark.parametrize("kind", ["pool", "semaphore", "lock"])
@pytest.mark.parametrize(
    ("setup", "token", "lease_ms"),
    [
        (_hold, "held-tok", 60000),  # extended
        (_hold, "", -2),  # by whoever holds it, keeping its duration
        (_hold, "held-tok", -1),  # made permanent
        (_hold, "other-tok", 60000),  # not that lease: lost (-2)
        (_nothing, "held-tok", 60000),  # nothing held: lost (-2)
    ],
    ids=["token", "whoever", "permanent", "other", "nothing"],
)
def test_the_fast_renew_agrees_with_renew(
    client: Any, kind: str, setup: Any, token: str, lease_ms: int
) -> None:
    resource = "r1" if kind == "pool" else "h"
    assert _fast_and_full(client, kind, setup, "renew", token, lease_ms, resource)


def test_the_fast_renew_leaves_an_expired_lease_to_the_whole_renew(client: Any) -> None:
    def expired(primitive: LeasedPrimitive) -> None:
        ops(primitive).run("acquire", "held-tok", 1, 0, 0, -1, 2000, "", 1, "h")
        wait_for(lambda: primitive.lease_of("h") is None, what="the 1 ms lease to expire")

    assert not _fast_and_full(client, "lock", expired, "renew", "held-tok", 60000, "h")


def test_the_fast_release_leaves_a_waiter_to_the_whole_release(client: Any) -> None:
    # the whole release hands the lock to the waiter; the fast one says 'slow'
    def held_with_waiter(primitive: LeasedPrimitive) -> None:
        _hold(primitive)
        ops(primitive).run("acquire", "w-tok", 30000, 0, 60000, -1, 2000, "", 1, "w")
        assert primitive.waiting_count() == 1, "the waiter is queued"

    assert not _fast_and_full(
        client, "lock", held_with_waiter, "release", "held-tok", "req", "", 0, "h"
    )


# -- waits never block forever --------------------------------------------------------


def test_a_wait_with_a_millisecond_left_returns(redis_server: Any, redis_client: Any) -> None:
    # Redis < 7.0.8 reads a blocking timeout of ~1 ms as 0: "block forever". With
    # no socket timeout, a wait that sent one would never return.
    client = redis.Redis.from_url(redis_server.url, socket_timeout=None)
    holder = Lock(redis_client, "tiny")
    assert holder.acquire()
    for timeout in (0.001, 0.0015, 0.002, 0.0005):
        thread, out = in_thread(lambda t=timeout: Lock(client, "tiny").acquire(timeout=t))
        assert finish(thread, out) is False
    client.close()


def test_many_short_waits_all_return(redis_server: Any, redis_client: Any) -> None:
    # Blocking reads may return up to a millisecond early, leaving ~1 ms: every
    # wait must still end (here: 12 threads, 20-200 ms timeouts, for 3 s).
    client = redis.Redis.from_url(redis_server.url, socket_timeout=None)
    assert Lock(redis_client, "busy").acquire()
    until = time.monotonic() + 3
    counts: list[int] = []

    def waits() -> None:
        rng = random.Random()
        n = 0
        while time.monotonic() < until:
            assert Lock(client, "busy").acquire(timeout=rng.uniform(0.02, 0.2)) is False
            n += 1
        counts.append(n)

    threads = [threading.Thread(target=waits, daemon=True) for _ in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert not any(thread.is_alive() for thread in threads), "a wait never returned"
    assert len(counts) == 12 and min(counts) > 0
    client.close()


# -- how the Lua runs: function library (Redis >= 7) or EVALSHA ------------------------


@pytest.fixture
def redis7(redis_version: tuple[int, ...]) -> None:
    if redis_version < (7,):
        pytest.skip("functions need Redis >= 7 (scripts/dev.py test runs the suite on Redis 7)")


def library_names(client: Any) -> set[bytes]:
    """Names of the function libraries loaded in ``client``'s server."""
    return {
        dict(zip(lib[0::2], lib[1::2], strict=True))[b"library_name"]
        for lib in client.function_list()
    }


def _cycle(pool: ResourcePool) -> None:
    lease = pool.acquire(timeout=0)
    assert lease is not None
    assert lease.release()


def test_redis7_clients_run_the_function_library(redis7: None, redis_client: Any) -> None:
    pool = pool_of(redis_client, "fn", "r1")
    _cycle(pool)
    libraries = library_names(redis_client)
    assert LIBRARY_NAME.encode() in libraries
    assert runner_for(redis_client).functions is True
    redis_client.config_resetstat()
    _cycle(pool)
    stats = redis_client.info("commandstats")
    assert stats["cmdstat_fcall"]["calls"] == 2 and "cmdstat_evalsha" not in stats


def test_redis62_clients_run_scripts(redis_version: tuple[int, ...], redis_client: Any) -> None:
    if redis_version >= (7,):
        pytest.skip("this run's Redis has functions (the Redis 6.2 run checks EVALSHA)")
    _cycle(pool_of(redis_client, "evalsha", "r1"))
    assert runner_for(redis_client).functions is False


def test_an_asyncio_twin_takes_the_path_its_client_found(
    redis_client: Any, redis_version: tuple[int, ...]
) -> None:
    """A new event loop's twin of a blocking client starts on the path that
    client found: it does not ask again, so on Redis 6.2 no FCALL is refused
    (once per concurrent first call, in a burst)."""
    pool = pool_of(redis_client, "twin-path", "r1")
    _cycle(pool)
    found = runner_for(redis_client).functions
    assert found is not None
    redis_client.config_resetstat()

    async def first_calls() -> list[Any]:
        assert runner_for(async_client_for(redis_client)).functions is found
        return await asyncio.gather(*(pool.aacquire(timeout=0) for _ in range(10)))

    leases = asyncio.run(first_calls())
    assert sum(lease is not None for lease in leases) == 1
    if redis_version >= (7,):
        return  # (FCALL is the path there: none is refused)
    # (the errors of known commands, e.g. the connections' CLIENT SETINFO that
    # Redis 6.2 refuses, are in their commandstats; an unknown command's are not)
    known = sum(
        stats["failed_calls"] + stats["rejected_calls"]
        for stats in redis_client.info("commandstats").values()
    )
    refused = redis_client.info("stats")["total_error_replies"] - known
    assert refused == 0, "no FCALL refused as an unknown command"


@pytest.mark.cluster
def test_the_cluster_runs_scripts(cluster_client: Any) -> None:
    _cycle(pool_of(cluster_client, "cluster-evalsha", "r1"))
    assert runner_for(cluster_client).functions is False


def _user_client(redis_server: Any, client: Any, name: str, rules: list[str]) -> redis.Redis:
    client.acl_setuser(name, enabled=True, nopass=True, keys=["*"], channels=["*"], commands=rules)
    return redis.Redis(host="127.0.0.1", port=redis_server.port, username=name)


@pytest.mark.parametrize(
    "rules",
    [["+@all", "-function"], ["+@all", "-function", "-fcall", "-fcall_ro"]],
    ids=["load-refused", "functions-refused"],
)
def test_clients_on_evalsha_and_on_functions_share_one_pool(
    redis7: None, redis_server: Any, redis_client: Any, rules: list[str]
) -> None:
    redis_client.function_flush()  # (FLUSHALL leaves functions loaded)
    scripted = _user_client(redis_server, redis_client, "scripted", rules)
    try:
        # The refused client comes first, so the library is not there to call.
        by_script = pool_of(scripted, "mixed", "r1", "r2")
        by_function = ResourcePool(redis_client, "mixed")
        first = by_script.acquire(holder="s")
        second = by_function.acquire(holder="f")
        assert first and second and {first.resource, second.resource} == {"r1", "r2"}
        assert runner_for(scripted).functions is False
        assert runner_for(redis_client).functions is not False
        # a waiter on one path is handed the resource released on the other
        waiter, out = in_thread(lambda: by_script.acquire(holder="s2", timeout=10))
        wait_for(lambda: by_function.waiting_count() == 1, what="the scripted waiter")
        assert second.release()
        handed = finish(waiter, out)
        assert handed is not None and handed.resource == second.resource
        assert handed.fence > max(first.fence, second.fence)
        waiter, out = in_thread(lambda: by_function.acquire(holder="f2", timeout=10))
        wait_for(lambda: by_script.waiting_count() == 1, what="the function waiter")
        assert first.release()
        assert finish(waiter, out).resource == first.resource
    finally:
        scripted.close()
        redis_client.acl_deluser("scripted")


def test_two_versions_of_the_library_never_load_over_each_other(
    redis7: None, redis_client: Any
) -> None:
    # Another version of the package: other code, so another digest, another name.
    other_name = "drp_000000000000"
    other = library_source().replace(LIBRARY_NAME, other_name)
    redis_client.function_load(other)
    _cycle(pool_of(redis_client, "versions", "r1"))
    libraries = library_names(redis_client)
    assert {LIBRARY_NAME.encode(), other_name.encode()} <= libraries
    assert library_source().startswith(f"#!lua name={LIBRARY_NAME}\n")


def test_a_lost_library_is_loaded_again(redis7: None, redis_client: Any) -> None:
    pool = pool_of(redis_client, "lost-library", "r1")
    _cycle(pool)
    redis_client.function_flush()  # e.g. a restart without persistence
    _cycle(pool)
    assert runner_for(redis_client).functions is True


# -- clients ------------------------------------------------------------------------


def test_valkey_clients_are_refused_naming_the_fix(redis_server: Any) -> None:
    import valkey

    client = valkey.Valkey(host="127.0.0.1", port=redis_server.port)
    try:
        for build in (
            lambda: ResourcePool(client, "v"),
            lambda: Semaphore(client, "v"),
            lambda: Lock(client, "v"),
        ):
            with pytest.raises(TypeError, match=r"valkey-py client.*redis\.Redis\.from_url"):
                build()
    finally:
        client.close()


def test_the_scripts_and_python_name_the_protocol_words_alike() -> None:
    """Each constant of ``protocol.py`` is a local constant of the same value at
    the top of ``engine.lua`` (``Reply.SLOW`` is ``REPLY_SLOW``), and no script
    writes a mode, a reply or a restore value bare."""
    prefixes = {Mode: "MODE", Reply: "REPLY", Restore: "RESTORE", TaskStatus: "TASK"}
    words = {
        f"{prefix}_{name}": value
        for cls, prefix in prefixes.items()
        for name, value in vars(cls).items()
        if name.isupper() and isinstance(value, str)
    }
    declared = re.compile(r"^local ((?:MODE|REPLY|RESTORE|TASK)_\w+) = '([^']*)'", re.M)
    header = load_lua("engine").split("-- @fn", 1)[0]
    assert dict(declared.findall(header)) == words
    # (task statuses are also words of their own: token states, read selectors)
    bare = {value for name, value in words.items() if not name.startswith("TASK_") and value}
    for path in sorted(LUA_FILES.values()):
        code = declared.sub("", re.sub(r"--[^\n]*", "", path.read_text()))
        found = set(re.findall(r"'([^'\n]*)'", code)) & bare
        assert found == set(), f"{path.name} writes {sorted(found)} bare"


def test_scripts_carry_the_constants_as_literals() -> None:
    # A constant that stayed a local would be an upvalue of every helper that
    # names it: made anew on every run of an EVALSHA script.
    from django_redis_pool.primitives.wire.scripts import OPERATIONS, _constants, library_source

    names = set(_constants())
    assert {"REPLY_SLOW", "MODE_SEM", "PROVISIONAL_MS", "F_EXTRA"} <= names
    for source in [library_source(), *(script_source(op) for op in OPERATIONS)]:
        code = re.sub(r"--[^\n]*", "", source)
        assert names.isdisjoint(re.findall(r"\b[A-Z][A-Z0-9_]*\b", code))
    assert "return 'slow'" in script_source("acquire_fast")


def test_an_evalsha_script_runs_begin_and_its_operation_as_its_own_code(redis_client) -> None:
    # Every run of an EVALSHA script makes each function it defines anew (a
    # closure, and an upvalue for each local it names): the two that every run
    # calls once are its own code; the function library keeps them functions.
    from django_redis_pool.primitives.wire.scripts import OPERATIONS

    for op in sorted({*OPERATIONS, *FAST.values()}):
        source = script_source(op)
        code = re.sub(r"--[^\n]*", "", source)
        assert not re.search(rf"function begin\b|\bop_{op}\b", code), op
        assert code.count("redis.call('TIME')") == 1, op
        assert redis_client.script_load(source) == script_sha(op)  # (it compiles)
    assert "local function begin(keys, args)" in library_source()
    assert "local function op_release(args)" in library_source()


def test_request_tokens_are_unique_and_safe_in_records() -> None:
    from django_redis_pool.primitives.wire.keys import new_token

    tokens = {new_token() for _ in range(10_000)}
    assert len(tokens) == 10_000
    assert all(token.isalnum() for token in tokens)


def test_a_forked_child_makes_tokens_of_its_own() -> None:
    import os

    from django_redis_pool.primitives.wire.keys import new_token

    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: send a token, exit at once
        os.write(write, new_token().encode())
        os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    child = os.read(read, 100).decode()
    os.close(read)
    assert child[:16] != new_token()[:16], "a child never repeats its parent's tokens"
