"""The packed and the padded forward pass through the whole pipeline, side by side.

The default policy on the local RabbitMQ and Redis (ingress and batcher as processes, fp32, 2
threads), open-loop evenly spaced arrivals of the benchmark's sentences at 24, 40 and 48 req/s
for 15 s each; `FORWARD=packed` and `FORWARD=padded` take turns on fresh stacks, four rounds,
the first config alternating. Prints one line per cell and a table of medians.

    PYTHONPATH=src:services:. .venv/bin/python docs/benchmarks/packed-ab/pipeline_ab.py
"""

from __future__ import annotations

import statistics
import sys

from bench import batching, workload

RATES = (24.0, 40.0, 48.0)
ROUNDS = 4
NOMINAL = 80.0  # loads are passed as shares of this, so each cell runs at its rate


def main() -> None:
    model = workload.build_model()
    batching.CONFIGS["packed"] = {**batching.CONFIGS["default"], "FORWARD": "packed"}
    batching.CONFIGS["padded"] = {**batching.CONFIGS["default"], "FORWARD": "padded"}
    loads = [rate / NOMINAL for rate in RATES]
    runs: dict[str, list[dict]] = {"packed": [], "padded": []}
    for round_ in range(ROUNDS):
        for name in batching.turns(["packed", "padded"], round_):
            runs[name] += batching.measure_config(name, model, "fp32", NOMINAL, loads, round_, 15.0)
    print("| req/s | forward | p50 ms | p90 ms | p99 ms (each round) | compute/job ms | mean batch |")
    print("|---|---|---|---|---|---|---|")
    for rate in RATES:
        for name, cells in runs.items():
            mine = [c for c in cells if abs(c["offered_rps"] - rate) < 1e-6]

            def med(key: str, mine: list[dict] = mine) -> float:
                return statistics.median(c[key] for c in mine)

            each = ", ".join(f"{c['e2e_p99_ms']:.0f}" for c in mine)
            print(
                f"| {rate:.0f} | {name} | {med('e2e_p50_ms'):.0f} | {med('e2e_p90_ms'):.0f} | "
                f"**{med('e2e_p99_ms'):.0f}** ({each}) | {med('compute_per_job_ms'):.1f} | "
                f"{med('mean_batch_size'):.1f} |",
                flush=True,
            )
    sys.stdout.flush()


if __name__ == "__main__":
    main()
