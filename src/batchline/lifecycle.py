"""Process lifecycle: signals, the gRPC server with health and reflection, graceful drain."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import logging
import os
import signal
import subprocess
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from typing import Any

import grpc
import uvloop
from grpc import aio
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1.health import SERVICE_NAME as HEALTH_SERVICE
from grpc_health.v1.health import aio as health_aio  # type: ignore[attr-defined]
from grpc_reflection.v1alpha import reflection
from prometheus_client import Gauge

from batchline import access
from batchline.errors import Boundary
from batchline.settings import SettingsError

log = logging.getLogger(__name__)

# Largest request or response a server takes: a SubmitBatch of 256 x 2000-character texts
# (up to 4 bytes a character) fits with room; anything larger is refused by gRPC itself.
MAX_MESSAGE_BYTES = 4 * 1024 * 1024
# Every Batchline gRPC server's options. No SO_REUSEPORT unless a server asks for it
# (`GrpcServer(reuse_port=True)`, the ingress's INGRESS_PROCESSES): a second server on a taken
# port fails to start instead of sharing it unnoticed.
SERVER_OPTIONS = [
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.so_reuseport", 0),
]

# A task that outlives its call or stream shows up here as growth under a steady load (the soak).
TASKS = Gauge(
    "batchline_event_loop_tasks", "asyncio tasks alive in this process's event loop (at scrape time)"
)

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


def stop_on_signals(stop: asyncio.Event) -> None:
    """SIGTERM and SIGINT only set `stop`; the owner of the event drains."""
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)


class GrpcServer:
    """A grpc.aio server with the error boundary, health and reflection wired in."""

    def __init__(
        self,
        service_names: Iterable[str],
        *,
        host: str = "0.0.0.0",
        port: int = 0,
        describe: Iterable[str] = (),
        keys: access.KeyRing | None = None,
        reuse_port: bool = False,
    ) -> None:
        """Serve `service_names` (health reports each); reflection lists them plus `describe`.
        With `keys`, every call of a batchline service must present one of them. With
        `reuse_port`, other processes may listen on the same port too (SO_REUSEPORT: the
        kernel gives each new connection to one of them); without, a taken port is an error."""
        options = list({**dict(SERVER_OPTIONS), "grpc.so_reuseport": int(reuse_port)}.items())
        self.server = aio.server(options=options)
        self._boundary = Boundary(self.server, functools.partial(access.admit, keys))
        self.health = health_aio.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self.server)
        self.service_names = list(service_names)
        reflection.enable_server_reflection(
            [*self.service_names, *describe, HEALTH_SERVICE, reflection.SERVICE_NAME], self.server
        )
        self.port = self.server.add_insecure_port(f"{host}:{port}")
        if self.port == 0:
            raise OSError(f"cannot listen on {host}:{port}: the port is taken or not allowed")

    def add(self, register: Callable[[Any], None]) -> None:
        """Register a service (its generated `add_*Servicer_to_server`) behind the boundary:
        the access guard and the error mapping of `batchline.errors`. Health and reflection are
        grpc's own, need no key and raise nothing of ours: they go onto the server as they are."""
        register(self._boundary)

    async def start(self) -> None:
        await self.set_serving(False)
        await self.server.start()

    async def set_serving(self, serving: bool) -> None:
        state = SERVING if serving else NOT_SERVING
        for name in ("", *self.service_names):
            await self.health.set(name, state)

    async def drain(self, grace_s: float) -> None:
        """NOT_SERVING, then refuse new calls and let running ones finish for `grace_s`."""
        await self.set_serving(False)
        await self.server.stop(grace_s)


async def watch_dependencies(
    server: GrpcServer,
    checks: Iterable[Callable[[], Awaitable[None]]],
    stop: asyncio.Event,
    every_s: float = 1.0,
) -> None:
    """Keep health in step with the dependencies: SERVING only while every check passes. A
    dependency not ready yet at start-up is logged at info (the service is starting); one lost
    while serving, at warning."""
    checks = list(checks)
    serving: bool | None = None
    while not stop.is_set():
        ok = True
        for check in checks:
            try:
                await check()
            except Exception as exc:
                ok = False
                if serving is None:
                    log.info("waiting for a dependency: %s", exc)
                elif serving:
                    log.warning("dependency check failed: %s", exc)
                break
        if ok != serving:
            await server.set_serving(ok)
            log.info("health %s", "SERVING" if ok else "NOT_SERVING")
            serving = ok
        await pause(stop, every_s)


async def pause(stop: asyncio.Event, seconds: float) -> None:
    """Wait `seconds`, or less if `stop` is set first. Unlike `asyncio.wait_for`, which runs what
    it awaits as a task of its own, this adds no task, so the periodic loops leave the count of
    live tasks (`batchline_event_loop_tasks`) the same between samples."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(seconds):
            await stop.wait()


def count_tasks() -> None:
    """Report the running loop's live tasks as TASKS, counted when /metrics is scraped (from the
    metrics thread; asyncio.all_tasks(loop) is made for that), so a sample sees the process as it
    is at that moment, not as it was up to a second before."""
    loop = asyncio.get_running_loop()
    TASKS.set_function(lambda: len(asyncio.all_tasks(loop)))


def run_service(main: Coroutine[Any, Any, None]) -> None:
    """Run a service's main coroutine on the event loop EVENT_LOOP names: `uvloop` (the default)
    or `asyncio`'s own."""
    loop = os.environ.get("EVENT_LOOP", "uvloop")
    if loop == "uvloop":
        uvloop.run(main)
    elif loop == "asyncio":
        asyncio.run(main)
    else:
        main.close()
        raise SettingsError(f"EVENT_LOOP={loop!r}: choose uvloop or asyncio")


def freeze_startup_heap() -> None:
    """Put what startup allocated (modules, descriptors, the model, connections) out of the
    cyclic collector's reach. A full collection then walks only what requests allocate: at
    1,000 Submit/s the ingress's full collections paused it for up to 17 ms before and under
    1 ms after. Called once a process is ready, never in tests that run services in-process."""
    gc.collect()
    gc.freeze()


def is_serving(target: str, timeout_s: float = 1.0) -> bool:
    """True when the gRPC server at `target` answers health SERVING (a blocking client call)."""
    with grpc.insecure_channel(target) as channel:
        try:
            reply = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(), timeout=timeout_s
            )
        except grpc.RpcError:
            return False
    return bool(reply.status == SERVING)


def wait_until_serving(
    target: str,
    timeout_s: float = 60.0,
    process: subprocess.Popen[bytes] | None = None,
    name: str = "process",
) -> None:
    """Block until `target` is SERVING; RuntimeError after `timeout_s`, or as soon as `process`
    (the `name` that serves `target`, when the caller started it) exits, with its exit code."""
    deadline = time.monotonic() + timeout_s
    while not is_serving(target):
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"the {name} exited with {process.returncode} before SERVING on {target}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{target} did not become SERVING within {timeout_s:.0f}s")
        time.sleep(0.1)


def serve_metrics(port: int) -> None:
    """Prometheus /metrics on `port` (a daemon thread); 0 serves nothing."""
    if not port:
        return
    from prometheus_client import start_http_server

    try:
        start_http_server(port)
    except OSError as exc:
        raise SettingsError(
            f"METRICS_PORT={port} cannot be served ({exc}); set another, or 0 for none"
        ) from exc
    log.info("metrics on :%d/metrics", port)
