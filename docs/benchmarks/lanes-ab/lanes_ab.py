"""Two model lanes against one, side by side on this 2-core machine.

`1 lane` is one pass at a time on both cores (MODEL_LANES=1, the batcher before lanes); `2 lanes`
is the default (MODEL_LANES=auto): up to two passes at once on one core each, or one alone on
both when that pays (batcher/lanes.py). Both use the default policy, the packed pass, the local
RabbitMQ and Redis, one batcher process. Part 1: the bare model in this process, batches of 16
in arrival order, sequences/s: one pass at a time on two PyTorch threads, two Python threads
running passes on one PyTorch thread each, and two one-thread processes at once (summed).
Part 2: evenly spaced open-loop arrivals at 8, 27, 40 and 54 req/s, fp32, 15 s each, three
rounds, the two taking turns on fresh stacks.
Prints one line per cell (stderr) and tables of medians (stdout).

    PYTHONPATH=src:services:. .venv/bin/python docs/benchmarks/lanes-ab/lanes_ab.py
"""

from __future__ import annotations

import statistics
import threading
import time
from typing import Any

import torch

from bench import batching, workload

RATES = [8.0, 27.0, 40.0, 54.0]
ROUNDS = 3
CONFIGS = {"1 lane": {"MODEL_LANES": "1"}, "2 lanes": {}}


def two_threads_one_core_each(model: Any, encoded: list[Any], seconds: float) -> float:
    """Sequences/s of two Python threads each running batches of 16 on one PyTorch thread."""
    done = [0, 0]
    stop = time.perf_counter() + seconds

    def lane(i: int) -> None:
        torch.set_num_threads(1)  # per calling thread
        n = 0
        while time.perf_counter() < stop:
            at = (n * 16 + i * 7) % (len(encoded) - 16)
            model.predict(encoded[at : at + 16])
            n += 1
        done[i] = n * 16

    started = time.perf_counter()
    lanes = [threading.Thread(target=lane, args=(i,)) for i in range(2)]
    for t in lanes:
        t.start()
    for t in lanes:
        t.join()
    return sum(done) / (time.perf_counter() - started)


def main() -> None:
    path = workload.build_model()
    batching.CONFIGS.update(CONFIGS)
    print("| round | 1 pass at a time, 2 threads | 2 lanes of 1 thread | 2 processes of 1 thread |")
    print("|---|---|---|---|")
    model, encoded = workload.warm_model(path, "fp32", 2)
    for round_ in range(ROUNDS):
        one = batching.fifo_throughput(model, encoded, 10.0)[0]
        lanes = two_threads_one_core_each(model, encoded, 10.0)
        procs = batching.bare_instances(path, "fp32", 10.0)
        print(f"| {round_ + 1} | {one:.1f} | {lanes:.1f} | {procs:.1f} |", flush=True)
    del model

    cells = batching.side_by_side(list(CONFIGS), path, "fp32", RATES, ROUNDS)
    print()
    print("\n".join(batching.rate_table(cells, RATES)))
    print("\n| req/s | config | outside the pass p50 ms | done/s |")
    print("|---|---|---|---|")
    for rate in RATES:
        for name, runs in cells.items():
            mine = [c for c in runs if abs(c["offered_rps"] - rate) < 1e-6]
            print(
                f"| {rate:.0f} | {name} | {statistics.median(c['outside_model_p50_ms'] for c in mine):.1f} | "
                f"{statistics.median(c['completed_rps'] for c in mine):.1f} |"
            )


if __name__ == "__main__":
    main()
