"""The holder name of a request (``django_redis_pool.holder_names``): a view held by
``@with_resource`` without an identity shows its request's method, path and
user in ``manage.py pool_status --json`` and in the admin's holders table,
while the view runs (it waits at a gate meanwhile: ``tests/urlconfs/holder_views.py``).

The requests run in threads, with their own database connections: the tests
are transactional, so that those connections see the users and sessions.
"""

from __future__ import annotations

import asyncio
import io
import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from django.contrib.admin.utils import quote
from django.core.management import call_command
from django.test import AsyncClient, Client
from django.urls import reverse

from django_redis_pool import get_lock, get_pool, get_semaphore
from django_redis_pool.guard import request_of
from django_redis_pool.holder_names import holder_words, process_of, request_holder
from tests.support.admin_pages import table
from tests.support.waiting import wait_for
from tests.urlconfs.holder_views import GATE

pytestmark = [
    pytest.mark.urls("tests.urlconfs.holder_views"),
    pytest.mark.django_db(transaction=True),
]

NA = "\N{EN DASH}"
ELLIPSIS = "\N{HORIZONTAL ELLIPSIS}"


@pytest.fixture(autouse=True)
def _gate() -> Iterator[None]:
    GATE.reset()
    yield
    GATE.open.set()  # never leave a view thread blocked


@pytest.fixture
def configured(settings: Any, redis_url: str) -> None:
    settings.DJANGO_REDIS_POOL = {
        "CONNECTION": {"URL": redis_url},
        "POOLS": {"printers": {"RESOURCES": ["p1", "p2"], "LEASE_TIMEOUT": 30}},
        "SEMAPHORES": {"reports": {"MAX_SIZE": 2, "LEASE_TIMEOUT": 30}},
        "LOCKS": {"imports": {"LEASE_TIMEOUT": 30}},
    }
    call_command("pool_sync", verbosity=0)


@pytest.fixture
def alice(django_user_model: Any) -> Client:
    """A client logged in as the (non-staff) user "alice"."""
    client = Client()
    client.force_login(django_user_model.objects.create_user("alice", "alice@example.com"))
    return client


@pytest.fixture
def admin(django_user_model: Any) -> Client:
    client = Client()
    client.force_login(django_user_model.objects.create_superuser("admin", "a@example.com"))
    return client


@contextmanager
def holding(request: Callable[[], Any]) -> Iterator[list[Any]]:
    """Run ``request()`` in a thread until its view waits at the gate; open
    the gate on leaving. Yields the list that gets its response."""
    responses: list[Any] = []
    thread = threading.Thread(target=lambda: responses.append(request()), daemon=True)
    thread.start()
    try:
        wait_for(lambda: GATE.entered == 1 or not thread.is_alive(), 15, "the view to hold")
        assert GATE.entered == 1, f"the request did not reach the view: {responses}"
        yield responses
    finally:
        GATE.open.set()
        thread.join(15)
    assert [r.status_code for r in responses] == [200]


def status_holders(name: str) -> list[dict[str, Any]]:
    out = io.StringIO()
    call_command("pool_status", "--json", "--name", name, stdout=out)
    [primitive] = json.loads(out.getvalue())["primitives"]
    return primitive["holders"]


def detail_url(name: str) -> str:
    return reverse("admin:django_redis_pool_primitive", args=[quote(name)])


#: The Request column of the holders table of each primitive (a semaphore's
#: identity and a lock's holder are their holder: they have no Holder column).
REQUEST_COLUMN = {"printers": 2, "reports": 1, "imports": 1}


def holder_row(admin: Client, name: str = "printers") -> list[str]:
    """The one row of the holders table of ``name``."""
    [row] = table(admin.get(detail_url(name)), "holders")
    return row


def request_cell(admin: Client, name: str = "printers") -> str:
    """The Request cell of the one row of the holders table of ``name``."""
    return holder_row(admin, name)[REQUEST_COLUMN[name]]


# ---------------------------------------------------------------- pool_status and the admin


