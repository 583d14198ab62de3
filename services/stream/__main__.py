"""`python -m stream`: JobStreamService against Redis pub/sub."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from batchline import logs, tracing
from batchline.lifecycle import (
    GrpcServer,
    count_tasks,
    freeze_startup_heap,
    run_service,
    serve_metrics,
    stop_on_signals,
    watch_dependencies,
)
from batchline.redis_store import RedisJobStore
from batchline.settings import SettingsError
from batchline.v1 import stream_pb2_grpc
from stream.fanout import Fanout
from stream.servicer import JobStreamServicer
from stream.settings import StreamSettings

log = logging.getLogger("stream")
SERVICE_NAME = "batchline.v1.JobStreamService"


async def serve(
    settings: StreamSettings, stop: asyncio.Event, on_ready: Callable[[int], None] | None = None
) -> None:
    """Subscribe once, serve watchers until `stop`, drain."""
    store = RedisJobStore(settings.store)
    fanout = Fanout(store, settings.watcher_buffer, settings.max_watchers)
    server = GrpcServer([SERVICE_NAME], host=settings.host, port=settings.port, keys=settings.keys)
    servicer = JobStreamServicer(store, fanout, settings.heartbeat_s)
    server.add(lambda s: stream_pb2_grpc.add_JobStreamServiceServicer_to_server(servicer, s))
    await server.start()
    serve_metrics(settings.metrics_port)
    log.info("stream listening", extra={"port": server.port})
    if on_ready is not None:
        on_ready(server.port)

    async def subscribed() -> None:
        if not fanout.subscribed.is_set():
            raise ConnectionError("not subscribed to job events yet")

    try:
        async with asyncio.TaskGroup() as tasks:
            routing = tasks.create_task(fanout.run())
            tasks.create_task(watch_dependencies(server, [store.ping, subscribed], stop))
            count_tasks()
            await stop.wait()
            await server.drain(settings.shutdown_grace_s)
            routing.cancel()
    finally:
        await store.close()
    log.info("stream stopped")


async def _main(settings: StreamSettings) -> None:
    stop = asyncio.Event()
    stop_on_signals(stop)
    await serve(settings, stop, on_ready=lambda _port: freeze_startup_heap())


def main() -> None:
    logs.configure("stream")
    tracing.configure("stream")
    settings = StreamSettings.from_env()
    if not settings.store.redis_url:
        raise SettingsError("stream runs against Redis: set REDIS_URL (or run `python -m embedded`)")
    run_service(_main(settings))


if __name__ == "__main__":
    main()
