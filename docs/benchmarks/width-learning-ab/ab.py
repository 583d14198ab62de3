"""Light load on two checkouts of Batchline side by side: the batcher's lone passes, how many
ran on every thread and how many on one lane's, and what that did to the end to end. Per round,
each checkout in turn (the other order next round): the bare single-item pass in this process,
spaced as the jobs are; then a fresh local stack from that checkout (the default policy, fp32)
offered one job every 1/RATE s, ROUNDS rounds.

    PYTHONPATH=src:services:. .venv/bin/python docs/benchmarks/width-learning-ab/ab.py \\
        NAME=CHECKOUT NAME=CHECKOUT [--rate 16] [--jobs 200] [--rounds 3]

A checkout is a directory holding src/ and services/ (a git worktree of a commit, say). The
runs in ../width-learning-ab.md compared 1c2a657 (random arrivals assumed) with 1b09328 (the
wait measured), and main at the time with the same commit and learning.patch applied:

    git worktree add /tmp/probe-only HEAD && git worktree add /tmp/learning HEAD
    git -C /tmp/learning apply "$PWD/docs/benchmarks/width-learning-ab/learning.patch"
    ... ab.py probe-only=/tmp/probe-only learning=/tmp/learning --rounds 3
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
from pathlib import Path

from batchline import codec
from batchline.v1 import job_pb2
from bench import batching, stack, workload


def cell(
    checkout: str, model: Path, rate: float, jobs: int, seed: int, config: str = "default"
) -> tuple[list[job_pb2.Job], dict[str, float]]:
    """A fresh local stack from `checkout` (`config`, by default the default policy; fp32),
    warmed by a backlog of 32, then offered `jobs` sentences evenly spaced at `rate`: the jobs
    that ended DONE, and how many passes ran meanwhile on every thread (`wide`) and on one
    lane's (`lane`)."""
    os.environ["PYTHONPATH"] = os.pathsep.join(f"{checkout}/{d}" for d in ("src", "services", "."))
    env, batchers = batching.stack_env(config, model, "fp32")
    with stack.start("local", env, batchers=batchers, envoy=False, metrics=True) as targets:
        batching.warm(targets.ingress)
        before = batching.pass_widths(targets.metrics["batcher"])
        baseline = asyncio.run(batching.finished_count(targets.ingress))
        ids, _, _ = asyncio.run(
            batching.open_loop(targets.ingress, workload.sentences(jobs, seed=seed), rate)
        )
        done = [
            j for j in asyncio.run(batching.collect(targets.ingress, ids, baseline)) if j.status == codec.DONE
        ]
        after = batching.pass_widths(targets.metrics["batcher"])
    return done, {width: after.get(width, 0) - before.get(width, 0) for width in ("wide", "lane")}


def one(checkout: str, model: Path, rate: float, jobs: int, seed: int) -> dict[str, float]:
    done, passes = cell(checkout, model, rate, jobs, seed)
    e2e = [batching.e2e_ms(j) for j in done]
    return {
        "e2e_p50_ms": statistics.median(e2e),
        "pass_p50_ms": statistics.median(j.trace.inference_ms for j in done),
        **passes,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkouts", nargs=2, help="NAME=DIRECTORY")
    parser.add_argument("--rate", type=float, default=16.0)
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    checkouts = [tuple(c.split("=", 1)) for c in args.checkouts]
    model = workload.build_model()
    bare, encoded = workload.warm_model(model, "fp32", 2)
    for round_ in range(args.rounds):
        for name, checkout in checkouts if round_ % 2 == 0 else checkouts[::-1]:
            _, single = batching.single_passes(bare, encoded, 1 / args.rate)
            got = one(os.path.abspath(checkout), model, args.rate, args.jobs, seed=7 + round_)
            print(
                f"round {round_ + 1} {name}: bare spaced pass {single:.2f} ms; e2e p50 "
                f"{got['e2e_p50_ms']:.2f} ({got['e2e_p50_ms'] - single:+.2f}); pass p50 "
                f"{got['pass_p50_ms']:.2f}; passes wide {got['wide']:.0f}, on a lane {got['lane']:.0f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
