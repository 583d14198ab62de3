"""Processes killed under load: batchers with SIGKILL mid-batch, again and again, and the
stream service restarted while clients watch (and resume after the last state they saw). Every
accepted job ends DONE exactly once."""

from __future__ import annotations

import asyncio
import collections
import signal

import grpc
import pytest

from batchline import codec
from batchline.lifecycle import wait_until_serving
from batchline.redis_store import RedisJobStore
from batchline.settings import StoreSettings
from batchline.v1 import inference_pb2, inference_pb2_grpc, job_pb2, stream_pb2, stream_pb2_grpc
from batchline_client import Client
from tests.e2e.conftest import Service
from tests.helpers import count_done_events, free_port, wait_for

pytestmark = pytest.mark.timeout(240)
KILLS = 4  # below the quorum queue's delivery limit (5): a job held by every killed batcher still runs


def start(services: list[Service], env: dict[str, str], module: str, **extra: str) -> Service:
    service = Service(module, {**env, **extra})
    services.append(service)
    return service


def test_batchers_killed_again_and_again_under_load_lose_nothing_and_announce_once(
    services: list[Service], service_env: dict[str, str], store_settings: StoreSettings
) -> None:
    ingress = start(services, service_env, "ingress")
    start(services, service_env, "stream")
    target = f"127.0.0.1:{ingress.port()}"
    wait_until_serving(target)
    slow = {"SIM_FIXED_MS": "60"}  # batches long enough for a kill to land inside one
    batchers = [start(services, service_env, "batcher", WORKER_NAME=f"b{i}", **slow) for i in range(2)]
    counts: collections.Counter[str] = collections.Counter()
    ids: list[str] = []
    kills = 0

    async def scenario() -> None:
        nonlocal kills
        store = RedisJobStore(store_settings)
        listener = await count_done_events(store, counts)

        async def load() -> None:
            async with grpc.aio.insecure_channel(target) as channel:
                inference = inference_pb2_grpc.InferenceServiceStub(channel)
                for wave in range(20):
                    texts = [f"wave {wave}, job {i}: a fine day" for i in range(20)]
                    reply = await inference.SubmitBatch(
                        inference_pb2.SubmitBatchRequest(texts=texts), timeout=10
                    )
                    ids.extend(job.job_id for job in reply.jobs)
                    await asyncio.sleep(0.25)

        async def running() -> bool:
            return bool(ids) and codec.RUNNING in await store.statuses(ids[-100:])

        loading = asyncio.create_task(load())
        while kills < KILLS:
            await wait_for(running, 30, what="a batch in progress")
            victim = batchers.pop(0)
            victim.kill(signal.SIGKILL)
            victim.process.wait(10)
            kills += 1
            batchers.append(start(services, service_env, "batcher", WORKER_NAME=f"b{kills + 1}", **slow))
            await asyncio.sleep(0.8)
        await loading

        async def all_done() -> bool:
            return all(s == codec.DONE for s in await store.statuses(ids))

        await wait_for(all_done, 90, what="every accepted job DONE")
        await asyncio.sleep(1.0)  # a duplicate announcement would have arrived by now
        listener.cancel()
        redelivered = [
            j for j in await asyncio.gather(*(store.get(i) for i in ids)) if j and j.trace.attempt > 1
        ]
        assert redelivered, "the kills should have interrupted batches"
        await store.close()

    asyncio.run(scenario())
    assert kills == KILLS and len(ids) == 400
    assert sorted(set(counts.values())) == [1], "every job announced DONE exactly once"
    assert set(counts) >= set(ids)


