"""Network faults between the services (real subprocesses) and RabbitMQ or Redis, injected with
a TCP proxy that the test cuts and restores. While cut, Submit answers UNAVAILABLE within its
deadline and health goes NOT_SERVING; once restored, everything recovers by itself; no job that
was accepted is lost."""

from __future__ import annotations

import time
from collections.abc import Iterator
from urllib.parse import urlsplit

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from batchline import codec
from batchline.lifecycle import wait_until_serving
from batchline.v1 import inference_pb2, inference_pb2_grpc
from tests.e2e.conftest import Service
from tests.faults.common import statuses, submit_all, through
from tests.helpers import wait_until
from tests.proxy import TcpProxy

pytestmark = pytest.mark.timeout(180)


def health(target: str) -> int:
    with grpc.insecure_channel(target) as channel:
        try:
            reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=2)
        except grpc.RpcError:
            return -1
        return int(reply.status)


@pytest.fixture
def stack(
    services: list[Service], service_env: dict[str, str], request: pytest.FixtureRequest
) -> Iterator[tuple[str, TcpProxy]]:
    """Ingress, stream and batcher, all reaching `request.param` (AMQP_URL or REDIS_URL) through a proxy."""
    variable: str = request.param
    url = service_env[variable]
    parts = urlsplit(url)
    with TcpProxy((parts.hostname or "127.0.0.1", parts.port or 0)) as proxy:
        env = {
            **service_env,
            variable: through(url, proxy),
            "REDIS_TIMEOUT_S": "0.5",
            "PUBLISH_TIMEOUT_S": "1",
            "SIM_FIXED_MS": "40",  # batches slow enough that some are in flight at the cut
        }
        ingress = Service("ingress", env)
        services += [ingress, Service("stream", env), Service("batcher", {**env, "WORKER_NAME": "survivor"})]
        target = f"127.0.0.1:{ingress.port()}"
        wait_until_serving(target)
        services[-1].wait_log("consuming")
        yield target, proxy


@pytest.mark.parametrize("stack", ["REDIS_URL", "AMQP_URL"], indirect=True)
def test_a_cut_dependency_fails_fast_goes_not_serving_and_recovers(stack: tuple[str, TcpProxy]) -> None:
    target, proxy = stack
    before = submit_all(target, [f"before the cut, job {i} was fine" for i in range(20)])
    wait_until(
        lambda: all(s == codec.DONE for s in statuses(target, before)), 30, what="jobs done before the cut"
    )

    in_flight = submit_all(target, [f"in flight at the cut, job {i}" for i in range(30)])
    proxy.cut()
    with grpc.insecure_channel(target) as channel:
        inference = inference_pb2_grpc.InferenceServiceStub(channel)
        started = time.monotonic()
        with pytest.raises(grpc.RpcError) as refused:
            inference.Submit(inference_pb2.SubmitRequest(text="during the cut"), timeout=5)
        took = time.monotonic() - started
    assert refused.value.code() == grpc.StatusCode.UNAVAILABLE, refused.value.details()
    assert took < 3.0, f"Submit took {took:.1f}s to refuse while cut"
    wait_until(lambda: health(target) == health_pb2.HealthCheckResponse.NOT_SERVING, 15, what="NOT_SERVING")

    proxy.restore()
    wait_until(lambda: health(target) == health_pb2.HealthCheckResponse.SERVING, 60, what="SERVING again")
    after = submit_all(target, [f"after the cut, job {i} was fine" for i in range(20)])
    wait_until(
        lambda: all(s == codec.DONE for s in statuses(target, before + in_flight + after)),
        60,
        what="every accepted job DONE, those in flight at the cut included",
    )
