"""The packed and the padded forward pass through the whole pipeline, side by side.

The default policy on the local RabbitMQ and Redis (ingress and batcher as processes, fp32, 2
threads), open-loop evenly spaced arrivals of the benchmark's sentences at 24, 40 and 48 req/s
for 15 s each; `FORWARD=packed` and `FORWARD=padded` take turns on fresh stacks, four rounds,
the first config alternating. Prints one line per cell and a table of medians.

    PYTHONPATH=src:services:. .venv/bin/python docs/benchmarks/packed-ab/pipeline_ab.py
"""

from __future__ import annotations

from bench import batching, workload

RATES = [24.0, 40.0, 48.0]
ROUNDS = 4


def main() -> None:
    model = workload.build_model()
    batching.CONFIGS["packed"] = {**batching.CONFIGS["default"], "FORWARD": "packed"}
    batching.CONFIGS["padded"] = {**batching.CONFIGS["default"], "FORWARD": "padded"}
    cells = batching.side_by_side(["packed", "padded"], model, "fp32", RATES, ROUNDS)
    print("\n".join(batching.rate_table(cells, RATES, label="forward")), flush=True)


if __name__ == "__main__":
    main()
