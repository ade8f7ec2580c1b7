"""Worker processes: aggregate throughput, hand-offs, and another revision's package.

A :class:`Gang` (``engine``'s sections 2 and 3, ``cpu``) spawns its worker
processes once per server (start method ``spawn``: nothing inherited but the
arguments), each with its own redis-py clients, and then hands them jobs:

* ``throughput``: run one case's acquire + release loop for a fixed time,
  started together with the other workers and the parent by a
  ``multiprocessing.Barrier``; reply (cycles, seconds);
* ``handoff``: workers 0 and 1 play ping-pong over a pipe of their own, in
  turn holding the token while the other waits for it; reply the release and
  acquire times of each hand-off.

Every wait is bounded: a worker gives up on a barrier or its peer after
``STEP_LIMIT`` seconds, and exits when its parent is gone or sends ``None``.

A :class:`Revision` (``--before REF`` of ``engine``, ``async`` and
``redis-cost``) is a git worktree of REF; the processes it starts import
``django_redis_pool`` from there and the benchmarks (the cases) from here.
They run ``python -m benchmarks --worker KIND ...`` (``benchmarks.__main__.serve``), as do
the other one-off workers (``async``'s rounds, ``redis-cost --client``).
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import redis

from benchmarks import cases

ROOT = Path(__file__).resolve().parent.parent
#: Set in a worker's environment: import ``django_redis_pool`` from this tree
#: (``benchmarks/__init__.py`` puts it first on ``sys.path``).
PACKAGE_FROM = "DRP_BENCH_PACKAGE_FROM"

#: Seconds any single wait may take (a barrier, the peer, a result).
STEP_LIMIT = 60.0
#: Hand-offs dropped at the start of each ping-pong.
HANDOFF_WARMUP = 2


def client_name(index: int) -> str:
    return f"bench-worker-{index}"


# -- inside a worker ------------------------------------------------------------------


def worker_main(
    index: int, url: str, inbox: Any, results: Any, barriers: dict[int, Any], peer: Any
) -> None:
    """A worker's loop: run jobs from ``inbox`` until ``None`` or the parent is gone."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    client = redis.Redis.from_url(url, client_name=client_name(index))
    dclient = redis.Redis.from_url(url, decode_responses=True)
    parent = multiprocessing.parent_process()
    while True:
        try:
            job = inbox.get(timeout=1.0)
        except queue.Empty:
            if parent is not None and not parent.is_alive():
                return
            continue
        if job is None:
            return
        kind, *args = job
        try:
            if kind == "throughput":
                out = throughput(index, client, dclient, barriers, *args)
            elif kind == "ping":
                out = client.ping()
            elif kind == "handoff":
                out = handoff_player(index, client, peer, *args)
            else:
                raise ValueError(kind)
            results.put((index, "ok", out))
        except BaseException:
            results.put((index, "error", traceback.format_exc()))


def throughput(
    index: int,
    client: redis.Redis,
    dclient: redis.Redis,
    barriers: dict[int, Any],
    case: str,
    name: str,
    processes: int,
    duration: float,
) -> tuple[int, float]:
    barrier = barriers[processes]
    try:
        cycle = cases.cycle(case, client, dclient, name, f"w{index}", new_identity=False)
        for _ in range(cases.WARMUP):
            cycle()
    except BaseException:
        barrier.abort()  # the others and the parent stop waiting at once
        raise
    barrier.wait(timeout=STEP_LIMIT)
    count = 0
    started = time.perf_counter()
    deadline = started + duration
    while True:
        cycle()
        count += 1
        if time.perf_counter() >= deadline:
            break
    return count, time.perf_counter() - started


def _expect(peer: Any, message: Any) -> None:
    if not peer.poll(STEP_LIMIT):
        raise RuntimeError(f"ping-pong: no {message!r} from the peer within {STEP_LIMIT} s")
    got = peer.recv()
    if got != message:
        raise RuntimeError(f"ping-pong out of step: expected {message!r}, got {got!r}")


def _wait_until(what: str, check: Callable[[], bool]) -> None:
    limit = time.monotonic() + STEP_LIMIT
    while not check():
        if time.monotonic() > limit:
            raise RuntimeError(f"gave up after {STEP_LIMIT} s waiting for: {what}")


def blocked_in_blpop(client: redis.Redis, name: str) -> bool:
    """True if the connection named ``name`` is blocked in BLPOP on the server."""
    return any(
        c.get("name") == name and c.get("cmd") == "blpop" and "b" in c.get("flags", "")
        for c in client.client_list()
    )


