"""The work queue against the real RabbitMQ. Publishing: one write per call, one confirm per
task, and aiormq's books left as they were found, whatever RabbitMQ answers. Consuming: a
batch's acks in one write, a requeue counted, a reject dead-lettered, and consuming again after
RabbitMQ cancels the consumer."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from dataclasses import replace

import aio_pika
import aiormq
import pytest
from aiormq.abc import ChannelFrame

from batchline import codec
from batchline.broker import Delivery
from batchline.errors import QueueFull, Unavailable
from batchline.rabbit import RabbitBroker
from batchline.settings import BrokerSettings
from batchline.v1 import job_pb2
from tests.helpers import queued_tasks, wait_for


def tasks(n: int, tag: str = "t") -> list[job_pb2.InferenceTask]:
    return [job_pb2.InferenceTask(job_id=codec.new_job_id(), text=f"{tag} {i}") for i in range(n)]


async def books(broker: RabbitBroker) -> tuple[int, int]:
    """What the publishing channel still holds: pending confirmations, message ids kept for returns."""
    assert broker._publish_channel is not None
    channel = await broker._publish_channel.get_underlay_channel()
    assert isinstance(channel, aiormq.Channel)
    return len(channel.confirmations), len(channel.message_id_delivery_tag)


Open = Callable[[BrokerSettings], Awaitable[RabbitBroker]]


def consuming(broker: RabbitBroker, prefetch: int) -> AsyncGenerator[Delivery]:
    """`broker.consume`, as the generator it is: `aclose` closes its channel."""
    deliveries = broker.consume(prefetch)
    assert isinstance(deliveries, AsyncGenerator)
    return deliveries


@pytest.fixture
async def open_broker() -> AsyncIterator[Open]:
    opened: list[RabbitBroker] = []

    async def open_(settings: BrokerSettings) -> RabbitBroker:
        opened.append(await RabbitBroker.connect(settings, name="batchline-test"))
        return opened[-1]

    yield open_
    for broker in opened:
        await broker.close()


async def test_concurrent_calls_publish_every_task_once_in_each_calls_order(
    broker_settings: BrokerSettings, open_broker: Open
) -> None:
    broker = await open_broker(broker_settings)
    calls = [tasks(64, f"call{c}") for c in range(4)]
    answers = await asyncio.gather(*(broker.publish(call) for call in calls))
    assert all(error is None for answer in answers for error in answer)
    found = await queued_tasks(broker_settings)
    assert sorted(t.job_id for t in found) == sorted(t.job_id for call in calls for t in call)
    for call in calls:  # a call's tasks are one write: nothing of another call comes between
        ids = [t.job_id for t in call]
        start = [t.job_id for t in found].index(ids[0])
        assert [t.job_id for t in found[start : start + 64]] == ids
    assert await books(broker) == (0, 0)


async def test_a_full_queue_refuses_every_task_of_a_call_with_queue_full(
    broker_settings: BrokerSettings, open_broker: Open
) -> None:
    settings = replace(broker_settings, max_length=5)
    broker = await open_broker(settings)
    for task in tasks(5):
        assert await broker.publish([task]) == [None]
    outcome = await broker.publish(tasks(4))
    assert all(isinstance(error, QueueFull) for error in outcome), outcome
    assert len(await queued_tasks(settings)) == 5  # the bound exactly (RabbitMQ alone admits 6)
    assert await books(broker) == (0, 0)


async def test_a_queue_filled_behind_the_brokers_back_is_refused_by_rabbitmqs_nack(
    broker_settings: BrokerSettings, open_broker: Open
) -> None:
    settings = replace(broker_settings, max_length=5)
    broker = await open_broker(settings)  # it saw an empty queue
    connection = await aio_pika.connect(settings.amqp_url)
    channel = await connection.channel(publisher_confirms=True)
    for _ in range(6):  # another publisher; RabbitMQ alone admits one past the bound
        await channel.default_exchange.publish(aio_pika.Message(b"x"), routing_key=settings.queue)
    await connection.close()
    [error] = await broker.publish(tasks(1))
    assert isinstance(error, QueueFull)
    assert await books(broker) == (0, 0)


async def depth(settings: BrokerSettings) -> int:
    connection = await aio_pika.connect(settings.amqp_url)
    queue = await (await connection.channel()).declare_queue(settings.queue, passive=True)
    await connection.close()
    return int(queue.declaration_result.message_count or 0)


async def take(settings: BrokerSettings, n: int) -> None:
    connection = await aio_pika.connect(settings.amqp_url)
    queue = await (await connection.channel()).get_queue(settings.queue, ensure=False)
    for _ in range(n):
        assert await queue.get(no_ack=True) is not None
    await connection.close()


async def fill(publishers: list[RabbitBroker], settings: BrokerSettings, groups: int) -> tuple[int, int]:
    """Every publisher writes `groups` groups of 256 at once (the ingress's largest group
    commit): the jobs accepted, and the depth after."""
    answers = await asyncio.gather(*(p.publish(tasks(256)) for p in publishers for _ in range(groups)))
    accepted = sum(error is None for answer in answers for error in answer)
    return accepted, await depth(settings)


async def test_groups_written_at_once_never_take_the_queue_past_its_bound(
    broker_settings: BrokerSettings, open_broker: Open
) -> None:
    # RabbitMQ 3.10 alone took a queue bounded at 500 to 512 from empty, and a group of 256
    # written at 380 all landed (636): it tells publishers the queue is full only afterwards.
    settings = replace(broker_settings, max_length=500)
    broker = await open_broker(settings)
    assert await fill([broker], settings, groups=3) == (500, 500)
    for _ in range(3):  # consumers take some, and the room is filled again, not overfilled
        await take(settings, 150)
        assert await fill([broker], settings, groups=2) == (150, 500)
    assert await books(broker) == (0, 0)


async def test_a_whole_call_that_does_not_fit_is_refused_without_writing_any(
    broker_settings: BrokerSettings, open_broker: Open
) -> None:
    settings = replace(broker_settings, max_length=500)
    broker = await open_broker(settings)
    assert await fill([broker], settings, groups=1) == (256, 256)
    await broker.publish(tasks(200))
    outcome = await broker.publish(tasks(64), whole=True)  # 44 places left
    assert all(isinstance(error, QueueFull) for error in outcome)
    assert await depth(settings) == 456
    assert await broker.publish(tasks(44), whole=True) == [None] * 44
    assert await depth(settings) == 500 and await books(broker) == (0, 0)


async def test_two_publishers_together_keep_the_bound_within_a_few_places(
    broker_settings: BrokerSettings, open_broker: Open
) -> None:
    # Each sees the other's messages only when it looks at the queue; near the bound each
    # writes an eighth of the room it saw (with RabbitMQ alone, two such publishers reached 874).
    settings = replace(broker_settings, max_length=500)
    publishers = [await open_broker(settings) for _ in range(2)]
    peak = (await fill(publishers, settings, groups=3))[1]
    for _ in range(3):
        await take(settings, 150)
        peak = max(peak, (await fill(publishers, settings, groups=2))[1])
    assert 500 <= peak <= 504


async def test_a_vanished_queue_returns_every_task_as_unroutable(
    broker_settings: BrokerSettings, open_broker: Open
) -> None:
    broker = await open_broker(broker_settings)
    connection = await aio_pika.connect(broker_settings.amqp_url)
    await (await connection.channel()).queue_delete(broker_settings.queue)
    await connection.close()
    outcome = await broker.publish(tasks(8))
    assert all(isinstance(e, Unavailable) and broker_settings.queue in str(e) for e in outcome)
    assert await books(broker) == (0, 0)


async def test_depth_counts_both_queues_and_looks_again_after_a_queue_was_missing(
    broker_settings: BrokerSettings, open_broker: Open
) -> None:
    broker = await open_broker(broker_settings)
    assert await broker.publish(tasks(3)) == [None] * 3
    assert await broker.depth() == (3, 0)
    connection = await aio_pika.connect(broker_settings.amqp_url)
    await (await connection.channel()).queue_delete(broker_settings.queue)
    await connection.close()
    with pytest.raises(Unavailable):  # the passive declare failed and closed its channel
        await broker.depth()
    await open_broker(broker_settings)  # declares the queue again
    assert await broker.depth() == (0, 0)  # on a fresh channel


async def test_a_closed_connection_refuses_every_task_without_raising(
    broker_settings: BrokerSettings, open_broker: Open
) -> None:
    broker = await open_broker(broker_settings)
    await broker.close()
    outcome = await broker.publish(tasks(3))
    assert all(isinstance(error, Unavailable) for error in outcome)


async def test_a_batchs_acks_go_out_in_one_write_and_settle_every_message(
    broker_settings: BrokerSettings, open_broker: Open, monkeypatch: pytest.MonkeyPatch
) -> None:
    broker = await open_broker(broker_settings)
    assert await broker.publish(tasks(21)) == [None] * 21
    writes: list[list[object]] = []
    marshall = ChannelFrame.marshall

    def counted(channel_number: int, frames: list[object], drain_future: object = None) -> object:
        writes.append([f for f in frames if isinstance(f, aiormq.spec.Basic.Ack)])
        return marshall(channel_number=channel_number, frames=frames, drain_future=drain_future)  # type: ignore[arg-type]

    monkeypatch.setattr(ChannelFrame, "marshall", counted)
    deliveries = consuming(broker, prefetch=32)
    batch = [await anext(deliveries) for _ in range(21)]
    for delivery in batch[:20]:  # the 21st is left unsettled
        await delivery.ack()
    await asyncio.sleep(0.2)
    assert [len(acks) for acks in writes if acks] == [20]
    await deliveries.aclose()  # closes the consuming channel: the unsettled one goes back
    left = await queued_tasks(broker_settings)
    assert [t.job_id for t in left] == [batch[20].message_id]


async def test_a_requeued_delivery_comes_back_counted_and_a_rejected_one_goes_dead(
    broker_settings: BrokerSettings, open_broker: Open
) -> None:
    broker = await open_broker(broker_settings)
    sent = tasks(2)
    assert await broker.publish(sent) == [None, None]
    deliveries = consuming(broker, prefetch=8)
    first = [await anext(deliveries) for _ in range(2)]
    assert [(d.message_id, d.attempt) for d in first] == [(t.job_id, 1) for t in sent]
    await first[0].requeue()
    await first[1].reject()
    again = await asyncio.wait_for(anext(deliveries), 10)
    assert (again.message_id, again.attempt) == (sent[0].job_id, 2)
    await again.ack()
    await deliveries.aclose()
    dead = await queued_tasks(replace(broker_settings, queue=broker_settings.dead_letter_queue))
    assert [t.job_id for t in dead] == [sent[1].job_id]
    assert await queued_tasks(broker_settings) == []


async def test_a_consumer_cancelled_by_rabbitmq_consumes_again_once_its_queue_is_back(
    broker_settings: BrokerSettings, open_broker: Open, caplog: pytest.LogCaptureFixture
) -> None:
    broker = await open_broker(broker_settings)
    deliveries = consuming(broker, prefetch=8)
    assert await broker.publish(tasks(1, "before")) == [None]
    await (await anext(deliveries)).ack()
    connection = await aio_pika.connect(broker_settings.amqp_url)
    await (await connection.channel()).queue_delete(broker_settings.queue)
    await connection.close()
    await wait_for(lambda: "cancelled by the broker" in caplog.text, what="aiormq to log the Basic.Cancel")
    await open_broker(broker_settings)  # declares the queue again
    after = tasks(1, "after")
    assert await broker.publish(after) == [None]
    delivery = await asyncio.wait_for(anext(deliveries), 15)
    assert delivery.message_id == after[0].job_id
    await delivery.ack()
    await deliveries.aclose()
