"""The work queue on RabbitMQ: a bounded quorum queue, confirmed persistent publishes,
prefetch as the consumer's backpressure, and a dead-letter queue for poison."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

import aio_pika
import aiormq
from aio_pika.abc import AbstractChannel, AbstractRobustConnection
from aiormq.abc import ChannelFrame, DeliveredMessage
from opentelemetry.trace import Span, SpanKind

from batchline import frames, names, tracing
from batchline.broker import Delivery
from batchline.errors import BatchlineError, QueueFull, Unavailable
from batchline.room import QueueRoom
from batchline.settings import BrokerSettings, redact_url
from batchline.v1 import job_pb2

log = logging.getLogger(__name__)

PERSISTENT = int(aio_pika.DeliveryMode.PERSISTENT)

# What can go wrong talking to RabbitMQ, short of a nack: all mean "not reachable now".
# ChannelInvalidStateError (a publish on a channel the robust connection has not reopened yet)
# is a RuntimeError, not an AMQPError, so it is named.
BROKER_ERRORS = (
    aiormq.exceptions.AMQPError,
    aiormq.exceptions.ChannelInvalidStateError,
    aio_pika.exceptions.AMQPException,
    ConnectionError,
    OSError,
)


def queue_arguments(settings: BrokerSettings) -> dict[str, Any]:
    """The work queue: quorum (it counts deliveries), bounded, refusing when full."""
    return {
        "x-queue-type": "quorum",
        "x-max-length": settings.max_length,
        "x-overflow": "reject-publish",
        "x-dead-letter-exchange": "",
        "x-dead-letter-routing-key": settings.dead_letter_queue,
        "x-delivery-limit": settings.delivery_limit,
    }


def dead_letter_arguments(settings: BrokerSettings) -> dict[str, Any]:
    """The dead-letter queue keeps the newest poison, bounded too."""
    return {"x-queue-type": "quorum", "x-max-length": settings.max_length, "x-overflow": "drop-head"}


class RabbitBroker:
    """`Broker` on RabbitMQ through aio-pika's robust (self-reconnecting) connection."""

    def __init__(self, settings: BrokerSettings, connection: AbstractRobustConnection) -> None:
        self._settings = settings
        self._connection = connection
        self._publish_channel: AbstractChannel | None = None
        self._room = QueueRoom(settings.max_length)
        self._near_full = asyncio.Lock()  # near the bound, one call writes at a time
        self._look_channel: AbstractChannel | None = None
        self._looking: asyncio.Future[int] | None = None

    @classmethod
    async def connect(cls, settings: BrokerSettings, name: str, timeout_s: float = 10.0) -> RabbitBroker:
        """Connect, declare both queues, and open the confirmed publishing channel."""
        try:
            connection = await aio_pika.connect_robust(
                settings.amqp_url, timeout=timeout_s, client_properties={"connection_name": name}
            )
        except (*BROKER_ERRORS, TimeoutError) as exc:
            raise Unavailable(f"RabbitMQ at {redact_url(settings.amqp_url)} is unreachable: {exc}") from exc
        broker = cls(settings, connection)
        channel = await connection.channel()
        await channel.declare_queue(
            settings.dead_letter_queue, durable=True, arguments=dead_letter_arguments(settings)
        )
        work = await channel.declare_queue(settings.queue, durable=True, arguments=queue_arguments(settings))
        broker._room.seen(_count(work), broker._room.looking())
        await channel.close()
        broker._publish_channel = await connection.channel(publisher_confirms=True)
        log.info("connected to RabbitMQ at %s, queue %s", redact_url(settings.amqp_url), settings.queue)
        return broker

    async def publish(
        self,
        tasks: Sequence[job_pb2.InferenceTask],
        parents: Sequence[tracing.TraceContext] | None = None,
        whole: bool = False,
    ) -> list[BatchlineError | None]:
        """Publish the tasks within one publish timeout, keeping the queue's bound
        (`batchline.room`): far from it, all in one write; near it, only what fits, a piece at
        a time after a fresh look at the queue."""
        if not tasks:
            return []
        assert self._publish_channel is not None
        if self._publish_channel.is_closed:  # refuse at once: reopening waits for a reconnect
            return [Unavailable("RabbitMQ is unreachable: the publishing channel is closed")] * len(tasks)
        deadline = asyncio.get_running_loop().time() + self._settings.publish_timeout_s
        if self._room.must_look(len(tasks)):
            with contextlib.suppress(Unavailable):  # then the publish says so
                await self._look(deadline)
        elif self._room.may_look():
            self._look_soon()
        if self._room.at_once(len(tasks)):
            return await self._publish(tasks, parents, deadline)
        return await self._publish_near_full(tasks, parents, deadline, whole)

    async def _publish_near_full(
        self,
        tasks: Sequence[job_pb2.InferenceTask],
        parents: Sequence[tracing.TraceContext] | None,
        deadline: float,
        whole: bool,
    ) -> list[BatchlineError | None]:
        """One call at a time: look, write what the room allows, again until all are written;
        refuse the rest with QueueFull once there is no room (`whole`: all of them, unless the
        first look finds room for all), and all that follows a piece's first refusal with that
        refusal."""
        try:
            async with asyncio.timeout_at(deadline):
                await self._near_full.acquire()
        except TimeoutError:
            return [self._too_late()] * len(tasks)
        outcomes: list[BatchlineError | None] = []
        try:
            while (start := len(outcomes)) < len(tasks):
                try:
                    await self._look(deadline)
                    left = len(tasks) - start
                    n = left if self._room.at_once(left) else self._room.fits()  # far from it after all
                except Unavailable:  # cannot look: RabbitMQ's own bound decides
                    n = self._room.chunk
                if n == 0 or (whole and start == 0 and self._room.room() < len(tasks)):
                    full = QueueFull(f"queue {self._settings.queue} is full", retry_after_s=1.0)
                    return outcomes + [full] * (len(tasks) - start)
                piece = slice(start, start + n)
                outcomes += await self._publish(tasks[piece], parents[piece] if parents else None, deadline)
                if (error := next((e for e in outcomes[start:] if e is not None), None)) is not None:
                    return outcomes + [error] * (len(tasks) - len(outcomes))
            return outcomes
        finally:
            self._near_full.release()

    async def _publish(
        self,
        tasks: Sequence[job_pb2.InferenceTask],
        parents: Sequence[tracing.TraceContext] | None,
        deadline: float,
    ) -> list[BatchlineError | None]:
        """Write every task in one go on the confirmed channel, then collect RabbitMQ's answers
        until the deadline."""
        assert self._publish_channel is not None
        loop = asyncio.get_running_loop()
        self._room.written(len(tasks))
        try:
            async with asyncio.timeout_at(deadline):
                channel = await self._publish_channel.get_underlay_channel()
                assert isinstance(channel, aiormq.Channel)  # its books are what _write_all uses
                confirmations = await self._write_all(channel, tasks, parents)
        except (*BROKER_ERRORS, TimeoutError) as exc:
            self._room.settled(confirmed=0, refused=len(tasks))
            return [Unavailable(f"RabbitMQ is unreachable: {str(exc) or 'no channel in time'}")] * len(tasks)
        try:
            await asyncio.wait(confirmations, timeout=max(0.0, deadline - loop.time()))
        finally:  # past the deadline, or the call itself cancelled
            for confirmation in confirmations:
                confirmation.cancel()  # aiormq drops a confirm that comes after this
        outcomes = [self._outcome(confirmation) for confirmation in confirmations]
        # One that timed out may be in the queue: the room counts it as confirmed until a look.
        pairs = zip(confirmations, outcomes, strict=True)
        refused = sum(not confirmation.cancelled() and error is not None for confirmation, error in pairs)
        self._room.settled(confirmed=len(tasks) - refused, refused=refused)
        return outcomes

    def _too_late(self) -> Unavailable:
        return Unavailable(f"RabbitMQ did not confirm within {self._settings.publish_timeout_s}s")

    async def _look(self, deadline: float) -> None:
        """Look at the queue's depth now, or wait for the look under way, until the deadline. Any
        look will do: the room counts whatever of this publisher's it may have missed."""
        try:
            async with asyncio.timeout_at(deadline):
                await asyncio.shield(self._look_soon())
        except TimeoutError:
            raise self._too_late() from None

    def _look_soon(self) -> asyncio.Future[int]:
        """The look under way, or a new one."""
        if self._looking is None or self._looking.done():
            self._looking = asyncio.ensure_future(self._look_now())
            self._looking.add_done_callback(lambda done: done.cancelled() or done.exception())
        return self._looking

    async def _look_now(self) -> int:
        mark = self._room.looking()
        work = await self._ready(self._settings.queue)
        self._room.seen(work, mark)
        return work

    async def _ready(self, queue: str) -> int:
        """Ready messages in `queue`, as its leader counts them against its bound: a passive
        declare on a channel kept for these (a passive declare of a missing queue closes it)."""
        try:
            async with asyncio.timeout(self._settings.publish_timeout_s):
                if self._look_channel is None or self._look_channel.is_closed:
                    self._look_channel = await self._connection.channel()
                channel = await self._look_channel.get_underlay_channel()
                declared = await channel.queue_declare(queue, passive=True)
        except (*BROKER_ERRORS, TimeoutError) as exc:
            raise Unavailable(f"RabbitMQ is unreachable: {exc!r}") from exc
        return int(declared.message_count or 0)

    async def _write_all(
        self,
        channel: aiormq.Channel,
        tasks: Sequence[job_pb2.InferenceTask],
        parents: Sequence[tracing.TraceContext] | None,
    ) -> list[asyncio.Future[object]]:
        """All the tasks' frames in one write under the channel's lock, each with a confirmation
        registered in aiormq's own books, so its reader settles them (ack, nack, return, or the
        channel closing). aiormq's `basic_publish` does the same for one message with a lock, a
        write-queue hop, a socket write and a timeout of its own; for SubmitBatches of 64, side
        by side, this cut the ingress's CPU per job from 131 to 56 µs and RabbitMQ's from 76 to
        31. The frames are encoded by `batchline.frames`, a body split at the connection's frame
        size. Tied to aiormq 7.2 (pinned); the publish tests against the real RabbitMQ fail if
        its books change."""
        payload: list[bytes] = []
        confirmations: list[asyncio.Future[object]] = []
        current = tracing.headers()  # the call's span
        # mandatory: a queue that is gone returns the message instead of dropping it
        method = frames.publish_method(channel.number, self._settings.queue, mandatory=True)
        async with channel.lock:
            first_tag = channel.delivery_tag
            try:
                for n, task in enumerate(tasks):
                    body = task.SerializeToString()
                    span = tracing.start_span(
                        "publish",
                        SpanKind.PRODUCER,
                        parent=parents[n] if parents else current,
                        start_s=time.time(),
                        attributes={"batchline.job_id": task.job_id},
                    )
                    payload.append(
                        frames.publish(
                            method,
                            channel.number,
                            body,
                            max_content=channel.max_content_size,
                            message_id=task.job_id,
                            content_type=names.TASK_CONTENT_TYPE,
                            message_type=names.TASK_TYPE,
                            delivery_mode=PERSISTENT,
                            headers=tracing.headers(span),  # the batcher continues the trace here
                        )
                    )
                    channel.delivery_tag += 1
                    confirmation = channel.create_future()
                    channel.confirmations[channel.delivery_tag] = confirmation
                    channel.message_id_delivery_tag[task.job_id] = channel.delivery_tag  # for returns
                    confirmation.add_done_callback(_settle(channel, task.job_id, channel.delivery_tag, span))
                    confirmations.append(confirmation)
                written = channel.create_future()
                await channel.write_queue.put(
                    ChannelFrame(payload=b"".join(payload), should_close=False, drain_future=written)
                )
            except BaseException:  # nothing reached the broker: give the tags back
                for tag in range(first_tag + 1, channel.delivery_tag + 1):
                    channel.confirmations.pop(tag, None)
                for confirmation in confirmations:
                    confirmation.cancel()
                channel.delivery_tag = first_tag
                raise
        try:
            await written
        except Exception as exc:  # the channel closed under the write; aiormq rejected its futures
            raise ConnectionError(f"the publishing channel closed: {exc!r}") from exc
        return confirmations

    def _outcome(self, send: asyncio.Future[object]) -> BatchlineError | None:
        """What one publish came to: None once RabbitMQ confirmed it into the queue."""
        if send.cancelled():
            return self._too_late()
        exc = send.exception()
        if isinstance(exc, aiormq.exceptions.DeliveryError):
            # reject-publish: the queue is at x-max-length and RabbitMQ nacked.
            return QueueFull(f"queue {self._settings.queue} is full", retry_after_s=1.0)
        if exc is not None:  # the channel or connection closed (aiormq rejects what it holds)
            return Unavailable(f"RabbitMQ is unreachable: {str(exc) or type(exc).__name__}")
        if not isinstance(send.result(), aiormq.spec.Basic.Ack):  # returned: no such queue
            return Unavailable(f"RabbitMQ has no queue {self._settings.queue} to route to")
        return None

    async def consume(self, prefetch: int) -> AsyncIterator[Delivery]:
        """Deliveries, forever. When the consuming channel closes (the connection dropped),
        consume again on a fresh channel once the robust connection is back. Messages that
        were in flight on the lost channel are redelivered by RabbitMQ."""
        backoff_s = 0.1
        while True:
            channel = None
            try:
                await self._connection.connected.wait()  # the robust connection is back
                channel = await self._connection.channel()
                await channel.set_qos(prefetch_count=prefetch)
                underlay = await channel.get_underlay_channel()
                assert isinstance(underlay, aiormq.Channel)
                # On aiormq's channel: the robust channel would reopen its own, without this
                # consumer, and this loop consumes afresh instead.
                inbox = Inbox(underlay)
                try:
                    await underlay.basic_consume(self._settings.queue, inbox.put)
                    log.info("consuming %s", self._settings.queue)
                    backoff_s = 0.1
                    while (delivery := await inbox.next()) is not None:
                        yield delivery
                    log.info("consuming %s ended: %s", self._settings.queue, inbox.ended)
                finally:
                    inbox.close()
            except (*BROKER_ERRORS, RuntimeError) as exc:  # aio-pika: "connection closed" is one
                log.warning(
                    "consuming %s stopped (%s); again when RabbitMQ is back", self._settings.queue, exc
                )
            finally:
                if channel is not None and not channel.is_closed:
                    with contextlib.suppress(*BROKER_ERRORS, RuntimeError):
                        await channel.close()
            await asyncio.sleep(backoff_s)
            backoff_s = min(backoff_s * 2, 5.0)

    async def depth(self) -> tuple[int, int]:
        return await self._look_now(), await self._ready(self._settings.dead_letter_queue)

    async def ping(self) -> None:
        if self._connection.is_closed or not self._connection.connected.is_set():
            raise Unavailable("RabbitMQ connection is down")

    async def close(self) -> None:
        if self._looking is not None:
            self._looking.cancel()
        await self._connection.close()


