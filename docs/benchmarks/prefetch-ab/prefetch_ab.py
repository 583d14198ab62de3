"""How many waiting jobs a batch is chosen from (`PREFETCH`, the policy's pool) against padding
and jobs/s at saturation.

1. `simulate`: a backlog of 1,200 benchmark sentences through the real policy with a
   pool of 64 to 256 jobs (one batch computing holds 16 places), forward pass 16.3 ms + 0.46 ms
   per padded token (fp32 here) or 2.2 + 0.153 (bf16): no machine noise; and the time one
   batch decision takes with a full pool.
2. `measure`: the same backlog through the real services (default config, hf backend), each
   repeat just after the bare model is measured (as `make bench-batching` does), a fresh stack
   per prefetch, the prefetch values alternating within each round.

    PYTHONPATH=src:services:. .venv/bin/python docs/benchmarks/prefetch-ab/prefetch_ab.py simulate
    PYTHONPATH=src:services:. .venv/bin/python docs/benchmarks/prefetch-ab/prefetch_ab.py measure fp32
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from dataclasses import replace

from batcher.collector import Load, next_batch
from bench import batching, workload
from bench.simulate import POLICIES, Job, tokens

PREFETCHES = (64, 128)


def backlog_padding(prefetch: int, fixed_ms: float, per_token_ms: float, seed: int) -> tuple[float, float]:
    """Padding efficiency and jobs per second of model time over a backlog of 1,200 jobs,
    with at most `prefetch` - 16 jobs waiting when a batch forms."""

    def forward_s(size: int, longest: int, real: int = 0) -> float:
        return (fixed_ms + per_token_ms * size * longest) / 1000

    backlog = [Job(i * 1e-6, tokens(t)) for i, t in enumerate(workload.sentences(1200, seed=seed))]
    policy = replace(POLICIES["default"], pool=prefetch)
    waiting: list[Job] = []
    nxt, now, real, padded, model_s = 0, 1.0, 0, 0, 0.0
    while nxt < len(backlog) or waiting:
        while nxt < len(backlog) and len(waiting) < prefetch - 16:
            waiting.append(backlog[nxt])
            nxt += 1
        decision = next_batch(waiting, now, policy, Load(50.0, forward_s))
        taken = set(decision.take)
        batch = [waiting[i] for i in decision.take]
        waiting = [w for i, w in enumerate(waiting) if i not in taken]
        longest = max(j.tokens for j in batch)
        real, padded = real + sum(j.tokens for j in batch), padded + len(batch) * longest
        model_s += forward_s(len(batch), longest)
        now += forward_s(len(batch), longest)
    return real / padded, len(backlog) / model_s


def formation_ms(pool: int) -> float:
    """Median time to decide one batch from a full pool of `pool` waiting jobs."""
    jobs = [Job(i * 1e-3, tokens(t)) for i, t in enumerate(workload.sentences(pool, seed=3))]
    policy = replace(POLICIES["default"], pool=pool)
    load = Load(50.0, lambda size, longest, real: (16.3 + 0.46 * size * longest) / 1000)
    times = []
    for _ in range(200):
        started = time.perf_counter()
        next_batch(jobs, 1.0, policy, load)
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


def simulate() -> None:
    for prefetch in (64, 96, 128, 192, 256):
        cells = [f"forming a batch from {prefetch} waiting {formation_ms(prefetch):.2f} ms"]
        for name, fixed, per_token in (("fp32", 16.3, 0.46), ("bf16", 2.2, 0.153)):
            runs = [backlog_padding(prefetch, fixed, per_token, seed) for seed in (1, 2, 3)]
            cells.append(
                f"{name} padding {statistics.median(r[0] for r in runs):.3f}, "
                f"{statistics.median(r[1] for r in runs):.1f} jobs/s of model time"
            )
        print(f"prefetch {prefetch}: " + "; ".join(cells), flush=True)


def measure(precision: str, rounds: int = 2, repeats: int = 2) -> None:
    model = workload.build_model()
    for round_ in range(rounds):
        for prefetch in PREFETCHES:
            os.environ["PREFETCH"] = str(prefetch)  # the stack's services inherit it
            for r in batching.measure_saturation("default", model, precision, 1200, repeats, 2):
                print(
                    f"round {round_ + 1} prefetch {prefetch} {precision}: "
                    f"{r['completed_rps']:.1f} jobs/s, bare just before {r['bare_throughput_per_s']:.1f}/s, "
                    f"ratio {r['completed_rps'] / r['bare_throughput_per_s']:.3f}, "
                    f"padding {r['padding_efficiency']:.3f}, batch {r['mean_batch_size']:.1f}, "
                    f"compute/job {r['compute_per_job_ms']:.2f} ms, close {r['close_reasons']}",
                    flush=True,
                )


if __name__ == "__main__":
    if sys.argv[1] == "simulate":
        simulate()
    else:
        measure(sys.argv[2] if len(sys.argv) > 2 else "fp32")
