"""Group commit for single Submits: store and publish together the jobs that arrive while the
previous group is being stored and published.

A lone Submit goes out on the event loop's next turn, as a group of one. Submits that arrive
while a group is in flight wait for it and then go out together: one Redis round trip
(`create_many`) and one write to RabbitMQ (`publish`) for all of them. So the groups grow with
the load and with the round trip's length, and an idle ingress adds no wait. Each caller still
gets its own answer: its task's own confirm or refusal.
"""

from __future__ import annotations

from batchline import tracing
from batchline.broker import Broker
from batchline.errors import BatchlineError
from batchline.grouped import Grouped
from batchline.store import JobStore
from batchline.v1 import job_pb2
from ingress import metrics

# A Submit's part of a group: its task, its record, and the caller's span (its task's publish
# span goes under it).
_Entry = tuple[job_pb2.InferenceTask, job_pb2.Job, tracing.TraceContext]


class GroupCommit:
    def __init__(self, store: JobStore, broker: Broker, max_group: int = 256) -> None:
        self._store = store
        self._broker = broker
        self._groups: Grouped[_Entry, BatchlineError | None] = Grouped(self._send, max_group)

    async def submit(self, task: job_pb2.InferenceTask, job: job_pb2.Job) -> BatchlineError | None:
        """Store `job` (QUEUED) and publish `task`. Returns None once RabbitMQ confirmed the task,
        or the publish's refusal (QueueFull, Unavailable); raises Unavailable when Redis could not
        store the job (then nothing was published)."""
        return await self._groups((task, job, tracing.headers()))

    async def _send(self, group: list[_Entry]) -> list[BatchlineError | None]:
        metrics.SUBMIT_GROUP_JOBS.observe(len(group))
        await self._store.create_many([job for _, job, _ in group])
        return await self._broker.publish([task for task, _, _ in group], parents=[p for _, _, p in group])
