"""A backlog of 1,200 jobs through a fresh stack (default config, real hf backend), three
times: jobs/s, how much of the run the model computed, and the idle gap between passes.

Run it from a checkout, once per commit compared, alternating:
    PYTHONPATH=src:services:. .venv/bin/python docs/benchmarks/handover-ab/saturation_ab.py bf16
"""

from __future__ import annotations

import asyncio
import itertools
import statistics
import sys

from batchline import codec
from bench import batching, stack


def main(precision: str, repeats: int = 3) -> None:
    model = batching.build_model()
    env = {"MODEL_BACKEND": "hf", "MODEL_PATH": str(model), "PRECISION": precision}
    with stack.start("local", env, envoy=False) as targets:
        for repeat in range(repeats):
            texts = batching.sentences(1200, seed=500 + repeat)
            baseline = asyncio.run(batching.finished_count(targets.ingress))
            ids = asyncio.run(batching.backlog(targets.ingress, texts))
            jobs = asyncio.run(batching.collect(targets.ingress, ids, baseline))
            summary = batching.Run("default", float("inf"), 0.0, jobs, 0.0, 0.0).summary()
            traces = {j.trace.batch_id: j.trace for j in jobs if j.status == codec.DONE}
            passes = sorted((codec.seconds(t.started_at), t.inference_ms / 1000) for t in traces.values())
            span = max(codec.seconds(t.finished_at) for t in traces.values()) - passes[0][0]
            # The model thread's idle time between one pass's end and the next one's start.
            gaps = [b[0] - (a[0] + a[1]) for a, b in itertools.pairwise(passes)]
            print(
                f"{precision} #{repeat + 1}: {summary['completed_rps']:.1f} jobs/s, "
                f"model busy {sum(p[1] for p in passes) / span:.2f} of the run, "
                f"gap between passes p50 {statistics.median(gaps) * 1000:.2f} ms, "
                f"pass p50 {statistics.median(p[1] for p in passes) * 1000:.1f} ms, "
                f"batch {summary['mean_batch_size']:.1f}, padding {summary['padding_efficiency']:.2f}",
                flush=True,
            )


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "bf16")
