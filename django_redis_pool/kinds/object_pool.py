"""Object pools in Django: the ``OBJECT_POOLS`` setting, ``get_object_pool``, a
borrowed object per request, the ``GLOBAL_LIMIT`` named after a configured
semaphore, and every process's pool counters, published to Redis with an
expiring heartbeat for ``pool_status`` and the admin (:func:`published`)."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import socket
import threading
import weakref
from collections.abc import Mapping
from typing import Any

from .. import conf
from ..exceptions import NotOwned, ResourceUnavailable
from ..primitives.object_pool.pool import ObjectPool
from ..primitives.validators import check_count, check_lease_timeout, check_name, check_timeout
from .contract import MAX_WAITING, Ask, Grant, Kind, Option, Report, validate_bool

__all__ = ["KIND", "ObjectPoolKind", "published"]

#: Seconds between two publications of a process's counters; they expire after three.
PUBLISH_EVERY = 5.0


def _callable_path(value: Any, path: str) -> Any:
    if value is not None:
        conf.import_callable(value, path)
    return value


def _semaphore_name(value: Any, path: str) -> str | None:
    return None if value is None else check_name(value, path)


_SECONDS = "Use a number of seconds >= 0, or None."


class ObjectPoolKind(Kind[ObjectPool[Any]]):
    """An :class:`ObjectPool` of the objects ``FACTORY`` makes, in each process."""

    name = "object_pool"
    setting_key = "OBJECT_POOLS"
    primitive = ObjectPool
    options = {
        "FACTORY": Option(
            _callable_path,
            None,
            "Use the dotted path of a function that makes one object, e.g. "
            '"myapp.clients.connect".',
        ),
        "DESTROY": Option(_callable_path, None, "Use the dotted path of a function(obj), or None."),
        "VALIDATE": Option(
            _callable_path, None, "Use the dotted path of a function(obj) -> bool, or None."
        ),
        "MIN": Option(check_count, 0, "Use an int >= 0 (and <= MAX)."),
        "MAX": Option(functools.partial(check_count, minimum=1), 10, "Use an int >= 1."),
        "MAX_WAITING": MAX_WAITING,
        "ACQUIRE_TIMEOUT": Option(check_timeout, None, _SECONDS),
        "FIFO": Option(validate_bool, True, "Use True or False."),
        "TEST_ON_BORROW": Option(validate_bool, False, "Use True or False."),
        "TEST_ON_RETURN": Option(validate_bool, False, "Use True or False."),
        "IDLE_TIMEOUT": Option(check_timeout, None, _SECONDS),
        "SOFT_IDLE_TIMEOUT": Option(check_timeout, None, _SECONDS),
        "EVICTION_INTERVAL": Option(check_timeout, 0, _SECONDS),
        "NUM_TESTS_PER_EVICTION_RUN": Option(
            functools.partial(check_count, minimum=1), 3, "Use an int >= 1."
        ),
        "GLOBAL_LIMIT": Option(
            _semaphore_name,
            None,
            "Use the name of a configured semaphore (its MAX_SIZE caps the live objects of "
            "every process together), or None.",
        ),
        "GLOBAL_LEASE_TIMEOUT": Option(
            check_lease_timeout, 30.0, "Use a number of seconds > 0, e.g. 30."
        ),
    }
    required = ("FACTORY",)

    def build(
        self, client: Any, name: str, key_prefix: str, options: Mapping[str, Any]
    ) -> ObjectPool[Any]:
        def path(key: str) -> Any:
            value = options[key]
            return None if value is None else conf.import_callable(value, key)

        # A configured semaphore, found by its name when the first object is made
        # (``global_limit.semaphore_by_name``, which the registry sets).
        limit = options["GLOBAL_LIMIT"]
        pool: ObjectPool[Any] = ObjectPool(
            path("FACTORY"),
            destroy=path("DESTROY"),
            validate=path("VALIDATE"),
            min=options["MIN"],
            max=options["MAX"],
            max_waiting=options["MAX_WAITING"],
            acquire_timeout=options["ACQUIRE_TIMEOUT"],
            fifo=options["FIFO"],
            test_on_borrow=options["TEST_ON_BORROW"],
            test_on_return=options["TEST_ON_RETURN"],
            idle_timeout=options["IDLE_TIMEOUT"],
            soft_idle_timeout=options["SOFT_IDLE_TIMEOUT"],
            eviction_interval=options["EVICTION_INTERVAL"] or 0,
            num_tests_per_eviction_run=options["NUM_TESTS_PER_EVICTION_RUN"],
            global_limit=limit,
            global_lease_timeout=options["GLOBAL_LEASE_TIMEOUT"],
            name=name,
            autostart=False,  # started by its first user, not by pool_status or gc
        )
        _PUBLISHERS[pool] = _Publisher(pool, client, f"{key_prefix}:{{{self.name}:{name}}}:procs")
        return pool

    def check_entry(self, options: Mapping[str, Any], path: str) -> None:
        if options["MIN"] > options["MAX"]:
            raise ValueError(f"{path} has MIN {options['MIN']} above MAX {options['MAX']}")

    def request_timeout(self, primitive: ObjectPool[Any]) -> float | None:
        """How long a request waits when its view or rule names no ``timeout``:
        the pool's ``ACQUIRE_TIMEOUT`` (None: forever)."""
        return primitive.acquire_timeout

    def grant(self, primitive: ObjectPool[Any], ask: Ask) -> Grant | None:
        """The borrowed object itself; given back after the response."""
        try:
            obj = started(primitive).acquire(timeout=ask.timeout.seconds)
        except ResourceUnavailable as exc:
            if exc.reason == exc.FULL:
                raise  # refused at once: the guard refuses the request with it
            return None
        return _held(primitive, obj)

    async def agrant(self, primitive: ObjectPool[Any], ask: Ask) -> Grant | None:
        """:meth:`grant` on the event loop (giving back runs in a thread: it may
        destroy the object, or free its global slot in Redis)."""
        try:
            obj = await started(primitive).aacquire(timeout=ask.timeout.seconds)
        except ResourceUnavailable as exc:
            if exc.reason == exc.FULL:
                raise
            return None
        return _held(primitive, obj)

    def status(self, primitive: ObjectPool[Any]) -> Report:
        """Every process's counters, as published (this one's included)."""
        publisher = _PUBLISHERS.get(primitive)
        if publisher is not None and publisher.running:
            publisher.publish()  # this process's, fresh
        processes = published(primitive)
        totals = {k: sum(p[k] for p in processes) for k in ("size", "borrowed", "pending")}
        return Report(
            primitive.name,
            changed=any(p["pending"] for p in processes),
            details=tuple(
                f"  {p['host']}:{p['pid']}  size {p['size']}  borrowed {p['borrowed']}  "
                f"pending {p['pending']}  global slots {p['slots']}"
                for p in processes
            ),
            data={
                "kind": self.name,
                "name": primitive.name,
                "held": totals["borrowed"],
                "free": None,
                "waiting": totals["pending"],
                "size": totals["size"],
                "processes": processes,
            },
        )


