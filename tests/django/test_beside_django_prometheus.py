"""Beside django-prometheus: ``ResourceMiddleware`` placed as the README says
(appended: after ``AuthenticationMiddleware``, and after
``PrometheusAfterMiddleware``, so that its refusals pass through it), a
rule's refusal is counted by django-prometheus's responses by status."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from prometheus_client import REGISTRY

pytestmark = pytest.mark.urls("tests.urlconfs.middleware_views")

#: A project's MIDDLEWARE with django-prometheus, as its docs say.
WITH_DJANGO_PROMETHEUS = [
    "django_prometheus.middleware.PrometheusBeforeMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django_prometheus.middleware.PrometheusAfterMiddleware",
]


def responses(status: int) -> float:
    value = REGISTRY.get_sample_value(
        "django_http_responses_total_by_status_total", {"status": str(status)}
    )
    return value or 0.0


def test_a_rules_refusal_is_counted_by_django_prometheus(settings: Any, redis_url: str) -> None:
    middleware = list(WITH_DJANGO_PROMETHEUS)
    middleware += ["django_redis_pool.middleware.ResourceMiddleware"]  # (the README's line)
    settings.MIDDLEWARE = middleware
    settings.DJANGO_REDIS_POOL = {
        "CONNECTION": {"URL": redis_url},
        "POOLS": {"printers": {"RESOURCES": ["p1"], "MAX_WAITING": 0}},
        "MIDDLEWARE": [{"PATH": r"^/", "RESOURCE": "printers", "TIMEOUT": 0}],
    }
    from django_redis_pool import get_pool

    pool = get_pool("printers")
    pool.associate("p1")
    held = pool.acquire(holder="busy")
    assert held is not None
    before = responses(503)
    assert Client().get("/plain/").status_code == 503
    assert responses(503) == before + 1, "the refusal passed through PrometheusAfterMiddleware"
    held.release()
    served = responses(200)
    assert Client().get("/plain/").status_code == 200
    assert responses(200) == served + 1
