"""OpenTelemetry tracing, off unless OTEL_EXPORTER_OTLP_ENDPOINT is set.

One trace per job: the Submit call at the ingress (continuing a caller's `traceparent`), its
publish to RabbitMQ (W3C trace context in the message headers), its forward pass in a batcher,
and each stream's delivery of its states. Each record a batcher writes carries, in
`trace.traceparent`, the span that wrote it: the stream continues the trace from there, and a
client can look the job up in its tracing backend. With tracing off every call here is the
OpenTelemetry API's no-op, and records carry no traceparent. Off, the helpers here return at
once: Submit, the batch loop and the fan-out pay one type check, not the API's no-op machinery.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from contextlib import AbstractContextManager
from typing import Any

from opentelemetry import propagate, trace
from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanKind

TRACER = trace.get_tracer("batchline")


def configure(service: str, env: Mapping[str, str] = os.environ) -> bool:
    """Export spans over OTLP/gRPC (the standard OTEL_* variables) when an endpoint is set."""
    if not env.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
        return False
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    name = env.get("OTEL_SERVICE_NAME") or f"batchline-{service}"
    provider = TracerProvider(resource=Resource.create({"service.name": name}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))  # flushed at exit
    install(provider)
    return True


_installed = False


def install(provider: trace.TracerProvider) -> None:
    """Make `provider` the process's (once per process: OpenTelemetry's rule) and turn tracing on."""
    global _installed
    trace.set_tracer_provider(provider)
    _installed = True


def enabled() -> bool:
    """Whether a tracer provider is installed (by configure, or by a test through install)."""
    return _installed


def span(
    name: str,
    kind: SpanKind,
    parent: Mapping[str, object] | None = None,
    attributes: Mapping[str, str | int | float] | None = None,
) -> AbstractContextManager[Span | None]:
    """A current span named `name`, child of the context in `parent` (headers or metadata) or
    of the current span; nothing when tracing is off."""
    if not enabled():
        return contextlib.nullcontext()
    context = context_of(parent) if parent is not None else None
    return TRACER.start_as_current_span(name, context=context, kind=kind, attributes=attributes)


def start_span(
    name: str, kind: SpanKind, parent: Mapping[str, object], start_s: float, attributes: Mapping[str, str]
) -> Span | None:
    """A span that started at `start_s` (unix seconds), child of the context in `parent`; ended by
    its owner. None when tracing is off."""
    if not enabled():
        return None
    return TRACER.start_span(
        name, context=context_of(parent), kind=kind, start_time=int(start_s * 1e9), attributes=attributes
    )


TraceContext = Mapping[str, object]  # W3C trace context as headers or call metadata


def headers(span: Span | None = None) -> dict[str, Any]:
    """W3C trace context of `span` (default: the current one) as headers; empty when off."""
    if not enabled():
        return {}
    carrier: dict[str, Any] = {}
    propagate.inject(carrier, context=trace.set_span_in_context(span) if span is not None else None)
    return carrier


def traceparent(span: Span | None = None) -> str:
    return str(headers(span).get("traceparent", ""))


def context_of(carrier: Mapping[str, object] | None) -> Context:
    """The trace context in message headers or call metadata (a fresh one when there is none)."""
    return propagate.extract({k: str(v) for k, v in (carrier or {}).items() if isinstance(k, str)})
