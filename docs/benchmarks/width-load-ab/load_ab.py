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
import asyncio
import os
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "width-learning-ab"))

from ab import passes_by_width  # width-learning-ab/ab.py

from batchline import codec
from bench import batching, stack, workload


def one(checkout: str, model: Path, rate: float, jobs: int, seed: int) -> dict[str, Any]:
    os.environ["PYTHONPATH"] = os.pathsep.join(f"{checkout}/{d}" for d in ("src", "services", "."))
    env, batchers = batching.stack_env("default", model, "fp32")
    with stack.start("local", env, batchers=batchers, envoy=False, metrics=True) as targets:
        warm = batching.sentences(32, seed=1)
        asyncio.run(
            batching.collect(targets.ingress, asyncio.run(batching.backlog(targets.ingress, warm)), 0)
        )
        [port] = targets.metrics["batcher"]
        before = passes_by_width(port)
        baseline = asyncio.run(batching.finished_count(targets.ingress))
        texts = batching.sentences(jobs, seed=seed)
        ids, _, _ = asyncio.run(batching.open_loop(targets.ingress, texts, rate))
        done = [
            j for j in asyncio.run(batching.collect(targets.ingress, ids, baseline)) if j.status == codec.DONE
        ]
        after = passes_by_width(port)
    e2e = [(codec.seconds(j.trace.finished_at) - codec.seconds(j.trace.accepted_at)) * 1000 for j in done]
    return {
        "done": len(done),
        "e2e_ms": {p: batching.pct(e2e, p) for p in (50, 90, 99)},
        "pass_p50_ms": statistics.median(j.trace.inference_ms for j in done),
        "batch_mean": statistics.mean(j.trace.batch_size for j in done),
        "wide": after.get("wide", 0) - before.get("wide", 0),
        "lane": after.get("lane", 0) - before.get("lane", 0),
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
