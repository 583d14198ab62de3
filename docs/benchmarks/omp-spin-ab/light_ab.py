"""Does libgomp's spin after a parallel region cost a lone job its time? PyTorch's OpenMP
threads spin GOMP_SPINCOUNT times before they sleep, after every region and after the pass;
on 2 vCPUs a spinning thread holds a core the stack's other processes want. Two default fp32
stacks side by side, one with the batcher's GOMP_SPINCOUNT set to SPIN; rounds go A B B A, one
job every 1/RATE s to one stack while the other idles. Per round: the bare spaced pass timed
before and after it (the benchmark's light-cell reference), the e2e p50 over it, the trace's
pass over it, accepted -> started, and how many of the round's passes ran wide. One line per round.

    PYTHONPATH=src:services:. .venv/bin/python docs/benchmarks/omp-spin-ab/light_ab.py SPIN [RATE] [ROUNDS]
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from contextlib import ExitStack

from bench import batching, stack, workload


def main() -> None:
    spin = sys.argv[1]
    rate = float(sys.argv[2]) if len(sys.argv) > 2 else 10.0
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 8
    path = workload.build_model()
    bare, encoded = workload.warm_model(path, "fp32", 2)
    env, batchers = batching.stack_env("default", path, "fp32")
    arms = {"default": env, f"spin {spin}": {**env, "GOMP_SPINCOUNT": spin}}
    with ExitStack() as running:
        targets = {
            name: running.enter_context(stack.start("local", e, batchers, envoy=False, metrics=True))
            for name, e in arms.items()
        }
        for t in targets.values():
            batching.warm(t.ingress)
        for round_ in range(rounds):
            name = list(arms)[(round_ + round_ // 2) % 2]  # A B B A A B B A ...
            t = targets[name]
            texts = workload.sentences(200, seed=7 + round_ // 2)  # each pair sends the same texts
            _, before = batching.timed_single_passes(bare, encoded, 1 / rate)
            baseline = asyncio.run(batching.finished_count(t.ingress))
            widths = batching.pass_widths(t.metrics["batcher"])
            ids, _, lag = asyncio.run(batching.open_loop(t.ingress, texts, rate))
            jobs = asyncio.run(batching.collect(t.ingress, ids, baseline))
            wide = batching.pass_widths(t.metrics["batcher"])["wide"] - widths["wide"]
            _, after = batching.timed_single_passes(bare, encoded, 1 / rate)
            reference = statistics.median(before + after)
            print(
                f"{time.strftime('%H:%M:%S')} round {round_ + 1} {name:>12} at {rate:g}/s: "
                f"{batching.over_reference(jobs, reference)}; wide {wide:.0f}; send lag p99 {lag:.1f} ms",
                flush=True,
            )


if __name__ == "__main__":
    main()
