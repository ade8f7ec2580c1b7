"""One OpenTelemetry span per hold (``django_redis_pool.tracing``): a request's
(``@with_resource``, the middleware) and ``holding()``'s, a child of the
current span, with the primitive's name and kind, the wait and the outcome;
an error status when refused or failed; nothing at all without a provider."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest
from django.http import HttpResponse
from django.test import RequestFactory
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)
from opentelemetry.trace import StatusCode

from django_redis_pool import ResourceUnavailable, holding, tracing
from django_redis_pool.guard import Guard
from tests.support.stoppable_servers import closed_port


@pytest.fixture
def configured(settings: Any, redis_url: str) -> None:
    settings.DJANGO_REDIS_POOL = {
        "CONNECTION": {"URL": redis_url},
        "POOLS": {"printers": {"RESOURCES": ["p1"], "LEASE_TIMEOUT": 30}},
        "SEMAPHORES": {"reports": {"MAX_SIZE": 1, "MAX_WAITING": 0}},
        "RATE_LIMITS": {"api": {"RATE": "1/m"}},
    }


@pytest.fixture
def exporter(monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemorySpanExporter]:
    """A global SDK tracer provider exporting into memory, for this test only
    (the API lets a process set its provider once: the test swaps it back)."""
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", provider)
    yield memory
    provider.shutdown()


def holds(exporter: InMemorySpanExporter) -> list[ReadableSpan]:
    return [span for span in exporter.get_finished_spans() if span.name.startswith("django_")]


def test_a_hold_is_a_child_span_of_the_current_one(
    configured: None, exporter: InMemorySpanExporter
) -> None:
    tracer = trace.get_tracer("tests")
    with tracer.start_as_current_span("celery.task") as parent, holding("printers", timeout=0):
        pass
    (span,) = holds(exporter)
    assert span.name == "django_redis_pool.hold printers"
    assert span.parent is not None
    assert span.parent.span_id == parent.get_span_context().span_id
    assert span.context.trace_id == parent.get_span_context().trace_id
    attributes = dict(span.attributes or {})
    assert attributes["django_redis_pool.primitive.name"] == "printers"
    assert attributes["django_redis_pool.primitive.kind"] == "pool"
    assert attributes["django_redis_pool.hold.outcome"] == "held"
    assert attributes["django_redis_pool.hold.outside_request"] is True
    assert isinstance(attributes["django_redis_pool.hold.fence"], int)
    wait = attributes["django_redis_pool.wait.seconds"]
    assert isinstance(wait, float) and 0 <= wait <= (span.end_time - span.start_time) / 1e9
    assert span.status.status_code is StatusCode.UNSET
    assert span.end_time is not None and span.start_time is not None


def test_a_refused_hold_has_an_error_status(
    configured: None, exporter: InMemorySpanExporter
) -> None:
    with holding("printers", timeout=0):
        with pytest.raises(ResourceUnavailable), holding("printers", timeout=0.1):
            pass
        exporter.clear()
        with pytest.raises(ResourceUnavailable), holding("printers", timeout=0.1):
            pass
    (refused,) = holds(exporter)[:1]
    attributes = dict(refused.attributes or {})
    assert attributes["django_redis_pool.hold.outcome"] == "refused"
    assert attributes["django_redis_pool.hold.reason"] == "timeout"
    assert attributes["django_redis_pool.wait.seconds"] >= 0.1
    assert refused.status.status_code is StatusCode.ERROR
    assert [event.name for event in refused.events] == ["exception"]

    exporter.clear()
    full_queue = holding("reports", timeout=5)
    with holding("reports", timeout=0), pytest.raises(ResourceUnavailable), full_queue:
        pass
    full = holds(exporter)[1]  # (after the first holder's)
    assert full.attributes["django_redis_pool.hold.outcome"] == "full"  # type: ignore[index]
    assert full.status.status_code is StatusCode.ERROR

    exporter.clear()
    with holding("api"), pytest.raises(ResourceUnavailable), holding("api"):
        pass
    limited = holds(exporter)[1]
    assert limited.attributes["django_redis_pool.hold.outcome"] == "refused"  # type: ignore[index]
    assert limited.attributes["django_redis_pool.hold.reason"] == "limited"  # type: ignore[index]


def test_redis_unreachable_is_an_unavailable_span(
    settings: Any, exporter: InMemorySpanExporter
) -> None:
    settings.DJANGO_REDIS_POOL = {
        "CONNECTION": {"URL": f"redis://127.0.0.1:{closed_port()}/0"},
        "LOCKS": {"imports": {}},
    }
    with pytest.raises(ConnectionError), holding("imports", timeout=0):
        pass
    (span,) = holds(exporter)
    assert span.attributes["django_redis_pool.hold.outcome"] == "unavailable"  # type: ignore[index]
    assert span.status.status_code is StatusCode.ERROR


@pytest.mark.django_db  # (closing a response sends request_finished: Django closes old connections)
def test_a_request_hold_is_traced_sync_and_async(
    configured: None, exporter: InMemorySpanExporter
) -> None:
    guard = Guard("printers", timeout=0)
    response = guard.call(RequestFactory().get("/print/"), lambda request: HttpResponse(), (), {})
    response.close()

    async def view(request: Any) -> HttpResponse:
        return HttpResponse()

    async def main() -> None:
        response = await guard.acall(RequestFactory().get("/print/"), view, (), {})
        response.close()

    asyncio.run(main())
    spans = holds(exporter)
    assert [span.name for span in spans] == ["django_redis_pool.hold printers"] * 2
    for span in spans:
        assert span.attributes["django_redis_pool.hold.outcome"] == "held"  # type: ignore[index]
        assert "django_redis_pool.hold.outside_request" not in (span.attributes or {})


def test_without_a_provider_no_span_is_made(
    configured: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", None)  # the API's default: a proxy
    monkeypatch.delenv("OTEL_PYTHON_TRACER_PROVIDER", raising=False)
    made: list[Any] = []
    monkeypatch.setattr(trace.ProxyTracerProvider, "get_tracer", lambda *a, **k: made.append(a))
    with holding("printers", timeout=0):
        pass
    assert tracing.start("printers", time.monotonic()) is None
    assert made == [], "no tracer asked for, no span made"
    # a provider set later is used from the next hold on
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", provider)
    with holding("printers", timeout=0):
        pass
    assert len(holds(memory)) == 1


def test_without_the_api_no_span_is_made(
    configured: None, monkeypatch: pytest.MonkeyPatch, exporter: InMemorySpanExporter
) -> None:
    monkeypatch.setattr(tracing, "_trace", False)  # as when opentelemetry is not installed
    with holding("printers", timeout=0):
        pass
    assert holds(exporter) == []
