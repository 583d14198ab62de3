"""`python -m embedded`: the whole pipeline in one process, no servers needed.

`make run` starts it behind Envoy (scripts/devstack.py). With AMQP_URL and REDIS_URL set, run
the services on their own instead (`make up`).
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable

from batcher.model import Model, load_model
from batcher.settings import BatcherSettings
from batcher.worker import Batcher
from batchline import logs, names, tracing
from batchline.lifecycle import (
    GrpcServer,
    count_tasks,
    freeze_startup_heap,
    run_service,
    serve_metrics,
    stop_on_signals,
)
from batchline.memory import MemoryBroker, MemoryJobStore
from batchline.settings import SettingsError, env_int
from batchline.v1 import inference_pb2_grpc, stream_pb2_grpc
from ingress import metrics as ingress_metrics
from ingress.backlog import Backlog
from ingress.servicer import InferenceServicer
from ingress.settings import IngressSettings
from stream.fanout import Fanout
from stream.servicer import JobStreamServicer
from stream.settings import StreamSettings

log = logging.getLogger("embedded")


async def serve(
    stop: asyncio.Event,
    *,
    port: int = names.EMBEDDED_PORT,
    host: str = "0.0.0.0",
    model: Model | None = None,
    metrics_port: int = 0,
    on_ready: Callable[[int], None] | None = None,
) -> None:
    """Serve InferenceService and JobStreamService on one port until `stop`."""
    ingress_settings = IngressSettings.from_env()
    batcher_settings = BatcherSettings.from_env()
    stream_settings = StreamSettings.from_env()
    model = model or load_model(batcher_settings.model)

    store = MemoryJobStore(job_ttl_s=ingress_settings.store.job_ttl_s)
    broker = MemoryBroker(ingress_settings.broker.max_length, ingress_settings.broker.delivery_limit)
    fanout = Fanout(store, stream_settings.watcher_buffer, stream_settings.max_watchers)
    batcher = Batcher(batcher_settings, store, broker, model)
    await batcher.warm_up()
    serve_metrics(metrics_port)

    server = GrpcServer(
        ["batchline.v1.InferenceService", "batchline.v1.JobStreamService"],
        host=host,
        port=port,
        keys=ingress_settings.keys,
    )
    backlog = Backlog(store)
    inference = InferenceServicer(ingress_settings, store, broker, backlog)
    streaming = JobStreamServicer(store, fanout, stream_settings.heartbeat_s)
    server.add(lambda s: inference_pb2_grpc.add_InferenceServiceServicer_to_server(inference, s))
    server.add(lambda s: stream_pb2_grpc.add_JobStreamServiceServicer_to_server(streaming, s))
    await server.start()

    batcher_stop = asyncio.Event()
    async with asyncio.TaskGroup() as tasks:
        routing = tasks.create_task(fanout.run())
        tasks.create_task(batcher.run(batcher_stop))
        sampler = tasks.create_task(ingress_metrics.sample_queue(broker, backlog, batcher_stop))
        tasks.create_task(backlog.run(batcher_stop))
        count_tasks()
        await fanout.subscribed.wait()
        await server.set_serving(True)
        log.info(
            "embedded pipeline serving on port %d with model %s",
            server.port,
            model.name,
            extra={"port": server.port, "model": model.name},
        )
        if on_ready is not None:
            on_ready(server.port)
        await stop.wait()
        log.info("draining")
        await server.drain(ingress_settings.shutdown_grace_s)
        batcher_stop.set()
        routing.cancel()
        sampler.cancel()
    log.info("embedded pipeline stopped")


async def _main() -> None:
    stop = asyncio.Event()
    stop_on_signals(stop)
    port = env_int(os.environ, "PORT", names.EMBEDDED_PORT, minimum=0)
    metrics_port = env_int(os.environ, "METRICS_PORT", 9100, minimum=0)
    await serve(stop, port=port, metrics_port=metrics_port, on_ready=lambda _port: freeze_startup_heap())


def main() -> None:
    logs.configure("embedded")
    tracing.configure("embedded")
    if os.environ.get("AMQP_URL") or os.environ.get("REDIS_URL"):
        raise SettingsError(
            "AMQP_URL/REDIS_URL are set: run the services on their own (`make up`), "
            "or unset them for the embedded pipeline"
        )
    run_service(_main())


if __name__ == "__main__":
    main()
