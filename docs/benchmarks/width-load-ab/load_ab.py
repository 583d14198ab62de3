"""Which width a batcher's passes should take under load, measured: checkouts of Batchline side
by side at one offered rate (evenly spaced, as `make bench-batching` offers it), each round
every checkout in turn (reversed order the next round), a fresh local stack each time (the
default policy, fp32, two model lanes). Prints, per cell, the end-to-end percentiles, the
pass time and how many passes ran on every thread (wide) and on one lane's.

    PYTHONPATH=src:services:. .venv/bin/python docs/benchmarks/width-load-ab/load_ab.py \\
        NAME=CHECKOUT NAME=CHECKOUT ... [--rate 28] [--seconds 15] [--rounds 3]

A checkout is a directory holding src/ and services/ (a git worktree with a patch applied,
say: `narrow.patch` never runs a pass wide, `wide.patch` always does when it can).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "width-learning-ab"))

from ab import cell  # width-learning-ab/ab.py

from bench import batching, workload


def one(checkout: str, model: Path, rate: float, jobs: int, seed: int) -> dict[str, Any]:
    done, passes = cell(checkout, model, rate, jobs, seed)
    e2e = [batching.e2e_ms(j) for j in done]
    return {
        "done": len(done),
        "e2e_ms": {p: batching.pct(e2e, p) for p in (50, 90, 99)},
        "pass_p50_ms": statistics.median(j.trace.inference_ms for j in done),
        "batch_mean": statistics.mean(j.trace.batch_size for j in done),
        **passes,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkouts", nargs="+", help="NAME=DIRECTORY")
    parser.add_argument("--rate", type=float, default=28.0)
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    checkouts = [tuple(c.split("=", 1)) for c in args.checkouts]
    model = workload.build_model()
    jobs = max(200, int(args.rate * args.seconds))
    for round_ in range(args.rounds):
        for name, checkout in checkouts if round_ % 2 == 0 else checkouts[::-1]:
            got = one(os.path.abspath(checkout), model, args.rate, jobs, seed=11 + round_)
            p = got["e2e_ms"]
            print(
                f"rate {args.rate:g}/s round {round_ + 1} {name}: {got['done']}/{jobs} done; e2e p50 "
                f"{p[50]:.1f} p90 {p[90]:.1f} p99 {p[99]:.1f} ms; pass p50 {got['pass_p50_ms']:.1f}; "
                f"batch {got['batch_mean']:.2f}; passes wide {got['wide']:.0f}, on a lane {got['lane']:.0f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
