"""The system under test, started as real processes on free ports."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from batchline.lifecycle import wait_until_serving


@dataclass(frozen=True)
class Targets:
    ingress: str
    stream: str


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def start(kind: str, env: dict[str, str]) -> Iterator[Targets]:
    """`embedded`: one process on in-memory adapters; `local`: ingress, stream and a batcher
    against the local RabbitMQ and Redis, on a queue and key prefix of their own."""
    run_id = uuid.uuid4().hex[:8]
    base = {
        **os.environ,
        "LOG_LEVEL": "WARNING",
        "LOG_FORMAT": "json",
        "HOST": "127.0.0.1",
        "METRICS_PORT": "0",
        **env,
    }
    processes: list[subprocess.Popen[bytes]] = []

    def spawn(module: str, extra: dict[str, str]) -> None:
        processes.append(
            subprocess.Popen(
                [sys.executable, "-m", module],
                env={**base, **extra},
                stdout=subprocess.DEVNULL,
                start_new_session=True,
            )
        )

    try:
        if kind == "embedded":
            port = free_port()
            for name in ("AMQP_URL", "REDIS_URL"):
                base.pop(name, None)
            spawn("embedded", {"PORT": str(port)})
            targets = Targets(f"127.0.0.1:{port}", f"127.0.0.1:{port}")
        else:
            ports = [free_port() for _ in range(3)]
            shared = {
                "AMQP_URL": base.get("AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/"),
                "REDIS_URL": base.get("REDIS_URL", "redis://127.0.0.1:6379/0"),
                "QUEUE_NAME": f"bench.{run_id}.requests",
                "KEY_PREFIX": f"bench:{run_id}:",
                "JOB_TTL_S": "600",
            }
            spawn("ingress", {**shared, "INGRESS_PORT": str(ports[0])})
            spawn("stream", {**shared, "STREAM_PORT": str(ports[1])})
            wait_until_serving(f"127.0.0.1:{ports[0]}")  # the queue exists before the batcher consumes
            spawn("batcher", {**shared, "BATCHER_HEALTH_PORT": str(ports[2]), "WORKER_NAME": "bench-batcher"})
            wait_until_serving(f"127.0.0.1:{ports[2]}")
            targets = Targets(f"127.0.0.1:{ports[0]}", f"127.0.0.1:{ports[1]}")
        wait_until_serving(targets.ingress)
        wait_until_serving(targets.stream)
        yield targets
    finally:
        for process in processes:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for process in processes:
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
        if kind == "local":
            _cleanup(run_id)


def _cleanup(run_id: str) -> None:
    """Remove the run's queues and keys."""
    import asyncio

    import aio_pika
    import redis.asyncio as aioredis

    async def clean() -> None:
        connection = await aio_pika.connect(os.environ.get("AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/"))
        channel = await connection.channel()
        for name in (f"bench.{run_id}.requests", f"bench.{run_id}.requests.dead"):
            await channel.queue_delete(name)
        await connection.close()
        client = aioredis.Redis.from_url(os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"))
        keys = [k async for k in client.scan_iter(match=f"bench:{run_id}:*", count=1000)]
        if keys:
            await client.delete(*keys)
        await client.aclose()

    asyncio.run(clean())