def handoff_player(
    index: int, client: redis.Redis, peer: Any, case: str, name: str, total: int
) -> tuple[dict[int, int], dict[int, int]]:
    """One side of the ping-pong; hand-off ``i`` goes from role ``i % 2`` to the other.

    The waiter says ("wait", i) before it acquires and ("got", i) once it holds
    the token. The holder releases only once the waiter is really blocked: for
    ours, ``waiting_count() == 1``; for every case, ``CLIENT LIST`` shows the
    waiter's connection blocked in BLPOP. The holder does not ask for the token
    again before "got" (python-redis-lock is not fair: a releaser asking at once
    would usually win). Returns ({i: ns before release}, {i: ns after acquire})
    on ``time.monotonic_ns()`` (CLOCK_MONOTONIC, shared by all processes)."""
    role = index
    other = client_name(1 - role)
    token = cases.baton(case, client, name, role)
    primitive = getattr(token, "primitive", None)
    released: dict[int, int] = {}
    acquired: dict[int, int] = {}
    if role == 0:  # holds it first; the peer starts only once it does
        if not token.acquire():
            raise RuntimeError("the first acquire failed")
        peer.send("held")
    else:
        _expect(peer, "held")
    for i in range(total):
        if i % 2 == role:
            _expect(peer, ("wait", i))
            if primitive is not None:
                _wait_until("waiting_count() == 1", lambda: primitive.waiting_count() == 1)
            _wait_until(f"{other} blocked in BLPOP", lambda: blocked_in_blpop(client, other))
            released[i] = time.monotonic_ns()
            token.release()
            _expect(peer, ("got", i))
        else:
            peer.send(("wait", i))
            if not token.acquire():
                raise RuntimeError("a blocking acquire returned False")
            acquired[i] = time.monotonic_ns()
            peer.send(("got", i))
    if total % 2 == role:  # the last waiter holds it now
        token.release()
    return released, acquired


# -- in the parent --------------------------------------------------------------------


class Gang:
    """``size`` spawned workers on one server; ``counts`` are the numbers of
    workers that may run a throughput job together (one barrier each, the
    parent being one more party)."""

    def __init__(self, url: str, size: int, counts: list[int]) -> None:
        self.url, self.size, self.counts = url, max(size, 2), counts
        self._start()

    def _start(self) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.results = ctx.Queue()
        self.barriers = {n: ctx.Barrier(n + 1) for n in self.counts}
        ends = ctx.Pipe()
        self.inboxes = [ctx.Queue() for _ in range(self.size)]
        self.processes = [
            ctx.Process(
                target=worker_main,
                args=(
                    i,
                    self.url,
                    self.inboxes[i],
                    self.results,
                    self.barriers,
                    ends[i] if i < 2 else None,
                ),
                name=client_name(i),
                daemon=True,
            )
            for i in range(self.size)
        ]
        for p in self.processes:
            p.start()

    def stop(self) -> None:
        for inbox in self.inboxes:
            inbox.put(None)
        for p in self.processes:
            p.join(timeout=10)
            if p.is_alive():
                p.terminate()
                p.join(timeout=5)

    def restart(self) -> None:
        """After a failed job: new workers (no stale messages, barriers or pipes)."""
        for p in self.processes:
            if p.is_alive():
                p.terminate()
            p.join(timeout=5)
        self._start()

    def ready(self) -> None:
        """Return once every worker has started and reached the server."""
        for inbox in self.inboxes:
            inbox.put(("ping",))
        self._collect(self.size, STEP_LIMIT)

    def _collect(self, n: int, limit: float) -> list[Any]:
        """Results of ``n`` workers (by index); raises if any failed."""
        out: dict[int, Any] = {}
        errors: list[str] = []
        deadline = time.monotonic() + limit
        while len(out) + len(errors) < n:
            try:
                index, status, value = self.results.get(
                    timeout=max(0.1, deadline - time.monotonic())
                )
            except queue.Empty:
                errors.append(f"{n - len(out) - len(errors)} worker(s) sent no result")
                break
            if status == "ok":
                out[index] = value
            else:
                errors.append(f"worker {index}:\n{value}")
        if errors:
            self.restart()
            raise RuntimeError("\n".join(errors))
        return [out[i] for i in sorted(out)]

    def throughput(
        self, case: str, name: str, processes: int, duration: float, on_start: Callable[[], Any]
    ) -> tuple[list[tuple[int, float]], Any, Any]:
        """Run ``case`` in ``processes`` workers at once for ``duration`` s.

        Returns ([(cycles, seconds)] per worker, ``on_start()`` called as the
        barrier opens, ``on_start()`` called again after ``duration``)."""
        for i in range(processes):
            self.inboxes[i].put(("throughput", case, name, processes, duration))
        barrier = self.barriers[processes]
        try:
            barrier.wait(timeout=STEP_LIMIT)
        except threading.BrokenBarrierError:
            self._collect(processes, STEP_LIMIT)  # raises with the workers' errors
            raise
        before = on_start()
        time.sleep(duration)
        after = on_start()
        return self._collect(processes, STEP_LIMIT + duration), before, after

    def handoffs(self, case: str, name: str, n: int) -> list[float]:
        """Latencies in ms of ``n`` hand-offs between workers 0 and 1 (after
        ``HANDOFF_WARMUP`` dropped ones)."""
        total = n + HANDOFF_WARMUP
        for role in (0, 1):
            self.inboxes[role].put(("handoff", case, name, total))
        released: dict[int, int] = {}
        acquired: dict[int, int] = {}
        for rel, acq in self._collect(2, STEP_LIMIT + total):
            released.update(rel)
            acquired.update(acq)
        return [(acquired[i] - released[i]) / 1e6 for i in range(HANDOFF_WARMUP, total)]


