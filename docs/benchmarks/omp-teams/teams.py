"""Why only one thread of a batcher ever runs a multi-threaded pass (batcher/lanes.py): a lone
fp32 pass on both threads, spaced as light load spaces jobs (1/16 s), timed in the main thread
before and after another thread of the same process has run the model on N threads.

    PYTHONPATH=src:services:. .venv/bin/python docs/benchmarks/omp-teams/teams.py [N] [ROUNDS]

Each invocation is one process (what the OpenMP runtime keeps lives as long as the process).
"""

from __future__ import annotations

import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from bench import batching, workload

GAP_S = 1 / 16


def main() -> None:
    other_threads = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    model, encoded = workload.warm_model(workload.build_model(), "fp32", 2)
    middle = batching.typical_sentences(encoded)

    def spaced() -> float:
        times = []
        for _ in range(rounds):
            for e in middle:
                time.sleep(GAP_S)
                times.append(batching.timed_pass(model.predict, e))
        return statistics.median(times)

    before = spaced()
    with ThreadPoolExecutor(max_workers=1) as other:
        other.submit(model.use_threads, other_threads).result()
        for e in middle:
            other.submit(model.predict, [e]).result()
        after = spaced()
    print(
        f"lone pass on 2 threads in the main thread, p50: {before:.2f} ms; after another thread "
        f"ran the model on {other_threads}: {after:.2f} ms ({after / before:.2f}x)",
        flush=True,
    )


if __name__ == "__main__":
    main()
