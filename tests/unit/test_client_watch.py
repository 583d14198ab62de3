"""The client's infer(): it watches only what comes after QUEUED, which its Submit already said,
and still ends on the job's final record. Fake servers record what the client asked for."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import grpc

from batchline import codec
from batchline.v1 import inference_pb2, job_pb2, stream_pb2, stream_pb2_grpc
from batchline_client import AsyncClient


async def submit(request: Any, context: Any) -> inference_pb2.SubmitResponse:
    return inference_pb2.SubmitResponse(job_id="j1")


SUBMIT_ONLY = grpc.method_handlers_generic_handler(
    "batchline.v1.InferenceService",
    {
        "Submit": grpc.unary_unary_rpc_method_handler(
            submit,
            request_deserializer=inference_pb2.SubmitRequest.FromString,
            response_serializer=inference_pb2.SubmitResponse.SerializeToString,
        )
    },
)


class Recorder(stream_pb2_grpc.JobStreamServiceServicer):
    def __init__(self) -> None:
        self.after: list[int] = []

    async def WatchJob(self, request: Any, context: Any) -> AsyncIterator[stream_pb2.WatchJobResponse]:
        self.after.append(request.after_sequence)
        states = [(codec.QUEUED, 1), (codec.RUNNING, 2), (codec.DONE, 3)]
        for status, sequence in states:
            if sequence > request.after_sequence:  # the real stream's rule
                job = job_pb2.Job(job_id="j1", status=status, sequence=sequence)
                yield stream_pb2.WatchJobResponse(job=job)


async def test_infer_watches_after_queued_and_returns_the_final_record() -> None:
    recorder = Recorder()
    server = grpc.aio.server()
    server.add_generic_rpc_handlers((SUBMIT_ONLY,))
    stream_pb2_grpc.add_JobStreamServiceServicer_to_server(recorder, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        async with AsyncClient(f"127.0.0.1:{port}") as client:
            job = await client.infer("I loved it")
            states = [state.status async for state in client.watch("j1")]
    finally:
        await server.stop(None)
    assert job.status == codec.DONE and job.sequence == 3
    assert recorder.after == [codec.ACCEPTED_SEQUENCE, 0]  # infer skips QUEUED; watch() asks for all
    assert codec.ACCEPTED_SEQUENCE == codec.rank(codec.QUEUED) == 1
    assert states == [codec.QUEUED, codec.RUNNING, codec.DONE]
