"""The system under test, started as real processes on free ports, with Envoy in front."""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from batchline import edge
from batchline.lifecycle import wait_until_serving

# How long a batcher may take to turn SERVING: it does once its model is warm, every shape
# traffic will use on both widths with two lanes. In bf16 on a 2-vCPU Xeon without AMX that
# took 73 s, more than the minute every other service is given.
BATCHER_READY_S = 600.0


@dataclass(frozen=True)
class Targets:
    ingress: str  # host:port, native gRPC straight to the ingress
    stream: str  # host:port of the stream service
    edge: str  # host:port of Envoy: gRPC, REST and grpc-web
    pids: dict[str, list[int]]  # component -> process ids, for CPU accounting
    key_prefix: str = ""  # the run's Redis key prefix (local stacks)
    metrics: dict[str, list[int]] = field(default_factory=dict)  # component -> /metrics ports
    queue: str = ""  # the run's RabbitMQ queue (local stacks)


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU time the processes have used so far (Linux /proc)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / tick  # utime, stime
    return total


def service_pids(name: str) -> list[int]:
    """Process ids of a server running on this machine (RabbitMQ, Redis), by command name."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/comm"):
        try:
            if stat.read_text().strip().startswith(name):
                found.append(int(stat.parent.name))
        except OSError:
            continue
    return found


def children(pid: int) -> list[int]:
    """Process ids whose parent is `pid` (an ingress's extra processes: INGRESS_PROCESSES)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(stat.parent.name))
        except OSError:
            continue
    return found


def listeners(port: int) -> int:
    """Sockets listening on TCP `port` (one per process sharing it with SO_REUSEPORT)."""
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            _, local, _, state = row.split()[:4]
            count += state == "0A" and int(local.rsplit(":", 1)[1], 16) == port  # 0A: LISTEN
    return count


def wait_for_listeners(port: int, count: int, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while listeners(port) < count:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{count} processes did not listen on port {port} within {timeout_s:.0f}s")
        time.sleep(0.1)


_HANDED_OUT: set[int] = set()


def free_port() -> int:
    """A port nothing listens on now and not handed out before by this process. Chosen below
    Linux's ephemeral range (32768 upward), not by binding port 0: an ephemeral port can be
    taken by some outgoing connection between this check and the server's own bind, and then
    the server fails to start. A stack picks all its ports before its servers bind them, so
    without the record two of them could get the same one."""
    for _ in range(200):
        port = random.randint(10_000, 32_000)
        if port not in _HANDED_OUT and all(bindable(port, host) for host in ("127.0.0.1", "0.0.0.0")):
            _HANDED_OUT.add(port)
            return port
    raise RuntimeError("no free port between 10000 and 32000")


def bindable(port: int, host: str = "127.0.0.1") -> bool:
    """Whether `port` on `host` could be bound now."""
    with socket.socket() as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


@contextmanager
def start(
    kind: str, env: dict[str, str], batchers: int = 1, envoy: bool = True, metrics: bool = False
) -> Iterator[Targets]:
    """`embedded`: one process on in-memory adapters; `local`: ingress, stream and `batchers`
    batchers on the local RabbitMQ and Redis, on a queue and key prefix of their own.
    Envoy fronts both unless `envoy` is False; each service serves /metrics if `metrics`."""
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
    pids: dict[str, list[int]] = {}
    metrics_ports: dict[str, list[int]] = {}

    def spawn(module: str, extra: dict[str, str]) -> subprocess.Popen[bytes]:
        if metrics:
            port = free_port()
            metrics_ports.setdefault(module, []).append(port)
            extra = {**extra, "METRICS_PORT": str(port)}
        pids.setdefault(module, []).append(0)
        processes.append(
            subprocess.Popen(
                [sys.executable, "-m", module],
                env={**base, **extra},
                stdout=subprocess.DEVNULL,
                start_new_session=True,
            )
        )
        pids[module][-1] = processes[-1].pid
        return processes[-1]

    workdir = tempfile.TemporaryDirectory(prefix="batchline-bench-")
    prefix = f"bench:{run_id}:" if kind == "local" else ""
    queue = f"bench.{run_id}.requests" if kind == "local" else ""
    try:
        if kind == "embedded":
            port = free_port()
            for name in ("AMQP_URL", "REDIS_URL"):
                base.pop(name, None)
            server = spawn("embedded", {"PORT": str(port)})
            ingress = stream = f"127.0.0.1:{port}"
            wait_until_serving(
                ingress, BATCHER_READY_S, server, "embedded server"
            )  # its batcher warms a model too
        else:
            ports = [free_port() for _ in range(2)]
            shared = {
                "AMQP_URL": base.get("AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/"),
                "REDIS_URL": base.get("REDIS_URL", "redis://127.0.0.1:6379/0"),
                "QUEUE_NAME": queue,
                "KEY_PREFIX": prefix,
                "JOB_TTL_S": env.get("JOB_TTL_S", "600"),
            }
            front = spawn("ingress", {**shared, "INGRESS_PORT": str(ports[0])})
            fan_out = spawn("stream", {**shared, "STREAM_PORT": str(ports[1])})
            ingress, stream = f"127.0.0.1:{ports[0]}", f"127.0.0.1:{ports[1]}"
            wait_until_serving(
                ingress, process=front, name="ingress"
            )  # the queue exists before a batcher consumes
            if (ingresses := int(base.get("INGRESS_PROCESSES", "1"))) > 1:
                wait_for_listeners(ports[0], ingresses)
                pids["ingress"] += children(front.pid)
            for n in range(batchers):
                health = free_port()
                batcher = spawn(
                    "batcher", {**shared, "BATCHER_HEALTH_PORT": str(health), "WORKER_NAME": f"bench-{n}"}
                )
                wait_until_serving(f"127.0.0.1:{health}", BATCHER_READY_S, batcher, "batcher")
            wait_until_serving(stream, process=fan_out, name="stream service")
        if kind == "local":
            pids["rabbitmq"] = service_pids("beam.smp")
            pids["redis"] = service_pids("redis-server")
        if not envoy:
            yield Targets(ingress, stream, "", pids, prefix, metrics_ports, queue)
            return
        envoy_port = free_port()
        topology = edge.Topology(
            port=envoy_port,
            admin_port=0,
            ingress=("127.0.0.1", int(ingress.rsplit(":", 1)[1])),
            stream=("127.0.0.1", int(stream.rsplit(":", 1)[1])),
        )
        proxy = edge.start(topology, Path(workdir.name))
        processes.append(proxy)
        pids["envoy"] = [proxy.pid]
        edge.wait_ready(f"http://127.0.0.1:{envoy_port}", proxy)
        yield Targets(ingress, stream, f"127.0.0.1:{envoy_port}", pids, prefix, metrics_ports, queue)
    finally:
        for process in processes:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for process in processes:
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
        workdir.cleanup()
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
        for at in range(0, len(keys), 10_000):
            await client.delete(*keys[at : at + 10_000])
        await client.aclose()

    asyncio.run(clean())
