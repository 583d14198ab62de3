"""The public API through a real Envoy: the in-process pipeline on real RabbitMQ and Redis
(see tests/integration/conftest.py) with `envoy/envoy.yaml` rendered in front of it.

The services run in the test's event loop, so every client call here is async (httpx, aio
gRPC) or runs in a thread; a blocking call would stall the very server it waits for.
"""

from __future__ import annotations

import asyncio
import json
import signal
import ssl
import subprocess
import time
import urllib.request
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest

from batchline import edge
from batchline.v1 import inference_pb2_grpc, stream_pb2_grpc
from tests.conftest import ROOT
from tests.helpers import free_port
from tests.integration.conftest import MakePipeline, Pipeline, make_pipeline

__all__ = ["make_pipeline"]  # re-exported fixture: the pipeline behind Envoy
UI_ORIGIN = "http://localhost:3000"


@dataclass
class Edge:
    """One Envoy in front of one pipeline: REST at `url`, gRPC and grpc-web on the same port."""

    url: str
    target: str
    http: httpx.AsyncClient
    channel: grpc.aio.Channel
    pipeline: Pipeline

    @property
    def inference(self) -> inference_pb2_grpc.InferenceServiceAsyncStub:
        return inference_pb2_grpc.InferenceServiceStub(self.channel)

    @property
    def stream(self) -> stream_pb2_grpc.JobStreamServiceAsyncStub:
        return stream_pb2_grpc.JobStreamServiceStub(self.channel)

    async def grpc_web(self, scenario: str, arg: str) -> list[dict[str, Any]]:
        """Run the Node grpc-web client (clients/web/examples/grpcweb.ts); its JSON lines."""
        process = await asyncio.create_subprocess_exec(
            str(ROOT / "node_modules/.bin/tsx"),
            str(ROOT / "clients/web/examples/grpcweb.ts"),
            self.url,
            scenario,
            arg,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=ROOT,
        )
        out, err = await asyncio.wait_for(process.communicate(), 60)
        assert process.returncode == 0, err.decode()
        return [json.loads(line) for line in out.decode().splitlines() if line.strip()]


StartEdge = Callable[..., Awaitable[Edge]]


@pytest.fixture
async def start_edge(make_pipeline: MakePipeline, tmp_path: Path) -> AsyncIterator[StartEdge]:
    """Start a pipeline (arguments go to make_pipeline) and a real Envoy in front of it."""
    processes: list[subprocess.Popen[bytes]] = []
    clients: list[httpx.AsyncClient] = []
    channels: list[grpc.aio.Channel] = []

    async def start(
        *,
        stream_port: int | None = None,
        key_rate: edge.KeyRate | None = None,
        tls: edge.Tls | None = None,
        **pipeline_args: Any,
    ) -> Edge:
        pipeline = await make_pipeline(**pipeline_args)
        port = free_port()
        topology = edge.Topology(
            port=port,
            admin_port=0,
            ingress=("127.0.0.1", pipeline.ports["ingress"]),
            stream=("127.0.0.1", stream_port or pipeline.ports["stream"]),
            key_rate=key_rate,
            tls=tls,
        )
        workdir = tmp_path / f"envoy-{port}"
        workdir.mkdir()
        log = (workdir / "envoy.log").open("w")
        process = edge.start(topology, workdir, log)
        processes.append(process)
        url = f"{'https' if tls else 'http'}://127.0.0.1:{port}"
        trust = ssl.create_default_context(cafile=tls.cert) if tls else None
        if stream_port is None:
            try:
                await asyncio.to_thread(edge.wait_ready, url, process, 30.0, trust)
            except RuntimeError as exc:
                raise RuntimeError(f"{exc}; envoy upstreams: {_health_flags(workdir)}") from exc
        else:  # a deliberately broken topology: wait for Envoy itself only
            await asyncio.to_thread(_wait_alive, url, process)
        http = httpx.AsyncClient(base_url=url, timeout=20, verify=trust or True)
        if tls:
            root = grpc.ssl_channel_credentials(await asyncio.to_thread(Path(tls.cert).read_bytes))
            channel = grpc.aio.secure_channel(f"127.0.0.1:{port}", root)
        else:
            channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
        clients.append(http)
        channels.append(channel)
        return Edge(url, f"127.0.0.1:{port}", http, channel, pipeline)

    yield start
    for client in clients:
        await client.aclose()
    for channel in channels:
        await channel.close(None)
    for process in processes:
        process.send_signal(signal.SIGTERM)
        process.wait(10)


def _health_flags(workdir: Path) -> str:
    admin = (workdir / "admin.address").read_text().strip()
    with urllib.request.urlopen(f"http://{admin}/clusters", timeout=5) as reply:
        lines = reply.read().decode().splitlines()
    return "; ".join(line for line in lines if "health_flags" in line)


def _wait_alive(url: str, process: subprocess.Popen[bytes]) -> None:
    for _ in range(300):
        if edge.http_status(f"{url}/healthz") == 200:
            return
        assert process.poll() is None, "envoy exited"
        time.sleep(0.1)
    raise AssertionError("envoy did not answer /healthz")
