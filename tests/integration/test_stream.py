"""Invariant 8: one subscription per stream instance, and no event slips through the gap
between registering a watcher and reading the current state."""

from __future__ import annotations

import asyncio
from typing import Any

from batchline import codec
from batchline.redis_store import RedisJobStore
from batchline.settings import StoreSettings
from batchline.v1 import job_pb2, stream_pb2
from stream.fanout import Fanout
from stream.servicer import JobStreamServicer


class FinishesDuringRead(RedisJobStore):
    """Reads the record, then the job finishes (event published), then the stale read returns."""

    async def get(self, job_id: str) -> job_pb2.Job | None:
        stale = await super().get(job_id)
        done = job_pb2.Job(job_id=job_id, status=codec.DONE)
        done.result.label = "POSITIVE"
        assert await self.transition(done)
        return stale


async def run_fanout(store: RedisJobStore) -> tuple[Fanout, asyncio.Task[None]]:
    fanout = Fanout(store, watcher_buffer=4, max_watchers=10)
    task = asyncio.create_task(fanout.run())
    await asyncio.wait_for(fanout.subscribed.wait(), 5)
    return fanout, task


async def test_watch_never_misses_a_terminal_event_between_subscribe_and_read(
    store_settings: StoreSettings,
) -> None:
    store = FinishesDuringRead(store_settings)
    await store.create(job_pb2.Job(job_id="gap", status=codec.QUEUED))
    fanout, routing = await run_fanout(store)
    servicer = JobStreamServicer(store, fanout, heartbeat_s=5)
    context: Any = None
    events = await asyncio.wait_for(
        _collect(servicer.WatchJob(stream_pb2.WatchJobRequest(job_id="gap"), context)), 5
    )
    routing.cancel()
    await store.close()
    assert [e.job.status for e in events] == [codec.QUEUED, codec.DONE]
    assert fanout.count == 0  # the watcher unregistered when its stream ended


async def test_a_finished_job_is_sent_once_and_the_stream_ends(store_settings: StoreSettings) -> None:
    store = RedisJobStore(store_settings)
    await store.create(job_pb2.Job(job_id="fin", status=codec.QUEUED))
    await store.transition(job_pb2.Job(job_id="fin", status=codec.DONE))
    fanout, routing = await run_fanout(store)
    servicer = JobStreamServicer(store, fanout, heartbeat_s=5)
    context: Any = None
    events = await asyncio.wait_for(
        _collect(servicer.WatchJob(stream_pb2.WatchJobRequest(job_id="fin"), context)), 5
    )
    routing.cancel()
    await store.close()
    assert [e.job.status for e in events] == [codec.DONE]


async def test_idle_streams_get_heartbeats(store_settings: StoreSettings) -> None:
    store = RedisJobStore(store_settings)
    await store.create(job_pb2.Job(job_id="idle", status=codec.QUEUED))
    fanout, routing = await run_fanout(store)
    servicer = JobStreamServicer(store, fanout, heartbeat_s=0.05)
    context: Any = None
    stream = servicer.WatchJob(stream_pb2.WatchJobRequest(job_id="idle"), context)
    first = await anext(stream)
    second = await asyncio.wait_for(anext(stream), 2)
    await stream.aclose()  # type: ignore[attr-defined]
    routing.cancel()
    await store.close()
    assert first.job.status == codec.QUEUED
    assert second.HasField("heartbeat")


async def _collect(stream: Any) -> list[stream_pb2.WatchJobResponse]:
    return [event async for event in stream if event.HasField("job")]
