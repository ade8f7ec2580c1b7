"""A password-protected Redis and ``rediss://`` (TLS), end to end through the
Django layer: requests hold and release, commands and the admin work, and no
password shows up in any page, command output, log line or error.

TLS runs on Debian's redis-server 7 (built with TLS; the test command installs
it), with a throwaway CA and server certificate made by ``openssl``.
"""

from __future__ import annotations

import asyncio
import io
import os
import shutil
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import RequestFactory
from redis.backoff import NoBackoff
from redis.retry import Retry

from django_redis_pool import BackendUnavailable, get_pool
from django_redis_pool.guard import Guard, Refusal
from django_redis_pool.kinds import Grant
from django_redis_pool.testing import EmbeddedRedis
from tests.support.waiting import answers_ping, wait_for

pytestmark = pytest.mark.django_db

PASSWORD = "s3cr3t-Pa55word"
WRONG = "not-the-Pa55word"
REDIS7 = os.environ.get("REDIS7_SERVER") or "/usr/bin/redis-server"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def auth_server() -> Iterator[EmbeddedRedis]:
    with EmbeddedRedis(password=PASSWORD) as server:
        yield server


def auth_url(server: EmbeddedRedis, password: str = PASSWORD) -> str:
    return server.url.replace(PASSWORD, password, 1)


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, Path]]:
    """(TLS port, CA certificate) of a redis-server 7 that speaks only TLS."""
    if not (Path(REDIS7).exists() and shutil.which("openssl")):
        pytest.skip("needs Debian's redis-server 7 and openssl (scripts/dev.py test installs them)")
    tmp = tmp_path_factory.mktemp("tls")

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=tmp, check=True, capture_output=True)

    # (the extensions a strict verifier wants: Python >= 3.13's default context
    # sets VERIFY_X509_STRICT, which refuses a CA without keyUsage)
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out",
            "ca.crt", "-days", "1", "-subj", "/CN=drp-test-ca",
            "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign")  # fmt: skip
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out",
            "server.csr", "-subj", "/CN=127.0.0.1")  # fmt: skip
    (tmp / "san.ext").write_text(
        "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
        "authorityKeyIdentifier=keyid,issuer\n"
        "keyUsage=critical,digitalSignature,keyEncipherment\n"
        "extendedKeyUsage=serverAuth\n"
    )
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
            "-CAcreateserial", "-out", "server.crt", "-days", "1",
            "-extfile", "san.ext")  # fmt: skip
    port = free_port()
    process = subprocess.Popen(
        [REDIS7, "--port", "0", "--tls-port", str(port), "--bind", "127.0.0.1",
         "--tls-cert-file", "server.crt", "--tls-key-file", "server.key",
         "--tls-ca-cert-file", "ca.crt", "--tls-auth-clients", "no",
         "--requirepass", PASSWORD, "--save", "", "--appendonly", "no", "--dir", str(tmp)],
        cwd=tmp, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        client = redis.Redis(
            host="127.0.0.1",
            port=port,
            password=PASSWORD,
            ssl=True,
            ssl_ca_certs=str(tmp / "ca.crt"),
            socket_timeout=1,
            retry=Retry(NoBackoff(), 0),
        )
        wait_for(lambda: answers_ping(client), what="the TLS redis-server to start")
        yield port, tmp / "ca.crt"
    finally:
        process.kill()
        process.wait()


def use(settings: Any, connection: dict[str, Any]) -> None:
    settings.DJANGO_REDIS_POOL = {
        "CONNECTION": connection,
        "POOLS": {"printers": {"RESOURCES": ["p1"], "LEASE_TIMEOUT": 30}},
    }


def request_round_trip() -> None:
    """A sync request's hold, then an async one's (on the asyncio twin of the
    client: the same credentials and TLS settings)."""
    guard, request = Guard("printers", timeout=1), RequestFactory().get("/")
    held = guard.enter(request)
    assert isinstance(held, Grant) and held.lease is not None
    assert held.lease.resource == "p1"
    guard.exit(request, held)
    assert get_pool("printers").available() == ["p1"]

    async def on_the_loop() -> None:
        held = await guard.aenter(request)
        assert isinstance(held, Grant) and held.lease is not None
        await guard.aexit(request, held)

    asyncio.run(on_the_loop())
    assert get_pool("printers").available() == ["p1"]


def shown(admin_client: Any, caplog: Any) -> str:
    """Everything a person can read: pool_status, the admin pages, the log."""
    out = io.StringIO()
    try:
        call_command("pool_status", stdout=out, stderr=out, verbosity=2)
    except CommandError as exc:  # Redis refused us: what it says is shown too
        out.write(str(exc))
    pages = [
        admin_client.get("/admin/django_redis_pool/dashboard/").content.decode(),
        admin_client.get("/admin/django_redis_pool/dashboard/pool/printers/").content.decode(),
    ]
    return "\n".join([out.getvalue(), *pages, caplog.text])


def test_a_password_protected_redis_end_to_end(settings, auth_server, admin_client, caplog):
    caplog.set_level("DEBUG", logger="django_redis_pool")
    use(settings, {"URL": auth_url(auth_server)})
    request_round_trip()
    seen = shown(admin_client, caplog)
    assert "printers" in seen and PASSWORD not in seen


def test_a_wrong_password_is_refused_without_showing_it(
    settings, auth_server, admin_client, caplog
):
    caplog.set_level("DEBUG", logger="django_redis_pool")
    use(settings, {"URL": auth_url(auth_server, WRONG)})
    refused = Guard("printers", timeout=1).enter(RequestFactory().get("/"))
    assert isinstance(refused, Refusal) and isinstance(refused.error, BackendUnavailable)
    refused_async = asyncio.run(Guard("printers", timeout=1).aenter(RequestFactory().get("/")))
    assert isinstance(refused_async, Refusal)
    assert isinstance(refused_async.error, BackendUnavailable)
    seen = shown(admin_client, caplog) + str(refused.error)
    assert WRONG not in seen and PASSWORD not in seen


@pytest.mark.parametrize("form", ["query", "OPTIONS"])
def test_tls_end_to_end(settings, tls_server, admin_client, caplog, form):
    port, ca = tls_server
    url = f"rediss://:{PASSWORD}@127.0.0.1:{port}/0"
    if form == "query":
        use(settings, {"URL": f"{url}?ssl_cert_reqs=required&ssl_ca_certs={ca}"})
    else:
        use(
            settings,
            {"URL": url, "OPTIONS": {"ssl_ca_certs": str(ca), "ssl_cert_reqs": "required"}},
        )
    call_command("check")  # the OPTIONS pass the checks
    request_round_trip()
    assert PASSWORD not in shown(admin_client, caplog)


def test_tls_with_an_untrusted_certificate_is_refused(settings, tls_server, caplog):
    port, _ = tls_server
    use(settings, {"URL": f"rediss://:{PASSWORD}@127.0.0.1:{port}/0?ssl_cert_reqs=required"})
    refused = Guard("printers", timeout=1).enter(RequestFactory().get("/"))
    assert isinstance(refused, Refusal) and isinstance(refused.error, BackendUnavailable)
    refused_async = asyncio.run(Guard("printers", timeout=1).aenter(RequestFactory().get("/")))
    assert isinstance(refused_async, Refusal)
    assert isinstance(refused_async.error, BackendUnavailable)
    assert PASSWORD not in str(refused.error) + caplog.text
