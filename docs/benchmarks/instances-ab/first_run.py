"""The first look: the pipeline with N batchers of T PyTorch threads each, fp32, one stack per
config, open-loop arrivals at the given rates for 15 s (at least 200 jobs) and, for a rate of 0,
a backlog of 800 jobs. Output: first-run.txt (configs 2x1, 1x2, 2x2, 2x1, 1x2, in that order,
each with `fp32 8 40 48 64 0`, 2026-12-01 01:45-01:57).

    PYTHONPATH=src:services:. .venv/bin/python docs/benchmarks/instances-ab/first_run.py 2x2 fp32 8 40 48 64 0
"""

from __future__ import annotations

import asyncio
import sys

from bench import stack, workload
from bench.batching import Run, backlog, collect, finished_count, open_loop


def main(batchers: int, threads: int, rates: list[float], precision: str) -> None:
    model = workload.build_model()
    env = {
        "MODEL_BACKEND": "hf",
        "MODEL_PATH": str(model),
        "PRECISION": precision,
        "TORCH_THREADS": str(threads),
    }
    with stack.start("local", env, batchers=batchers, envoy=False) as t:
        warm = workload.sentences(64, seed=1)
        asyncio.run(collect(t.ingress, asyncio.run(backlog(t.ingress, warm)), 0))
        for rate in rates:
            base = asyncio.run(finished_count(t.ingress))
            if rate == 0:
                ids = asyncio.run(backlog(t.ingress, workload.sentences(800, seed=500)))
                s = Run(
                    "x", float("inf"), 0.0, asyncio.run(collect(t.ingress, ids, base)), 0.0, 0.0
                ).summary()
                what = f"backlog: {s['completed_rps']:.1f} jobs/s"
            else:
                texts = workload.sentences(max(200, int(rate * 15)), seed=int(rate))
                ids, wall, lag = asyncio.run(open_loop(t.ingress, texts, rate))
                s = Run("x", 0, rate, asyncio.run(collect(t.ingress, ids, base)), wall, lag).summary()
                what = f"{rate:.0f}/s: p50 {s['e2e_p50_ms']:.0f} p99 {s['e2e_p99_ms']:.0f}"
            print(
                f"{batchers}x{threads} {precision} {what} batch {s['mean_batch_size']:.1f} "
                f"compute/job {s['compute_per_job_ms']:.1f}",
                flush=True,
            )


if __name__ == "__main__":
    b, t = map(int, sys.argv[1].split("x"))
    main(b, t, [float(r) for r in sys.argv[3:]], sys.argv[2])
