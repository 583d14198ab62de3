"""The packed forward pass against the padded one, side by side on the same weights.

The full-size DistilBERT shape (random weights) on 2 threads, the benchmark's sentences; for
each batch size, batches drawn at random (FIFO: the lengths of whatever arrived together) and
batches of neighbours in length (what the length-aware policy forms from a backlog). The two
passes alternate, five rounds of six batches each; the table gives the median per job.

    PYTHONPATH=src:services:. .venv/bin/python docs/benchmarks/packed-ab/packed_ab.py fp32
    PYTHONPATH=src:services:. .venv/bin/python docs/benchmarks/packed-ab/packed_ab.py bf16
"""

from __future__ import annotations

import random
import statistics
import sys
import time
from collections.abc import Callable, Sequence

import torch

from batcher.model import Encoded
from bench import workload


def per_job_ms(run: Callable[[Sequence[Encoded]], object], batches: list[list[Encoded]]) -> float:
    started = time.perf_counter()
    for batch in batches:
        run(batch)
    return (time.perf_counter() - started) * 1000 / sum(len(b) for b in batches)


def main(precision: str) -> None:
    model, encoded = workload.warm_model(workload.build_model(), precision, threads=2)
    assert model._packed is not None
    packed = model._packed

    def run_packed(batch: Sequence[Encoded]) -> object:
        return packed([e.ids for e in batch])

    def run_padded(batch: Sequence[Encoded]) -> object:
        return model._padded(batch, max(e.tokens for e in batch))

    rng = random.Random(1)
    print(f"| {precision} | batch | batches | padding | padded ms/job | packed ms/job | padded / packed |")
    print("|---|---|---|---|---|---|---|")
    with torch.inference_mode():
        for size in (1, 4, 8, 16):
            for kind in ("FIFO", "neighbours"):
                times: dict[str, list[float]] = {"padded": [], "packed": []}
                real = padded = 0
                for round_ in range(5):
                    if kind == "FIFO":
                        batches = [rng.sample(encoded, size) for _ in range(6)]
                    else:
                        pool = sorted(rng.sample(encoded, 128), key=lambda e: e.tokens)
                        batches = [pool[i : i + size] for i in range(0, 6 * size, size)]
                    real += sum(e.tokens for b in batches for e in b)
                    padded += sum(len(b) * max(e.tokens for e in b) for b in batches)
                    order = [("padded", run_padded), ("packed", run_packed)]
                    for name, run in order if round_ % 2 else order[::-1]:
                        times[name].append(per_job_ms(run, batches))
                a, b = statistics.median(times["padded"]), statistics.median(times["packed"])
                cells = f"{real / padded:.2f} | {a:.1f} | {b:.1f} | {a / b:.2f}"
                print(f"| | {size} | {kind} | {cells} |", flush=True)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "fp32")
