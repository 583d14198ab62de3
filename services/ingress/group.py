"""Group commit for single Submits: store and publish together the jobs that arrive while the
previous group is being stored and published.

A lone Submit goes out at once, as a group of one. Submits that arrive while a group is in
flight wait for it and then go out together: one Redis round trip (`create_many`) and one write
to RabbitMQ (`publish`) for all of them. So the groups grow with the load and with the round
trip's length, and an idle ingress adds no wait. Each caller still gets its own answer: its
task's own confirm or refusal.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass

from batchline import tracing
from batchline.broker import Broker
from batchline.errors import BatchlineError
from batchline.store import JobStore
from batchline.v1 import job_pb2
from ingress import metrics


@dataclass
class _Entry:
    task: job_pb2.InferenceTask
    job: job_pb2.Job
    parent: tracing.TraceContext  # the caller's span: its task's publish span goes under it
    answer: asyncio.Future[BatchlineError | None]


class GroupCommit:
    def __init__(self, store: JobStore, broker: Broker, max_group: int = 256) -> None:
        self._store = store
        self._broker = broker
        self._max_group = max_group
        self._waiting: list[_Entry] = []
        self._flusher: asyncio.Task[None] | None = None

    async def submit(self, task: job_pb2.InferenceTask, job: job_pb2.Job) -> BatchlineError | None:
        """Store `job` (QUEUED) and publish `task`. Returns None once RabbitMQ confirmed the task,
        or the publish's refusal (QueueFull, Unavailable); raises Unavailable when Redis could not
        store the job (then nothing was published)."""
        answer: asyncio.Future[BatchlineError | None] = asyncio.get_running_loop().create_future()
        self._waiting.append(_Entry(task, job, tracing.headers(), answer))
        if self._flusher is None:
            # Its own task: a caller that goes away must not stop the others' group.
            self._flusher = asyncio.create_task(self._flush())
        return await answer

    async def _flush(self) -> None:
        try:
            while self._waiting:
                group, self._waiting = self._waiting[: self._max_group], self._waiting[self._max_group :]
                await self._send(group)
        except asyncio.CancelledError:  # the ingress is stopping: nobody waits forever
            for entry in self._waiting:
                entry.answer.cancel()
            self._waiting.clear()
            raise
        finally:
            self._flusher = None

    async def _send(self, group: list[_Entry]) -> None:
        metrics.SUBMIT_GROUP_JOBS.observe(len(group))
        try:
            await self._store.create_many([entry.job for entry in group])
            errors = await self._broker.publish(
                [entry.task for entry in group], parents=[entry.parent for entry in group]
            )
        except asyncio.CancelledError:
            for entry in group:
                entry.answer.cancel()
            raise
        except Exception as exc:  # Unavailable, or a bug: every caller of the group hears it
            for entry in group:
                with contextlib.suppress(asyncio.InvalidStateError):  # its caller went away
                    entry.answer.set_exception(exc)
            return
        for entry, error in zip(group, errors, strict=True):
            with contextlib.suppress(asyncio.InvalidStateError):
                entry.answer.set_result(error)
