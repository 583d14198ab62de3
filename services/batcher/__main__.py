"""`python -m batcher`: consume tasks from RabbitMQ, store results in Redis."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from batcher.model import Model, load_model
from batcher.settings import BatcherSettings
from batcher.worker import Batcher
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

log = logging.getLogger("batcher")


async def serve(
    settings: BatcherSettings,
    stop: asyncio.Event,
    model: Model | None = None,
    on_ready: Callable[[], None] | None = None,
) -> None:
    """Load and warm the model, then consume until `stop`; finish the batch in progress."""
    model = model or load_model(settings.model)
    store = RedisJobStore(settings.store)
    broker = await RabbitBroker.connect(settings.broker, name=f"batchline-batcher-{settings.worker}")
    batcher = Batcher(settings, store, broker, model)
    await batcher.warm_up()  # before health can say SERVING
    serve_metrics(settings.metrics_port)
    health = None
    if settings.health_port:
        health = GrpcServer(["batchline.batcher"], port=settings.health_port)
        await health.start()
    log.info(
        "batcher %s consuming %s with model %s (batch %d, wait %s, token budget %d, %s, prefetch %d)",
        settings.worker,
        settings.broker.queue,
        model.name,
        settings.max_batch_size,
        f"auto up to {settings.max_wait_ms:.0f} ms"
        if settings.adaptive_wait
        else f"{settings.max_wait_ms:.0f} ms",
        settings.max_batch_tokens,
        "length-aware" if settings.length_aware else "FIFO",
        settings.prefetch,
    )
    if on_ready is not None:
        on_ready()
    try:
        async with asyncio.TaskGroup() as tasks:
            if health is not None:
                tasks.create_task(watch_dependencies(health, [store.ping, broker.ping], stop))
            tasks.create_task(batcher.run(stop))
            count_tasks()
    finally:
        if health is not None:
            await health.drain(0)
        await broker.close()
        await store.close()


async def _main(settings: BatcherSettings) -> None:
    stop = asyncio.Event()
    stop_on_signals(stop)
    await serve(settings, stop, on_ready=freeze_startup_heap)


def main() -> None:
    logs.configure("batcher")
    tracing.configure("batcher")
    settings = BatcherSettings.from_env()
    require_distributed(settings.broker, settings.store, "batcher")
    run_service(_main(settings))


if __name__ == "__main__":
    main()
