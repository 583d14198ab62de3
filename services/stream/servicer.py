"""JobStreamService.WatchJob: current state first, then every change, then the end."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import grpc

from batchline import access, codec
from batchline.errors import InvalidArgument, NotFound, TooSlow
from batchline.grouped import Grouped
from batchline.store import JobStore
from batchline.v1 import stream_pb2, stream_pb2_grpc
from stream import metrics
from stream.fanout import Fanout

LAST_SEQUENCE = codec.rank(codec.DONE)  # every terminal state


class JobStreamServicer(stream_pb2_grpc.JobStreamServiceServicer):
    def __init__(self, store: JobStore, fanout: Fanout, heartbeat_s: float) -> None:
        self._store = store
        self._fanout = fanout
        self._heartbeat_s = heartbeat_s
        # Watches that open while a read is in flight read their jobs together, in one command.
        self._read: Grouped[str, codec.Job | None] = Grouped(self._read_group)

    async def _read_group(self, job_ids: list[str]) -> list[codec.Job | None]:
        metrics.READ_GROUP_JOBS.observe(len(job_ids))
        return await self._store.get_many(job_ids)

    async def WatchJob(
        self, request: stream_pb2.WatchJobRequest, context: grpc.aio.ServicerContext[object, object]
    ) -> AsyncIterator[stream_pb2.WatchJobResponse]:
        codec.check_job_id(request.job_id)
        if request.after_sequence > LAST_SEQUENCE:
            raise InvalidArgument.field(
                "after_sequence",
                f"must be 0-{LAST_SEQUENCE} (the Job.sequence last seen), not {request.after_sequence}",
            )
        with self._fanout.watch(request.job_id) as watcher:
            job = await self._read(request.job_id)
            if job is None or not access.may_see(job):  # another owner's job reads as no job at all
                raise NotFound(f"job {request.job_id} does not exist or has expired")
            if codec.rank(job.status) > request.after_sequence:
                yield stream_pb2.WatchJobResponse(job=job)
            seen = max(codec.rank(job.status), request.after_sequence)
            while seen < LAST_SEQUENCE:
                try:
                    async with asyncio.timeout(self._heartbeat_s):  # wait_for would make a task per event
                        job = await watcher.events.get()
                except TimeoutError:
                    heartbeat = stream_pb2.WatchJobResponse()
                    heartbeat.heartbeat.sent_at.GetCurrentTime()
                    yield heartbeat
                    continue
                if watcher.overflowed:
                    raise TooSlow(
                        "this watcher fell too far behind; watch again with after_sequence "
                        "set to the last Job.sequence received to resume"
                    )
                if codec.rank(job.status) <= seen:
                    continue  # already sent (the read raced the event)
                seen = codec.rank(job.status)
                yield stream_pb2.WatchJobResponse(job=job)
