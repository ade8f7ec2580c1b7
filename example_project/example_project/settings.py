"""Settings of the example project.

``python3 scripts/dev.py example`` (from the repository root) runs it all: an
embedded Redis unless ``REDIS_URL`` is set, ``migrate``, ``pool_sync``, the demo
superuser, a ``pool_worker`` and ``runserver``. By hand: Redis is taken from
``REDIS_URL`` (default ``redis://127.0.0.1:6379/0``); run ``python manage.py
migrate`` and ``python manage.py pool_sync`` once, then ``python manage.py
runserver`` (and ``python manage.py pool_worker`` for the task demo). The SQLite
database is ``db.sqlite3`` beside ``manage.py``, or ``$EXAMPLE_DB``.
"""

import os
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent

SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "insecure-example-key-do-not-use-in-production")
DEBUG = True
ALLOWED_HOSTS = ["127.0.0.1", "localhost", "[::1]"]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_redis_pool",
    "example_project",  # for its tasks.py
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Holds the resource of the first matching DJANGO_REDIS_POOL["MIDDLEWARE"] rule.
    "django_redis_pool.middleware.ResourceMiddleware",
]

ROOT_URLCONF = "example_project.urls"
WSGI_APPLICATION = "example_project.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": os.environ.get("EXAMPLE_DB") or BASE_DIR / "db.sqlite3",
    }
}

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
# Times (the admin's, the printers page's) in UTC; Django's default TIME_ZONE
# is "America/Chicago".
TIME_ZONE = "UTC"
USE_TZ = True
STATIC_URL = "static/"

DJANGO_REDIS_POOL = {
    "CONNECTION": {"URL": os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")},
    "POOLS": {
        "printers": {
            "RESOURCES": ["printer-1", "printer-2", "printer-3"],
            "LEASE_TIMEOUT": 30,
        },
    },
    # At most 2 reports are built at once; each holder's slot expires after 60 s.
    "SEMAPHORES": {
        "reports": {"MAX_SIZE": 2, "LEASE_TIMEOUT": 60},
        # At most 6 HTTP clients alive across every process of the site.
        "http-clients-everywhere": {"MAX_SIZE": 6, "LEASE_TIMEOUT": 30},
    },
    # One import at a time; the lease renews itself while the import runs.
    "LOCKS": {"import": {"LEASE_TIMEOUT": 10, "AUTO_RENEW": True, "TIMEOUT": 0}},
    # Outbound proxies, one per fetch, the fast one handed out first; a visitor
    # is bound to the proxy it got last (soft binding, for an hour) and gets it
    # again while it is free: fetch as ann and bob at once on /fetch/.
    "ALLOCATORS": {
        "proxies": {"KEYS": {"proxy-fast": 10, "proxy-a": 0, "proxy-b": 0}, "LEASE_TIMEOUT": 30},
    },
    # Tasks run by `manage.py pool_worker` (example_project/tasks.py); /task/'s
    # form starts one, and each result is kept 10 minutes.
    "QUEUES": {"default": {"RESULT_TTL": 600}},
    # Up to 3 HTTP clients per process, kept alive between requests (/client/).
    "OBJECT_POOLS": {
        "http-clients": {
            "FACTORY": "example_project.clients.connect",
            "MAX": 3,
            "GLOBAL_LIMIT": "http-clients-everywhere",
        },
    },
    # Searches per visitor (its user, else its address), /search/: 5 a minute
    # (a spent search comes back every 12 s), with a burst of 2 (a visitor who has
    # not searched for 24 s has 2): 2 searches in quick succession pass, the third
    # gets the 429 page (Retry-After: 12 s), and then one passes every 12 s.
    "RATE_LIMITS": {"search": {"RATE": "5/m", "BURST": 2, "KEY": "user"}},
    # Every request under /report/ holds a slot of "reports" (waiting up to 2 s).
    "MIDDLEWARE": [{"PATH": r"^/report/", "RESOURCE": "reports", "TIMEOUT": 2}],
    # Renders the 503 (429 for a rate limit, with Retry-After) when nothing is
    # granted or Redis is down.
    "UNAVAILABLE_VIEW": "example_project.views.busy",
}
