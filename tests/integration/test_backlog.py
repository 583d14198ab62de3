"""Queue position, ETA and the computed retry delay, on real RabbitMQ and Redis."""

from __future__ import annotations

import asyncio
import time
from typing import Any, cast

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_status import rpc_status
from prometheus_client import REGISTRY

from batchline import codec
from batchline.v1 import inference_pb2
from ingress.backlog import MAX_RETRY_S
from tests.helpers import RecordingModel, wait_for
from tests.integration.conftest import MakePipeline

STEP_S = 0.15  # one job per forward pass, this long each


async def test_a_queued_job_knows_its_place_and_when_it_will_start(make_pipeline: MakePipeline) -> None:
    pipeline = await make_pipeline(
        batcher=False,
        model=RecordingModel(fixed_ms=STEP_S * 1000),
        batch={"max_batch_size": 1, "prefetch": 4},
    )
    ids = [
        (await pipeline.inference.Submit(inference_pb2.SubmitRequest(text=f"job {i}"))).job_id
        for i in range(30)
    ]
    batch = await pipeline.inference.SubmitBatch(inference_pb2.SubmitBatchRequest(texts=["x", "y"]))
    ids += [j.job_id for j in batch.jobs]

    async def place(job_id: str) -> inference_pb2.GetJobResponse:
        return await pipeline.inference.GetJob(inference_pb2.GetJobRequest(job_id=job_id))

    assert [(await place(i)).queue_position for i in ids] == list(range(1, 33))
    assert not (await place(ids[5])).HasField("eta")  # nothing has drained yet: no rate to go by
    await pipeline.inference.CancelJob(inference_pb2.CancelJobRequest(job_id=ids[0]))
    assert (await place(ids[0])).queue_position == 0  # not queued any more
    assert (await place(ids[-1])).queue_position == 31  # one fewer ahead of it

    await pipeline.start_batcher()
    started = time.monotonic()
    await wait_for(lambda: len(pipeline.model.computed) >= 10, 30, what="ten jobs computed")
    await asyncio.sleep(max(0.0, 2.0 - (time.monotonic() - started)))  # a rate over 2 s or more
    last = await place(ids[-1])
    assert last.job.status == codec.QUEUED and last.HasField("eta")
    expected_s = last.queue_position * STEP_S  # the model's own pace
    eta_s = last.eta.ToNanoseconds() / 1e9
    assert 0.5 * expected_s < eta_s < 2.5 * expected_s, (last.queue_position, eta_s)
    done = await pipeline.wait_status(ids[-1], codec.DONE, timeout_s=30)
    assert not (await place(done.job_id)).HasField("eta")


async def test_a_full_queue_that_does_not_drain_asks_for_the_longest_wait(
    make_pipeline: MakePipeline,
) -> None:
    pipeline = await make_pipeline(batcher=False, broker={"max_length": 5})
    for i in range(5):
        await pipeline.inference.Submit(inference_pb2.SubmitRequest(text=f"fits {i}"))
    await asyncio.sleep(1.2)  # two samples of the drain counter: nothing left the queue
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await pipeline.inference.Submit(inference_pb2.SubmitRequest(text="one too many"))
    assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    status = rpc_status.from_call(refused.value)  # type: ignore[arg-type]
    assert status is not None
    retry = error_details_pb2.RetryInfo()
    assert status.details[0].Unpack(retry)
    assert retry.retry_delay.ToNanoseconds() / 1e9 == MAX_RETRY_S
    trailers = dict(cast(Any, refused.value.trailing_metadata()))  # aio Metadata: (key, value) pairs
    assert trailers["retry-after"] == str(int(MAX_RETRY_S))


async def test_the_queue_gauges_show_the_oldest_waiting_job(make_pipeline: MakePipeline) -> None:
    def gauge(name: str) -> float:
        return REGISTRY.get_sample_value(name) or 0.0

    pipeline = await make_pipeline(batcher=False)
    for i in range(3):
        await pipeline.inference.Submit(inference_pb2.SubmitRequest(text=f"waiting {i}"))
    await asyncio.sleep(1.0)
    # The ingress samples them every 5 s.
    await wait_for(lambda: gauge("batchline_queue_depth") == 3, 8, what="the queue depth sampled")
    assert gauge("batchline_queue_oldest_age_seconds") >= 1.0
    assert gauge("batchline_queue_drain_seconds") == -1.0  # nothing has drained: no rate to go by
    await pipeline.start_batcher()
    await wait_for(lambda: gauge("batchline_queue_oldest_age_seconds") == 0.0, 8, what="the queue emptied")
