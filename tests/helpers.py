"""Test helpers: waiting on conditions with deadlines (never bare sleeps), local ports, and
small models."""

from __future__ import annotations

import asyncio
import collections
import threading
import time
from collections.abc import Awaitable, Callable, Sequence

import aio_pika

from batcher.model import BatchOutput, Encoded
from batcher.simulated import SimulatedModel
from batchline import codec
from batchline.broker import Broker
from batchline.redis_store import RedisJobStore
from batchline.settings import BrokerSettings
from batchline.store import JobStore
from batchline.v1 import job_pb2
from bench.stack import bindable as bindable  # the tests pick ports as the benchmarks do
from bench.stack import free_port as free_port


async def wait_for(
    condition: Callable[[], Awaitable[bool] | bool],
    timeout_s: float = 10.0,
    every_s: float = 0.02,
    what: str = "",
) -> None:
    """Poll `condition` until it holds; fail with `what` after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        result = condition()
        if not isinstance(result, bool):
            result = await result
        if result:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s}s waiting for {what or condition}")
        await asyncio.sleep(every_s)


async def count_done_events(store: RedisJobStore, counts: collections.Counter[str]) -> asyncio.Task[None]:
    """Count every DONE announcement per job from now on (the task runs until cancelled)."""
    subscribed = asyncio.Event()

    async def on_subscribed() -> None:
        subscribed.set()

    async def listen() -> None:
        async for job in store.events(on_subscribed):
            if job.status == codec.DONE:
                counts[job.job_id] += 1

    task = asyncio.create_task(listen())
    await asyncio.wait_for(subscribed.wait(), 5)
    return task


def wait_until(condition: Callable[[], bool], timeout_s: float = 10.0, what: str = "") -> None:
    """`wait_for` for tests that are not async (blocking calls to services in subprocesses)."""
    asyncio.run(wait_for(condition, timeout_s, 0.1, what))


class RecordingModel(SimulatedModel):
    """The simulated model, zero-cost by default, that remembers every text it computed
    and fails any batch containing a poison marker."""

    POISON = "<<poison>>"

    def __init__(self, fixed_ms: float = 0.0, per_token_ms: float = 0.0) -> None:
        super().__init__(fixed_ms, per_token_ms)
        self.computed: list[str] = []
        self.batch_sizes: list[int] = []
        self.gate: threading.Event | None = None  # when set up, each pass waits for it
        self._lock = threading.Lock()

    def predict(self, batch: Sequence[Encoded]) -> BatchOutput:
        if self.gate is not None:
            self.gate.wait(timeout=30)
        if any(self.POISON in e.text for e in batch):
            raise ValueError("poison input")
        output = super().predict(batch)
        with self._lock:
            self.computed.extend(e.text for e in batch)
            self.batch_sizes.append(len(batch))
        return output


async def submit(store: JobStore, broker: Broker, text: str) -> str:
    """Queue one job as the ingress does (record, then task), for a batcher on `store`/`broker`."""
    task = job_pb2.InferenceTask(job_id=codec.new_job_id(), text=text)
    task.accepted_at.CopyFrom(codec.now_ts())
    await store.create(codec.queued_job(task))
    assert await broker.publish([task]) == [None]
    return task.job_id


async def queued_tasks(settings: BrokerSettings) -> list[job_pb2.InferenceTask]:
    """Take every task out of the work queue, in order, checking each message's properties."""
    connection = await aio_pika.connect(settings.amqp_url)
    channel = await connection.channel()
    queue = await channel.get_queue(settings.queue, ensure=False)
    tasks = []
    while (message := await queue.get(no_ack=True, fail=False)) is not None:
        task = job_pb2.InferenceTask.FromString(message.body)
        assert message.delivery_mode == aio_pika.DeliveryMode.PERSISTENT
        assert message.message_id == task.job_id and message.type == "batchline.v1.InferenceTask"
        tasks.append(task)
    await connection.close()
    return tasks
