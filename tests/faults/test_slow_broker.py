"""A full queue refuses fast even while RabbitMQ is slow to answer: the ingress (a real
subprocess) reaches RabbitMQ through a TCP proxy that the test stalls for half a second in the
middle of a flood, with no batcher draining, so every Submit that reaches RabbitMQ is refused."""

from __future__ import annotations

import asyncio
import time
from urllib.parse import urlsplit

import grpc
import pytest

from batchline import codec
from batchline.lifecycle import wait_until_serving
from batchline.v1 import inference_pb2, inference_pb2_grpc
from tests.e2e.conftest import Service
from tests.faults.common import statuses, submit_all, through
from tests.helpers import wait_until
from tests.proxy import TcpProxy

pytestmark = pytest.mark.timeout(120)

BOUND = 40
RATE = 200  # Submits per second, open loop
SECONDS = 3.0
STALL = (1.0, 1.5)  # seconds into the flood when RabbitMQ stops answering, and answers again


async def flood(target: str, proxy: TcpProxy) -> list[tuple[float, float, grpc.StatusCode]]:
    """(sent at, seconds to answer, status) of every Submit, sent on schedule whatever the
    answers; the proxy stalled for the STALL window."""
    results: list[tuple[float, float, grpc.StatusCode]] = []
    async with grpc.aio.insecure_channel(target) as channel:
        inference = inference_pb2_grpc.InferenceServiceStub(channel)
        start = time.monotonic()

        async def one(i: int) -> None:
            await asyncio.sleep(max(0.0, start + i / RATE - time.monotonic()))
            sent = time.monotonic()
            try:
                await inference.Submit(inference_pb2.SubmitRequest(text=f"flood {i}"), timeout=10)
                code = grpc.StatusCode.OK
            except grpc.aio.AioRpcError as error:
                code = error.code()
            results.append((sent - start, time.monotonic() - sent, code))

        async def stall() -> None:
            await asyncio.sleep(STALL[0])
            proxy.stall()
            await asyncio.sleep(STALL[1] - STALL[0])
            proxy.flow()

        await asyncio.gather(stall(), *(one(i) for i in range(int(RATE * SECONDS))))
    return results


def test_a_full_queue_refuses_fast_while_rabbitmq_is_slow_to_answer(
    services: list[Service], service_env: dict[str, str]
) -> None:
    url = service_env["AMQP_URL"]
    parts = urlsplit(url)
    with TcpProxy((parts.hostname or "127.0.0.1", parts.port or 0)) as proxy:
        env = {**service_env, "QUEUE_MAX_LENGTH": str(BOUND), "PUBLISH_TIMEOUT_S": "5"}
        ingress = Service("ingress", {**env, "AMQP_URL": through(url, proxy)})
        services.append(ingress)
        target = f"127.0.0.1:{ingress.port()}"
        wait_until_serving(target)
        accepted = submit_all(target, [f"filling the queue, job {i}" for i in range(BOUND)])

        results = asyncio.run(flood(target, proxy))

    codes = {code for _, _, code in results}
    assert codes == {grpc.StatusCode.RESOURCE_EXHAUSTED}, codes  # full all along: nothing else
    during = sorted(took for sent, took, _ in results if STALL[0] <= sent < STALL[1])
    everything = sorted(took for _, took, _ in results)
    # The first Submit to ask RabbitMQ after the stall began waits it out; the ~100 sent during
    # it must not. p99 over all: the slowest 1% (six Submits) may wait.
    assert len(during) > 50
    slow = [round(took * 1000) for took in during if took > 0.05]
    assert len(slow) <= 2, f"{len(slow)} of {len(during)} Submits sent during the stall waited: {slow} ms"
    assert everything[int(0.99 * len(everything))] < 0.05

    # Nothing accepted is lost: a batcher started now computes the jobs the queue held.
    services.append(Service("batcher", env))
    wait_until(
        lambda: all(s == codec.DONE for s in statuses(target, accepted)), 60, what="the queued jobs DONE"
    )