def started(pool: ObjectPool[Any]) -> ObjectPool[Any]:
    """``pool``, started (``min`` objects, eviction, publishing) on first use
    in this process."""
    publisher = _PUBLISHERS.get(pool)
    if publisher is not None and not publisher.running:
        pool.start()
        publisher.start()
    return pool


class _Publisher:
    """Publishes one pool's counters for this process every PUBLISH_EVERY
    seconds, in a hash whose entries carry their own expiry (a process that
    died drops out after three periods). Stops with the pool, and in a fork."""

    def __init__(self, pool: ObjectPool[Any], client: Any, key: str) -> None:
        self.pool, self.client, self.key = weakref.ref(pool), client, key
        self.pid = os.getpid()
        self.field = f"{socket.gethostname()}:{self.pid}"

    running = False

    def start(self) -> None:
        self.running = True
        self.publish()
        threading.Thread(target=self.run, name="drp-publish", daemon=True).start()

    def run(self) -> None:
        stop = threading.Event()
        while not stop.wait(PUBLISH_EVERY):
            if os.getpid() != self.pid or self.pool() is None:
                return
            with contextlib.suppress(Exception):  # Redis away: the next period tries again
                self.publish()

    def publish(self) -> None:
        pool = self.pool()
        if pool is None:
            return
        now = self.client.time()
        expires = int(now[0]) + int(PUBLISH_EVERY * 3) + 1
        stats = {
            "host": socket.gethostname(),
            "pid": self.pid,
            "size": pool.size,
            "borrowed": pool.borrowed,
            "pending": pool.pending,
            "slots": pool.size if pool.capped else 0,
            "expires": expires,
        }
        self.client.hset(self.key, self.field, json.dumps(stats))


#: pool -> its publisher (forgotten with the pool).
_PUBLISHERS: weakref.WeakKeyDictionary[ObjectPool[Any], _Publisher] = weakref.WeakKeyDictionary()


def published(pool: ObjectPool[Any]) -> list[dict[str, Any]]:
    """The counters every live process published for ``pool`` (stale ones
    dropped); none for a pool the kind did not build."""
    publisher = _PUBLISHERS.get(pool)
    if publisher is None:
        return []
    client, key = publisher.client, publisher.key
    now = int(client.time()[0])
    live, stale = [], []
    for field, raw in client.hgetall(key).items():
        stats = json.loads(raw)
        (live if stats["expires"] >= now else stale).append((field, stats))
    if stale:
        client.hdel(key, *[field for field, _ in stale])
    return sorted((stats for _, stats in live), key=lambda s: (s["host"], s["pid"]))


KIND = ObjectPoolKind()


def _held(pool: ObjectPool[Any], obj: Any) -> Grant:
    def release() -> bool:
        try:
            pool.release(obj)
        except NotOwned:
            return False
        return True

    return Grant(obj, None, release)