def test_a_logged_in_request_shows_its_method_path_and_user(
    configured: None, alice: Client, admin: Client
) -> None:
    with holding(lambda: alice.get("/held/print/")):
        [holder] = status_holders("printers")
        row = holder_row(admin)

    assert holder["request"] == {"method": "GET", "path": "/held/print/", "user": "alice"}
    assert request_of(holder["holder"]) == holder["request"]
    # each fact once: the Holder column names the process, the Request column the request
    process = holder["holder"].split(" ")[0]
    assert row[1:3] == [process, "GET /held/print/ · alice"]
    assert status_holders("printers") == []  # released after the response


def test_an_anonymous_request_shows_no_user(configured: None, admin: Client) -> None:
    with holding(lambda: Client().post("/held/upload/")):
        [holder] = status_holders("printers")
        row = holder_row(admin)

    assert holder["request"] == {"method": "POST", "path": "/held/upload/", "user": None}
    assert holder["holder"].endswith(" POST /held/upload/ -")  # (the name as stored)
    assert row[1:3] == [holder["holder"].split(" ")[0], "POST /held/upload/ · anonymous"]


def test_a_path_with_spaces_and_unicode_round_trips(configured: None, admin: Client) -> None:
    with holding(lambda: Client().get("/held/a%20b/%C3%A9t%C3%A9%25/?q=1")):
        [holder] = status_holders("printers")
        cell = request_cell(admin)

    assert holder["holder"].count(" ") == 3  # the path is quoted
    assert holder["request"] == {"method": "GET", "path": "/held/a b/été%/", "user": None}
    assert cell == "GET /held/a b/été%/ · anonymous"


def test_a_very_long_path_is_shortened_within_200_characters(
    configured: None, alice: Client
) -> None:
    path = "/held/" + "é" * 150 + "/" + "x" * 1000 + "/"

    with holding(lambda: alice.get(path)):
        [holder] = status_holders("printers")

    assert len(holder["holder"]) <= 200
    shown = holder["request"]
    assert shown["method"] == "GET" and shown["user"] == "alice"
    assert shown["path"].startswith("/held/éé") and shown["path"].endswith(ELLIPSIS)
    assert path.startswith(shown["path"].removesuffix(ELLIPSIS))


def test_an_async_view_shows_its_logged_in_user(
    configured: None, django_user_model: Any, admin: Client
) -> None:
    client = AsyncClient()
    client.force_login(django_user_model.objects.create_user("bob", "bob@example.com"))

    with holding(lambda: asyncio.run(client.get("/async-held/scan/"))):
        [holder] = status_holders("printers")
        cell = request_cell(admin)

    assert holder["request"] == {"method": "GET", "path": "/async-held/scan/", "user": "bob"}
    assert cell == "GET /async-held/scan/ · bob"


def test_a_plain_lock_held_by_a_request_shows_its_process_and_its_request(
    configured: None, alice: Client, admin: Client
) -> None:
    with holding(lambda: alice.get("/lock/")):
        [holder] = status_holders("imports")
        row = holder_row(admin, "imports")

    assert holder["request"] == {"method": "GET", "path": "/lock/", "user": "alice"}
    # (a lock's table has no holder column: what is held is the holder, by its process)
    assert row[:2] == [holder["holder"].split(" ")[0], "GET /lock/ · alice"]


def test_a_hold_by_identity_or_named_in_code_has_no_request(
    configured: None, alice: Client, admin: Client
) -> None:
    get_pool("printers").acquire(holder="worker-1")

    with holding(lambda: alice.get("/identity/", {"user": "bob"})):
        [shared] = status_holders("reports")
        identity_cell = request_cell(admin, "reports")
    [named] = status_holders("printers")

    assert (shared["holder"], shared["request"]) == ("user-bob", None)
    assert (named["holder"], named["request"]) == ("worker-1", None)
    assert identity_cell == NA
    assert request_cell(admin) == NA


def test_without_the_authentication_middleware_the_user_is_unknown(
    configured: None, settings: Any
) -> None:
    settings.MIDDLEWARE = [m for m in settings.MIDDLEWARE if ".auth." not in m]

    with holding(lambda: Client().get("/held/x/")):
        [holder] = status_holders("printers")

    assert holder["request"] == {"method": "GET", "path": "/held/x/", "user": None}


