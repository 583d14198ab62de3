"""bench.floor's no-work Submit served four ways (FLOOR_VARIANT): `plain` (as bench.floor);
`pass-on` (behind a server interceptor that only passes each call on); `per-call` (the error
boundary as it was before 428c908: an interceptor wrapping each call's handler anew, the same
wrapping as `guarded`); `boundary` (registered through batchline.errors.Boundary, as now).
Prints its port once serving."""

import asyncio
import os

import grpc

from batchline.errors import Boundary, guarded
from batchline.lifecycle import SERVER_OPTIONS, run_service, stop_on_signals
from batchline.v1 import inference_pb2
from bench.floor import SERVICE, submit


class PassOn(grpc.aio.ServerInterceptor):
    async def intercept_service(self, continuation, details):
        return await continuation(details)


class PerCall(grpc.aio.ServerInterceptor):
    async def intercept_service(self, continuation, details):
        handler = await continuation(details)
        return None if handler is None else guarded(handler, details.method)


INTERCEPTORS = {"pass-on": [PassOn()], "per-call": [PerCall()]}


async def serve() -> None:
    stop = asyncio.Event()
    stop_on_signals(stop)
    variant = os.environ.get("FLOOR_VARIANT", "plain")
    server = grpc.aio.server(options=SERVER_OPTIONS, interceptors=INTERCEPTORS.get(variant, []))
    handler = grpc.unary_unary_rpc_method_handler(
        submit,
        request_deserializer=inference_pb2.SubmitRequest.FromString,
        response_serializer=inference_pb2.SubmitResponse.SerializeToString,
    )
    target = Boundary(server) if variant == "boundary" else server
    target.add_generic_rpc_handlers([grpc.method_handlers_generic_handler(SERVICE, {"Submit": handler})])
    bound = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    print(bound, flush=True)
    await stop.wait()
    await server.stop(0)


run_service(serve())
