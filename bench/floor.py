"""`python -m bench.floor`: Submit with no work behind it, the floor under the ingress target.

A bare grpc.aio server on the services' event loop, with their server options, whose
Submit answers at once with a response shaped as the ingress's (a fresh job id, QUEUED, the
status and watch URLs): what gRPC's Python server and the load generator cost at a given rate
on this machine, with none of Batchline's work (no interceptor, no Redis, no RabbitMQ). The load
suite offers it the ingress target's load beside the ingress, so a report shows how much of the
ingress's latency the transport alone costs there (docs/benchmarks/grpc-floor.md). Prints its
port on stdout once it serves.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import grpc

from batchline import codec
from batchline.lifecycle import SERVER_OPTIONS, run_service, stop_on_signals
from batchline.v1 import inference_pb2

ROOT = Path(__file__).resolve().parent.parent
SERVICE = "batchline.v1.InferenceService"  # only its Submit: the other methods answer UNIMPLEMENTED


async def submit(
    request: inference_pb2.SubmitRequest, context: grpc.aio.ServicerContext[object, object]
) -> inference_pb2.SubmitResponse:
    """Answer at once, as the ingress answers an accepted Submit."""
    job_id = codec.new_job_id()
    return inference_pb2.SubmitResponse(
        job_id=job_id,
        status=codec.QUEUED,
        status_url=codec.status_url(job_id),
        watch_url=codec.watch_url(job_id),
    )


async def serve(host: str = "127.0.0.1", port: int = 0) -> None:
    """Serve until SIGTERM or SIGINT; the port goes to stdout once serving."""
    stop = asyncio.Event()
    stop_on_signals(stop)
    server = grpc.aio.server(options=SERVER_OPTIONS)
    handler = grpc.unary_unary_rpc_method_handler(
        submit,
        request_deserializer=inference_pb2.SubmitRequest.FromString,
        response_serializer=inference_pb2.SubmitResponse.SerializeToString,
    )
    server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler(SERVICE, {"Submit": handler})])
    bound = server.add_insecure_port(f"{host}:{port}")
    await server.start()
    print(bound, flush=True)
    await stop.wait()
    await server.stop(0)


@contextmanager
def serving(timeout_s: float = 30.0) -> Iterator[tuple[str, int]]:
    """The floor server as a process of its own, as the ingress runs: (host:port, its pid)."""
    command = [sys.executable, "-m", "bench.floor"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()  # the port, or "" when it exited first
        if not line.strip().isdigit():
            raise RuntimeError(f"bench.floor did not start (exit code {process.wait(timeout_s)})")
        yield f"127.0.0.1:{int(line)}", process.pid
    finally:
        process.terminate()
        try:
            process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


if __name__ == "__main__":
    run_service(serve())