def test_pool_status_names_a_request_holder_by_its_process_and_its_request_once(
    configured: None,
) -> None:
    pool_holder = request_holder("web-1:11:0123456789ab", "GET", "/print/", None)
    identity = request_holder("web-2:22:0123456789ab", "POST", "/export/", "alice")
    lock_holder = request_holder("web-3:33:0123456789ab", "DELETE", "/import/", None)
    assert get_pool("printers").acquire(holder=pool_holder) is not None
    assert get_semaphore("reports").acquire(identity)
    assert get_lock("imports").for_holder(lock_holder).acquire(blocking=False)
    out = io.StringIO()

    call_command("pool_status", stdout=out)

    lines = out.getvalue().splitlines()
    assert sorted(line.split("  fence ")[0] for line in lines if "held by" in line) == [
        "  held by web-2:22:0123456789ab (POST /export/, user alice)",  # the identity: once
        "  held by web-3:33:0123456789ab (DELETE /import/, anonymous)",  # the lock: once
        "  p1  held by web-1:11:0123456789ab (GET /print/, anonymous)",
    ]
    assert not [line for line in lines if line.endswith(" -") or " - " in line]


# ---------------------------------------------------------------- the format


PROCESS = "web-3:4242:9f2c61d0a1b3"


@pytest.mark.parametrize(
    ("method", "path", "user"),
    [
        ("GET", "/print/", "alice"),
        ("PROPFIND", "/a b/c%20d/é/", "jean pierre"),
        ("GET", "/-/", "-"),  # a user named "-" is not the anonymous user
        ("DELETE", "/", None),
        ("GET", "/tab\there/\x00/", "o'neil+tag@example.com"),
        ("GET", "/" + "😀" * 100, "u" * 150),
    ],
)
def test_a_request_holder_reads_back_as_it_was_made(
    method: str, path: str, user: str | None
) -> None:
    holder = request_holder(PROCESS, method, path, user)

    assert len(holder) <= 200
    assert holder.startswith(f"{PROCESS} ") and holder.count(" ") == 3
    assert all(ord(char) >= 32 for char in holder)  # a valid holder: no control character
    read = request_of(holder)
    assert read is not None
    assert read["method"] == method
    if len(path) < 40:
        assert (read["path"], read["user"]) == (path, user)
    else:  # shortened, never inside a character
        assert read["path"].endswith(ELLIPSIS) and path.startswith(read["path"][:-1])
        assert read["user"] is not None and user is not None
        assert user.startswith(read["user"].removesuffix(ELLIPSIS))


def test_a_long_host_name_still_leaves_room_for_the_path() -> None:
    holder = request_holder("h" * 300 + ":4242:9f2c61d0a1b3", "GET", "/" + "p" * 300, "u" * 300)

    assert len(holder) <= 200
    read = request_of(holder)
    assert read is not None and read["path"].startswith("/pppppppppppppppppppp")


@pytest.mark.parametrize(
    ("user", "words"),
    [
        (None, f"{PROCESS} (GET /a b/, anonymous)"),
        ("alice", f"{PROCESS} (GET /a b/, user alice)"),
        ("anonymous", f"{PROCESS} (GET /a b/, user anonymous)"),  # a user of that name
        ("-", f"{PROCESS} (GET /a b/, user -)"),  # a user named "-" is not anonymous
    ],
)
def test_a_request_holder_is_said_once_by_its_process_and_its_request(
    user: str | None, words: str
) -> None:
    holder = request_holder(PROCESS, "GET", "/a b/", user)

    assert process_of(holder) == PROCESS
    assert holder_words(holder) == words


@pytest.mark.parametrize("holder", ["worker-1", "web-3:4242:9f2c61d0a1b3 task app.send"])
def test_any_other_holder_is_said_as_it_is(holder: str) -> None:
    assert process_of(holder) is None
    assert holder_words(holder) == holder


@pytest.mark.parametrize(
    "holder",
    [
        "worker-1",
        "user-42",
        "cron@batch-1",
        "web-3:4242:9f2c61d0a1b3 GET /print/",  # the name of an older version
        "web-3:4242:9f2c61d0a1b3",
        "an identity with spaces in it",
        "web-3:4242:9f2c61d0a1b3 GET print/ alice",  # a path starts with "/"
    ],
)
def test_any_other_holder_reads_back_as_none(holder: str) -> None:
    assert request_of(holder) is None
