"""What happens when Redis is slow: a caller never holds past its wait.

``CLIENT PAUSE`` makes the harness's real Redis answer late, as a stalled or
overloaded server would.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import signal
import subprocess
import sys
import threading
import time
from typing import Any

import pytest
import redis
from django.test import RequestFactory
from redis.retry import Retry

from django_redis_pool import BackendUnavailable, Lock, ResourcePool, ResourceUnavailable
from django_redis_pool.guard import Guard, Refusal
from django_redis_pool.kinds import Grant
from django_redis_pool.primitives import pending_releases
from django_redis_pool.primitives.clients.connections import DeadlineBackoff, DeadlineConnection
from django_redis_pool.primitives.clients.deadlines import DEADLINE_SLACK, deadline
from django_redis_pool.primitives.clients.stopwatch import Stopwatch, busy_time
from django_redis_pool.primitives.leased import lease as lease_module
from django_redis_pool.primitives.leased.engine import LATE_GRANT
from django_redis_pool.testing import EmbeddedRedis
from tests.support.primitive_helpers import own_lease
from tests.support.waiting import STALL, wait_for


@pytest.mark.parametrize("timeout", [0, 0.2])
def test_a_grant_that_arrives_after_the_wait_is_given_back(redis_client, caplog, timeout):
    pool = ResourcePool(redis_client, "slow", resources=["r"], lease_timeout=30)
    pool.collect()  # the resource is there
    pause = timeout + 4 * LATE_GRANT + 0.5
    redis_client.client_pause(int(pause * 1000))
    started = time.monotonic()
    with caplog.at_level("WARNING", logger="django_redis_pool"):
        lease = pool.acquire(timeout=timeout)
    assert time.monotonic() - started >= pause * 0.9, "Redis answered late, as asked"
    assert lease is None, "a grant past the wait is not handed to the caller"
    assert "given back" in caplog.text
    assert pool.available() == ["r"], "and it is free again"


class _PausesBeforeSending(DeadlineConnection):
    """A connection that runs the next of ``before`` (if any) before it sends a
    command: here, an admin's ``CLIENT PAUSE`` at a chosen command."""

    before: list[Any] = []

    def send_packed_command(self, *args: Any, **kwargs: Any) -> None:
        if self.before:
            self.before.pop(0)()
        super().send_packed_command(*args, **kwargs)


def test_a_late_grant_whose_give_back_redis_does_not_answer_is_given_back_later(
    redis_server, redis_client, caplog, monkeypatch
):
    """The grant comes late (Redis paused), and then Redis refuses writes for
    longer than a release's deadline as the grant is given back: the caller
    returns within its wait and the slack, and the give-back goes on in the
    background, so the resource is free soon after Redis is back (not when its
    60 s lease ends)."""
    client = redis.Redis.from_url(
        redis_server.url,
        connection_class=_PausesBeforeSending,
        retry=Retry(DeadlineBackoff(cap=0.5, base=0.05), 3),
    )
    pool = ResourcePool(client, "late-give-back", resources=["r"], lease_timeout=60)
    pool.collect()
    warm = pool.acquire(timeout=0)  # (connected, its script known)
    assert warm is not None and warm.release()
    pauses = [
        lambda: redis_client.execute_command("CLIENT", "PAUSE", 600, "ALL"),  # (the acquire)
        lambda: redis_client.execute_command("CLIENT", "PAUSE", 2500, "WRITE"),  # (the give-back)
    ]
    monkeypatch.setattr(_PausesBeforeSending, "before", pauses)
    watch = Stopwatch()
    with caplog.at_level("INFO", logger="django_redis_pool"):
        assert pool.acquire(timeout=0.2) is None, "a grant past the wait is not handed over"
        assert watch.waited() < 0.6 + DEADLINE_SLACK + 0.5, "the give-back did not hold the caller"
        assert "given back" in caplog.text
        assert "goes on in the background" in caplog.text
        wait_for(lambda: pool.available() == ["r"], 20, "the resource to be free again")
        wait_for(lambda: pending_releases() == 0, 10, "the background give-back to end")
    client.close()


def test_a_grant_within_the_wait_is_kept(redis_client):
    lock = Lock(redis_client, "slow-lock", lease_timeout=30)
    redis_client.client_pause(100)
    assert lock.acquire(timeout=5), "late for Redis, but well within the wait"
    lock.release()


