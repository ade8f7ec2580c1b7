"""Allocators under contention: 8 threads and 4 processes on 4 keys, checked
against an independent log; and a hypothesis state machine against a model."""

from __future__ import annotations

import multiprocessing
import threading
from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from django_redis_pool import Allocator
from tests.support.client_specs import client_from, spec_of

mp = multiprocessing.get_context("fork")
KEYS = ["k1", "k2", "k3", "k4"]
CYCLES = 150


def _cycles(spec: tuple[str, str, int], log_key: str, who: str, cycles: int) -> None:
    """malloc + free ``cycles`` times, logging each grant right after it and
    each free right before it: Redis orders the log, so a key given twice at
    once shows as two grants without a free between them."""
    client = client_from(spec)
    allocator = Allocator(client, "busy", lease_timeout=60)
    done = 0
    while done < cycles:
        key = allocator.malloc_key(holder=who, name=f"{who}-{done % 3}")
        if key is None:
            continue
        client.rpush(log_key, f"got {key} {key.fence} {who}")
        client.rpush(log_key, f"free {key} {key.fence} {who}")
        assert allocator.free_keys(key) == 1, f"{who} could not free {key}"
        done += 1


def test_eight_threads_and_four_processes_never_share_a_key(client: Any) -> None:
    allocator = Allocator(client, "busy", lease_timeout=60)
    allocator.extend(KEYS[:2])
    allocator.extend(KEYS[2:], priority=1)
    log_key = "{allocator:busy}:log"
    spec = spec_of(client)
    procs = [
        mp.Process(target=_cycles, args=(spec, log_key, f"proc-{i}", CYCLES)) for i in range(4)
    ]
    errors: list[BaseException] = []

    def thread_cycles(who: str) -> None:
        try:
            _cycles(spec, log_key, who, CYCLES)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=thread_cycles, args=(f"thread-{i}",)) for i in range(8)]
    for worker in (*procs, *threads):
        worker.start()
    for thread in threads:
        thread.join(120)
    for proc in procs:
        proc.join(120)
        assert proc.exitcode == 0
    assert errors == []
    holder: dict[str, tuple[int, str] | None] = dict.fromkeys(KEYS)
    last_fence = dict.fromkeys(KEYS, 0)
    grants = 0
    for entry in client.lrange(log_key, 0, -1):
        event, key, fence, who = entry.decode().split()
        if event == "got":
            assert holder[key] is None, f"{key} granted to {who} while {holder[key]} held it"
            assert int(fence) > last_fence[key], "a key's fences only increase"
            holder[key], last_fence[key] = (int(fence), who), int(fence)
            grants += 1
        else:
            assert holder[key] == (int(fence), who)
            holder[key] = None
    assert grants == 12 * CYCLES
    assert not any(allocator.is_locked(key) for key in KEYS)
    assert sorted(allocator.keys()) == KEYS


class AllocatorMachine(RuleBasedStateMachine):
    """The allocator against a model: which keys exist, their priority, who
    holds which, and which are out of rotation."""

    client: Any = None

    def __init__(self) -> None:
        super().__init__()
        self.client.flushall()
        self.allocator = Allocator(self.client, "model", lease_timeout=600)
        self.priority: dict[str, int] = {}
        self.held: dict[str, Any] = {}  # key -> its AllocatedKey
        self.stale: list[Any] = []  # AllocatedKeys freed or taken away since
        self.sick: set[str] = set()

    names = st.sampled_from(["a", "b", "c", "d", "e"])

    @rule(keys=st.lists(names, min_size=1, max_size=3), priority=st.integers(-2, 2))
    def extend(self, keys: list[str], priority: int) -> None:
        new = {k for k in keys if k not in self.priority}
        assert self.allocator.extend(keys, priority=priority) == len(new)
        for key in keys:
            self.priority[key] = priority

    @rule(keys=st.lists(names, min_size=1, max_size=2))
    def shrink(self, keys: list[str]) -> None:
        present = {k for k in keys if k in self.priority}
        assert self.allocator.shrink(keys) == len(present)
        for key in present:
            del self.priority[key]
            self.sick.discard(key)
            if key in self.held:
                self.stale.append(self.held.pop(key))

    @rule()
    def malloc(self) -> None:
        free = [k for k in self.priority if k not in self.held and k not in self.sick]
        key = self.allocator.malloc_key()
        if not free:
            assert key is None
            return
        assert key is not None and key in free
        assert self.priority[key] == max(self.priority[k] for k in free), "highest priority"
        self.held[str(key)] = key

    @rule(data=st.data())
    def free(self, data: Any) -> None:
        if not self.held:
            return
        key = data.draw(st.sampled_from(sorted(self.held)))
        assert self.allocator.free_keys(self.held.pop(key)) == 1

    @rule(data=st.data())
    def free_stale(self, data: Any) -> None:
        if self.stale:
            assert self.allocator.free_keys(data.draw(st.sampled_from(self.stale))) == 0

    @rule(key=names)
    def report_unhealthy(self, key: str) -> None:
        assert self.allocator.report_unhealthy(key, cooldown=600) == (key in self.priority)
        if key in self.priority:
            self.sick.add(key)

    @rule(key=names)
    def report_healthy(self, key: str) -> None:
        assert self.allocator.report_healthy(key) == (key in self.priority)
        self.sick.discard(key)

    @invariant()
    def agrees(self) -> None:
        assert sorted(self.allocator.keys()) == sorted(self.priority)
        for key in self.priority:
            expected = "held" if key in self.held else "unhealthy" if key in self.sick else "free"
            assert self.allocator.state(key) == expected, key


@pytest.mark.parametrize("_", [None])
def test_the_allocator_agrees_with_its_model(redis_client: Any, _: None) -> None:
    AllocatorMachine.client = redis_client
    runner = settings(max_examples=40, stateful_step_count=25, deadline=None)(AllocatorMachine)
    runner.TestCase().runTest()
