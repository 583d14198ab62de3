"""Scale-out: three batchers compete for one queue and two stream processes serve the watchers.
Every job is computed once, by one of the batchers, and every watcher gets its job's end from
whichever stream process it reached."""

from __future__ import annotations

import asyncio
import collections

import grpc
import pytest

from batchline import codec
from batchline.lifecycle import wait_until_serving
from batchline.redis_store import RedisJobStore
from batchline.settings import StoreSettings
from batchline.v1 import inference_pb2, inference_pb2_grpc, stream_pb2, stream_pb2_grpc
from tests.e2e.conftest import Service
from tests.helpers import count_done_events

JOBS = 300


@pytest.mark.timeout(180)
def test_three_batchers_and_two_stream_processes_compute_each_job_once(
    services: list[Service], service_env: dict[str, str], store_settings: StoreSettings
) -> None:
    ingress = Service("ingress", service_env)
    streams = [Service("stream", service_env) for _ in range(2)]
    batchers = [
        Service("batcher", {**service_env, "WORKER_NAME": f"b{i}", "SIM_FIXED_MS": "15"}) for i in range(3)
    ]
    services += [ingress, *streams, *batchers]
    target = f"127.0.0.1:{ingress.port()}"
    stream_targets = [f"127.0.0.1:{s.port()}" for s in streams]
    for t in (target, *stream_targets):
        wait_until_serving(t)
    for batcher in batchers:
        batcher.wait_log("consuming")
    announced: collections.Counter[str] = collections.Counter()
    finals: dict[str, tuple[int, str, int, int]] = {}  # job -> (status, worker, attempt, stream index)

    async def scenario() -> None:
        store = RedisJobStore(store_settings)
        listener = await count_done_events(store, announced)
        async with grpc.aio.insecure_channel(target) as channel:
            stub = inference_pb2_grpc.InferenceServiceStub(channel)
            texts = [f"job {i}: the service was {'great' if i % 2 else 'slow'}" for i in range(JOBS)]
            ids = []
            for start in range(0, JOBS, 100):
                reply = await stub.SubmitBatch(
                    inference_pb2.SubmitBatchRequest(texts=texts[start : start + 100])
                )
                ids += [job.job_id for job in reply.jobs]
        watch_channels = [grpc.aio.insecure_channel(t) for t in stream_targets]

        async def watch(index: int, job_id: str) -> None:
            which = index % 2  # half the watchers on each stream process
            stub = stream_pb2_grpc.JobStreamServiceStub(watch_channels[which])
            last = None
            async for event in stub.WatchJob(stream_pb2.WatchJobRequest(job_id=job_id), timeout=60):
                if event.HasField("job"):
                    last = event.job
            assert last is not None
            finals[job_id] = (last.status, last.trace.worker, last.trace.attempt, which)

        await asyncio.gather(*(watch(i, job_id) for i, job_id in enumerate(ids)))
        for channel in watch_channels:
            await channel.close(None)
        await asyncio.sleep(0.5)  # a duplicate announcement would have arrived by now
        listener.cancel()
        await store.close()

    asyncio.run(scenario())
    assert len(finals) == JOBS
    assert all(status == codec.DONE for status, *_ in finals.values())
    assert all(attempt == 1 for _, _, attempt, _ in finals.values()), "no job was computed twice"
    assert sorted(set(announced.values())) == [1], "each job announced DONE once"
    by_worker = collections.Counter(worker for _, worker, _, _ in finals.values())
    assert set(by_worker) == {"b0", "b1", "b2"}, by_worker  # all three competed for the queue
    by_stream = collections.Counter(which for *_, which in finals.values())
    assert by_stream == {0: JOBS // 2, 1: JOBS // 2}
