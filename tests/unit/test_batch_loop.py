"""The batch loop's overlap of model and round trips, on the in-memory queue and store: the model
never waits for a batch's results to be stored, the next batch goes to the model before the last
results are stored, and nothing is acked before it is stored."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from typing import Any

import pytest

from batcher.settings import BatcherSettings
from batcher.worker import Batcher
from batchline import codec
from batchline.broker import Delivery
from batchline.memory import MemoryBroker, MemoryJobStore
from batchline.store import BatchRecord
from batchline.v1 import job_pb2
from tests.helpers import RecordingModel, submit, wait_for


class HeldResults(MemoryJobStore):
    """Holds every write of finished jobs until `release` is set; RUNNING goes through."""

    def __init__(self) -> None:
        super().__init__(job_ttl_s=60)
        self.release = asyncio.Event()
        self.held = 0

    async def transition_many(
        self, jobs: Sequence[job_pb2.Job], batch: BatchRecord | None = None
    ) -> list[bool]:
        if any(codec.is_terminal(job.status) for job in jobs):
            self.held += 1
            await self.release.wait()
        return await super().transition_many(jobs, batch)


class CountingAcks(MemoryBroker):
    """Remembers which messages were acked."""

    def __init__(self) -> None:
        super().__init__()
        self.acked: list[str] = []

    def _delivery(self, message: Any, unsettled: asyncio.Semaphore) -> Delivery:
        delivery = super()._delivery(message, unsettled)

        async def ack() -> None:
            self.acked.append(delivery.message_id)
            await settle()

        settle = delivery.ack
        return replace(delivery, ack=ack)


def started(
    store: MemoryJobStore, broker: MemoryBroker, model: RecordingModel
) -> tuple[Batcher, asyncio.Event, asyncio.Task[None]]:
    settings = BatcherSettings(max_batch_size=1, max_wait_ms=0, adaptive_wait=False, prefetch=8, worker="w")
    batcher = Batcher(settings, store, broker, model)
    stop = asyncio.Event()
    return batcher, stop, asyncio.create_task(batcher.run(stop))


async def test_the_next_pass_runs_while_the_last_results_are_stored_and_nothing_is_acked_early() -> None:
    store, broker, model = HeldResults(), CountingAcks(), RecordingModel()
    batcher, stop, running = started(store, broker, model)
    first = await submit(store, broker, "first")
    await wait_for(lambda: store.held == 1, 5, what="the first batch's results held")
    second = await submit(store, broker, "second")
    # The second pass runs although the first batch's results are not stored yet.
    await wait_for(lambda: model.computed == ["first", "second"], 5, what="the second pass")
    assert (await store.get(first)).status == codec.RUNNING  # type: ignore[union-attr]
    assert (await store.get(second)).status == codec.RUNNING  # type: ignore[union-attr]
    assert broker.acked == [] and batcher.counters.done == 0  # nothing acked or counted before stored
    store.release.set()
    await wait_for(lambda: batcher.counters.done == 2, 5, what="both batches stored")
    assert broker.acked == [first, second]
    assert [(await store.get(i)).status for i in (first, second)] == [codec.DONE, codec.DONE]  # type: ignore[union-attr]
    stop.set()
    await asyncio.wait_for(running, 5)


async def test_a_stop_waits_for_the_results_being_stored() -> None:
    store, broker = HeldResults(), CountingAcks()
    _, stop, running = started(store, broker, RecordingModel())
    job_id = await submit(store, broker, "stored before the batcher stops")
    await wait_for(lambda: store.held == 1, 5, what="the results held")
    stop.set()
    await asyncio.sleep(0.1)
    assert not running.done()  # still storing
    store.release.set()
    await asyncio.wait_for(running, 5)
    assert (await store.get(job_id)).status == codec.DONE  # type: ignore[union-attr]
    assert broker.acked == [job_id]


class RecordingExecutor(ThreadPoolExecutor):
    """The model thread, noting (on the event loop) each pass handed to it."""

    def __init__(self, log: list[str]) -> None:
        super().__init__(max_workers=1)
        self.log = log

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Future[Any]:
        batch = args[-1]
        self.log.append("pass " + ",".join(e.text for e in batch))
        return super().submit(fn, *args, **kwargs)


class RecordingStore(MemoryJobStore):
    def __init__(self, log: list[str]) -> None:
        super().__init__(job_ttl_s=60)
        self.log = log

    async def transition_many(
        self, jobs: Sequence[job_pb2.Job], batch: BatchRecord | None = None
    ) -> list[bool]:
        if any(codec.is_terminal(job.status) for job in jobs):
            self.log.append("store results")
        return await super().transition_many(jobs, batch)


async def test_the_next_pass_is_handed_to_the_model_before_the_last_results_are_stored() -> None:
    """When a pass ends with jobs waiting, the model gets its next batch first; the finished
    pass's results are stored after (storing first delayed the next pass's status read)."""
    log: list[str] = []
    model = RecordingModel()
    model.gate = threading.Event()
    store, broker = RecordingStore(log), MemoryBroker()
    batcher, stop, running = started(store, broker, model)
    batcher._lanes._executors = [RecordingExecutor(log)]
    await submit(store, broker, "first")
    await wait_for(lambda: log == ["pass first"], 5, what="the first pass")
    await submit(store, broker, "second")
    await wait_for(lambda: len(batcher._waiting) == 1, 5, what="the second job waiting")
    model.gate.set()
    await wait_for(lambda: batcher.counters.done == 2, 5, what="both batches stored")
    assert log == ["pass first", "pass second", "store results", "store results"]
    stop.set()
    await asyncio.wait_for(running, 5)


async def test_a_finished_pass_is_stored_at_once_when_nothing_waits() -> None:
    """At light load the results do not wait for a next batch that is not there."""
    log: list[str] = []
    store, broker = RecordingStore(log), MemoryBroker()
    batcher, stop, running = started(store, broker, RecordingModel())
    await submit(store, broker, "alone")
    await wait_for(lambda: batcher.counters.done == 1, 5, what="the result stored")
    stop.set()
    await asyncio.wait_for(running, 5)


class BrokenStatuses(MemoryJobStore):
    async def statuses(self, job_ids: Sequence[str]) -> list[int | None]:
        raise RuntimeError("a bug, not an outage")


async def test_an_unexpected_error_in_a_batch_stops_the_batcher_loudly() -> None:
    """A batch runs in its own task; an error the batcher does not handle still ends `run`
    (supervisors restart it, the unacked jobs are redelivered) rather than vanishing."""
    store, broker = BrokenStatuses(job_ttl_s=60), MemoryBroker()
    _, _, running = started(store, broker, RecordingModel())
    await submit(store, broker, "meets the bug")
    with pytest.raises(ExceptionGroup) as caught:
        await asyncio.wait_for(running, 5)
    assert caught.group_contains(RuntimeError, match="a bug")
