"""A backlog of 2,400 jobs through the services (ingress, one batcher with the default policy,
bf16), twice on one stack: jobs/s end to end, the median pass of 15-16 jobs, and the CPU each
process spent per job.

    PYTHONPATH=src:services:. .venv/bin/python docs/benchmarks/row-buckets-ab/saturation.py
"""

from __future__ import annotations

import asyncio
import statistics
import sys

from bench import stack
from bench.batching import Run, backlog, collect, finished_count, stack_env
from bench.workload import MODEL_DIR, build_model, sentences


def main() -> None:
    precision = sys.argv[1] if len(sys.argv) > 1 else "bf16"
    jobs = 2400
    env, batchers = stack_env("default", build_model(MODEL_DIR), precision)
    with stack.start("local", env, batchers=batchers, envoy=False) as targets:
        warm = sentences(64, seed=1)
        asyncio.run(collect(targets.ingress, asyncio.run(backlog(targets.ingress, warm)), 0))
        for repeat in range(2):
            baseline = asyncio.run(finished_count(targets.ingress))
            before = {name: stack.cpu_seconds(pids) for name, pids in targets.pids.items()}
            ids = asyncio.run(backlog(targets.ingress, sentences(jobs, seed=500 + repeat)))
            records = asyncio.run(collect(targets.ingress, ids, baseline))
            cpu = {
                name: round(1000 * (stack.cpu_seconds(pids) - before[name]) / jobs, 3)
                for name, pids in targets.pids.items()
            }
            summary = Run("default", float("inf"), 0.0, records, 0.0, 0.0).summary()
            passes = {r.trace.batch_id: r.trace for r in records}
            full = [t.inference_ms for t in passes.values() if t.batch_size >= 15]
            print(
                f"#{repeat + 1}: {summary['completed_rps']:.1f} jobs/s, pass of 15-16 jobs "
                f"{statistics.median(full):.1f} ms (median of {len(full)}), CPU ms per job {cpu}",
                flush=True,
            )


if __name__ == "__main__":
    main()
