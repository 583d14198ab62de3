"""In-memory queue and store with the same promises as RabbitMQ and Redis, for the
embedded single-process mode and for unit tests of service logic. Single event loop only."""

from __future__ import annotations

import asyncio
import collections
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field

from batchline import codec, tracing
from batchline.broker import Delivery
from batchline.codec import Job
from batchline.errors import BatchlineError, QueueFull
from batchline.store import BatchRecord, OnSubscribed, StatsSnapshot, WorkerCounters
from batchline.v1 import job_pb2


@dataclass
class _Message:
    body: bytes
    message_id: str
    deliveries: int = 0
    headers: dict[str, str] = field(default_factory=dict)


class MemoryBroker:
    """A bounded FIFO with prefetch, redelivery on requeue and a dead-letter list."""

    def __init__(self, max_length: int = 10_000, delivery_limit: int = 5) -> None:
        self._max_length = max_length
        self._delivery_limit = delivery_limit
        self._ready: collections.deque[_Message] = collections.deque()
        self._arrived = asyncio.Condition()
        self.dead: collections.deque[_Message] = collections.deque(maxlen=max_length)

    async def publish(
        self,
        tasks: Sequence[job_pb2.InferenceTask],
        parents: Sequence[tracing.TraceContext] | None = None,
        whole: bool = False,
    ) -> list[BatchlineError | None]:
        if whole and len(self._ready) + len(tasks) > self._max_length:
            return [QueueFull("queue is full", retry_after_s=1.0)] * len(tasks)
        results: list[BatchlineError | None] = []
        current = tracing.headers()
        for n, task in enumerate(tasks):
            if len(self._ready) >= self._max_length:
                results.append(QueueFull("queue is full", retry_after_s=1.0))
                continue
            headers = {k: str(v) for k, v in parents[n].items()} if parents else current
            self._ready.append(_Message(task.SerializeToString(), task.job_id, headers=headers))
            results.append(None)
        async with self._arrived:
            self._arrived.notify_all()
        return results

    async def consume(self, prefetch: int) -> AsyncIterator[Delivery]:
        unsettled = asyncio.Semaphore(prefetch)
        while True:
            await unsettled.acquire()
            async with self._arrived:
                await self._arrived.wait_for(lambda: bool(self._ready))
                message = self._ready.popleft()
            message.deliveries += 1
            yield self._delivery(message, unsettled)

    def _delivery(self, message: _Message, unsettled: asyncio.Semaphore) -> Delivery:
        settled = False

        def settle() -> bool:
            nonlocal settled
            if settled:
                return False
            settled = True
            unsettled.release()
            return True

        async def ack() -> None:
            settle()

        async def reject() -> None:
            if settle():
                self.dead.append(message)

        async def requeue() -> None:
            if not settle():
                return
            if message.deliveries >= self._delivery_limit:
                self.dead.append(message)
                return
            self._ready.appendleft(message)
            async with self._arrived:
                self._arrived.notify_all()

        return Delivery(
            message.body, message.message_id, message.deliveries, ack, reject, requeue, message.headers
        )

    async def depth(self) -> tuple[int, int]:
        return len(self._ready), len(self.dead)

    async def ping(self) -> None:
        return None

    async def close(self) -> None:
        return None


@dataclass
class _Record:
    status: int
    data: bytes
    expires_at: float
    published: bool = False  # its task is in the queue (see JobStore.mark_published)
    entered: int = 0  # its number in the order jobs entered the queue