def _settle(
    channel: aiormq.Channel, message_id: str, tag: int, span: Span | None
) -> Callable[[asyncio.Future[object]], None]:
    """When a publish is settled: forget its message id (kept only to match a return) and end
    its span."""

    def settled(_: asyncio.Future[object]) -> None:
        if channel.message_id_delivery_tag.get(message_id) == tag:
            del channel.message_id_delivery_tag[message_id]
        if span is not None:
            span.end()

    return settled


def _count(queue: Any) -> int:
    result = queue.declaration_result
    return int(result.message_count or 0)


class Acks:
    """The acks of one consuming channel, written together: `add` queues a delivery's ack and
    returns, and every ack queued before the event loop next turns goes to RabbitMQ in one
    write. aiormq's `basic_ack` (what aio-pika's `ack` awaits) is, per message, a frame of its
    own, a write-queue hop and a wait for the socket to drain; a batch's 16 acks were 16 of
    each; in one write, at bf16 saturation, RabbitMQ's CPU per job went from 0.25 to 0.18 ms
    and the batcher's event loop's from 0.67 to 0.62 (docs/benchmarks/event-loop-cpu/acks-ab.txt).
    An ack that never reaches RabbitMQ (the channel closed first) is a redelivery, and a
    finished job is then acked without recompute."""

    def __init__(self, channel: aiormq.Channel) -> None:
        self._channel = channel
        self._tags: list[int] = []
        self._writing: asyncio.Task[None] | None = None

    def add(self, delivery_tag: int) -> None:
        self._tags.append(delivery_tag)
        if self._writing is None:  # starts once the current step of the caller yields
            self._writing = asyncio.ensure_future(self._write())

    async def _write(self) -> None:
        tags, self._tags, self._writing = self._tags, [], None
        channel = self._channel
        try:
            if channel.is_closed:
                raise aiormq.exceptions.ChannelInvalidStateError(f"{channel!r} closed")
            frames = [aiormq.spec.Basic.Ack(delivery_tag=tag) for tag in tags]
            await channel.write_queue.put(ChannelFrame.marshall(channel_number=channel.number, frames=frames))
        except BROKER_ERRORS as exc:
            log.warning("could not ack %d messages (RabbitMQ redelivers them): %s", len(tags), exc)


