"""Group by length only behind a deep backlog: simulated, not kept.

With the packed pass the default keeps arrival order (grouping saves under `GROUP_MIN_SAVING`
of the forward time). The idea tried: group whatever it saves once `group_backlog` jobs wait,
where latency is set by the queue and only throughput can shorten it; keep arrival order
below. Needs `backlog-gate.patch` applied (the `group_backlog` field, experiment only):

    git apply docs/benchmarks/group-saving/backlog-gate.patch
    PYTHONPATH=src:services:. .venv/bin/python docs/benchmarks/group-saving/backlog_gate.py \
        60 90 126 133 137 140
    PYTHONPATH=src:services:. .venv/bin/python docs/benchmarks/group-saving/backlog_gate.py   # the burst
    git apply -R docs/benchmarks/group-saving/backlog-gate.patch

The simulator (`bench.simulate`) with two lanes and Poisson arrivals, 3 sequences of 4,000 jobs
per cell, medians; the burst is 2,000 jobs at once. The pass costs the packed pass's fitted
line, with the padded layout weighted as timed rather than counted: attention at 4 x its
multiply-adds (PyTorch's fused CPU kernel took 5.0-5.7% of FIFO batches of 16, where its
multiply-adds are 1.2%: `../attention-ab/profile.txt`) and 0.01 of a token per padded place
for the scatter and gather, so that grouping saves what sorting timed
(`../packed-ab/sorted-vs-arrival.txt`: 3%; the first line printed checks it). The policies plan
with the line the batcher fits, on what the packed pass counts (`bench.simulate`'s costs), and
the passes take the costs above.
"""

from __future__ import annotations

import statistics
import sys

from batcher.collector import Policy
from bench.simulate import PASS_COSTS, pass_time, simulate, tokens
from bench.workload import sentences

FIXED_MS, PER_TOKEN_MS = PASS_COSTS["packed"]
COUNTED = pass_time("packed", FIXED_MS, PER_TOKEN_MS)  # what the batcher plans with


def timed(size: int, longest: int, real: int) -> float:
    layout = 4 * size * longest * longest / 4608 + 0.01 * size * longest
    return (FIXED_MS + PER_TOKEN_MS * (real + layout)) / 1000


def default(**change: float) -> Policy:
    """The default policy (as bench.simulate has it), with a pool of 64, and `change`."""
    return Policy(16, 0.05, adaptive=True, max_batch_tokens=4096, pool=64, **change)  # type: ignore[arg-type]


POLICIES = {
    "default": default(),
    "gate 48": default(group_backlog=48),
    "gate 32": default(group_backlog=32),
    "group always": default(group_min_saving=0.0),
}


def main(rates: list[float]) -> None:
    lengths = [tokens(text) for text in sentences(1600, seed=11)]
    by_length = sorted(lengths)
    arrival = [lengths[i : i + 16] for i in range(0, len(lengths), 16)]
    grouped = [by_length[i : i + 16] for i in range(0, len(by_length), 16)]
    for name, cost in (("as costed here", timed), ("as counted", COUNTED)):
        over = sum(cost(len(b), max(b), sum(b)) for b in arrival) / sum(
            cost(len(b), max(b), sum(b)) for b in grouped
        )
        print(f"100 batches of 16, arrival order over sorted by length, {name}: {over:.3f}")
    for rate in rates:
        cells = []
        for name, policy in POLICIES.items():
            runs = [
                simulate(policy, rate, timed, 4000, seed, lanes=2, planned_s=COUNTED) for seed in (1, 2, 3)
            ]
            p50, p99, padding, batch = (
                statistics.median(r[k] for r in runs) for k in ("p50_ms", "p99_ms", "padding", "mean_batch")
            )
            cells.append(f"{name} p50 {p50:.0f} p99 {p99:.0f} pad {padding:.2f} b {batch:.1f}")
        print(f"{rate:g}/s: " + " | ".join(cells), flush=True)
    if not rates:
        for name, policy in POLICIES.items():
            r = simulate(policy, 100000.0, timed, 2000, 1, lanes=2, planned_s=COUNTED)
            print(
                f"{name} burst: p50 {r['p50_ms']:.0f} p99 {r['p99_ms']:.0f} "
                f"pad {r['padding']:.2f} batch {r['mean_batch']:.1f}"
            )


if __name__ == "__main__":
    main([float(a) for a in sys.argv[1:]])
