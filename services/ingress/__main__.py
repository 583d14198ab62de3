"""`python -m ingress`: InferenceService against RabbitMQ and Redis."""

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
from batchline.rabbit import RabbitBroker
from batchline.redis_store import RedisJobStore
from batchline.settings import require_distributed
from batchline.v1 import inference_pb2_grpc
from ingress import metrics
from ingress.backlog import Backlog
from ingress.processes import Helpers, die_with_parent
from ingress.servicer import InferenceServicer
from ingress.settings import IngressSettings

log = logging.getLogger("ingress")
SERVICE_NAME = "batchline.v1.InferenceService"
# Envoy sends reflection to ingress, so ingress describes the whole public API: a client that
# knows only Envoy's address can list and call every service (WatchJob is routed to stream).
DESCRIBED = ["batchline.v1.JobStreamService"]


async def serve(
    settings: IngressSettings, stop: asyncio.Event, on_ready: Callable[[int], None] | None = None
) -> None:
    """Connect, serve until `stop` is set, drain, close."""
    store = RedisJobStore(settings.store)
    broker = await RabbitBroker.connect(settings.broker, name="batchline-ingress")
    server = GrpcServer(
        [SERVICE_NAME],
        host=settings.host,
        port=settings.port,
        describe=DESCRIBED,
        keys=settings.keys,
        reuse_port=settings.reuse_port or settings.processes > 1,
    )
    backlog = Backlog(store)
    servicer = InferenceServicer(settings, store, broker, backlog)
    server.add(lambda s: inference_pb2_grpc.add_InferenceServiceServicer_to_server(servicer, s))
    await server.start()
    serve_metrics(settings.metrics_port)
    log.info("ingress listening", extra={"port": server.port})
    if on_ready is not None:
        on_ready(server.port)
    try:
        async with asyncio.TaskGroup() as tasks:
            tasks.create_task(watch_dependencies(server, [store.ping, broker.ping], stop))
            tasks.create_task(backlog.run(stop))
            tasks.create_task(metrics.sample_queue(broker, backlog, stop))
            count_tasks()
            await stop.wait()
            log.info("draining", extra={"grace_s": settings.shutdown_grace_s})
            await server.drain(settings.shutdown_grace_s)
    finally:
        await broker.close()
        await store.close()
    log.info("ingress stopped")


async def _main(settings: IngressSettings) -> None:
    stop = asyncio.Event()
    stop_on_signals(stop)
    helpers = Helpers(settings.processes - 1, settings.metrics_port, settings.shutdown_grace_s)

    def ready(port: int) -> None:
        freeze_startup_heap()
        if helpers.count:
            helpers.start(port, stop)

    try:
        await serve(settings, stop, on_ready=ready)
    finally:
        await helpers.stop()
    if helpers.failed:
        raise SystemExit(helpers.failed)


def main() -> None:
    die_with_parent()
    logs.configure("ingress")
    tracing.configure("ingress")
    settings = IngressSettings.from_env()
    require_distributed(settings.broker, settings.store, "ingress")
    run_service(_main(settings))


if __name__ == "__main__":
    main()
