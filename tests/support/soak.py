"""Chaos soak: worker processes hold pools, a semaphore, a lock and an allocator
at random while a supervisor SIGKILLs workers, restarts Redis (with its AOF,
then with its data lost) and flushes it under their feet; an independent
checker then verifies, from the workers' own logs, that no guarantee was
broken.

    .venv/bin/python -m tests.support.soak --seconds 120 --workers 6     # the long run
    .venv/bin/python -m tests.support.soak --redis-server /usr/bin/redis-server

``tests/reliability/test_soak.py`` runs a short one in the test command. What is checked:

* two holds of one exclusive resource (a pool's resource, the lock, an
  allocator's key) never overlap, unless the earlier one was lost (its holder
  found it gone at its next renewal or release) and the later one has the
  higher fence: what fencing is for;
* the semaphore never has more live holds than its limit (lost ones aside);
* fences only increase: a grant that began after another one returned has a
  higher fence, across Redis restarts and a loss of all data;
* once every lease has expired and ``collect`` ran, every pool has
  ``available + held == total`` and every allocator holds all its keys.

Each worker writes one JSON line per event (``O_APPEND``, unbuffered), so a
SIGKILL loses at most the line being written; monotonic clock times are
comparable across the processes of one machine.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis

from tests.support.primitive_helpers import own_lease, slot_lease
from tests.support.waiting import answers_ping, wait_for

LEASE = 2.0  #: every lease, in seconds (holds last at most ~30 ms)
POOL = ["r0", "r1", "r2"]
KEYS = ["k0", "k1", "k2"]
SEM_LIMIT = 2
KINDS = ("pool", "semaphore", "lock", "allocator")


# ---------------------------------------------------------------- Redis server


class Server:
    """A redis-server on a fixed port and directory, restartable with its AOF
    (everything acknowledged survives) or with its data lost."""

    def __init__(self, binary: str, root: Path) -> None:
        self.binary, self.root = binary, root
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.generation = 0
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def dir(self) -> Path:
        return self.root / f"data-{self.generation}"

    def start(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        self.process = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.dir),
             "--save", "", "--appendonly", "yes", "--appendfsync", "always",
             "--protected-mode", "no"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
        client = redis.Redis.from_url(self.url, socket_timeout=1)
        wait_for(lambda: answers_ping(client), what="redis-server to start")

    def kill(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None

    def restart(self, *, lose_data: bool) -> None:
        """SIGKILL and start again: from the AOF, or (``lose_data``) empty."""
        self.kill()
        if lose_data:
            self.generation += 1
        self.start()


# ---------------------------------------------------------------------- workers


def _primitives(client: Any) -> dict[str, Any]:
    from django_redis_pool import Allocator, Lock, ResourcePool, Semaphore

    return {
        "pool": ResourcePool(client, "soak", resources=POOL, lease_timeout=LEASE),
        "semaphore": Semaphore(client, "soak", default_max_size=SEM_LIMIT, lease_timeout=LEASE),
        "lock": Lock(client, "soak", lease_timeout=LEASE),
        "allocator": Allocator(client, "soak", keys=KEYS, lease_timeout=LEASE),
    }


def worker(number: int, url: str, log_path: str, seed: int, stop: Any) -> None:
    """Acquire, hold a few ms, maybe renew, release, at random, until ``stop`` is set."""
    from django_redis_pool import Lock, PoolError

    rng = random.Random(seed)
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)

    def log(**event: Any) -> None:
        os.write(fd, (json.dumps(event) + "\n").encode())

    client = redis.Redis.from_url(url, socket_timeout=1, socket_connect_timeout=1)
    primitives = _primitives(client)
    while not stop.is_set():
        kind = rng.choice(KINDS)
        primitive = primitives[kind]
        start = time.monotonic()
        try:
            lease, end = _take(kind, primitive, f"w{number}", rng)
            log(e="try", k=kind, t=start)
            if lease is None:
                continue
            log(e="got", k=kind, r=lease.resource, f=lease.fence, s=start, t=time.monotonic())
            time.sleep(rng.uniform(0, 0.01))
            if rng.random() < 0.5:
                ok = lease.renew()
                log(e="renew", k=kind, f=lease.fence, ok=ok, t=time.monotonic())
                if not ok:
                    log(e="end", k=kind, r=lease.resource, f=lease.fence, t=time.monotonic(),
                        lost=True)  # fmt: skip
                    continue
                time.sleep(rng.uniform(0, 0.01))
            # (written before the release: a worker killed once its release
            # reached Redis stopped using the hold here, not at its death)
            log(e="ending", k=kind, f=lease.fence, t=time.monotonic())
            ok = end()
            log(e="end", k=kind, r=lease.resource, f=lease.fence, lost=not ok)
        except PoolError as exc:  # Redis restarting: stop using whatever we held
            log(e="error", t=time.monotonic(), what=type(exc).__name__)
            if kind == "lock" and isinstance(primitive, Lock):
                primitives = _primitives(client)  # forget a lock whose release failed
            time.sleep(0.05)


def _take(kind: str, primitive: Any, who: str, rng: random.Random) -> tuple[Any, Any]:
    """One acquisition: (its lease or None, what ends it -> True if it still held)."""
    from django_redis_pool import NotOwned

    if kind == "allocator":
        key = primitive.malloc_key(holder=who)
        if key is None:
            return None, None
        return key.lease, lambda: primitive.free_keys(key) == 1
    if kind == "lock":
        if not primitive.acquire(timeout=0.2, holder=who):
            return None, None

        def release() -> bool:
            try:
                primitive.release(holder=who)
            except NotOwned:
                return False
            return True

        return own_lease(primitive), release
    if kind == "semaphore":
        lease = slot_lease(primitive, f"{who}-{rng.randrange(1 << 30)}", timeout=0.2)
    else:
        lease = primitive.acquire(timeout=0.2, holder=who)
    return lease, (lease.release if lease is not None else None)


# ----------------------------------------------------------------------- checker


@dataclass
class Hold:
    kind: str
    resource: str
    fence: int
    began: float  #: when its acquire was called
    start: float  #: when the grant returned
    end: float | None = None  #: when its holder stopped using it
    lost: bool = False  #: its holder found it gone
    how: str = "open"  #: what ended it: released, lost, an error, killed (while releasing)


@dataclass
class Report:
    operations: int = 0
    grants: int = 0
    kills: int = 0
    restarts: int = 0
    flushes: int = 0
    losses: int = 0
    violations: list[str] = field(default_factory=list)
    #: Each disruption (the restarts and flushes) and when it happened (monotonic).
    chaos: list[tuple[str, float]] = field(default_factory=list)
    #: How many holds were granted after each disruption: the checks covered it.
    grants_after: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "violations": len(self.violations)}


def read_holds(paths: list[Path], deaths: dict[str, float], report: Report) -> list[Hold]:
    """Every hold from the workers' logs; a dead worker's open hold ends at its death."""
    holds: list[Hold] = []
    for path in paths:
        open_holds: dict[tuple[str, int], Hold] = {}
        for line in path.read_text().splitlines():
            try:
                event = json.loads(line)
            except ValueError:  # the line a SIGKILL cut
                continue
            report.operations += event["e"] in ("try", "renew", "end")
            if event["e"] == "got":
                hold = Hold(event["k"], event["r"], event["f"], event["s"], event["t"])
                open_holds[(hold.kind, hold.fence)] = hold
                holds.append(hold)
            elif event["e"] == "ending":
                open_holds[(event["k"], event["f"])].end = event["t"]
            elif event["e"] == "end":
                hold = open_holds.pop((event["k"], event["f"]))
                hold.end = event.get("t", hold.end)
                hold.lost = event["lost"]
                hold.how = "lost" if hold.lost else "released"
            elif event["e"] == "error":
                for hold in open_holds.values():
                    hold.end = hold.end or event["t"]
                    hold.how = f"error {event['what']}"
                open_holds.clear()
        for hold in open_holds.values():  # killed while holding, or while releasing
            hold.how = "killed while releasing" if hold.end else "killed"
            hold.end = hold.end or deaths.get(path.name, time.monotonic())
    report.grants = len(holds)
    return holds


def check(holds: list[Hold], report: Report) -> None:
    by_kind: dict[str, list[Hold]] = defaultdict(list)
    for hold in holds:
        by_kind[hold.kind].append(hold)
    for kind, group in by_kind.items():
        # fences only increase: a grant that began after another returned is higher
        ordered = sorted(group, key=lambda h: h.start)
        highest, highest_at = -1, -1.0
        starts = sorted((h.start, h.fence) for h in group)
        index = 0
        for hold in sorted(group, key=lambda h: h.began):
            while index < len(starts) and starts[index][0] < hold.began:
                highest = max(highest, starts[index][1])
                highest_at = starts[index][0]
                index += 1
            if hold.fence <= highest:
                report.violations.append(
                    f"{kind}: fence {hold.fence} not above {highest} granted at {highest_at}"
                )
        report.losses += sum(h.lost for h in group)
        live = [h for h in ordered if not h.lost]
        if kind == "semaphore":
            _check_limit(kind, live, SEM_LIMIT, report)
        else:
            per_resource: dict[str, list[Hold]] = defaultdict(list)
            for hold in ordered:
                per_resource[hold.resource].append(hold)
            for resource, seq in per_resource.items():
                active: list[Hold] = []  # earlier holds not yet ended
                for after in seq:
                    active = [h for h in active if h.end is not None and h.end > after.start]
                    for before in active:
                        if not (before.lost and after.fence > before.fence):
                            report.violations.append(
                                f"{kind} {resource}: fence {before.fence} held "
                                f"{before.start:.4f}-{before.end:.4f} ({before.how}), "
                                f"fence {after.fence} from {after.start:.4f}; "
                                f"chaos {report.chaos}"
                            )
                    active.append(after)


def _check_limit(kind: str, holds: list[Hold], limit: int, report: Report) -> None:
    edges = sorted([(h.start, 1) for h in holds] + [(h.end or 0.0, -1) for h in holds])
    live = 0
    for at, step in edges:
        live += step
        if live > limit:
            report.violations.append(f"{kind}: {live} live holds at {at:.4f} (limit {limit})")


def check_at_rest(url: str, report: Report) -> None:
    """Once every lease has expired: collect, then every member is accounted for."""
    client = redis.Redis.from_url(url)
    primitives = _primitives(client)
    # (a hold still live after that is reported below)
    with contextlib.suppress(AssertionError):
        wait_for(
            lambda: not any(p.snapshot(limit=0).held_count for p in primitives.values()),
            timeout=LEASE * 5,
            what="every lease to expire",
        )
    for primitive in primitives.values():
        primitive.collect()
    pool, allocator = primitives["pool"], primitives["allocator"]
    if sorted(pool.available()) != POOL or pool.occupied_count() != 0:
        report.violations.append(f"pool at rest: {pool.available()} available")
    if sorted(allocator.keys()) != KEYS or allocator.snapshot(limit=0).held_count != 0:
        report.violations.append(f"allocator at rest: keys {allocator.keys()}")
    if primitives["lock"].locked():
        report.violations.append("lock at rest: still held")
    if primitives["semaphore"].get_current_size() != 0:
        report.violations.append("semaphore at rest: slots still held")


# -------------------------------------------------------------------- supervisor


def run(*, seconds: float, workers: int, binary: str, seed: int = 0) -> Report:
    """The soak: a quarter of the time undisturbed, then SIGKILLs of workers
    all along; Redis restarted from its AOF at one half and with its data lost
    at three quarters, and flushed under the workers' feet at 60 % and 85 %.
    It ends once ``seconds`` have passed, every disruption happened and a tenth
    of ``seconds`` followed the last one (on a busy machine, they come late).
    Returns what the checker found."""
    rng = random.Random(seed)
    report = Report()
    root = Path(tempfile.mkdtemp(prefix="drp-soak-"))
    server = Server(binary, root)
    server.start()
    ctx = multiprocessing.get_context("fork")
    began = time.monotonic()
    stop_at = began + seconds
    stop = ctx.Event()
    procs: dict[str, Any] = {}
    deaths: dict[str, float] = {}
    spawned = 0

    def spawn() -> None:
        nonlocal spawned
        name = f"worker-{spawned}.log"
        args = (spawned, server.url, str(root / name), seed * 1000 + spawned, stop)
        proc = ctx.Process(target=worker, args=args)
        proc.start()
        procs[name] = proc
        spawned += 1

    try:
        for _ in range(workers):
            spawn()
        restarted = lost = False
        flushes = iter((0.6, 0.85))  # FLUSHALL, as cache.clear() on a shared database
        flush_at = next(flushes)
        last_chaos = began
        while True:
            now = time.monotonic()
            done = restarted and lost and flush_at == float("inf")
            if done and now >= stop_at and now >= last_chaos + seconds / 10:
                break
            time.sleep(rng.uniform(0.2, 0.6))
            elapsed = (time.monotonic() - began) / seconds
            if elapsed > 0.25:
                name = rng.choice([n for n, p in procs.items() if p.is_alive()] or [""])
                if name:
                    os.kill(procs[name].pid, signal.SIGKILL)
                    deaths[name] = time.monotonic()
                    report.kills += 1
                    spawn()
            if elapsed > 0.5 and not restarted:
                server.restart(lose_data=False)
                restarted = True
                report.restarts += 1
                last_chaos = _chaos(report, "restart from the AOF")
            if elapsed > 0.75 and not lost:
                server.restart(lose_data=True)
                lost = True
                report.restarts += 1
                last_chaos = _chaos(report, "restart with the data lost")
            if elapsed > flush_at:
                redis.Redis.from_url(server.url).flushall()
                report.flushes += 1
                flush_at = next(flushes, float("inf"))
                last_chaos = _chaos(report, f"flush {report.flushes}")
        stop.set()
        for proc in procs.values():
            proc.join(10)
            if proc.is_alive():
                proc.kill()
                report.violations.append(f"worker {proc.pid} did not stop")
        holds = read_holds(sorted(root.glob("worker-*.log")), deaths, report)
        report.grants_after = {what: sum(h.start > at for h in holds) for what, at in report.chaos}
        check(holds, report)
        check_at_rest(server.url, report)
    finally:
        for proc in procs.values():
            if proc.is_alive():
                proc.kill()
        server.kill()
        shutil.rmtree(root, ignore_errors=True)
    return report


def _chaos(report: Report, what: str) -> float:
    """Note a disruption in ``report``; returns when it ended."""
    at = time.monotonic()
    report.chaos.append((what, at))
    return at


def main(argv: list[str]) -> int:
    from django_redis_pool.testing import find_redis_binary

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=120)
    parser.add_argument("--workers", type=int, default=6)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--redis-server", default=None, help="default: the embedded binary")
    options = parser.parse_args(argv)
    binary = options.redis_server or find_redis_binary("redis-server")
    report = run(seconds=options.seconds, workers=options.workers, binary=binary, seed=options.seed)
    print(json.dumps(report.as_dict()))
    for violation in report.violations[:20]:
        print("VIOLATION", violation)
    return 1 if report.violations else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
