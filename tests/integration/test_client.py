"""The Python client against the real services (ingress and stream on RabbitMQ and Redis)."""

from __future__ import annotations

import asyncio
import time

import grpc
import pytest

from batchline import codec
from batchline_client import AsyncClient, Client, RpcError
from tests.integration.conftest import MakePipeline, Pipeline


def target(pipeline: Pipeline) -> str:
    return f"127.0.0.1:{pipeline.ports['ingress']}"


def stream(pipeline: Pipeline) -> str:
    return f"127.0.0.1:{pipeline.ports['stream']}"


async def test_infer_submits_and_waits_for_the_result(make_pipeline: MakePipeline) -> None:
    pipeline = await make_pipeline()
    async with AsyncClient(target(pipeline), stream_target=stream(pipeline)) as client:
        job = await client.infer("I loved it", priority=3)
        assert job.status == codec.DONE and job.result.label and job.priority == 3
        assert (await client.get(job.job_id)) == job
        states = [j.status async for j in client.watch(job.job_id)]
        assert states == [codec.DONE]  # a finished job: its state, then the end
        accepted = await client.submit_batch(["one", "two"])
        assert len({a.job_id for a in accepted}) == 2
        stats = await client.stats()
        assert stats.jobs >= 1


async def test_errors_carry_the_code_and_the_field(make_pipeline: MakePipeline) -> None:
    pipeline = await make_pipeline(batcher=False)
    async with AsyncClient(target(pipeline), stream_target=stream(pipeline)) as client:
        with pytest.raises(RpcError) as invalid:
            await client.submit("x" * 2001)
        assert invalid.value.code == grpc.StatusCode.INVALID_ARGUMENT
        assert [field for field, _ in invalid.value.violations] == ["text"]
        with pytest.raises(RpcError) as missing:
            await client.get("00000000-0000-4000-8000-000000000000")
        assert missing.value.code == grpc.StatusCode.NOT_FOUND
        job = await client.submit("to be cancelled")
        assert (await client.cancel(job.job_id)).status == codec.CANCELLED


async def test_a_full_queue_is_retried_after_the_servers_delay(make_pipeline: MakePipeline) -> None:
    pipeline = await make_pipeline(batcher=False, broker={"max_length": 1})
    async with AsyncClient(target(pipeline), stream_target=stream(pipeline), retry_budget_s=0.0) as impatient:
        await impatient.submit("fills the queue")
        with pytest.raises(RpcError) as refused:
            await impatient.submit("refused at once: no budget to retry")
        assert refused.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert refused.value.retry_delay_s is not None

    async with AsyncClient(target(pipeline), stream_target=stream(pipeline), retry_budget_s=20.0) as patient:
        started = time.monotonic()
        waiting = asyncio.create_task(patient.submit("accepted once the queue drains"))
        await asyncio.sleep(0.3)
        assert not waiting.done()  # still retrying
        await pipeline.start_batcher()
        accepted = await waiting
        assert accepted.job_id and time.monotonic() - started >= 0.3
        await pipeline.wait_status(accepted.job_id, codec.DONE)


async def test_the_blocking_client_does_the_same(make_pipeline: MakePipeline) -> None:
    pipeline = await make_pipeline()

    def use() -> tuple[int, str, list[tuple[str, str]]]:
        with Client(target(pipeline), stream_target=stream(pipeline)) as client:
            job = client.infer("terrible service", job_timeout_s=30)
            try:
                client.submit("")
            except RpcError as exc:
                return job.status, job.result.label, exc.violations
        raise AssertionError("empty text was accepted")

    status, label, violations = await asyncio.to_thread(use)  # the services share this loop
    assert status == codec.DONE and label
    assert [field for field, _ in violations] == ["text"]