def test_a_restarted_stream_serves_a_rewatch_the_terminal_state_once(
    services: list[Service], service_env: dict[str, str]
) -> None:
    ingress = start(services, service_env, "ingress")
    stream = start(services, service_env, "stream")
    start(services, service_env, "batcher", SIM_FIXED_MS="1500")  # slow enough to watch mid-flight
    target, stream_target = f"127.0.0.1:{ingress.port()}", f"127.0.0.1:{stream.port()}"
    for t in (target, stream_target):
        wait_until_serving(t)

    with grpc.insecure_channel(target) as channel:
        job_id = (
            inference_pb2_grpc.InferenceServiceStub(channel)
            .Submit(inference_pb2.SubmitRequest(text="watch me across a restart"), timeout=10)
            .job_id
        )
    with grpc.insecure_channel(stream_target) as channel:
        watch = stream_pb2_grpc.JobStreamServiceStub(channel).WatchJob(
            stream_pb2.WatchJobRequest(job_id=job_id), timeout=30
        )
        first = next(iter(watch))
        assert first.job.status in (codec.QUEUED, codec.RUNNING)
        stream.kill(signal.SIGKILL)  # the watcher's server dies under it
        with pytest.raises(grpc.RpcError) as broken:
            for _ in watch:
                pass
        assert broken.value.code() in (
            grpc.StatusCode.UNAVAILABLE,
            grpc.StatusCode.UNKNOWN,
            grpc.StatusCode.INTERNAL,
        )

    restarted = start(services, service_env, "stream")
    new_target = f"127.0.0.1:{restarted.port()}"
    wait_until_serving(new_target)
    with grpc.insecure_channel(new_target) as channel:
        stub = stream_pb2_grpc.JobStreamServiceStub(channel)

        def rewatch(after: int, timeout_s: float = 30) -> list[job_pb2.Job]:
            request = stream_pb2.WatchJobRequest(job_id=job_id, after_sequence=after)
            return [e.job for e in stub.WatchJob(request, timeout=timeout_s) if e.HasField("job")]

        # Resumed after the state it saw: only newer states, the terminal one exactly once.
        resumed = rewatch(after=first.job.sequence)
        assert first.job.sequence == codec.rank(first.job.status)
        assert [e.sequence for e in resumed] == sorted({e.sequence for e in resumed})
        assert all(e.sequence > first.job.sequence for e in resumed)
        assert [e.status for e in resumed].count(codec.DONE) == 1 and resumed[-1].status == codec.DONE
        # A finished job: its state at once, then the end; after its last sequence, nothing.
        assert [e.status for e in rewatch(after=0, timeout_s=5)] == [codec.DONE]
        assert rewatch(after=resumed[-1].sequence, timeout_s=5) == []


def test_the_client_resumes_its_watch_across_a_stream_restart_losing_and_repeating_nothing(
    services: list[Service], service_env: dict[str, str]
) -> None:
    port = free_port()
    env = {**service_env, "STREAM_PORT": str(port)}  # the restarted stream comes back on it
    ingress = start(services, env, "ingress")
    stream = start(services, env, "stream")
    start(services, env, "batcher", SIM_FIXED_MS="1500")  # slow enough to watch mid-flight
    target, stream_target = f"127.0.0.1:{ingress.port()}", f"127.0.0.1:{port}"
    for t in (target, stream_target):
        wait_until_serving(t)

    states: list[job_pb2.Job] = []
    with Client(target, stream_target=stream_target, retry_budget_s=30) as client:
        job_id = client.submit("watch me across a restart, from the client").job_id
        for state in client.watch(job_id):
            states.append(state)
            if len(states) == 1:  # the watch is open: take its server away, bring one back
                stream.kill(signal.SIGKILL)
                stream.process.wait(10)
                start(services, env, "stream").port()
    assert states[0].status in (codec.QUEUED, codec.RUNNING) and states[-1].status == codec.DONE
    sequences = [s.sequence for s in states]
    assert sequences == sorted(set(sequences)), sequences  # nothing twice, nothing out of order


def test_an_ingress_killed_while_clients_retry_with_idempotency_keys_creates_no_job_twice(
    services: list[Service], service_env: dict[str, str], store_settings: StoreSettings
) -> None:
    port = free_port()
    env = {**service_env, "INGRESS_PORT": str(port)}
    ingress = start(services, env, "ingress")
    start(services, env, "stream")
    start(services, env, "batcher", SIM_FIXED_MS="2")
    target = f"127.0.0.1:{port}"
    wait_until_serving(target)
    answers: dict[str, set[str]] = collections.defaultdict(set)
    attempts = 0

    async def client(keys: list[str]) -> None:
        """Submit each key until it is accepted, retrying whatever goes wrong, as a client should."""
        nonlocal attempts
        for key in keys:
            while True:
                attempts += 1
                try:
                    async with grpc.aio.insecure_channel(target) as channel:
                        reply = await inference_pb2_grpc.InferenceServiceStub(channel).Submit(
                            inference_pb2.SubmitRequest(text=f"order {key} arrived", idempotency_key=key),
                            timeout=2,
                        )
                    answers[key].add(reply.job_id)
                    break
                except grpc.aio.AioRpcError:
                    await asyncio.sleep(0.05)

    async def scenario() -> None:
        keys = [f"order-{i}" for i in range(300)]
        clients = [asyncio.create_task(client(keys[i::6])) for i in range(6)]
        await wait_for(lambda: len(answers) > 60, 30, what="load under way")
        ingress.kill(signal.SIGKILL)
        ingress.process.wait(10)
        services.append(Service("ingress", env))  # same port: clients reconnect to it
        await asyncio.gather(*clients)
        store = RedisJobStore(store_settings)

        async def all_done() -> bool:
            ids = [next(iter(v)) for v in answers.values()]
            return all(s == codec.DONE for s in await store.statuses(ids))

        await wait_for(all_done, 60, what="every accepted job DONE (none stuck QUEUED)")
        await store.close()

    asyncio.run(scenario())
    assert len(answers) == 300 and attempts > 300  # some calls failed while the ingress was down
    assert all(len(ids) == 1 for ids in answers.values()), "a key mapped to two jobs"