class Inbox:
    """What one consumer on one channel has been delivered and not yet taken. aiormq runs
    `put` as one task per delivery, and `put` only turns the message into a `Delivery` and
    queues it; at most the prefetch count wait here. aio-pika's queue iterator, used before,
    ran a second task per delivery and built an `IncomingMessage` of every property: side by
    side, consuming and acking cost 155 us of CPU per delivery through it and 98 through this,
    and the batcher's event loop at bf16 saturation 0.68 against 0.63 ms per job
    (docs/benchmarks/event-loop-cpu/consume-ab.txt). It ends, and `next` returns None, when
    the channel closes or RabbitMQ cancels the consumer (its queue was deleted); the iterator
    it replaced never noticed a cancel, and its batcher stopped consuming for good."""

    def __init__(self, channel: aiormq.Channel) -> None:
        self._channel = channel
        self._acks = Acks(channel)
        self._waiting: collections.deque[Delivery] = collections.deque()
        self._wakeup: asyncio.Future[None] | None = None
        self.ended = ""  # why, once it has
        self._closing = channel.closing
        self._closing.add_done_callback(lambda _: self._end("the channel closed"))
        channel.on_consumer_cancel_callbacks.add(self._cancelled)

    async def put(self, message: DeliveredMessage) -> None:
        self._waiting.append(_delivery(message, self._channel, self._acks))
        self._wake()

    async def next(self) -> Delivery | None:
        while not self._waiting:
            if self.ended:
                return None
            self._wakeup = asyncio.get_running_loop().create_future()
            try:
                await self._wakeup
            finally:
                self._wakeup = None
        return self._waiting.popleft()

    def close(self) -> None:
        self._channel.on_consumer_cancel_callbacks.discard(self._cancelled)
        self._closing.cancel()  # only this observer of the channel's closing
        self._end("closed")

    def _cancelled(self, _: object) -> None:
        self._end("RabbitMQ cancelled the consumer")

    def _end(self, why: str) -> None:
        self.ended = self.ended or why
        self._wake()

    def _wake(self) -> None:
        if self._wakeup is not None and not self._wakeup.done():
            self._wakeup.set_result(None)


