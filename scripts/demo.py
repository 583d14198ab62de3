"""Submit texts and follow each to its result: the terminal twin of the chat UI.

.venv/bin/python scripts/demo.py "I loved it" "terrible service"
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time

import grpc

from batchline import codec
from batchline.v1 import inference_pb2, inference_pb2_grpc, stream_pb2, stream_pb2_grpc


async def follow(target: str, stream_target: str, text: str) -> bool:
    async with grpc.aio.insecure_channel(target) as channel, grpc.aio.insecure_channel(stream_target) as sc:
        inference = inference_pb2_grpc.InferenceServiceStub(channel)
        watcher = stream_pb2_grpc.JobStreamServiceStub(sc)
        started = time.perf_counter()
        answer = await inference.Submit(inference_pb2.SubmitRequest(text=text), timeout=10)
        accepted_ms = (time.perf_counter() - started) * 1000
        job = None
        async for event in watcher.WatchJob(stream_pb2.WatchJobRequest(job_id=answer.job_id), timeout=60):
            if event.HasField("job"):
                job = event.job
        total_ms = (time.perf_counter() - started) * 1000
    assert job is not None
    print(f"{text!r}")
    if job.status != codec.DONE:
        print(f"  accepted in {accepted_ms:.1f} ms -> {codec.status_name(job.status)}: {job.error.message}")
        return False
    t = job.trace
    print(f"  accepted in {accepted_ms:.1f} ms -> {job.result.label} ({job.result.score:.4f}) by {job.model}")
    print(
        f"  total {total_ms:.1f} ms, batch_size={t.batch_size}, queue_wait={t.queue_wait_ms:.1f} ms, "
        f"inference={t.inference_ms:.1f} ms"
    )
    return True


async def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("texts", nargs="+")
    parser.add_argument("--target", default="127.0.0.1:50051", help="ingress (or embedded) address")
    parser.add_argument("--stream-target", default="", help="stream address (default: --target)")
    args = parser.parse_args()
    results = await asyncio.gather(
        *(follow(args.target, args.stream_target or args.target, t) for t in args.texts)
    )
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