# -- a Redis that stops answering ---------------------------------------------------
#
# The bounds are on the time the caller waited (a Stopwatch's, as the deadline's):
# on a busy machine a call also takes the time its thread waited for a CPU, which
# is not Redis's.


def test_a_hung_redis_fails_an_acquire_within_its_timeout_plus_the_slack(hung_server):
    client = redis.Redis.from_url(
        hung_server.url,
        connection_class=DeadlineConnection,
        socket_timeout=5,
        retry=Retry(DeadlineBackoff(cap=0.5, base=0.05), 3),
    )
    pool = ResourcePool(client, "hung", resources=["r"], lease_timeout=30)
    pool.collect()
    watch = Stopwatch()
    held = pool.acquire(timeout=0)
    floor = watch.waited()  # the same call on a Redis that answers
    assert held is not None
    os.kill(hung_server.pid, signal.SIGSTOP)
    watch = Stopwatch()
    with pytest.raises(BackendUnavailable, match="Redis could not be reached") as failed:
        pool.acquire(timeout=0.5)  # 4 attempts x 5 s = 20 s without the deadline
    assert watch.waited() < 0.5 + DEADLINE_SLACK + 10 * floor + STALL
    assert not failed.value.answered, "a stopped Redis is not a busy process"


@pytest.mark.parametrize("form", ["url", "sentinel"])
def test_a_hung_redis_fails_a_request_within_its_timeout_plus_the_slack(
    settings, hung_server, request, form
):
    """Directly, or the master a real Sentinel names."""
    _use_hung_server(settings, hung_server, request, form)
    guard, first = Guard("printers", timeout=1), RequestFactory().get("/")
    watch = Stopwatch()
    held = guard.enter(first)  # connected, and the pool filled
    floor = watch.waited()  # (the floor: the same on a Redis that answers)
    assert isinstance(held, Grant)
    os.kill(hung_server.pid, signal.SIGSTOP)
    watch = Stopwatch()
    refused = guard.enter(RequestFactory().get("/"))
    assert watch.waited() < 1 + DEADLINE_SLACK + 10 * floor + STALL
    assert isinstance(refused, Refusal) and isinstance(refused.error, BackendUnavailable)
    watch = Stopwatch()
    guard.exit(first, held)  # never raised: the release goes on in the background
    assert watch.waited() < DEADLINE_SLACK + 10 * floor + STALL
    assert pending_releases() == 1
    os.kill(hung_server.pid, signal.SIGCONT)
    wait_for(lambda: pending_releases() == 0, what="the late release to end once Redis is back")


@pytest.mark.parametrize("form", ["url", "sentinel"])
def test_a_hung_redis_fails_an_async_request_within_its_timeout_plus_the_slack(
    settings, hung_server, request, form
):
    """The same, on the event loop: every asyncio call keeps the deadline."""
    _use_hung_server(settings, hung_server, request, form)
    guard, first = Guard("printers", timeout=1), RequestFactory().get("/")

    async def scenario() -> None:
        watch = Stopwatch()
        held = await guard.aenter(first)  # connected, and the pool filled
        floor = watch.waited()  # (the floor: the same on a Redis that answers)
        assert isinstance(held, Grant)
        os.kill(hung_server.pid, signal.SIGSTOP)
        watch = Stopwatch()
        refused = await guard.aenter(RequestFactory().get("/"))
        assert watch.waited() < 1 + DEADLINE_SLACK + 10 * floor + STALL
        assert isinstance(refused, Refusal) and isinstance(refused.error, BackendUnavailable)
        assert "Redis could not be reached" in str(refused.error)
        assert not refused.error.answered, "a stopped Redis is not a busy process"
        watch = Stopwatch()
        await guard.aexit(first, held)  # never raised: the release goes on in the background
        assert watch.waited() < DEADLINE_SLACK + 10 * floor + STALL
        os.kill(hung_server.pid, signal.SIGCONT)  # (so that the twins close at the loop's end)

    asyncio.run(scenario())
    wait_for(lambda: pending_releases() == 0, what="the late release to end once Redis is back")


