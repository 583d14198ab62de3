"""One batcher with two PyTorch threads against two batchers with one thread each, side by side
through the pipeline on this 2-core machine.

`1x2` is the default deployment (one batcher, TORCH_THREADS=0: PyTorch takes both cores);
`2x1` runs two batchers on the same queue with TORCH_THREADS=1 (one model per core, as an
inference server runs model instances). Both use the default policy, the packed pass, the local
RabbitMQ and Redis. Part 1: the bare model in this process, batches of 16 in arrival order, with
two threads, and two processes with one thread each running at once (summed). Part 2: a backlog
of 800 jobs, fp32 and bf16, three repeats each, the bare model (two threads) measured just before
each. Part 3: evenly spaced open-loop arrivals at 8, 24, 40, 48 and 56 req/s, fp32, 15 s each
(at least 200 jobs), three rounds, the two taking turns on fresh stacks. Prints one line per
cell (stderr) and tables of medians (stdout).

    PYTHONPATH=src:services:. .venv/bin/python docs/benchmarks/instances-ab/instances_ab.py
"""

from __future__ import annotations

import statistics
from pathlib import Path

from bench import batching, workload

RATES = [8.0, 24.0, 40.0, 48.0, 56.0]
ROUNDS = 3
CONFIGS = {"1x2": {"MODEL_LANES": "1"}, "2x1": {"BATCHERS": "2", "TORCH_THREADS": "1"}}


def bare_side_by_side(path: Path, precision: str) -> tuple[float, float]:
    """Sequences/s of one process with two threads, then of two one-thread processes at once."""
    model, encoded = workload.warm_model(path, precision, 2)
    one = batching.fifo_throughput(model, encoded, 10.0)[0]
    del model
    return one, batching.bare_instances(path, precision, 10.0)


def main() -> None:
    path = workload.build_model()
    batching.CONFIGS.update(CONFIGS)
    print("| precision | bare, 1 process x 2 threads, seq/s | bare, 2 processes x 1 thread, seq/s |")
    print("|---|---|---|")
    for precision in ("fp32", "bf16"):
        one, two = bare_side_by_side(path, precision)
        print(f"| {precision} | {one:.1f} | {two:.1f} |", flush=True)

    print("\n| precision | config | backlog jobs/s (each) | bare 2 threads just before | ratio ", end="")
    print("| mean batch | compute/job ms |")
    print("|---|---|---|---|---|---|---|")
    med = batching.median_of
    for precision in ("fp32", "bf16"):
        for name in CONFIGS:
            runs = batching.measure_saturation(name, path, precision, 800, ROUNDS, threads=2)
            each = ", ".join(f"{r['completed_rps']:.1f}" for r in runs)
            ratio = statistics.median(r["completed_rps"] / r["bare_throughput_per_s"] for r in runs)
            print(
                f"| {precision} | {name} | **{med(runs, 'completed_rps'):.1f}** ({each}) | "
                f"{med(runs, 'bare_throughput_per_s'):.1f} | {ratio:.2f} | "
                f"{med(runs, 'mean_batch_size'):.1f} | {med(runs, 'compute_per_job_ms'):.1f} |",
                flush=True,
            )

    cells = batching.side_by_side(list(CONFIGS), path, "fp32", RATES, ROUNDS)
    print("\n" + "\n".join(batching.rate_table(cells, RATES)), flush=True)


if __name__ == "__main__":
    main()