@dataclass
class MemoryJobStore:
    """`JobStore` in a dict, with TTLs and in-process pub/sub."""

    job_ttl_s: float = 24 * 3600
    _records: dict[str, _Record] = field(default_factory=dict)
    _idempotency: dict[str, tuple[str, float]] = field(default_factory=dict)
    _subscribers: set[asyncio.Queue[Job]] = field(default_factory=set)
    _stats: StatsSnapshot = field(default_factory=StatsSnapshot)
    _writes_since_sweep: int = 0
    _entered: int = 0  # jobs stored QUEUED
    _left: int = 0  # jobs that left QUEUED (started, finished, discarded)
    _waiting: dict[str, float] = field(default_factory=dict)  # queued job id -> accepted at, in order

    async def ping(self) -> None:
        return None

    async def create(self, job: Job, idempotency_key: str = "") -> tuple[Job, bool]:
        self._sweep()
        if job.job_id in self._records:
            return job, False
        if idempotency_key:
            existing = self._idempotency.get(idempotency_key)
            if existing and existing[1] > time.monotonic():
                found = await self.get(existing[0])
                if found is not None:
                    return found, False
            self._idempotency[idempotency_key] = (job.job_id, time.monotonic() + self.job_ttl_s)
        self._put(job)
        self._entered += 1
        self._records[job.job_id].entered = self._entered
        self._waiting[job.job_id] = codec.seconds(job.trace.accepted_at)
        return job, True

    async def create_many(self, jobs: Sequence[Job]) -> None:
        for job in jobs:
            await self.create(job)

    async def discard(self, job_id: str, idempotency_key: str = "") -> None:
        record = self._records.pop(job_id, None)
        if record is not None and record.status == codec.QUEUED:
            self._left += 1
            self._waiting.pop(job_id, None)
        if idempotency_key and self._idempotency.get(idempotency_key, ("",))[0] == job_id:
            del self._idempotency[idempotency_key]

    async def mark_published(self, job_id: str) -> None:
        record = self._live(job_id)
        if record is not None:
            record.published = True

    async def published(self, job_id: str) -> bool:
        record = self._live(job_id)
        return record is not None and record.published

    async def transition(self, job: Job) -> bool:
        current = self._live(job.job_id)
        if current is None or codec.rank(job.status) <= codec.rank(current.status):
            return False
        if current.status == codec.QUEUED:
            self._left += 1
            self._waiting.pop(job.job_id, None)
        self._put(job)
        self._records[job.job_id].entered = current.entered
        if codec.is_terminal(job.status):
            name = job_pb2.JobStatus.Name(job.status)
            self._stats.finished[name] = self._stats.finished.get(name, 0) + 1
        for queue in self._subscribers:
            queue.put_nowait(job)
        return True

    async def transition_many(self, jobs: Sequence[Job], batch: BatchRecord | None = None) -> list[bool]:
        written = [await self.transition(job) for job in jobs]
        if batch is not None:
            counters = self._stats.workers.setdefault(batch.worker, WorkerCounters())
            counters.batches += 1
            counters.jobs += batch.size
            counters.real_tokens += batch.real_tokens
            counters.padded_tokens += batch.padded_tokens
            counters.inference_ms += batch.inference_ms
            counters.queue_wait_ms += batch.queue_wait_ms
            sizes, reasons = self._stats.batch_sizes, self._stats.close_reasons
            sizes[batch.size] = sizes.get(batch.size, 0) + 1
            reasons[batch.close_reason] = reasons.get(batch.close_reason, 0) + 1
        return written

    async def get(self, job_id: str) -> Job | None:
        record = self._live(job_id)
        return None if record is None else Job.FromString(record.data)

    async def get_many(self, job_ids: Sequence[str]) -> list[Job | None]:
        return [await self.get(job_id) for job_id in job_ids]

    async def left_queue(self) -> int:
        return self._left

    async def oldest_queued_s(self) -> float | None:
        while self._waiting:
            job_id, accepted = next(iter(self._waiting.items()))  # insertion order is acceptance order
            if self._live(job_id) is not None:
                return accepted
            del self._waiting[job_id]  # expired while queued
        return None

    async def queue_position(self, job_id: str) -> int | None:
        record = self._live(job_id)
        if record is None or record.status != codec.QUEUED:
            return None
        return max(1, record.entered - self._left)

    async def statuses(self, job_ids: Sequence[str]) -> list[int | None]:
        return [None if (r := self._live(i)) is None else r.status for i in job_ids]

    async def stats(self) -> StatsSnapshot:
        return self._stats

    async def events(self, on_subscribed: OnSubscribed | None = None) -> AsyncIterator[Job]:
        queue: asyncio.Queue[Job] = asyncio.Queue()
        self._subscribers.add(queue)
        try:
            if on_subscribed is not None:
                await on_subscribed()
            while True:
                yield await queue.get()
        finally:
            self._subscribers.discard(queue)

    async def close(self) -> None:
        return None

    def _put(self, job: Job) -> None:
        self._records[job.job_id] = _Record(
            job.status, codec.encode_record(job), time.monotonic() + self.job_ttl_s
        )

    def _live(self, job_id: str) -> _Record | None:
        record = self._records.get(job_id)
        if record is not None and record.expires_at <= time.monotonic():
            del self._records[job_id]
            return None
        return record

    def _sweep(self) -> None:
        """Drop expired records now and then, so memory follows the TTL policy."""
        self._writes_since_sweep += 1
        if self._writes_since_sweep < 1000:
            return
        self._writes_since_sweep = 0
        now = time.monotonic()
        for job_id in [k for k, r in self._records.items() if r.expires_at <= now]:
            del self._records[job_id]
        for key in [k for k, (_, exp) in self._idempotency.items() if exp <= now]:
            del self._idempotency[key]