def _use_hung_server(settings: Any, hung_server: Any, request: Any, form: str) -> None:
    """Configure the pool ``printers`` on ``hung_server``: by its URL, or as
    the master a real Sentinel names."""
    if form == "url":
        connection: dict[str, Any] = {"URL": hung_server.url}
    else:
        port = request.getfixturevalue("sentinel")
        connection = {"SENTINELS": [["127.0.0.1", port]], "SERVICE_NAME": "mymaster"}
    settings.DJANGO_REDIS_POOL = {
        "CONNECTION": connection,
        "POOLS": {"printers": {"RESOURCES": ["p1"], "LEASE_TIMEOUT": 30}},
    }


def test_a_renewal_stuck_on_a_hung_redis_delays_no_renewal_on_another(hung_server, redis_url):
    """Each server's leases are renewed by a thread of their own: a renewal that
    waits on a Redis that stopped answering (here for up to 10 s) must not let a
    lease on a healthy Redis expire meanwhile."""
    hung = hung_server.client(socket_timeout=10)
    stuck = Lock(hung, "stuck", lease_timeout=0.6, auto_renew=True)
    assert stuck.acquire(blocking=False)
    os.kill(hung_server.pid, signal.SIGSTOP)  # its renewal, 0.4 s from now, hangs
    healthy = Lock(redis.Redis.from_url(redis_url), "healthy", lease_timeout=1.5, auto_renew=True)
    assert healthy.acquire(blocking=False)
    try:
        for _ in range(15):  # 3 s: two lease durations
            time.sleep(0.2)
            assert healthy.owned(), "the healthy Redis's lease expired: its renewal was held up"
        assert own_lease(healthy) is not None and not own_lease(healthy).lost
    finally:
        healthy.release()
        assert own_lease(stuck) is not None
        own_lease(stuck).stop_auto_renew()  # its renewal, once Redis answers, reports nothing


def test_renewal_threads_are_one_per_server_and_end_when_idle(monkeypatch):
    """Clients of one server share its renewal thread, so threads do not pile up
    with clients; one with nothing to renew ends after RENEWER_IDLE, and the
    next renewal starts another."""
    monkeypatch.setattr(lease_module, "RENEWER_IDLE", 0.3)
    server = EmbeddedRedis().start()  # of its own: no renewer of an earlier test
    try:
        key = lease_module._server_key(server.client())
        seen: list[threading.Thread] = []
        for round in range(2):
            before = set(renewal_threads())
            locks = [
                Lock(server.client(), f"idle-{round}-{i}", lease_timeout=1.5, auto_renew=True)
                for i in range(3)  # three clients of one server
            ]
            assert all(lock.acquire(blocking=False) for lock in locks)
            renewer = lease_module._renewers[key]
            assert set(renewal_threads()) - before == {renewer}, "one thread for the server"
            assert renewer not in seen
            seen.append(renewer)
            time.sleep(3.0)  # two lease durations: renewed all along
            assert all(lock.owned() for lock in locks)
            for lock in locks:
                lock.release()
            wait_for(lambda r=renewer: not r.is_alive(), timeout=5, what="the idle thread to end")
            assert key not in lease_module._renewers
    finally:
        server.stop()


def renewal_threads() -> list[threading.Thread]:
    return [thread for thread in threading.enumerate() if thread.name.startswith("drp-renewer")]


def test_a_renewal_that_raises_leaves_its_thread_renewing_the_others(caplog):
    """A lease of an asyncio client asked to renew off its loop cannot be
    renewed from a thread: that is logged, and the thread goes on."""
    server = EmbeddedRedis().start()
    try:
        aclient = redis.asyncio.Redis(port=server.port)
        pool = ResourcePool(aclient, "async-off-loop", resources=["r"], lease_timeout=0.6)
        lease = asyncio.run(pool.aacquire(timeout=0))
        assert lease is not None
        lease.start_auto_renew()  # off the loop: the thread's renewal, 0.4 s on, raises
        renewer = lease_module._renewers[lease_module._server_key(aclient)]
        wait_for(lambda: "is no longer renewed" in caplog.text, what="the failure to be logged")
        assert renewer.is_alive(), "the renewal thread died with the renewal"
    finally:
        server.stop()


