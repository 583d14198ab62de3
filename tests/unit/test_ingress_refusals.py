"""A full queue is refused cheaply: after RabbitMQ refuses one publish, the ingress refuses new
jobs at once for queue_full_hold_s, without a round trip to the store or the broker; then one
call asks the broker again, and the others are refused at once until it has its answer."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

from batchline.errors import BatchlineError, QueueFull
from batchline.memory import MemoryBroker, MemoryJobStore
from batchline.settings import BrokerSettings
from batchline.tracing import TraceContext
from batchline.v1 import inference_pb2, job_pb2
from ingress.backlog import UNMEASURED_RETRY_S, Backlog
from ingress.servicer import InferenceServicer
from ingress.settings import IngressSettings


class CountingBroker(MemoryBroker):
    def __init__(self, max_length: int) -> None:
        super().__init__(max_length)
        self.publishes = 0
        self.answering = asyncio.Event()  # cleared: a publish waits for it (a broker slow to answer)
        self.answering.set()

    async def publish(
        self,
        tasks: Sequence[job_pb2.InferenceTask],
        parents: Sequence[TraceContext] | None = None,
        whole: bool = False,
    ) -> list[BatchlineError | None]:
        self.publishes += 1
        await self.answering.wait()
        return await super().publish(tasks, parents, whole)


def servicer(
    hold_s: float, max_length: int = 1, max_inflight: int = 2048
) -> tuple[InferenceServicer, MemoryJobStore, CountingBroker]:
    store, broker = MemoryJobStore(), CountingBroker(max_length)
    settings = IngressSettings(
        broker=BrokerSettings(max_length=max_length), queue_full_hold_s=hold_s, max_inflight=max_inflight
    )
    return InferenceServicer(settings, store, broker, Backlog(store)), store, broker


async def submit(ingress: InferenceServicer, text: str) -> Any:
    return await ingress.Submit(inference_pb2.SubmitRequest(text=text), None)  # type: ignore[arg-type]


async def test_after_a_refused_publish_the_next_jobs_are_refused_without_a_round_trip() -> None:
    ingress, store, broker = servicer(hold_s=0.2)
    await submit(ingress, "fits")
    with pytest.raises(QueueFull):
        await submit(ingress, "refused by the broker")
    assert broker.publishes == 2
    for _ in range(5):
        with pytest.raises(QueueFull) as held:
            await submit(ingress, "refused at once")
        assert held.value.retry_after_s == UNMEASURED_RETRY_S  # it still tells the client when to retry
    with pytest.raises(QueueFull):
        await ingress.SubmitBatch(inference_pb2.SubmitBatchRequest(texts=["a", "b"]), None)  # type: ignore[arg-type]
    assert broker.publishes == 2  # none of those reached the broker
    assert await store.left_queue() == 1  # and none stored a record (the broker's refusal was discarded)


async def after_the_hold() -> tuple[InferenceServicer, CountingBroker]:
    """An ingress whose queue the broker refused a publish to, once its hold (50 ms) is over."""
    ingress, _, broker = servicer(hold_s=0.05)
    await submit(ingress, "fits")
    with pytest.raises(QueueFull):
        await submit(ingress, "refused by the broker")
    await asyncio.sleep(0.06)
    return ingress, broker


async def test_the_hold_ends_and_the_broker_is_asked_again() -> None:
    ingress, broker = await after_the_hold()
    with pytest.raises(QueueFull):
        await submit(ingress, "asked again, still full")
    with pytest.raises(QueueFull):
        await submit(ingress, "held again: that refusal started a new hold")
    assert broker.publishes == 3


async def test_no_hold_when_it_is_off() -> None:
    ingress, _, broker = servicer(hold_s=0.0)
    await submit(ingress, "fits")
    for _ in range(3):
        with pytest.raises(QueueFull):
            await submit(ingress, "each asks the broker")
    assert broker.publishes == 4


async def test_while_one_call_asks_a_slow_broker_again_the_others_are_refused_at_once() -> None:
    ingress, broker = await after_the_hold()
    broker.answering.clear()
    asking = asyncio.ensure_future(submit(ingress, "asks again"))
    await asyncio.sleep(0.01)
    assert broker.publishes == 3 and not asking.done()  # it is waiting for the broker
    for _ in range(5):
        with pytest.raises(QueueFull):
            await asyncio.wait_for(submit(ingress, "refused while the broker is asked"), 0.1)
    with pytest.raises(QueueFull):
        await asyncio.wait_for(
            ingress.SubmitBatch(inference_pb2.SubmitBatchRequest(texts=["a"]), None),  # type: ignore[arg-type]
            0.1,
        )
    assert broker.publishes == 3  # none of those reached the broker

    deliveries = broker.consume(prefetch=1)  # a consumer makes room while the broker is slow to answer
    await (await anext(deliveries)).ack()
    broker.answering.set()
    await asking  # the call that asked is accepted...
    assert broker.publishes == 3
    await (await anext(deliveries)).ack()  # and room is made again
    await submit(ingress, "and the calls after it go through")  # the queue no longer counts as full
    assert broker.publishes == 4


async def test_past_the_in_flight_limit_a_call_is_refused_at_once() -> None:
    ingress, _, broker = servicer(hold_s=0.05, max_length=10, max_inflight=1)
    broker.answering.clear()
    first = asyncio.ensure_future(submit(ingress, "in flight"))
    await asyncio.sleep(0.01)
    with pytest.raises(QueueFull) as refused:
        await asyncio.wait_for(submit(ingress, "one too many"), 0.1)
    assert "in-flight limit" in str(refused.value) and broker.publishes == 1
    broker.answering.set()
    await first
    await submit(ingress, "taken once the first is answered")
    assert broker.publishes == 2
