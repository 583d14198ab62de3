"""An in-process pipeline on real RabbitMQ and Redis: ingress, stream and (optionally) a
batcher served on port 0 in the test's event loop, with aio gRPC stubs."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Any

import grpc
import pytest

import batcher.__main__ as batcher_main
import ingress.__main__ as ingress_main
import stream.__main__ as stream_main
from batcher.settings import BatcherSettings
from batchline.access import KeyRing
from batchline.redis_store import RedisJobStore
from batchline.settings import BrokerSettings, StoreSettings
from batchline.v1 import inference_pb2, inference_pb2_grpc, job_pb2, stream_pb2, stream_pb2_grpc
from ingress.settings import IngressSettings
from stream.settings import StreamSettings
from tests.helpers import RecordingModel, wait_for


@dataclass
class Pipeline:
    broker_settings: BrokerSettings
    store_settings: StoreSettings
    store: RedisJobStore
    inference: inference_pb2_grpc.InferenceServiceAsyncStub
    stream: stream_pb2_grpc.JobStreamServiceAsyncStub
    model: RecordingModel
    batcher_settings: BatcherSettings
    ports: dict[str, int]  # "ingress", "stream": where each listens on 127.0.0.1
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)
    _batcher: tuple[asyncio.Event, asyncio.Task[None]] | None = None

    async def start_batcher(self) -> None:
        stop = asyncio.Event()
        task = asyncio.create_task(batcher_main.serve(self.batcher_settings, stop, model=self.model))
        self._batcher = (stop, task)

    async def stop_batcher(self) -> None:
        if self._batcher is not None:
            stop, task = self._batcher
            stop.set()
            await asyncio.wait_for(task, 30)
            self._batcher = None

    async def job(self, job_id: str) -> job_pb2.Job:
        return (await self.inference.GetJob(inference_pb2.GetJobRequest(job_id=job_id))).job

    async def wait_status(self, job_id: str, status: int, timeout_s: float = 20) -> job_pb2.Job:
        async def reached() -> bool:
            return (await self.job(job_id)).status == status

        await wait_for(reached, timeout_s, what=f"job {job_id} to reach {status}")
        return await self.job(job_id)

    async def watch(self, job_id: str) -> list[job_pb2.Job]:
        call = self.stream.WatchJob(stream_pb2.WatchJobRequest(job_id=job_id))
        return [event.job async for event in call if event.HasField("job")]


MakePipeline = Callable[..., Awaitable[Pipeline]]


@pytest.fixture
async def make_pipeline(
    broker_settings: BrokerSettings, store_settings: StoreSettings, clean_env: None
) -> AsyncIterator[MakePipeline]:
    stop = asyncio.Event()
    built: list[Pipeline] = []
    channels: list[grpc.aio.Channel] = []

    async def make(
        *,
        batcher: bool = True,
        model: RecordingModel | None = None,
        broker: dict[str, Any] | None = None,
        batch: dict[str, Any] | None = None,
        store: StoreSettings | None = None,
        keys: KeyRing | None = None,
    ) -> Pipeline:
        bsettings = replace(broker_settings, **(broker or {}))
        ssettings = store or store_settings
        ports: dict[str, int] = {}
        tasks = [
            asyncio.create_task(
                ingress_main.serve(
                    IngressSettings(host="127.0.0.1", port=0, broker=bsettings, store=ssettings, keys=keys),
                    stop,
                    on_ready=lambda p: ports.__setitem__("ingress", p),
                )
            ),
            asyncio.create_task(
                stream_main.serve(
                    StreamSettings(host="127.0.0.1", port=0, store=ssettings, heartbeat_s=0.5, keys=keys),
                    stop,
                    on_ready=lambda p: ports.__setitem__("stream", p),
                )
            ),
        ]
        await wait_for(lambda: len(ports) == 2 or any(t.done() for t in tasks), 15, what="servers to listen")
        for task in tasks:
            if task.done():
                task.result()
        ingress_channel = grpc.aio.insecure_channel(f"127.0.0.1:{ports['ingress']}")
        stream_channel = grpc.aio.insecure_channel(f"127.0.0.1:{ports['stream']}")
        channels.extend([ingress_channel, stream_channel])
        pipeline = Pipeline(
            broker_settings=bsettings,
            store_settings=ssettings,
            store=RedisJobStore(ssettings),
            inference=inference_pb2_grpc.InferenceServiceStub(ingress_channel),
            stream=stream_pb2_grpc.JobStreamServiceStub(stream_channel),
            model=model or RecordingModel(),
            batcher_settings=BatcherSettings(
                broker=bsettings, store=ssettings, worker="test-batcher", **(batch or {})
            ),
            ports=ports,
            _tasks=tasks,
        )
        if batcher:
            await pipeline.start_batcher()
        built.append(pipeline)
        return pipeline

    yield make
    for pipeline in built:
        await pipeline.stop_batcher()
    stop.set()
    for pipeline in built:
        await asyncio.wait_for(asyncio.gather(*pipeline._tasks, return_exceptions=True), 20)
        await pipeline.store.close()
    for channel in channels:
        await channel.close(None)
