"""Light load in the pipeline with every process but the batcher at nice 19, against as it is.

`priority.py` showed, on the bare model beside a synthetic burner, that the other process at
nice 19 left a two-thread pass nearly as fast as alone. This asks the same of the pipeline at
light load: the ingress, the stream service, RabbitMQ, Redis and this process (the client) at
nice 19 for the cell (every thread of each: a nice value is per thread on Linux), the batcher
at the default. Per round, each variant in turn (the other order next round): the bare
single-item pass in this process spaced as the jobs are, then a fresh local stack (the default
policy, fp32) offered JOBS sentences evenly spaced at RATE. Each cell also gives each process's
CPU per job (including what it spends idle over the cell) and the Submit round trip the client
saw, which would show a starved ingress that the trace (which starts at `accepted`) cannot.

    PYTHONPATH=src:services:. .venv/bin/python docs/benchmarks/contention/pipeline_nice.py \\
        [RATE 9] [JOBS 200] [ROUNDS 4]

It runs only as root: putting a thread back to nice 0 from 19 needs the privilege, and without
it the machine's RabbitMQ and Redis would be left at nice 19.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import statistics
import sys
import time
from pathlib import Path

from batchline import codec
from bench import batching, machine, stack, workload

VARIANTS = ("as is", "others nice 19")


def renice(pids: list[int], value: int) -> None:
    for pid in pids:
        try:
            threads = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
        except OSError:
            continue
        for tid in threads:
            with contextlib.suppress(OSError):  # a thread that has ended
                os.setpriority(os.PRIO_PROCESS, tid, value)


def cell(variant: str, model: Path, rate: float, jobs: int, seed: int) -> dict[str, float]:
    env, batchers = batching.stack_env("default", model, "fp32")
    with stack.start("local", env, batchers=batchers, envoy=False) as targets:
        batching.warm(targets.ingress)
        processes = {**targets.pids, "client": [os.getpid()]}
        others = [pid for name, pids in processes.items() if name != "batcher" for pid in pids]
        baseline = asyncio.run(batching.finished_count(targets.ingress))
        round_trips: list[float] = []
        before = {name: stack.cpu_seconds(pids) for name, pids in processes.items()}
        if variant == "others nice 19":
            renice(others, 19)
        try:
            texts = workload.sentences(jobs, seed=seed)
            ids, _, _ = asyncio.run(batching.open_loop(targets.ingress, texts, rate, round_trips))
            time.sleep(0.5)  # the last job's result
        finally:
            renice(others, 0)
        cpu = {
            name: (stack.cpu_seconds(pids) - before[name]) * 1000 / jobs for name, pids in processes.items()
        }
        done = [
            j for j in asyncio.run(batching.collect(targets.ingress, ids, baseline)) if j.status == codec.DONE
        ]
    e2e = [batching.e2e_ms(j) for j in done]
    return {
        "e2e_p50": statistics.median(e2e),
        "pass_p50": statistics.median(j.trace.inference_ms for j in done),
        "submit_p50": statistics.median(round_trips),
        "submit_p99": batching.pct(round_trips, 99),
        **{f"cpu_{name}": value for name, value in cpu.items()},
    }


def main() -> None:
    if os.geteuid() != 0:
        sys.exit("pipeline_nice.py runs as root only: it puts RabbitMQ's and Redis's threads back to nice 0")
    rate = float(sys.argv[1]) if len(sys.argv) > 1 else 9.0
    jobs = int(sys.argv[2]) if len(sys.argv) > 2 else 200
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 4
    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {machine.describe()}")
    print(f"# default policy, fp32, {jobs} jobs evenly spaced at {rate}/s per cell; ms")
    model = workload.build_model()
    bare, encoded = workload.warm_model(model, "fp32", 2)
    rows: dict[str, list[dict[str, float]]] = {v: [] for v in VARIANTS}
    for round_ in range(rounds):
        for variant in VARIANTS if round_ % 2 == 0 else VARIANTS[::-1]:
            _, spaced = batching.single_passes(bare, encoded, 1 / rate)
            row = {"spaced_pass": spaced, **cell(variant, model, rate, jobs, seed=100 + round_)}
            row["e2e_over_pass"] = row["e2e_p50"] - spaced
            row["pass_over_pass"] = row["pass_p50"] - spaced
            rows[variant].append(row)
            print(
                f"round {round_ + 1} {variant:>15}: " + ", ".join(f"{k} {v:.2f}" for k, v in row.items()),
                flush=True,
            )
    print("medians over the rounds:")
    for variant, cells in rows.items():
        print(
            f"{variant:>15}: "
            + ", ".join(f"{k} {statistics.median(c[k] for c in cells):.2f}" for k in cells[0])
        )


if __name__ == "__main__":
    main()
