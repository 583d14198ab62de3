"""Invariant 8: one subscription per stream instance, and no event slips through the gap
between registering a watcher and reading the current state."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

from batchline import codec
from batchline.errors import NotFound
from batchline.redis_store import RedisJobStore
from batchline.settings import StoreSettings
from batchline.v1 import job_pb2, stream_pb2
from stream import fanout as fanout_module
from stream.fanout import Fanout
from stream.servicer import JobStreamServicer
from tests.helpers import wait_for


class FinishesDuringRead(RedisJobStore):
    """Reads the record, then the job finishes (event published), then the stale read returns."""

    async def get_many(self, job_ids: Sequence[str]) -> list[job_pb2.Job | None]:
        stale = await super().get_many(job_ids)
        for job_id in job_ids:
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


class CountsReads(RedisJobStore):
    """Holds each read until the test opens the gate; records every read's ids."""

    def __init__(self, settings: StoreSettings) -> None:
        super().__init__(settings)
        self.reads: list[list[str]] = []
        self.gate = asyncio.Event()
        self.gate.set()

    async def get_many(self, job_ids: Sequence[str]) -> list[job_pb2.Job | None]:
        self.reads.append(list(job_ids))
        await self.gate.wait()
        return await super().get_many(job_ids)


async def test_watches_that_open_while_a_read_is_in_flight_read_their_jobs_together(
    store_settings: StoreSettings,
) -> None:
    store = CountsReads(store_settings)
    ids = [f"w{i}" for i in range(5)]
    await store.create_many([job_pb2.Job(job_id=i, status=codec.QUEUED) for i in ids])
    await store.transition(job_pb2.Job(job_id="w4", status=codec.DONE))
    fanout, routing = await run_fanout(store)
    servicer = JobStreamServicer(store, fanout, heartbeat_s=5)
    context: Any = None

    requests = [stream_pb2.WatchJobRequest(job_id=i) for i in [*ids, "nope"]]
    streams: list[Any] = [servicer.WatchJob(request, context) for request in requests]
    store.gate.clear()
    first = asyncio.create_task(anext(streams[0]))
    await wait_for(lambda: len(store.reads) == 1, 5, what="the first read in flight")
    later = [asyncio.create_task(anext(stream)) for stream in streams[1:]]
    for _ in range(5):
        await asyncio.sleep(0)
    assert store.reads == [["w0"]]  # they wait for the read in flight
    store.gate.set()
    answers = await asyncio.gather(first, *later, return_exceptions=True)
    for stream in streams:
        await stream.aclose()
    routing.cancel()
    await store.close()
    assert store.reads == [["w0"], ["w1", "w2", "w3", "w4", "nope"]]  # then read in one command
    assert [a.job.status for a in answers[:5]] == [codec.QUEUED] * 4 + [codec.DONE]  # type: ignore[union-attr]
    assert isinstance(answers[5], NotFound)  # each watch gets its own job's answer


async def test_after_subscribing_every_watched_job_is_read_again_in_groups(
    store_settings: StoreSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Events published before the subscription are not lost: each watched job's record is
    re-read, RESYNC_READ jobs per command, and handed to its watchers."""
    monkeypatch.setattr(fanout_module, "RESYNC_READ", 2)
    store = CountsReads(store_settings)
    ids = ["r0", "r1", "r2"]
    await store.create_many([job_pb2.Job(job_id=i, status=codec.QUEUED) for i in ids])
    for job_id in ids[:2]:
        await store.transition(job_pb2.Job(job_id=job_id, status=codec.DONE))
    fanout = Fanout(store, watcher_buffer=4, max_watchers=10)
    with (
        fanout.watch("r0") as r0,
        fanout.watch("r1") as r1,
        fanout.watch("r2") as r2,
        fanout.watch("gone") as gone,
    ):
        routing = asyncio.create_task(fanout.run())
        await asyncio.wait_for(fanout.subscribed.wait(), 5)
        await wait_for(lambda: not r2.events.empty(), 5, what="the last group's re-read handed on")
        routing.cancel()
    await store.close()
    assert store.reads == [["r0", "r1"], ["r2", "gone"]]
    assert [w.events.get_nowait().status for w in (r0, r1, r2)] == [codec.DONE, codec.DONE, codec.QUEUED]
    assert gone.events.empty()  # no record, nothing handed on
