"""A Redis user (ACL) of its own: the exact rule of docs/operations.md works,
and a user refused a command the scripts need is told which, before any
write, by the primitives and by ``manage.py check --deploy``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import redis
from django.core.checks import run_checks

from django_redis_pool import Lock, PoolError, RateLimiter, ResourcePool, Semaphore, TaskQueue
from django_redis_pool.checks import TAG
from django_redis_pool.primitives.wire import permissions

PASSWORD = "acl-pw"


def rule(server: redis.Redis, without: tuple[str, ...] = ()) -> list[str]:
    """docs/operations.md's ACL rule, less the commands ``without`` (the
    function library's only where the server has it)."""
    functions = int(server.info("server")["redis_version"].split(".")[0]) >= 7
    words = permissions.acl_rule("drp", functions=functions).split()
    kept = [w for w in words if w[1:].upper().replace("|", " ") not in without]
    return ["on", f">{PASSWORD}", *kept]


@pytest.fixture
def user(redis_client: redis.Redis, redis_url: str) -> Iterator[Any]:
    """Makes a user "app" of the rule (less some commands) and a client of it."""
    made: list[redis.Redis] = []

    def make(without: tuple[str, ...] = ()) -> redis.Redis:
        redis_client.execute_command("ACL", "SETUSER", "app", "reset", *rule(redis_client, without))
        client = redis.Redis.from_url(redis_url, username="app", password=PASSWORD)
        made.append(client)
        return client

    yield make
    for client in made:
        client.close()
    redis_client.execute_command("ACL", "DELUSER", "app")


def test_the_documented_rule_serves_every_primitive(user):
    client = user()
    pool = ResourcePool(client, "acl-pool", resources=["r1", "r2"])
    lease = pool.acquire(timeout=0)
    assert lease is not None and lease.release()
    sem = Semaphore(client, "acl-sem", default_max_size=1)
    assert sem.acquire("a") and sem.release("a")
    lock = Lock(client, "acl-lock")
    assert lock.acquire(timeout=1)
    lock.release()
    assert RateLimiter(client, "acl-rate", rate=1, per=60).acquire("k")
    queue = TaskQueue(client, "acl-queue", task_fn=lambda task: task.params)
    queue.enqueue("job", 1, id="t")
    assert queue.listen(["job"], burst=True) == 1


def test_a_missing_command_is_named_and_nothing_is_written(user, redis_client):
    pool = ResourcePool(redis_client, "acl-half", resources=["r1", "r2"])
    pool.associate("r1")
    pool.associate("r2")
    limited = ResourcePool(user(without=("ZADD",)), "acl-half")
    with pytest.raises(PoolError, match="ZADD"):
        limited.acquire(timeout=0)
    assert sorted(pool.available()) == ["r1", "r2"], "no resource moved out"
    assert pool.occupied_count() == 0


def test_keys_outside_the_prefix_are_named(user):
    client = user()
    with pytest.raises(PoolError, match="keys of other:\\*"):
        ResourcePool(client, "p", key_prefix="other").acquire(timeout=0)


def deploy_messages(settings: Any, url: str) -> list[Any]:
    settings.DJANGO_REDIS_POOL = {"CONNECTION": {"URL": url}}
    return [
        m
        for m in run_checks(tags=[TAG], include_deployment_checks=True)
        if m.id.startswith("django_redis_pool.")
    ]


def test_check_deploy_names_each_command_the_user_may_not_run(user, settings, redis_url):
    user(without=("ZADD", "HINCRBY", "CONFIG"))
    url = redis_url.replace("redis://", f"redis://app:{PASSWORD}@")
    messages = {m.id.rpartition(".")[2]: m for m in deploy_messages(settings, url)}
    assert "ZADD" in messages["E040"].msg and "HINCRBY" in messages["E040"].msg
    assert "ACL SETUSER" in messages["E040"].hint
    assert PASSWORD not in messages["E040"].msg + messages["E040"].hint
    assert "W011" in messages, "CONFIG refused: persistence not checked, and said so"
    assert "W004" not in messages
