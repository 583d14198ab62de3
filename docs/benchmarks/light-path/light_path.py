"""Where a job's time goes at light load: the default policy, fp32, on the real services, one
job every 1/RATE s. Per round, first the bare model's single-item pass in this process, spaced
1/RATE s apart as the jobs are (with the services idle); then, per job from its trace, accepted
-> started (the broker's hop, the batcher's decision and its status read), the pass as the
batcher timed it, and started + pass -> finished (the rest). Prints p50s, one line per round.

    PYTHONPATH=src:services:. .venv/bin/python docs/benchmarks/light-path/light_path.py [RATE] [ROUNDS]
"""

from __future__ import annotations

import asyncio
import statistics
import sys

from batchline import codec
from bench import batching, stack, workload


def main() -> None:
    rate = float(sys.argv[1]) if len(sys.argv) > 1 else 5.0
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    path = workload.build_model()
    bare, encoded = workload.warm_model(path, "fp32", 2)
    env, batchers = batching.stack_env("default", path, "fp32")
    with stack.start("local", env, batchers=batchers, envoy=False) as targets:
        batching.warm(targets.ingress)
        for round_ in range(rounds):
            _, single = batching.single_passes(bare, encoded, 1 / rate)
            texts = workload.sentences(200, seed=7 + round_)
            baseline = asyncio.run(batching.finished_count(targets.ingress))
            ids, _, _ = asyncio.run(batching.open_loop(targets.ingress, texts, rate))
            jobs = asyncio.run(batching.collect(targets.ingress, ids, baseline))
            t = [j.trace for j in jobs if j.status == codec.DONE]
            e2e = [(codec.seconds(x.finished_at) - codec.seconds(x.accepted_at)) * 1000 for x in t]
            before = [(codec.seconds(x.started_at) - codec.seconds(x.accepted_at)) * 1000 for x in t]
            after = [
                (codec.seconds(x.finished_at) - codec.seconds(x.started_at)) * 1000 - x.inference_ms
                for x in t
            ]
            p50 = statistics.median
            print(
                f"round {round_ + 1} at {rate:g}/s: bare spaced pass {single:.2f} ms; e2e p50 {p50(e2e):.2f} "
                f"(+{p50(e2e) - single:.2f}): accepted->started {p50(before):.2f}, pass "
                f"{p50([x.inference_ms for x in t]):.2f}, after the pass {p50(after):.2f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
