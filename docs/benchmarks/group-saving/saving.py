"""What grouping a pool of waiting reviews by length saves, in the batcher's cost model.

For pools of the benchmark's sentences (20 draws each), the forward time of the pool cut in
urgency order (FIFO's batches) against its cheapest cut by length (what the length-aware policy
would run), for the packed and the padded pass at the costs `bench/simulate.py` uses. The
policy groups only when the saving is at least GROUP_MIN_SAVING (0.02). Then, for FIFO batches
of 16 of those sentences, the share of the packed pass's work that is attention over the padded
layout (the only part of it that sees the padding) and the share of a padded pass's tokens that
are padding.

    PYTHONPATH=src:services:. python docs/benchmarks/group-saving/saving.py
"""

from __future__ import annotations

import functools
import statistics

from batcher import collector
from batcher.collector import Policy
from batcher.forecast import ForwardTime
from batcher.model import packed_work, padded_work
from bench.simulate import PASS_COSTS, Job, tokens
from bench.workload import sentences


def main() -> None:
    works = {"packed": functools.partial(packed_work, dim=768, hidden=3072), "padded": padded_work}
    policy = Policy(16, 0.0, max_batch_tokens=4096)
    print("| pass | pool | saving by grouping: median | min | max |")
    print("|---|---|---|---|---|")
    for forward, work in works.items():
        fixed_ms, per_token_ms = PASS_COSTS[forward]
        forward_s = ForwardTime(fixed_s=fixed_ms / 1e3, per_token_s=per_token_ms / 1e3, work=work)
        for size in (17, 32, 128):
            savings = []
            for seed in range(20):
                pool = [Job(float(i), tokens(t)) for i, t in enumerate(sentences(size, seed=seed))]
                _, in_order = collector._in_order(pool, list(range(size)), policy, forward_s)
                *_, grouped = collector._cheapest_run(sorted(w.tokens for w in pool), 0, policy, forward_s)
                savings.append(1 - grouped / in_order)
            median, low, high = statistics.median(savings), min(savings), max(savings)
            print(f"| {forward} | {size} | {median:.1%} | {low:.1%} | {high:.1%} |")

    print()
    print(
        "| FIFO batches of 16 | attention, of the packed pass's work | padding, of a padded pass's tokens |"
    )
    print("|---|---|---|")
    for seed in (1, 2, 3):
        lengths = [tokens(t) for t in sentences(1600, seed=seed)]
        real = padded = packed = 0.0
        for first in range(0, len(lengths), 16):
            batch = lengths[first : first + 16]
            real, padded = real + sum(batch), padded + len(batch) * max(batch)
            packed += works["packed"](len(batch), max(batch), sum(batch))
        print(f"| draw {seed} | {(packed - real) / packed:.1%} | {1 - real / padded:.1%} |")


if __name__ == "__main__":
    main()
