"""The error boundary on a real grpc.aio server: what a caller sees when a method fails."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

import grpc
import pytest
from grpc_status import rpc_status

from batchline.errors import Boundary, InvalidArgument, Unauthenticated, guarded
from batchline.v1 import inference_pb2, inference_pb2_grpc

SUBMIT = "/batchline.v1.InferenceService/Submit"


class Failing(inference_pb2_grpc.InferenceServiceServicer):
    async def Submit(
        self, request: inference_pb2.SubmitRequest, context: grpc.aio.ServicerContext[object, object]
    ) -> inference_pb2.SubmitResponse:
        if request.text == "bad":
            raise InvalidArgument.field("text", "is bad")
        if request.text == "bug":
            raise RuntimeError("a bug")
        return inference_pb2.SubmitResponse(job_id="j1")


FAILING = Failing()  # type: ignore[abstract]  # the stubs declare every method; grpc needs only Submit's


def refuse_keyless(method: str, metadata: Sequence[tuple[str, str | bytes]]) -> None:
    if ("x-api-key", "k") not in metadata:
        raise Unauthenticated("an API key is required")


@pytest.fixture(params=["registered", "generic"])
async def channel(request: pytest.FixtureRequest) -> AsyncIterator[grpc.aio.Channel]:
    """A server with Failing behind the boundary, registered as generated code does (both ways)
    or through a generic handler only (the fallback grpc takes for a method not registered)."""
    server = grpc.aio.server()
    boundary = Boundary(server, refuse_keyless)
    if request.param == "registered":
        inference_pb2_grpc.add_InferenceServiceServicer_to_server(FAILING, boundary)  # type: ignore[arg-type]
    else:
        handler = grpc.unary_unary_rpc_method_handler(
            FAILING.Submit,
            request_deserializer=inference_pb2.SubmitRequest.FromString,
            response_serializer=inference_pb2.SubmitResponse.SerializeToString,
        )
        generic = grpc.method_handlers_generic_handler("batchline.v1.InferenceService", {"Submit": handler})
        boundary.add_generic_rpc_handlers([generic])
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        yield channel
    await server.stop(0)


async def call(channel: grpc.aio.Channel, payload: bytes, key: str = "k") -> grpc.aio.AioRpcError | bytes:
    method = channel.unary_unary(SUBMIT, None, None)
    try:
        return bytes(await method(payload, metadata=(("x-api-key", key),)))
    except grpc.aio.AioRpcError as exc:
        return exc


async def test_a_batchline_error_becomes_its_status_with_details(channel: grpc.aio.Channel) -> None:
    error = await call(channel, inference_pb2.SubmitRequest(text="bad").SerializeToString())
    assert isinstance(error, grpc.aio.AioRpcError) and error.code() == grpc.StatusCode.INVALID_ARGUMENT
    status = rpc_status.from_call(error)  # type: ignore[arg-type]
    assert status is not None and status.details, "google.rpc details ride along"


async def test_anything_else_is_internal_and_says_nothing_of_it(channel: grpc.aio.Channel) -> None:
    error = await call(channel, inference_pb2.SubmitRequest(text="bug").SerializeToString())
    assert isinstance(error, grpc.aio.AioRpcError) and error.code() == grpc.StatusCode.INTERNAL
    assert "a bug" not in (error.details() or "")


async def test_bytes_that_are_not_the_message_are_invalid_argument(channel: grpc.aio.Channel) -> None:
    error = await call(channel, b"\xff\xff\xff\xff")
    assert isinstance(error, grpc.aio.AioRpcError) and error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "not a valid protobuf message" in (error.details() or "")


async def test_the_guard_refuses_before_the_method_runs(channel: grpc.aio.Channel) -> None:
    error = await call(channel, inference_pb2.SubmitRequest(text="bug").SerializeToString(), key="wrong")
    assert isinstance(error, grpc.aio.AioRpcError) and error.code() == grpc.StatusCode.UNAUTHENTICATED


async def test_a_good_call_answers(channel: grpc.aio.Channel) -> None:
    answer = await call(channel, inference_pb2.SubmitRequest(text="fine").SerializeToString())
    assert isinstance(answer, bytes) and inference_pb2.SubmitResponse.FromString(answer).job_id == "j1"


def test_a_generic_handler_is_wrapped_once_per_method() -> None:
    handler = grpc.unary_unary_rpc_method_handler(FAILING.Submit)
    generic = grpc.method_handlers_generic_handler("batchline.v1.InferenceService", {"Submit": handler})
    registered: list[grpc.GenericRpcHandler] = []  # type: ignore[type-arg]

    class Server:
        def add_generic_rpc_handlers(self, handlers: Sequence[grpc.GenericRpcHandler]) -> None:  # type: ignore[type-arg]
            registered.extend(handlers)

    Boundary(Server()).add_generic_rpc_handlers([generic])  # type: ignore[arg-type]

    class Details(grpc.HandlerCallDetails):
        method = SUBMIT
        invocation_metadata = ()

    first, again = registered[0].service(Details()), registered[0].service(Details())
    assert first is again and first is not handler
    assert guarded(handler, SUBMIT) is not handler
