"""How far does the light-load reference move from one timing to the next? `make bench-batching`
reads each light cell against the bare model's spaced single-item passes timed with the cell
(`bench.batching.timed_single_passes`: 3 rounds of 11 passes, each after the light load's gap,
each round after 11 back to back; about 5 s). Here that reference is timed TIMES times in a
row, in this process, beside a default stack that is up, warmed and idle, as in the benchmark;
one line per timing: its median, quartiles and first five passes.

    PYTHONPATH=src:services:. .venv/bin/python docs/benchmarks/light-path/reference_spells.py [TIMES] [GAP_S]
"""

from __future__ import annotations

import statistics
import sys
import time

from bench import batching, stack, workload


def main() -> None:
    times = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    gap = float(sys.argv[2]) if len(sys.argv) > 2 else 0.105
    path = workload.build_model()
    bare, encoded = workload.warm_model(path, "fp32", 2)
    env, batchers = batching.stack_env("default", path, "fp32")
    with stack.start("local", env, batchers=batchers, envoy=False) as targets:
        batching.warm(targets.ingress)
        for n in range(times):
            at = time.strftime("%H:%M:%S")
            _, spaced = batching.timed_single_passes(bare, encoded, gap)
            low, _, high = statistics.quantiles(spaced, n=4)
            first = ", ".join(f"{x:.1f}" for x in spaced[:5])
            print(
                f"{at} reference {n + 1}: median {statistics.median(spaced):.1f} ms, "
                f"quartiles {low:.1f} / {high:.1f}, first five {first}",
                flush=True,
            )


if __name__ == "__main__":
    main()
