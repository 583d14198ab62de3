"""A backlog of 1,200 jobs through a fresh stack (default config, real hf backend), three
times: jobs/s, how much of the run the model computed, the idle gap between passes, and the CPU
each process spent per job (the batcher's event-loop thread apart from its model threads).

Run it from a checkout, once per commit compared, alternating:
    PYTHONPATH=src:services:. .venv/bin/python docs/benchmarks/handover-ab/saturation_ab.py bf16
"""

from __future__ import annotations

import asyncio
import itertools
import statistics
import sys
from pathlib import Path

from batchline import codec
from bench import batching, stack, workload


def thread_cpu_s(pid: int) -> float:
    """User + system CPU of a process's main thread (its event loop), from /proc."""
    fields = Path(f"/proc/{pid}/task/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / 100


def main(precision: str, repeats: int = 3) -> None:
    model = workload.build_model()
    env = {"MODEL_BACKEND": "hf", "MODEL_PATH": str(model), "PRECISION": precision}
    with stack.start("local", env, envoy=False) as targets:
        pids = {
            "batcher": targets.pids["batcher"],
            "stream": targets.pids["stream"],
            "ingress": targets.pids["ingress"],
            "rabbitmq": stack.service_pids("beam"),
            "redis": stack.service_pids("redis"),
        }
        for repeat in range(repeats):
            texts = workload.sentences(1200, seed=500 + repeat)
            baseline = asyncio.run(batching.finished_count(targets.ingress))
            before = {name: stack.cpu_seconds(p) for name, p in pids.items()}
            loop_before = thread_cpu_s(pids["batcher"][0])
            ids = asyncio.run(batching.backlog(targets.ingress, texts))
            jobs = asyncio.run(batching.collect(targets.ingress, ids, baseline))
            loop_s = thread_cpu_s(pids["batcher"][0]) - loop_before
            spent = {name: stack.cpu_seconds(p) - before[name] for name, p in pids.items()}
            cpu_ms = {name: seconds * 1000 / len(ids) for name, seconds in spent.items()}
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
            # The ingress's share includes reading every job back after the run (GetJob).
            print(
                "  CPU ms per job: batcher event loop "
                f"{loop_s * 1000 / len(ids):.2f}, "
                + ", ".join(f"{name} {ms:.2f}" for name, ms in cpu_ms.items()),
                flush=True,
            )


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "bf16")
