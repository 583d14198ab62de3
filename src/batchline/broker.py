"""The work-queue interface: RabbitMQ in production, memory in the embedded process."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from batchline.errors import BatchlineError
from batchline.tracing import TraceContext
from batchline.v1 import job_pb2


@dataclass
class Delivery:
    """One task handed to a batcher. Settle it exactly once: ack, reject or requeue."""

    body: bytes
    message_id: str  # the job id, readable even when the body is not
    attempt: int  # 1 for the first delivery
    ack: Callable[[], Awaitable[None]]
    reject: Callable[[], Awaitable[None]]  # to the dead-letter queue, never redelivered
    requeue: Callable[[], Awaitable[None]]  # back to the queue for another try
    headers: Mapping[str, object] = field(default_factory=dict)  # message headers (trace context)


class Broker(Protocol):
    async def publish(
        self,
        tasks: Sequence[job_pb2.InferenceTask],
        parents: Sequence[TraceContext] | None = None,
        whole: bool = False,
    ) -> list[BatchlineError | None]:
        """Publish persistent tasks and wait for every confirm, all at once. `parents`: each
        task's trace context (`tracing.headers()` of its call), default the current span's.
        `whole`: when the bounded queue has no room for all of them, refuse them all and write
        none (a SubmitBatch is all or nothing; what fits of it would only be cancelled).

        One entry per task: None when the broker confirmed it, QueueFull when the bounded
        queue refused it, Unavailable when the broker could not be reached in time.
        """

    def consume(self, prefetch: int) -> AsyncIterator[Delivery]:
        """Deliveries with at most `prefetch` unsettled at a time, until closed."""

    async def depth(self) -> tuple[int, int]:
        """Ready messages in the work queue and in the dead-letter queue."""

    async def ping(self) -> None:
        """Raise Unavailable unless the broker is connected."""

    async def close(self) -> None: ...
