"""The consuming side alone: the CPU this process spends to take `jobs` deliveries from
RabbitMQ and ack them in batches of 16, as a batcher does (prefetch 128), without the model.

    PYTHONPATH=src:services:. .venv/bin/python docs/benchmarks/event-loop-cpu/consume_cpu.py [jobs] [rounds]

Each round fills a fresh queue first (SubmitBatch-sized publishes of 64), then times only the
consuming: the process's CPU time (all threads) and wall time per delivery.
"""

from __future__ import annotations

import sys
import time
import uuid

import uvloop

from batchline.rabbit import RabbitBroker
from batchline.settings import BrokerSettings
from batchline.v1 import job_pb2

BATCH = 16


async def one_round(jobs: int) -> tuple[float, float]:
    name = f"bench.consume.{uuid.uuid4().hex[:8]}"
    settings = BrokerSettings(amqp_url="amqp://guest:guest@127.0.0.1:5672/", queue=name, max_length=jobs + 10)
    broker = await RabbitBroker.connect(settings, name="consume-cpu")
    try:
        for at in range(0, jobs, 64):
            tasks = [
                job_pb2.InferenceTask(job_id=str(uuid.uuid4()), text="a review of twenty words or so " * 3)
                for _ in range(min(64, jobs - at))
            ]
            assert await broker.publish(tasks) == [None] * len(tasks)
        deliveries = broker.consume(prefetch=8 * BATCH)
        cpu, wall = time.process_time(), time.perf_counter()
        batch = []
        for _ in range(jobs):
            batch.append(await anext(deliveries))
            if len(batch) == BATCH:
                for delivery in batch:
                    await delivery.ack()
                batch = []
        for delivery in batch:
            await delivery.ack()
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        await deliveries.aclose()
    finally:
        channel = await broker._connection.channel()
        await channel.queue_delete(name)
        await channel.queue_delete(settings.dead_letter_queue)
        await broker.close()
    return cpu * 1e6 / jobs, wall * 1e6 / jobs


def main() -> None:
    jobs = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    for round_ in range(rounds):
        cpu_us, wall_us = uvloop.run(one_round(jobs))
        print(
            f"round {round_ + 1}: {jobs} deliveries, CPU {cpu_us:.1f} us each, wall {wall_us:.1f} us each",
            flush=True,
        )


if __name__ == "__main__":
    main()
