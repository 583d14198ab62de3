"""The bare model alone: a single-item fp32 pass after 100 ms idle, and the CPU the process
burns in the 50 ms after it (libgomp's threads spinning), with libgomp's default spin
(GOMP_SPINCOUNT=300000) and with the batcher's (30000). Each arm runs in a fresh process
(libgomp reads the variable once, when torch loads it); the arms alternate, ROUNDS times.

    PYTHONPATH=src:services:. .venv/bin/python docs/benchmarks/omp-spin-ab/spin_probe.py [ROUNDS]
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time

ARMS = ("300000", "30000")


def one_arm() -> None:
    from bench import batching, workload

    model, encoded = workload.warm_model(workload.build_model(), "fp32", 2)
    passes, after = [], []
    for _ in range(3):
        for e in batching.typical_sentences(encoded):
            time.sleep(0.1)
            passes.append(batching.timed_pass(model.predict, e))
            cpu = time.process_time()
            time.sleep(0.05)
            after.append((time.process_time() - cpu) * 1000)
    print(
        f"GOMP_SPINCOUNT={os.environ['GOMP_SPINCOUNT']}: spaced pass p50 {statistics.median(passes):.2f} ms; "
        f"process CPU in the 50 ms after it p50 {statistics.median(after):.2f} ms "
        f"(min {min(after):.2f}, max {max(after):.2f}); {len(passes)} passes",
        flush=True,
    )


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    for _ in range(rounds):
        for spin in ARMS:
            env = {**os.environ, "GOMP_SPINCOUNT": spin, "SPIN_PROBE_ARM": "1"}
            subprocess.run([sys.executable, __file__], env=env, check=True)


if __name__ == "__main__":
    if os.environ.get("SPIN_PROBE_ARM"):
        one_arm()
    else:
        main()
