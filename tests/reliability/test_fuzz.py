"""Fuzzing (hypothesis): whatever names, ids, identities and settings users
(or their clients) pass, only ``ValueError``, a system-check message or
``NotConfigured`` comes out: never a Redis error, a crash, or a half-written
state in Redis.
"""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from django_redis_pool import (
    Allocator,
    Lock,
    NotConfigured,
    ResourcePool,
    Semaphore,
    conf,
    registry,
)
from django_redis_pool.checks import validate
from tests.support.primitive_helpers import ops, slot_lease

FUZZ = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

#: Text users send: empty, long, unicode, control characters, braces, spaces.
texts = st.one_of(
    st.text(max_size=12),
    st.text(alphabet=st.characters(codec="utf-8"), min_size=190, max_size=210),
    st.sampled_from(["", " ", "{x}", "a b", "tab\there", "new\nline", "\x00", "é", "|", "a|b"]),
)
anything = st.one_of(
    texts, st.integers(), st.floats(allow_nan=True), st.none(), st.booleans(), st.binary(max_size=8)
)


def _text(value: Any) -> Any:
    """What the API keeps of ``value`` (bytes are read as UTF-8)."""
    return value.decode() if isinstance(value, bytes) else value


def _keys_of(client: Any, primitive: Any) -> dict[bytes, bytes]:
    return {key: client.type(key) for key in client.scan_iter(match=f"{ops(primitive).base}*")}


@FUZZ
@given(name=anything, resource=anything)
def test_pool_names_and_resource_ids(redis_client: Any, name: Any, resource: Any) -> None:
    redis_client.flushdb()  # (one Redis for every example)
    try:
        pool = ResourcePool(redis_client, name)
    except ValueError:
        return
    before = _keys_of(redis_client, pool)
    try:
        added = pool.associate(resource)
    except ValueError:
        assert _keys_of(redis_client, pool) == before, "a refused id wrote something"
        return
    assert added is True or added is False
    lease = pool.acquire(timeout=0)
    assert lease is not None and lease.resource == _text(resource)
    assert lease.release() and pool.disassociate(resource)


@FUZZ
@given(identity=anything, holder=anything)
def test_semaphore_identities_and_lock_holders(
    redis_client: Any, identity: Any, holder: Any
) -> None:
    redis_client.flushdb()
    semaphore = Semaphore(redis_client, "fuzz", default_max_size=1)
    try:
        lease = slot_lease(semaphore, identity, timeout=0)
    except ValueError:
        assert semaphore.get_current_size() == 0
    else:
        assert lease is not None and lease.holder == _text(identity)
        assert lease.release()
    lock = Lock(redis_client, "fuzz")
    try:
        granted = lock.acquire(blocking=False, holder=holder)
    except ValueError:
        assert not lock.locked()
    else:
        assert granted and lock.locked()
        lock.release(holder=holder)


@FUZZ
@given(key=anything, name=anything, priority=anything, cooldown=anything)
def test_allocator_keys_bindings_priorities(
    redis_client: Any, key: Any, name: Any, priority: Any, cooldown: Any
) -> None:
    redis_client.flushdb()
    allocator = Allocator(redis_client, "fuzz", lease_timeout=30)
    try:
        allocator.extend([key], priority=priority)
    except ValueError:
        assert len(allocator) == 0
        return
    try:
        got = allocator.malloc_key(name=name)
    except ValueError:
        got = allocator.malloc_key()
    assert got == _text(key)
    assert allocator.free_keys(got) == 1
    try:
        allocator.report_unhealthy(key, cooldown=cooldown)
    except ValueError:
        assert allocator.state(key) == "free"
    allocator.shrink([key])
    assert len(allocator) == 0


# ----------------------------------------------------------------- settings

TOP_KEYS = [*conf.top_level_keys(registry.KINDS), "NOPE"]
option_keys = st.sampled_from(
    sorted({key for kind in registry.all_kinds() for key in kind.options} | {"BOGUS"})
)
entry = st.dictionaries(option_keys, anything, max_size=4)
entries = st.dictionaries(st.one_of(texts, st.integers()), st.one_of(entry, anything), max_size=3)
setting = st.one_of(
    anything,
    st.dictionaries(
        st.sampled_from(TOP_KEYS),
        st.one_of(
            anything,
            st.dictionaries(
                st.one_of(texts, st.integers()), st.one_of(entry, anything), max_size=3
            ),
            st.lists(st.dictionaries(st.sampled_from(["PATH", "RESOURCE", "TIMEOUT"]), anything)),
        ),
        max_size=5,
    ),
)


@FUZZ
@given(raw=setting)
def test_any_setting_gives_check_messages_or_a_working_config(redis_client: Any, raw: Any) -> None:
    messages = validate(raw, {})  # never raises
    if any(message.is_serious() for message in messages):
        return
    config = conf.valid_config(raw, registry.KINDS, caches={})
    for entry_ in config.entries.values():
        with contextlib.suppress(NotConfigured):
            entry_.kind.build(redis_client, entry_.name, config.key_prefix, entry_.options)


def test_fuzzing_is_wired(redis_client: Any) -> None:
    """(A plain check that the strategies reach the code under test.)"""
    with pytest.raises(ValueError, match="name"):
        ResourcePool(redis_client, "a b")
