"""Light cells of one config on one checkout, each on a fresh local stack warmed by a backlog of
32, then offered 200 jobs evenly spaced at RATE: the end-to-end p50 and how many passes ran on
every thread (wide) and on one lane's. With decisions.patch applied to the checkout, the
batcher logs each lone decision to WIDTH_LOG (decisions.py sums it up).

    PYTHONPATH=src:services:. .venv/bin/python docs/benchmarks/width-compare-ab/light_cells.py \\
        CHECKOUT CONFIG RATE ROUNDS
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys

from batchline import codec
from bench import batching, stack, workload


def main() -> None:
    checkout, config, rate, rounds = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
    os.environ["PYTHONPATH"] = os.pathsep.join(f"{checkout}/{d}" for d in ("src", "services", "."))
    model = workload.build_model()
    for round_ in range(rounds):
        env, batchers = batching.stack_env(config, model, "fp32")
        with stack.start("local", env, batchers=batchers, envoy=False, metrics=True) as targets:
            warm = batching.sentences(32, seed=1)
            asyncio.run(
                batching.collect(targets.ingress, asyncio.run(batching.backlog(targets.ingress, warm)), 0)
            )
            before = batching.pass_widths(targets.metrics["batcher"])
            baseline = asyncio.run(batching.finished_count(targets.ingress))
            texts = batching.sentences(200, seed=100 + round_)
            ids, _, _ = asyncio.run(batching.open_loop(targets.ingress, texts, rate))
            done = asyncio.run(batching.collect(targets.ingress, ids, baseline))
            after = batching.pass_widths(targets.metrics["batcher"])
        e2e = [(codec.seconds(j.trace.finished_at) - codec.seconds(j.trace.accepted_at)) * 1000 for j in done]
        print(
            f"round {round_ + 1} {config}: e2e p50 {statistics.median(e2e):.1f}; "
            f"wide {after['wide'] - before['wide']:.0f} lane {after['lane'] - before['lane']:.0f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
