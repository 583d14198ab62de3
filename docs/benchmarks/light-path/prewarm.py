"""Would waking the CPU just before a lone pass give back what idle costs it? A lone job's pass
comes after the status read, about a millisecond after the job is delivered; a batcher could
fill that millisecond with a busy spell on the lane's thread. Here, in one process, the bare
model's single-item pass over sentences around the median length, five ways taking turns: back
to back; after GAP s asleep; and after GAP s of which the last part is spent spinning in Python
(1 ms) or running small matrix products on PyTorch's threads (1 ms, 0.3 ms), so its OpenMP
workers are awake when the pass starts. Prints each round's medians, then the medians over all.

    PYTHONPATH=src:services:. .venv/bin/python docs/benchmarks/light-path/prewarm.py [GAP_S] [ROUNDS]
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable

import torch

from bench import batching, workload


def spin(ms: float) -> None:
    end = time.perf_counter() + ms / 1000
    while time.perf_counter() < end:
        pass


def products(ms: float, a: torch.Tensor) -> None:
    end = time.perf_counter() + ms / 1000
    while time.perf_counter() < end:
        torch.mm(a, a)


def main() -> None:
    gap = float(sys.argv[1]) if len(sys.argv) > 1 else 0.1
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 6
    model, encoded = workload.warm_model(workload.build_model(), "fp32", 2)
    middle = batching.typical_sentences(encoded)
    a = torch.randn(256, 256)

    def after_idle(busy_ms: float, busy: Callable[[float], None]) -> Callable[[], None]:
        def wait() -> None:
            time.sleep(gap - busy_ms / 1000)
            busy(busy_ms)

        return wait

    before: dict[str, Callable[[], None]] = {
        "back to back": lambda: None,
        "idle": lambda: time.sleep(gap),
        "idle, spin 1 ms": after_idle(1, spin),
        "idle, torch 1 ms": after_idle(1, lambda ms: products(ms, a)),
        "idle, torch 0.3 ms": after_idle(0.3, lambda ms: products(ms, a)),
    }
    passes: dict[str, list[float]] = {name: [] for name in before}
    for round_ in range(rounds):
        for name in batching.turns(list(before), round_):
            for e in middle:
                before[name]()
                passes[name].append(batching.timed_pass(model.predict, e))
        line = ", ".join(f"{k} {statistics.median(v[-len(middle) :]):.2f}" for k, v in passes.items())
        print(f"round {round_ + 1}: {line}", flush=True)
    print("medians: " + ", ".join(f"{k} {statistics.median(v):.2f}" for k, v in passes.items()))


if __name__ == "__main__":
    main()
