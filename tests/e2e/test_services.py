"""The three services as subprocesses against real RabbitMQ and Redis, driven by generated stubs."""

from __future__ import annotations

import asyncio
import collections
import signal

import grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from batchline import codec
from batchline.lifecycle import wait_until_serving
from batchline.redis_store import RedisJobStore
from batchline.settings import StoreSettings
from batchline.v1 import inference_pb2, inference_pb2_grpc, stream_pb2, stream_pb2_grpc
from tests.e2e.conftest import Service
from tests.helpers import count_done_events, wait_for


def start_stack(services: list[Service], env: dict[str, str], batcher_env: dict[str, str]) -> tuple[str, str]:
    ingress = Service("ingress", env)
    stream = Service("stream", env)
    services += [ingress, stream]
    services.append(Service("batcher", {**env, **batcher_env}))
    targets = f"127.0.0.1:{ingress.port()}", f"127.0.0.1:{stream.port()}"
    for target in targets:
        wait_until_serving(target)
    services[-1].wait_log("consuming")
    return targets


def test_three_services_serve_jobs_end_to_end(services: list[Service], service_env: dict[str, str]) -> None:
    ingress_target, stream_target = start_stack(services, service_env, {"WORKER_NAME": "e2e-batcher"})
    with grpc.insecure_channel(ingress_target) as ic, grpc.insecure_channel(stream_target) as sc:
        inference = inference_pb2_grpc.InferenceServiceStub(ic)
        watch = stream_pb2_grpc.JobStreamServiceStub(sc)
        answers = inference.SubmitBatch(
            inference_pb2.SubmitBatchRequest(texts=[f"a great film, part {i}" for i in range(20)])
        ).jobs
        single = inference.Submit(inference_pb2.SubmitRequest(text="terrible service"))
        for answer in [*answers, single]:
            events = [
                e.job
                for e in watch.WatchJob(stream_pb2.WatchJobRequest(job_id=answer.job_id), timeout=30)
                if e.HasField("job")
            ]
            assert events[-1].status == codec.DONE
            assert events[-1].trace.worker == "e2e-batcher"
        assert (
            inference.GetJob(inference_pb2.GetJobRequest(job_id=single.job_id)).job.result.label == "NEGATIVE"
        )
        stats = inference.GetStats(inference_pb2.GetStatsRequest())
        assert stats.jobs == 21 and stats.workers[0].worker == "e2e-batcher"

        # Reflection: a client that knows only the address can list the services.
        reflect = reflection_pb2_grpc.ServerReflectionStub(ic)
        [reply] = reflect.ServerReflectionInfo(
            iter([reflection_pb2.ServerReflectionRequest(list_services="")])
        )
        names = {s.name for s in reply.list_services_response.service}
        assert {"batchline.v1.InferenceService", "grpc.health.v1.Health"} <= names

    for service in services:
        assert service.stop() == 0, f"{service.module} did not drain cleanly:\n" + "\n".join(
            service.lines[-20:]
        )


def test_a_batcher_killed_mid_batch_loses_no_job(
    services: list[Service], service_env: dict[str, str], store_settings: StoreSettings
) -> None:
    # A slow model so the kill lands while a batch is in its forward pass.
    ingress_target, _ = start_stack(services, service_env, {"SIM_FIXED_MS": "400", "WORKER_NAME": "doomed"})
    doomed = services[-1]
    done_events: collections.Counter[str] = collections.Counter()
    ids: list[str] = []

    async def count_and_recover() -> None:
        store = RedisJobStore(store_settings)
        listener = await count_done_events(store, done_events)
        async with grpc.aio.insecure_channel(ingress_target) as channel:
            inference = inference_pb2_grpc.InferenceServiceStub(channel)
            request = inference_pb2.SubmitBatchRequest(texts=[f"job {i} was good" for i in range(100)])
            ids.extend(a.job_id for a in (await inference.SubmitBatch(request)).jobs)

        async def some_running() -> bool:
            return codec.RUNNING in await store.statuses(ids)

        await wait_for(some_running, 30, what="a batch in progress")
        doomed.kill(signal.SIGKILL)
        doomed.process.wait(10)
        stuck = [i for i, s in zip(ids, await store.statuses(ids), strict=True) if s == codec.RUNNING]
        assert stuck, "the kill should have interrupted a batch"

        services.append(Service("batcher", {**service_env, "SIM_FIXED_MS": "2", "WORKER_NAME": "rescuer"}))

        async def all_done() -> bool:
            return all(s == codec.DONE for s in await store.statuses(ids))

        await wait_for(all_done, 60, what="every job DONE after a new batcher started")
        await asyncio.sleep(0.5)  # a duplicate DONE would have been announced by now
        listener.cancel()
        for job_id in stuck:
            job = await store.get(job_id)
            assert job is not None
            assert job.trace.worker == "rescuer" and job.trace.attempt >= 2
        await store.close()

    asyncio.run(count_and_recover())
    assert len(ids) == 100
    assert all(done_events[i] == 1 for i in ids), "every job is announced DONE exactly once"
