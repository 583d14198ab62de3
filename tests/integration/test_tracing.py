"""One trace per job: Submit at the ingress, the publish to RabbitMQ, the forward pass in the
batcher and the stream's delivery, on real RabbitMQ and Redis, caught by an in-memory exporter."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from batchline import codec, tracing
from batchline.v1 import inference_pb2
from tests.helpers import wait_for
from tests.integration.conftest import MakePipeline

CALLER_TRACE, CALLER_SPAN = "ab" * 16, "cd" * 8


@pytest.fixture(scope="module")
def exported() -> Iterator[InMemorySpanExporter]:
    """The process's tracer provider (it can be set once), exporting to memory."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.install(provider)
    yield exporter
    provider.shutdown()


def one(spans: list[ReadableSpan], name: str) -> ReadableSpan:
    [span] = [s for s in spans if s.name == name]
    return span


async def test_a_job_is_one_trace_from_the_callers_submit_to_its_watchers(
    make_pipeline: MakePipeline, exported: InMemorySpanExporter
) -> None:
    exported.clear()
    pipeline = await make_pipeline()
    caller = (("traceparent", f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"),)
    accepted = await pipeline.inference.Submit(inference_pb2.SubmitRequest(text="follow me"), metadata=caller)
    states = await pipeline.watch(accepted.job_id)
    assert states[-1].status == codec.DONE

    def in_trace() -> list[ReadableSpan]:
        trace_id = int(CALLER_TRACE, 16)
        return [
            s
            for s in exported.get_finished_spans()
            if s.context is not None and s.context.trace_id == trace_id
        ]

    await wait_for(
        lambda: len([s for s in in_trace() if s.name == "deliver"]) >= 2, 10, what="both delivered"
    )
    spans = in_trace()
    submit, publish, inference = one(spans, "Submit"), one(spans, "publish"), one(spans, "inference")
    assert submit.parent is not None and submit.parent.span_id == int(
        CALLER_SPAN, 16
    )  # the caller's trace goes on
    assert publish.parent is not None and publish.parent.span_id == submit.context.span_id
    assert (
        inference.parent is not None and inference.parent.span_id == publish.context.span_id
    )  # across RabbitMQ
    for deliver in (s for s in spans if s.name == "deliver"):  # across Redis pub/sub to the stream
        assert deliver.parent is not None and deliver.parent.span_id == inference.context.span_id
        assert deliver.attributes and deliver.attributes["batchline.job_id"] == accepted.job_id
    assert inference.attributes and inference.attributes["batchline.status"] == "DONE"
    assert inference.attributes["batchline.batch_size"] == 1
    # The record names its trace, so a client can find it.
    assert states[-1].trace.traceparent.split("-")[1] == CALLER_TRACE


async def test_submits_published_together_each_keep_their_own_trace(
    make_pipeline: MakePipeline, exported: InMemorySpanExporter
) -> None:
    exported.clear()
    pipeline = await make_pipeline(batcher=False)
    traces = [f"{i:02x}" * 16 for i in range(1, 9)]
    calls = [
        pipeline.inference.Submit(
            inference_pb2.SubmitRequest(text=f"caller {i}"),
            metadata=(("traceparent", f"00-{trace}-{CALLER_SPAN}-01"),),
        )
        for i, trace in enumerate(traces)
    ]
    await asyncio.gather(*calls)
    spans = exported.get_finished_spans()
    for trace in traces:  # each caller's publish span sits under that caller's own Submit span
        mine = [s for s in spans if s.context is not None and s.context.trace_id == int(trace, 16)]
        submit, publish = one(mine, "Submit"), one(mine, "publish")
        assert publish.parent is not None and publish.parent.span_id == submit.context.span_id
