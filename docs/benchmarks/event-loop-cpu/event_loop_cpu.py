"""Where the CPU goes at saturation: a backlog through the default config, each process's CPU
per job, and the batcher's event-loop thread on its own (the thread that consumes, tokenizes,
forms batches and stores results; the model lanes are the others).

    PYTHONPATH=src:services:. .venv/bin/python docs/benchmarks/event-loop-cpu/event_loop_cpu.py \
        [precision] [jobs] [rounds]

Each round measures the bare model's batch-16 throughput just before (as `make bench-batching`
does), then submits `jobs` at once (SubmitBatch of 64) and reads every record back.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path

from bench import machine, stack
from bench.batching import Run, backlog, collect, fifo_throughput, finished_count, stack_env
from bench.workload import build_model, sentences, warm_model


def thread_cpu_s(pid: int, tid: int) -> float:
    fields = Path(f"/proc/{pid}/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    precision = sys.argv[1] if len(sys.argv) > 1 else "bf16"
    jobs = int(sys.argv[2]) if len(sys.argv) > 2 else 3000
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    model = build_model()
    bare, encoded = warm_model(model, precision, os.cpu_count() or 1)
    env, batchers = stack_env("default", model, precision)
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    print(f"# {when}, {machine.describe()}; {precision}, backlogs of {jobs}")
    with stack.start("local", env, batchers=batchers, envoy=False) as targets:
        pids = {
            **targets.pids,
            "rabbitmq": stack.service_pids("beam"),
            "redis": stack.service_pids("redis-server"),
        }
        batcher = targets.pids["batcher"][0]
        asyncio.run(collect(targets.ingress, asyncio.run(backlog(targets.ingress, sentences(64, seed=1))), 0))
        for round_ in range(rounds):
            bare_per_s, _ = fifo_throughput(bare, encoded, seconds=8.0)
            texts = sentences(jobs, seed=500 + round_)
            baseline = asyncio.run(finished_count(targets.ingress))
            before = {name: stack.cpu_seconds(ids) for name, ids in pids.items()}
            loop_before = thread_cpu_s(batcher, batcher)  # the main thread's id is the process id
            records = asyncio.run(
                collect(targets.ingress, asyncio.run(backlog(targets.ingress, texts)), baseline)
            )
            loop_ms = (thread_cpu_s(batcher, batcher) - loop_before) * 1000 / jobs
            cpu = {name: (stack.cpu_seconds(ids) - before[name]) * 1000 / jobs for name, ids in pids.items()}
            run = Run("default", float("inf"), 0.0, records, 0.0, 0.0).summary()
            print(
                f"round {round_ + 1}: {run['completed_rps']:.1f} jobs/s, bare {bare_per_s:.1f}/s just before "
                f"(ratio {run['completed_rps'] / bare_per_s:.2f}); batcher event loop {loop_ms:.3f} ms/job; "
                "CPU ms/job " + ", ".join(f"{name} {ms:.3f}" for name, ms in cpu.items()),
                flush=True,
            )


if __name__ == "__main__":
    main()