# -- other processes: this revision's package or another's ----------------------------------


def worker_command(kind: str, *args: Any) -> list[str]:
    """The command line of a ``--worker KIND`` process (see ``benchmarks.__main__.serve``)."""
    return [sys.executable, "-m", "benchmarks", "--worker", kind, *map(str, args)]


def worker_env(tree: str | None = None, **extra: str) -> dict[str, str]:
    """The environment of a worker process: ``benchmarks`` from here, and
    ``django_redis_pool`` from ``tree`` (a :class:`Revision`'s) or else the one
    this process imported."""
    import django_redis_pool

    here = str(Path(django_redis_pool.__file__).resolve().parent.parent)
    path = os.pathsep.join(dict.fromkeys([str(ROOT), here]))
    env = {k: v for k, v in os.environ.items() if k != PACKAGE_FROM}
    env.update(PYTHONPATH=path, **extra)
    if tree is not None:
        env[PACKAGE_FROM] = tree
    return env


class Revision:
    """Our package at git revision ``ref`` (``--before REF``): a worktree of it in
    a temporary directory, removed by :meth:`remove`."""

    def __init__(self, ref: str) -> None:
        self.ref = ref
        self.tree = tempfile.mkdtemp(prefix="drp-before-")
        subprocess.run(
            ["git", "worktree", "add", "--detach", self.tree, ref],
            cwd=ROOT,
            check=True,
            capture_output=True,
        )

    def env(self, **extra: str) -> dict[str, str]:
        return worker_env(self.tree, **extra)

    def cases(self) -> CaseWorker:
        """A worker that sets up and runs today's cases on this revision's package."""
        return CaseWorker(self)

    def remove(self) -> None:
        subprocess.run(
            ["git", "worktree", "remove", "--force", self.tree],
            cwd=ROOT,
            check=False,
            capture_output=True,
        )


class CaseWorker:
    """A ``--worker cases`` process of a :class:`Revision`, answering one line per
    request (see :func:`serve_cases`)."""

    def __init__(self, revision: Revision) -> None:
        self.revision = revision
        self.proc = subprocess.Popen(
            worker_command("cases"),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=revision.env(),
            cwd=ROOT,
        )
        package = self.ask("package")
        if not package.startswith(revision.tree):
            raise RuntimeError(f"--before {revision.ref} imported {package}, not its worktree")

    def ask(self, *words: Any) -> Any:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(" ".join(map(str, words)) + "\n")
        self.proc.stdin.flush()
        answer = self.proc.stdout.readline()
        if not answer:
            raise RuntimeError(f"the --before {self.revision.ref} worker died")
        return json.loads(answer)

    def setup(self, url: str, case: str, name: str, me: str, warmup: int) -> None:
        """Flush, set ``case`` up under ``name`` and run ``warmup`` cycles."""
        self.ask("setup", url, case, name, me, warmup)

    def measure(self, cycles: int) -> dict[str, float]:
        """:func:`cases.measure` of ``cycles`` cycles of the case set up."""
        return self.ask("measure", cycles)  # type: ignore[no-any-return]

    def run(self, cycles: int) -> None:
        """``cycles`` cycles of the case set up."""
        self.ask("run", cycles)

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            self.proc.stdin.close()  # type: ignore[union-attr]
            self.proc.wait(30)


def serve_cases() -> None:
    """``--worker cases``: one JSON answer per line on stdin. ``package``: where
    ``django_redis_pool`` comes from; ``setup URL CASE NAME ME WARMUP``: flush,
    set ``CASE`` up (a pool: one resource per ``associate`` call, which older
    engines take) and warm it up; ``measure N``: :func:`cases.measure` of N
    cycles; ``run N``: N cycles."""
    import django_redis_pool

    client: redis.Redis | None = None
    cycle: cases.Cycle | None = None
    case = ""
    for line in sys.stdin:
        words = line.split()
        answer: Any = "ok"
        if words[0] == "package":
            answer = django_redis_pool.__file__
        elif words[0] == "setup":
            url, case, name, me, warmup = words[1:]
            client = redis.Redis.from_url(url)
            dclient = redis.Redis.from_url(url, decode_responses=True)
            client.flushall()
            if case == "pool":
                pool = django_redis_pool.ResourcePool(client, name, lease_timeout=cases.LEASE)
                for resource in cases.resource_ids(cases.POOL_SIZE):
                    pool.associate(resource)
                cycle = cases.cycle(case, client, dclient, name, me)
            elif case in cases.CASES:
                cases.setup(case, client, dclient, name)
                cycle = cases.cycle(case, client, dclient, name, me)
            else:
                cycle = cases.cycle_of(case, url, name, me)
            for _ in range(int(warmup)):
                cycle()
        elif words[0] == "measure":
            assert client is not None and cycle is not None
            answer, _ = cases.measure(case, client, cycle, int(words[1]))
        elif words[0] == "run":
            assert cycle is not None
            for _ in range(int(words[1])):
                cycle()
        print(json.dumps(answer), flush=True)
