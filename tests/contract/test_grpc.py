"""grpc-web (a real Node client) and native gRPC (generated stubs, reflection) through Envoy."""

from __future__ import annotations

import asyncio
import threading

import grpc
import pytest
from google.protobuf import descriptor_pool, message_factory
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (
    ProtoReflectionDescriptorDatabase,
)

from batchline.v1 import inference_pb2, job_pb2, stream_pb2
from batchline_client import AsyncClient, RpcError
from tests.contract.conftest import StartEdge
from tests.helpers import RecordingModel


async def test_grpc_web_submit_and_watch_to_the_end(start_edge: StartEdge) -> None:
    front = await start_edge()
    lines = await front.grpc_web("submit-watch", "I loved it")
    assert "submitted" in lines[0]
    statuses = [line["status"] for line in lines[1:]]
    assert statuses[-1] == "DONE" and lines[-1]["label"] and lines[-1]["batchSize"] >= 1
    job = await front.pipeline.job(lines[0]["submitted"])
    assert job.status == job_pb2.JOB_STATUS_DONE  # the job the browser saw is the stored one


async def test_grpc_web_errors_carry_the_field(start_edge: StartEdge) -> None:
    front = await start_edge()
    [line] = await front.grpc_web("submit-error", "x" * 2001)
    assert line["code"] == grpc.StatusCode.INVALID_ARGUMENT.value[0]
    assert [v["field"] for v in line["violations"]] == ["text"]


async def test_grpc_web_watch_can_be_aborted(start_edge: StartEdge) -> None:
    model = RecordingModel()
    model.gate = threading.Event()  # the job stays RUNNING while the client aborts
    front = await start_edge(model=model)
    job_id = (await front.inference.Submit(inference_pb2.SubmitRequest(text="wait"))).job_id
    lines = await front.grpc_web("watch-abort", job_id)
    assert lines[0]["status"] in {"QUEUED", "RUNNING"}
    assert lines[-1]["aborted"] is True and lines[-1]["code"] == grpc.StatusCode.CANCELLED.value[0]
    model.gate.set()
    await front.pipeline.wait_status(job_id, job_pb2.JOB_STATUS_DONE)  # the job itself goes on


async def test_native_grpc_through_envoy(start_edge: StartEdge) -> None:
    front = await start_edge()
    accepted = await front.inference.Submit(inference_pb2.SubmitRequest(text="terrible service"))
    events = [
        e.job
        async for e in front.stream.WatchJob(stream_pb2.WatchJobRequest(job_id=accepted.job_id))
        if e.HasField("job")
    ]
    assert events[-1].status == job_pb2.JOB_STATUS_DONE
    health = await health_pb2_grpc.HealthStub(front.channel).Check(health_pb2.HealthCheckRequest())
    assert health.status == health_pb2.HealthCheckResponse.SERVING

    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await front.inference.Submit(inference_pb2.SubmitRequest(text=""), timeout=5)
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT


async def test_reflection_through_envoy_lists_and_calls_the_api(start_edge: StartEdge) -> None:
    front = await start_edge()
    # A client that knows only Envoy's address: discover, build the request, call.
    services, reply = await asyncio.to_thread(_discover_and_submit, front.target)
    assert {"batchline.v1.InferenceService", "batchline.v1.JobStreamService"} <= set(services)
    job = await front.pipeline.wait_status(reply, job_pb2.JOB_STATUS_DONE)
    assert job.result.label


def _discover_and_submit(target: str) -> tuple[list[str], str]:
    with grpc.insecure_channel(target) as channel:
        database = ProtoReflectionDescriptorDatabase(channel)
        services = list(database.get_services())
        pool = descriptor_pool.DescriptorPool(database)
        method = pool.FindServiceByName("batchline.v1.InferenceService").methods_by_name["Submit"]
        request_class = message_factory.GetMessageClass(method.input_type)
        response_class = message_factory.GetMessageClass(method.output_type)
        call = channel.unary_unary(
            "/batchline.v1.InferenceService/Submit",
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=response_class.FromString,
        )
        response = call(request_class(text="discovered and called"), timeout=10)
        return services, str(response.job_id)


async def test_the_python_client_needs_only_envoys_address(start_edge: StartEdge) -> None:
    front = await start_edge()
    async with AsyncClient(front.target) as client:  # Envoy routes Submit to ingress, WatchJob to stream
        job = await client.infer("what a lovely day")
        assert job.status == job_pb2.JOB_STATUS_DONE and job.result.label
        with pytest.raises(RpcError) as refused:
            await client.submit("   ")
        assert refused.value.violations[0][0] == "text"
