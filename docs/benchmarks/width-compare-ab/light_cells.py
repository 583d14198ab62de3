"""Light cells of one config on one checkout, each on a fresh local stack warmed by a backlog of
32, then offered 200 jobs evenly spaced at RATE: the end-to-end p50 and how many passes ran on
every thread (wide) and on one lane's. With decisions.patch applied to the checkout, the
batcher logs each lone decision to WIDTH_LOG (decisions.py sums it up).

    PYTHONPATH=src:services:. .venv/bin/python docs/benchmarks/width-compare-ab/light_cells.py \\
        CHECKOUT CONFIG RATE ROUNDS
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "width-learning-ab"))

from ab import cell  # width-learning-ab/ab.py

from bench import batching, workload


def main() -> None:
    checkout, config, rate, rounds = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
    model = workload.build_model()
    for round_ in range(rounds):
        done, passes = cell(checkout, model, rate, 200, seed=100 + round_, config=config)
        e2e = [batching.e2e_ms(j) for j in done]
        print(
            f"round {round_ + 1} {config}: e2e p50 {statistics.median(e2e):.1f}; "
            f"wide {passes['wide']:.0f} lane {passes['lane']:.0f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
