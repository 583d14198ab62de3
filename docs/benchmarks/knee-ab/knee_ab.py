"""The adaptive wait's knee rule against greedy batching, side by side through the pipeline.

`MAX_WAIT_MS=auto` (the default, with the rule that waits when running now would keep the
model busier than `AUTO_BUSY_SHARE` of the time between arrivals; the share is the script's
argument, 0.9 by default) against `MAX_WAIT_MS=0` (greedy; what
`auto` did on this CPU before the rule), both length-aware with the packed pass, on the local
RabbitMQ and Redis, fp32, evenly spaced open-loop arrivals at 8, 24, 40 and 48 req/s for 15 s
each (at least 200 jobs); the two take turns on fresh stacks, four rounds, the first config
alternating. Prints one line per cell and a table of medians.

    git checkout f63cd15  # the rule lives only there
    PYTHONPATH=src:services:. .venv/bin/python docs/benchmarks/knee-ab/knee_ab.py [share] [rates...]
"""

from __future__ import annotations

import statistics
import sys
from typing import Any

from bench import batching, workload

RATES = [8.0, 24.0, 40.0, 48.0]
ROUNDS = 4
NOMINAL = 80.0  # loads are passed as shares of this, so each cell runs at its rate


def main(share: str, rates: list[float]) -> None:
    model = workload.build_model()
    batching.CONFIGS["auto"] = {"MAX_WAIT_MS": "auto", "AUTO_BUSY_SHARE": share}
    batching.CONFIGS["greedy"] = {"MAX_WAIT_MS": "0"}
    loads = [rate / NOMINAL for rate in rates]
    runs: dict[str, list[dict[str, Any]]] = {"auto": [], "greedy": []}
    for round_ in range(ROUNDS):
        for name in batching.turns(list(runs), round_):
            runs[name] += batching.measure_config(name, model, "fp32", NOMINAL, loads, round_, 15.0)
    columns = ["req/s", "wait", "p50 ms", "p90 ms", "p99 ms (each round)", "compute/job ms", "mean batch"]
    print("| " + " | ".join([*columns, "closed by"]) + " |")
    print("|---|---|---|---|---|---|---|---|")
    for rate in rates:
        for name, cells in runs.items():
            mine = [c for c in cells if abs(c["offered_rps"] - rate) < 1e-6]

            def med(key: str, mine: list[dict[str, Any]] = mine) -> float:
                return float(statistics.median(c[key] for c in mine))

            reasons: dict[str, int] = {}
            for c in mine:
                for reason, count in c["close_reasons"].items():
                    reasons[reason] = reasons.get(reason, 0) + count
            each = ", ".join(f"{c['e2e_p99_ms']:.0f}" for c in mine)
            closed = ", ".join(f"{reason} {count}" for reason, count in sorted(reasons.items()))
            print(
                f"| {rate:.0f} | {name} | {med('e2e_p50_ms'):.0f} | {med('e2e_p90_ms'):.0f} | "
                f"**{med('e2e_p99_ms'):.0f}** ({each}) | {med('compute_per_job_ms'):.1f} | "
                f"{med('mean_batch_size'):.1f} | {closed} |",
                flush=True,
            )


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "0.9", [float(r) for r in sys.argv[2:]] or RATES)
