"""What an admin page costs as a pool grows: paged reads against reading it all.

For pools of 1,000, 10,000 and 100,000 resources (a tenth of them held), in the
same run, through Django's test ``Client`` logged in as a superuser:

* overview      - the dashboard (one counts-only snapshot per primitive);
* detail p1     - the pool's page: one page (50 rows) of each table;
* detail last   - its last page of available resources (the deepest offset);
* full read     - no page at all: ``pool.snapshot()`` with no limit, the whole
                  pool in one script (what a dashboard without pagination does,
                  and the baseline here).

Reported: the median milliseconds over ``--repeat`` runs and the Redis commands
(round trips) each sends.

    python -m benchmarks admin [--quick] [--repeat 15] [--server 6.2|7|PATH|URL]

``--quick``: pools of 1,000 and 10,000 resources, 2 runs each.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

from benchmarks import servers
from benchmarks.results import choose, heading, ints, say

NAME = "admin"
HELP = "admin pages (paged) vs reading a whole pool, by pool size"

urlpatterns: list[Any] = []  # the admin's, once Django is set up
SIZES = (1_000, 10_000, 100_000)


def configure(url: str, sizes: list[int]) -> None:
    import django
    from django.conf import settings
    from django.urls import path

    settings.configure(
        DEBUG=False,
        SECRET_KEY="bench",
        ALLOWED_HOSTS=["testserver"],
        ROOT_URLCONF=__name__,
        INSTALLED_APPS=[
            "django.contrib.admin",
            "django.contrib.auth",
            "django.contrib.contenttypes",
            "django.contrib.sessions",
            "django.contrib.messages",
            "django_redis_pool",
        ],
        MIDDLEWARE=[
            "django.contrib.sessions.middleware.SessionMiddleware",
            "django.contrib.auth.middleware.AuthenticationMiddleware",
            "django.contrib.messages.middleware.MessageMiddleware",
        ],
        TEMPLATES=[
            {
                "BACKEND": "django.template.backends.django.DjangoTemplates",
                "APP_DIRS": True,
                "OPTIONS": {
                    "context_processors": [
                        "django.template.context_processors.request",
                        "django.contrib.auth.context_processors.auth",
                        "django.contrib.messages.context_processors.messages",
                    ]
                },
            }
        ],
        DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}},
        STATIC_URL="/static/",
        USE_TZ=True,
        DJANGO_REDIS_POOL={
            "CONNECTION": {"URL": url},
            "POOLS": {f"pool-{n}": {"LEASE_TIMEOUT": 600} for n in sizes},
        },
    )
    django.setup()
    from django.contrib import admin

    urlpatterns.append(path("admin/", admin.site.urls))


def fill(pool: Any, n: int) -> None:
    """``n`` resources, a tenth of them held."""
    for i in range(n):
        pool.associate(f"r{i:06d}")
    for _ in range(n // 10):
        pool.acquire(holder="bench")


def count_commands(client: Any) -> list[int]:
    """Count the commands ``client`` sends (round trips; a script is one)."""
    sent = [0]
    execute = client.execute_command

    def counted(*args: Any, **options: Any) -> Any:
        sent[0] += 1
        return execute(*args, **options)

    client.execute_command = counted
    return sent


def measure(sent: list[int], run: Callable[[], Any], repeat: int) -> tuple[float, int]:
    """(median ms, Redis commands of one run after a warm-up run)."""
    run()  # loads the scripts, fills caches
    before = sent[0]
    run()
    cost = sent[0] - before
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times), cost


def add_arguments(parser: argparse.ArgumentParser) -> None:
    servers.add_option(parser, multiple=False)
    parser.add_argument("--repeat", type=int, help="runs per case (default 15; --quick: 2)")
    parser.add_argument("--sizes", help="pool sizes, comma-separated (default 1000,10000,100000)")


def run(args: argparse.Namespace) -> dict[str, Any] | None:
    s = choose(
        args,
        {"repeat": 15, "sizes": ",".join(map(str, SIZES))},
        {"repeat": 2, "sizes": "1000,10000"},
    )
    sizes = ints(s["sizes"])
    rows: dict[str, dict[str, list[float]]] = {}
    with servers.redis_server(args.server) as srv:
        configure(srv.url, sizes)
        from django.contrib.auth.models import User
        from django.core.management import call_command
        from django.test import Client

        from django_redis_pool import get_pool, registry
        from django_redis_pool.dashboard.tables import PAGE_SIZE

        call_command("migrate", verbosity=0)
        browser = Client()
        browser.force_login(User.objects.create_superuser("bench", "b@example.com", "x"))
        for n in sizes:
            say(f"filling pool-{n}")
            pool = get_pool(f"pool-{n}")
            fill(pool, n)
        sent = count_commands(registry.get_connection())
        for n in sizes:
            say(f"measuring pool-{n}")
            pool = get_pool(f"pool-{n}")
            base = f"/admin/django_redis_pool/dashboard/pool-{n}/"
            last = -(-(n - n // 10) // PAGE_SIZE)

            def get(url: str) -> None:
                response = browser.get(url)
                assert response.status_code == 200, (url, response.status_code)

            cases = {
                "overview": lambda: get("/admin/django_redis_pool/dashboard/"),
                "detail p1": lambda base=base: get(base),
                "detail last": lambda base=base, last=last: get(f"{base}?available_page={last}"),
                "full read": lambda pool=pool: pool.snapshot(),
            }
            for case, run in cases.items():
                ms, cost = measure(sent, run, s["repeat"])
                rows.setdefault(case, {})[str(n)] = [ms, cost]
    return {
        "settings": {**s, "server": args.server},
        # case -> {pool size: [median ms, Redis commands of one run]}
        "results": {"cases": rows},
    }


def render(doc: dict[str, Any]) -> str:
    sizes = ints(doc["settings"]["sizes"])
    lines = [heading(doc), "", "```", f"{'case':<14}" + "".join(f"{n:>22,}" for n in sizes)]
    for case, by_size in doc["results"]["cases"].items():
        cells = [f"{by_size[str(n)][0]:>10.2f} ms {by_size[str(n)][1]:>3} cmd" for n in sizes]
        lines.append(f"{case:<14}" + "".join(f"{cell:>22}" for cell in cells))
    lines.append("```")
    return "\n".join(lines)
