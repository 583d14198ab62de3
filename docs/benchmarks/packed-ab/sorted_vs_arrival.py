"""Does a packed pass cost less when its batch's sentences are of similar length?

The same 1,600 benchmark sentences as batches of 16, two ways: in arrival order (what greedy
FIFO runs) and sorted by length (what the length-aware policy cuts from a backlog), the packed
fp32 pass on 2 threads, the two ways in turns, `ROUNDS` rounds; milliseconds per real token
over all 100 batches of each way (both hold the same tokens).

    PYTHONPATH=src:services:. .venv/bin/python docs/benchmarks/packed-ab/sorted_vs_arrival.py
"""

from __future__ import annotations

import random
import statistics
import time

from batcher.hf import HFModel
from batcher.model import Encoded
from batcher.settings import ModelSettings
from bench import workload

ROUNDS = 5


def main() -> None:
    model = HFModel(
        ModelSettings(backend="hf", model_path=str(workload.build_model()), torch_threads=2, precision="fp32")
    )
    model.warm_up(16)
    jobs = model.encode(workload.sentences(1600, seed=11))
    arrival = [jobs[i : i + 16] for i in range(0, len(jobs), 16)]
    ordered = sorted(jobs, key=lambda e: e.tokens)
    by_length = [ordered[i : i + 16] for i in range(0, len(ordered), 16)]
    random.Random(2).shuffle(by_length)  # no run of ever longer passes
    tokens = sum(e.tokens for e in jobs)

    def per_token_ms(batches: list[list[Encoded]]) -> float:
        started = time.perf_counter()
        for batch in batches:
            model.predict(batch)
        return (time.perf_counter() - started) * 1000 / tokens

    ratios = []
    for round_ in range(ROUNDS):
        ways = [("arrival", arrival), ("sorted", by_length)]
        times = dict((name, per_token_ms(b)) for name, b in (ways if round_ % 2 == 0 else ways[::-1]))
        ratios.append(times["arrival"] / times["sorted"])
        print(
            f"round {round_ + 1}: arrival order {times['arrival']:.4f} ms per real token, "
            f"sorted by length {times['sorted']:.4f}; arrival / sorted {ratios[-1]:.3f}",
            flush=True,
        )
    print(f"median arrival / sorted: {statistics.median(ratios):.3f} ({tokens} real tokens per way)")


if __name__ == "__main__":
    main()
