"""The in-memory store keeps the same promises as the Redis one (which has its own tests)."""

from __future__ import annotations

import asyncio

from batchline import codec
from batchline.errors import QueueFull
from batchline.memory import MemoryBroker, MemoryJobStore
from batchline.v1 import job_pb2


def job(job_id: str, status: int) -> job_pb2.Job:
    return job_pb2.Job(job_id=job_id, status=status)  # type: ignore[arg-type]


async def test_status_only_moves_forward_and_each_change_is_announced_once() -> None:
    store = MemoryJobStore()
    events: list[int] = []

    async def listen() -> None:
        async for event in store.events():
            events.append(event.status)

    listener = asyncio.create_task(listen())
    await asyncio.sleep(0)
    await store.create(job("a", codec.QUEUED))
    assert await store.transition(job("a", codec.RUNNING))
    assert await store.transition(job("a", codec.DONE))
    assert not await store.transition(job("a", codec.QUEUED))
    assert not await store.transition(job("a", codec.CANCELLED))
    assert not await store.transition(job("a", codec.DONE))
    await asyncio.sleep(0)
    listener.cancel()
    assert events == [codec.RUNNING, codec.DONE]
    stored = await store.get("a")
    assert stored is not None and stored.status == codec.DONE


async def test_idempotency_key_returns_the_first_job() -> None:
    store = MemoryJobStore()
    first, created = await store.create(job("a", codec.QUEUED), "key-1")
    again, created_again = await store.create(job("b", codec.QUEUED), "key-1")
    assert created and not created_again
    assert again.job_id == first.job_id == "a"
    assert await store.get("b") is None


async def test_records_expire() -> None:
    store = MemoryJobStore(job_ttl_s=0.01)
    await store.create(job("a", codec.QUEUED))
    await asyncio.sleep(0.02)
    assert await store.get("a") is None


async def test_memory_broker_is_bounded_and_requeues() -> None:
    broker = MemoryBroker(max_length=2, delivery_limit=2)
    tasks = [job_pb2.InferenceTask(job_id=str(i), text="t") for i in range(3)]
    results = await broker.publish(tasks)
    assert [r is None for r in results] == [True, True, False]
    stream = broker.consume(prefetch=4)
    first = await anext(stream)
    await first.requeue()
    again = await anext(stream)
    assert again.message_id == first.message_id and again.attempt == 2
    await again.requeue()  # past the delivery limit: dead-lettered
    assert (await broker.depth()) == (1, 1)


async def test_a_whole_publish_that_does_not_fit_writes_none() -> None:
    broker = MemoryBroker(max_length=3)
    tasks = [job_pb2.InferenceTask(job_id=str(i), text="t") for i in range(3)]
    assert await broker.publish(tasks[:1]) == [None]
    refused = await broker.publish([*tasks[1:], job_pb2.InferenceTask(job_id="3")], whole=True)
    assert len(refused) == 3 and all(isinstance(r, QueueFull) for r in refused)
    assert (await broker.depth()) == (1, 0)
    assert await broker.publish(tasks[1:], whole=True) == [None, None]


async def test_queue_positions_count_the_jobs_still_ahead_and_sequences_are_stamped() -> None:
    store = MemoryJobStore()
    for name in "abcd":
        await store.create(job(name, codec.QUEUED))
    assert [await store.queue_position(n) for n in "abcd"] == [1, 2, 3, 4]
    assert await store.transition(job("a", codec.RUNNING))  # started: left the queue
    await store.discard("b")  # never published: left too
    assert [await store.queue_position(n) for n in "abcd"] == [None, None, 1, 2]
    assert await store.left_queue() == 2
    assert await store.transition(job("a", codec.DONE))  # RUNNING -> DONE: not a queue exit
    assert await store.left_queue() == 2
    stored = await store.get("a")
    assert stored is not None and stored.sequence == 3


async def test_the_oldest_queued_job_is_tracked_as_jobs_leave() -> None:
    store = MemoryJobStore()
    for name, accepted in (("a", 100.0), ("b", 200.0), ("c", 300.0)):
        queued = job(name, codec.QUEUED)
        queued.trace.accepted_at.CopyFrom(codec.ts_from_seconds(accepted))
        await store.create(queued)
    assert await store.oldest_queued_s() == 100.0
    assert await store.transition(job("a", codec.RUNNING))
    await store.discard("b")
    assert await store.oldest_queued_s() == 300.0
    assert await store.transition(job("c", codec.DONE))
    assert await store.oldest_queued_s() is None
