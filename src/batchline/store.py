"""The job store interface: Redis in production, memory in the embedded process and unit tests.

Both keep the same promises: a record is created once, its status only moves forward
(QUEUED -> RUNNING -> terminal), and every accepted change is announced exactly once on the
event channel, atomically with the write.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from batchline.codec import Job


@dataclass(frozen=True)
class BatchRecord:
    """What one batch did, counted into the shared statistics."""

    worker: str
    size: int
    real_tokens: int
    padded_tokens: int
    inference_ms: float
    close_reason: str
    queue_wait_ms: float = 0.0  # summed over the batch's computed jobs


@dataclass
class WorkerCounters:
    batches: int = 0
    jobs: int = 0
    real_tokens: int = 0
    padded_tokens: int = 0
    inference_ms: float = 0.0
    queue_wait_ms: float = 0.0


@dataclass
class StatsSnapshot:
    """Counters since the store was created (or its keys expired)."""

    workers: dict[str, WorkerCounters] = field(default_factory=dict)
    batch_sizes: dict[int, int] = field(default_factory=dict)
    close_reasons: dict[str, int] = field(default_factory=dict)
    finished: dict[str, int] = field(default_factory=dict)


OnSubscribed = Callable[[], Awaitable[None]]


class JobStore(Protocol):
    async def ping(self) -> None:
        """Raise Unavailable unless the store answers."""

    async def create(self, job: Job, idempotency_key: str = "") -> tuple[Job, bool]:
        """Store a new QUEUED record; with a key already used, return that job and False."""

    async def create_many(self, jobs: Sequence[Job]) -> None:
        """Store many new QUEUED records in one round trip."""

    async def discard(self, job_id: str, idempotency_key: str = "") -> None:
        """Remove a record whose task never reached the queue (and its idempotency key)."""

    async def mark_published(self, job_id: str) -> None:
        """Note that the job's task is in the queue (confirmed), for idempotent retries."""

    async def published(self, job_id: str) -> bool:
        """Whether mark_published was called for the job (False once the record is gone)."""

    async def transition(self, job: Job) -> bool:
        """Write `job` only if its status moves forward; announce it if written."""

    async def transition_many(self, jobs: Sequence[Job], batch: BatchRecord | None = None) -> list[bool]:
        """`transition` for each job, plus the batch's statistics, in one round trip."""

    async def get(self, job_id: str) -> Job | None:
        """The record, or None for unknown or expired ids."""

    async def get_many(self, job_ids: Sequence[str]) -> list[Job | None]:
        """`get` for each id, in one round trip."""

    async def left_queue(self) -> int:
        """Jobs that have left QUEUED (started, finished or discarded) since counting began."""

    async def oldest_queued_s(self) -> float | None:
        """When the oldest job still QUEUED was accepted (unix seconds); None when none is."""

    async def queue_position(self, job_id: str) -> int | None:
        """A queued job's approximate place in the queue, 1 = next; None unless QUEUED. Jobs are
        numbered as they enter, so place = own number - jobs that have left (priorities and
        batch formation reorder a little within a batcher's window)."""

    async def statuses(self, job_ids: Sequence[str]) -> list[int | None]:
        """Current status of each id (None when unknown), in one round trip."""

    async def stats(self) -> StatsSnapshot:
        """Counters of every worker."""

    def events(self, on_subscribed: OnSubscribed | None = None) -> AsyncIterator[Job]:
        """Every announced change, forever. `on_subscribed` runs after each (re)subscription,
        so a consumer can re-read state that changed while it was not listening."""

    async def close(self) -> None: ...
