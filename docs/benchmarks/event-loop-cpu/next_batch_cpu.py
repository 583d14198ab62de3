"""What one batch decision costs on the event loop: `next_batch` over 1, 2, 32, 64 and 128 waiting
jobs of benchmark lengths, with the default policy and a forward-time model like the one the
batcher fits for the full-size DistilBERT with packed passes (12 ms + 40 us per token).

    PYTHONPATH=src:services:. .venv/bin/python docs/benchmarks/event-loop-cpu/next_batch_cpu.py [rounds]

Best of `rounds` rounds of 20 decisions each (the machine is noisy; the best is the cost).
"""

from __future__ import annotations

import functools
import sys
import time

from batcher.collector import Load, Policy, next_batch
from batcher.forecast import ForwardTime
from batcher.model import packed_work
from bench.simulate import Job, tokens
from bench.workload import sentences


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 15
    texts = sentences(128, seed=7)
    waiting = [Job(i * 1e-3, tokens(text)) for i, text in enumerate(texts)]
    policy = Policy(16, 0.05, adaptive=True, max_batch_tokens=4096, pool=128)
    distilbert = functools.partial(packed_work, dim=768, hidden=3072)
    load = Load(300.0, ForwardTime(fixed_s=0.012, per_token_s=4e-5, work=distilbert))
    for count in (1, 2, 32, 64, 128):
        best = float("inf")
        for _ in range(rounds):
            started = time.perf_counter()
            for _ in range(20):
                decision = next_batch(waiting[:count], 1.0, policy, load)
            best = min(best, (time.perf_counter() - started) / 20)
        print(f"{count:4d} waiting: {best * 1e6:7.0f} us per decision, batch of {len(decision.take)}")


if __name__ == "__main__":
    main()
