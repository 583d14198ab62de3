"""Does the load generator's gRPC client cost a lone job its time? At light load the client
shares the two cores with the stack, and its Submit's answer arrives while the batcher starts
the job's pass: whatever the client does then takes a core from one of the pass's two threads.
One default stack, fp32, one job every 1/RATE s; rounds alternate the open-loop sender as
`make bench-batching` had it (grpc.aio) and the generator's lean HTTP/2 client (bench.load.h2),
the same arrivals in both. Per round: the bare spaced pass timed before and after it (the
benchmark's light-cell reference), the e2e p50 over it, the trace's pass over it, accepted ->
started, and the client process's CPU per job while it sent. One line per round.

    PYTHONPATH=src:services:. .venv/bin/python docs/benchmarks/light-path/client_ab.py [RATE] [ROUNDS]
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time

from batchline.v1 import inference_pb2
from bench import batching, stack, workload
from bench.load import h2
from bench.load.protocols import grpc_frame, grpc_outcome

SUBMIT_PATH = "/batchline.v1.InferenceService/Submit"


async def open_loop_h2(target: str, texts: list[str], rate: float) -> tuple[list[str], float, float]:
    """batching.open_loop's schedule (batching.paced), each Submit a stream on one held HTTP/2
    connection."""
    pool = h2.Pool(target, 1, connect_timeout=10)
    await pool.connect()
    block = h2.request_block(pool.authority, SUBMIT_PATH, {}, 30)

    async def submit(i: int) -> str:
        payload = inference_pb2.SubmitRequest(text=texts[i]).SerializeToString()
        outcome = grpc_outcome(await pool.request(block, grpc_frame(payload)), inference_pb2.SubmitResponse)
        if outcome.code != 0:
            raise RuntimeError(f"Submit failed: {outcome.code} {outcome.message}")
        assert isinstance(outcome.response, inference_pb2.SubmitResponse)
        return outcome.response.job_id

    try:
        return await batching.paced(len(texts), rate, submit)
    finally:
        await pool.close()


SENDERS = {"grpc.aio": batching.open_loop, "h2": open_loop_h2}


def main() -> None:
    rate = float(sys.argv[1]) if len(sys.argv) > 1 else 10.0
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 8
    path = workload.build_model()
    bare, encoded = workload.warm_model(path, "fp32", 2)
    env, batchers = batching.stack_env("default", path, "fp32")
    with stack.start("local", env, batchers=batchers, envoy=False) as targets:
        batching.warm(targets.ingress)
        for round_ in range(rounds):
            name = list(SENDERS)[round_ % 2]
            texts = workload.sentences(200, seed=7 + round_ // 2)  # each pair sends the same texts
            _, before = batching.timed_single_passes(bare, encoded, 1 / rate)
            baseline = asyncio.run(batching.finished_count(targets.ingress))
            cpu = time.process_time()
            ids, _, lag = asyncio.run(SENDERS[name](targets.ingress, texts, rate))
            cpu_ms = (time.process_time() - cpu) * 1000 / len(ids)
            jobs = asyncio.run(batching.collect(targets.ingress, ids, baseline))
            _, after = batching.timed_single_passes(bare, encoded, 1 / rate)
            reference = statistics.median(before + after)
            print(
                f"{time.strftime('%H:%M:%S')} round {round_ + 1} {name:>8} at {rate:g}/s: "
                f"{batching.over_reference(jobs, reference)}; client CPU {cpu_ms:.2f} ms/job; "
                f"send lag p99 {lag:.1f} ms",
                flush=True,
            )


if __name__ == "__main__":
    main()