def test_a_renewal_failing_after_its_lease_was_let_go_reports_no_loss():
    """A renewal in flight during a long outage, that fails after the holder
    stopped renewing (released it, or stopped auto-renewal), calls no on_lost."""
    server = EmbeddedRedis().start()
    lost: list[object] = []
    try:
        # (a lease long enough that its own background renewal, 20 s on, is not
        # the one that fails here: on a busy machine, server.stop() can take
        # longer than the 0.33 s after which a 0.5 s lease is renewed)
        lock = Lock(server.client(), "let-go", lease_timeout=30, on_lost=lost.append)
        assert lock.acquire(blocking=False)
        lease = own_lease(lock)
        assert lease is not None
        lease.start_auto_renew()
        lease._failing_since = time.monotonic() - 60  # failing for longer than the lease
        server.stop()  # refused from now on
        lease.stop_auto_renew()  # the holder lets go while a renewal is in flight
        assert lease._owner.channel.run(lease_module._renewal(lease)) is None
        assert lost == [] and not lease.lost
    finally:
        server.stop()


def _child_can_schedule_renewals(result: Any) -> None:
    result.put(lease_module._renewers_lock.acquire(timeout=2) and not lease_module._renewers)


def test_a_child_forked_while_a_renewal_thread_holds_the_lock_can_renew(redis_client):
    """A fork (gunicorn, prefork workers) while a thread of the parent holds the
    renewers' lock must not leave the child's first auto-renewal blocked."""
    lock = Lock(redis_client, "forked", lease_timeout=30, auto_renew=True)
    assert lock.acquire(blocking=False)  # the parent has a renewal thread
    context = multiprocessing.get_context("fork")
    result = context.Queue()
    with lease_module._renewers_lock:  # as a renewer retiring at the moment of the fork
        child = context.Process(target=_child_can_schedule_renewals, args=(result,))
        child.start()
    child.join(10)
    lock.release()
    assert result.get(timeout=5) is True


# -- a busy or starved process is not a slow Redis ----------------------------------


def _spin(seconds: float) -> None:
    """Keep this thread running (on a CPU) for ``seconds``."""
    ends = time.monotonic() + seconds
    while time.monotonic() < ends:
        pass


@pytest.mark.parametrize("busy", ["past LATE_GRANT", "past the deadline"])
def test_a_reply_the_loop_reads_late_is_neither_a_late_grant_nor_a_hung_redis(redis_client, busy):
    """The event loop is busy with something else, right after an acquire sent
    its command, for longer than LATE_GRANT, or than the whole deadline (timeout
    + DEADLINE_SLACK): Redis answered at once, the loop reads the reply late.
    That is neither a grant that came late (given back) nor a Redis that stopped
    answering (BackendUnavailable): both count only the time the loop waited."""
    seconds = LATE_GRANT + 0.3 if busy == "past LATE_GRANT" else DEADLINE_SLACK + 0.5
    pool = ResourcePool(redis_client, "busy-loop", resources=["r"], lease_timeout=30)
    pool.collect()

    async def scenario() -> Any:
        warm = await pool.aacquire(timeout=0)  # (the twin connected, its scripts known)
        assert warm is not None and await warm.arelease()
        asyncio.get_running_loop().call_soon(_spin, seconds)
        return await pool.aacquire(timeout=0)  # (sent; then the loop spins)

    lease = asyncio.run(scenario())
    assert lease is not None and lease.resource == "r"
    assert pool.available() == []


def test_a_reply_left_unread_by_a_blocked_loop_is_named_a_busy_process(
    redis_client, settings, caplog
):
    """The event loop's thread is held up by a blocking call (a time.sleep in
    another task: waiting, to the deadline, not running) right after a
    request's acquire sent its command, past the whole deadline. Redis
    answered at once: the refusal says that this process was too busy to read
    the reply, not that Redis could not be reached, and so does the log."""
    settings.DJANGO_REDIS_POOL = {
        "CONNECTION": {"URL": redis_url_of(redis_client)},
        "POOLS": {"printers": {"RESOURCES": ["p1", "p2"], "LEASE_TIMEOUT": 30}},
    }
    guard = Guard("printers", timeout=0)

    async def scenario() -> Any:
        warm = await guard.aenter(RequestFactory().get("/"))  # (connected, scripts known)
        assert isinstance(warm, Grant)
        await guard.aexit(RequestFactory().get("/"), warm)
        asyncio.get_running_loop().call_soon(time.sleep, DEADLINE_SLACK + 0.5)
        return await guard.aenter(RequestFactory().get("/"))  # (sent; then the loop sleeps)

    with caplog.at_level("ERROR", logger="django_redis_pool"):
        refused = asyncio.run(scenario())
    assert isinstance(refused, Refusal)
    assert "could not be reached" not in str(refused.error)
    assert "is unreachable" not in caplog.text
    if isinstance(refused.error, ResourceUnavailable):
        # (where the loop runs the read's callback before the deadline's timer,
        # as on Python 3.10 or with redis-py 5: the grant is read, late by the
        # waiting it counted, and given back as any late grant is, LATE_GRANT;
        # that does not blame Redis either)
        return
    assert isinstance(refused.error, BackendUnavailable) and refused.error.answered
    assert "too busy to read Redis's reply in time (Redis answered)" in str(refused.error)
    assert "this process was too busy to read the reply in time" in caplog.text