def _delivery(message: DeliveredMessage, channel: aiormq.Channel, acks: Acks) -> Delivery:
    properties = message.header.properties
    headers = properties.headers or {}
    count = headers.get(names.DELIVERY_COUNT_HEADER, 0)
    deliver = message.delivery
    assert isinstance(deliver, aiormq.spec.Basic.Deliver) and deliver.delivery_tag is not None
    tag = deliver.delivery_tag
    message_id = properties.message_id or ""

    async def ack() -> None:
        acks.add(tag)

    async def reject() -> None:
        await _answer(channel.basic_reject(tag, requeue=False), "reject", message_id)

    async def requeue() -> None:
        await _answer(channel.basic_nack(tag, requeue=True), "requeue", message_id)

    return Delivery(
        body=message.body,
        message_id=message_id,
        attempt=(count if isinstance(count, int) else 0) + 1,
        ack=ack,
        reject=reject,
        requeue=requeue,
        headers=dict(headers),
    )


async def _answer(call: Awaitable[None], action: str, message_id: str) -> None:
    try:
        await call
    except BROKER_ERRORS as exc:
        # The channel this came on is gone; RabbitMQ will redeliver, and a finished
        # job is then acked without recompute.
        log.warning("could not %s message %s: %s", action, message_id, exc)
