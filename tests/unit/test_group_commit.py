"""Group commit for single Submits: a lone Submit goes out at once; Submits that arrive while a
group is in flight go out together next; every caller gets its own task's answer."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from batchline import codec
from batchline.errors import BatchlineError, QueueFull, Unavailable
from batchline.memory import MemoryBroker, MemoryJobStore
from batchline.tracing import TraceContext
from batchline.v1 import inference_pb2, job_pb2
from ingress.backlog import Backlog
from ingress.group import GroupCommit
from ingress.servicer import InferenceServicer
from ingress.settings import IngressSettings


class GatedBroker(MemoryBroker):
    """Holds each publish until the test opens the gate; records every call's size."""

    def __init__(self, max_length: int = 10_000) -> None:
        super().__init__(max_length)
        self.calls: list[int] = []
        self.gate = asyncio.Event()
        self.gate.set()

    async def publish(
        self,
        tasks: Sequence[job_pb2.InferenceTask],
        parents: Sequence[TraceContext] | None = None,
        whole: bool = False,
    ) -> list[BatchlineError | None]:
        self.calls.append(len(tasks))
        await self.gate.wait()
        return await super().publish(tasks, parents, whole)


class DownStore(MemoryJobStore):
    async def create_many(self, jobs: Sequence[job_pb2.Job]) -> None:
        raise Unavailable("Redis is unreachable")


def job(text: str) -> tuple[job_pb2.InferenceTask, job_pb2.Job]:
    task = job_pb2.InferenceTask(job_id=codec.new_job_id(), text=text)
    task.accepted_at.CopyFrom(codec.now_ts())
    return task, codec.queued_job(task)


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_a_lone_submit_goes_out_at_once_as_a_group_of_one() -> None:
    store, broker = MemoryJobStore(), GatedBroker()
    task, record = job("alone")
    assert await GroupCommit(store, broker).submit(task, record) is None
    assert broker.calls == [1]
    stored = await store.get(task.job_id)
    assert stored is not None and stored.status == codec.QUEUED


async def test_submits_that_arrive_while_a_group_is_in_flight_go_out_together() -> None:
    store, broker = MemoryJobStore(), GatedBroker()
    groups = GroupCommit(store, broker)
    broker.gate.clear()
    first = asyncio.create_task(groups.submit(*job("first")))
    await settle()
    assert broker.calls == [1]  # in flight, held at the broker
    later = [asyncio.create_task(groups.submit(*job(f"later {i}"))) for i in range(5)]
    await settle()
    assert broker.calls == [1]  # they wait for the group in flight
    broker.gate.set()
    assert await asyncio.gather(first, *later) == [None] * 6
    assert broker.calls == [1, 5]  # then go out in one store and one publish


async def test_a_group_is_at_most_max_group_jobs() -> None:
    store, broker = MemoryJobStore(), GatedBroker()
    groups = GroupCommit(store, broker, max_group=4)
    broker.gate.clear()
    calls = [asyncio.create_task(groups.submit(*job(f"t{i}"))) for i in range(11)]
    await settle()
    broker.gate.set()
    await asyncio.gather(*calls)
    assert broker.calls == [4, 4, 3]


async def test_each_caller_gets_its_own_tasks_refusal() -> None:
    store, broker = MemoryJobStore(), GatedBroker(max_length=3)
    groups = GroupCommit(store, broker)
    broker.gate.clear()
    calls = [asyncio.create_task(groups.submit(*job(f"t{i}"))) for i in range(5)]
    await settle()
    broker.gate.set()
    answers = await asyncio.gather(*calls)
    assert broker.calls == [5]  # all arrived before the group went out
    assert answers[:3] == [None] * 3
    assert all(isinstance(answer, QueueFull) for answer in answers[3:])


async def test_when_the_store_is_down_every_caller_of_the_group_hears_it_and_nothing_is_published() -> None:
    broker = GatedBroker()
    groups = GroupCommit(DownStore(), broker)
    calls = [asyncio.create_task(groups.submit(*job(f"t{i}"))) for i in range(3)]
    for answer in await asyncio.gather(*calls, return_exceptions=True):
        assert isinstance(answer, Unavailable)
    assert broker.calls == []


async def test_a_caller_that_goes_away_does_not_stop_its_group() -> None:
    store, broker = MemoryJobStore(), GatedBroker()
    groups = GroupCommit(store, broker)
    broker.gate.clear()
    first = asyncio.create_task(groups.submit(*job("first")))
    await settle()
    (gone_task, gone_job), (kept_task, kept_job) = job("gone"), job("kept")
    gone = asyncio.create_task(groups.submit(gone_task, gone_job))
    kept = asyncio.create_task(groups.submit(kept_task, kept_job))
    await settle()
    gone.cancel()
    broker.gate.set()
    assert await first is None and await kept is None
    with pytest.raises(asyncio.CancelledError):
        await gone
    assert broker.calls == [1, 2]  # the cancelled call's job was already in the group


async def test_the_ingress_forgets_the_record_of_a_grouped_submit_the_broker_refused() -> None:
    store, broker = MemoryJobStore(), GatedBroker(max_length=1)
    settings = IngressSettings(queue_full_hold_s=0)
    ingress = InferenceServicer(settings, store, broker, Backlog(store))

    async def submit(text: str) -> inference_pb2.SubmitResponse:
        return await ingress.Submit(inference_pb2.SubmitRequest(text=text), None)  # type: ignore[arg-type]

    broker.gate.clear()
    calls = [asyncio.create_task(submit(f"t{i}")) for i in range(3)]
    await settle()
    broker.gate.set()
    answers = await asyncio.gather(*calls, return_exceptions=True)
    accepted = [a for a in answers if isinstance(a, inference_pb2.SubmitResponse)]
    assert len(accepted) == 1 and all(isinstance(a, QueueFull) for a in answers[1:])
    assert broker.calls == [3]
    assert await store.get(accepted[0].job_id) is not None
    assert await store.left_queue() == 2  # both refused records were discarded