class _StallsAfterSending(DeadlineConnection):
    """A connection whose thread, once ``stall`` is set, is held up for that
    long after each command went out (as by other threads holding the GIL),
    before it reads the reply."""

    stall = 0.0

    def send_packed_command(self, *args: Any, **kwargs: Any) -> None:
        super().send_packed_command(*args, **kwargs)
        time.sleep(self.stall)


def test_a_reply_a_stalled_thread_reads_late_is_named_a_busy_process(
    redis_server, redis_client, monkeypatch
):
    """The blocking twin: the calling thread reads the reply only after the
    deadline passed, and Redis's reply is there (the retries that follow fail
    at once, and say the same)."""
    client = redis.Redis.from_url(
        redis_server.url,
        connection_class=_StallsAfterSending,
        retry=Retry(DeadlineBackoff(cap=0.5, base=0.05), 3),
    )
    pool = ResourcePool(client, "stalled", resources=["r"], lease_timeout=30)
    pool.collect()
    monkeypatch.setattr(_StallsAfterSending, "stall", 0.5)
    with pytest.raises(BackendUnavailable) as failed, deadline(0.3):
        pool.available()
    assert failed.value.answered
    assert "too busy to read Redis's reply in time (Redis answered)" in str(failed.value)
    client.close()


def redis_url_of(client: Any) -> str:
    kwargs = client.connection_pool.connection_kwargs
    return f"redis://{kwargs['host']}:{kwargs['port']}/0"


def test_a_stopwatch_counts_sleeping_and_not_running(redis_client):
    watch = Stopwatch()
    _spin(0.3)
    elapsed, waited = watch.elapsed(), watch.waited()
    assert elapsed >= 0.3 and waited < elapsed / 3, "running is not waiting"
    watch = Stopwatch()
    time.sleep(0.3)
    assert watch.waited() >= 0.25, "sleeping is"
    watch = Stopwatch()
    redis_client.client_pause(300)
    redis_client.ping()  # (answered after the pause)
    assert watch.waited() >= 0.25, "and so is waiting for Redis"


@pytest.mark.skipif(
    not os.path.exists("/proc/thread-self/schedstat") or not hasattr(os, "sched_setaffinity"),
    reason="waiting for a CPU is measured from Linux's /proc/thread-self/schedstat",
)
def test_waiting_for_a_cpu_is_not_waiting():
    """A thread that shares its one CPU with a CPU-bound process runs about half
    the time and waits for the CPU the rest: busy_time counts both."""
    cpu = min(os.sched_getaffinity(0))
    spin = f"import os; os.sched_setaffinity(0, {{{cpu}}}); print(flush=True)\nwhile True: pass"
    hog = subprocess.Popen([sys.executable, "-c", spin], stdout=subprocess.PIPE)
    measured: list[float] = []

    def pinned() -> None:
        os.sched_setaffinity(0, {cpu})  # (this thread only)
        assert hog.stdout is not None and hog.stdout.readline()  # (the hog runs)
        busy, cpu_time, started = busy_time(), time.thread_time(), time.monotonic()
        _spin(1.0)
        measured.extend(
            [time.monotonic() - started, busy_time() - busy, time.thread_time() - cpu_time]
        )

    try:
        thread = threading.Thread(target=pinned)
        thread.start()
        thread.join(30)
    finally:
        hog.kill()
        hog.wait()
    elapsed, busy, ran = measured
    assert ran < 0.8 * elapsed, "the hog took part of the CPU"
    assert busy > 0.9 * elapsed, "running or waiting for the CPU, all along"
