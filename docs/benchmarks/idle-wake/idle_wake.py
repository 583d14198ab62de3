"""What one hop between processes costs on this machine when they were idle before it: a Redis
PING, a task published to RabbitMQ (confirmed, quorum queue, as the ingress publishes) until
its consumer has it, and a 512-byte append made durable with fdatasync (as a quorum queue's log
is) on the disk under /var/lib/rabbitmq, each after 0, 1, 10 and 100 ms of quiet.

    PYTHONPATH=src:services:. .venv/bin/python docs/benchmarks/idle-wake/idle_wake.py

Each probe returns its p50s by gap (ms), for the A/B scripts beside it.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import time
import uuid

import redis.asyncio as redis

from batchline.rabbit import RabbitBroker
from batchline.settings import BrokerSettings
from batchline.v1 import job_pb2

GAPS_S = (0.0, 0.001, 0.01, 0.1)
SAMPLES = 40
LOCAL_RABBITMQ = "amqp://guest:guest@127.0.0.1:5672/"


async def redis_ping() -> dict[float, float]:
    """Gap (s) -> PING p50 (ms)."""
    client = redis.Redis()
    await client.ping()
    p50s = {}
    for gap in GAPS_S:
        times = []
        for _ in range(SAMPLES):
            await asyncio.sleep(gap)
            began = time.perf_counter()
            await client.ping()
            times.append((time.perf_counter() - began) * 1000)
        p50s[gap] = statistics.median(times)
    await client.aclose()
    return p50s


async def rabbit_delivery(amqp_url: str = LOCAL_RABBITMQ) -> dict[float, tuple[float, float]]:
    """Gap (s) -> (publish to confirm, publish to the consumer's hands) p50s (ms)."""
    settings = BrokerSettings(amqp_url=amqp_url, queue=f"wake-{uuid.uuid4().hex[:8]}")
    broker = await RabbitBroker.connect(settings, "idle-wake")
    delivered: dict[str, float] = {}
    got = asyncio.Event()

    async def consume() -> None:
        async for delivery in broker.consume(16):
            delivered[job_pb2.InferenceTask.FromString(delivery.body).job_id] = time.perf_counter()
            got.set()
            await delivery.ack()

    consumer = asyncio.create_task(consume())
    await asyncio.sleep(0.5)
    p50s = {}
    try:
        for gap in GAPS_S:
            to_consumer, to_confirm = [], []
            for i in range(SAMPLES):
                await asyncio.sleep(gap)
                job_id = f"{gap}-{i}"
                got.clear()
                began = time.perf_counter()
                await broker.publish([job_pb2.InferenceTask(job_id=job_id, text="quiet")])
                to_confirm.append((time.perf_counter() - began) * 1000)
                await asyncio.wait_for(got.wait(), 5)
                to_consumer.append((delivered[job_id] - began) * 1000)
            p50s[gap] = (statistics.median(to_confirm), statistics.median(to_consumer))
    finally:
        consumer.cancel()
        channel = await broker._connection.channel()
        await channel.queue_delete(settings.queue)
        await channel.queue_delete(settings.dead_letter_queue)
        await broker.close()
    return p50s


def disk_sync(folder: str = "/var/lib/rabbitmq") -> dict[float, float]:
    """Gap (s) -> fdatasync p50 (ms)."""
    path = os.path.join(folder if os.path.isdir(folder) else ".", f"idle-wake-{uuid.uuid4().hex[:8]}")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    p50s = {}
    try:
        for gap in GAPS_S:
            times = []
            for _ in range(SAMPLES):
                time.sleep(gap)
                began = time.perf_counter()
                os.write(fd, b"x" * 512)
                os.fdatasync(fd)
                times.append((time.perf_counter() - began) * 1000)
            p50s[gap] = statistics.median(times)
    finally:
        os.close(fd)
        os.unlink(path)
    return p50s


if __name__ == "__main__":
    for gap, ms in asyncio.run(redis_ping()).items():
        print(f"Redis PING after {gap * 1000:5.0f} ms quiet: p50 {ms:.3f} ms")
    for gap, (confirm, consumer) in asyncio.run(rabbit_delivery()).items():
        print(
            f"RabbitMQ publish after {gap * 1000:5.0f} ms quiet: confirm p50 {confirm:.2f} ms, "
            f"at the consumer p50 {consumer:.2f} ms"
        )
    for gap, ms in disk_sync().items():
        print(f"fdatasync after {gap * 1000:5.0f} ms quiet: p50 {ms:.3f} ms")
