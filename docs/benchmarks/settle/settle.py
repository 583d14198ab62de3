"""Does a pass at light load get cheaper when it starts after the arrival's own work has
settled? The default policy with fixed windows of 0, 3, 6, 12 and 50 ms (`MAX_WAIT_MS`) at 8
req/s, fp32, on the real services, two rounds taking turns; prints per window the end-to-end
p50, the compute per job and the time outside the pass, one value per round.

    PYTHONPATH=src:services:. .venv/bin/python docs/benchmarks/settle/settle.py
"""

from __future__ import annotations

from typing import Any

from bench import batching, workload

WAITS = ["0", "3", "6", "12", "50"]


def main() -> None:
    model = workload.build_model()
    for wait in WAITS:
        batching.CONFIGS[f"w{wait}"] = {"MAX_WAIT_MS": wait}
    cells: dict[str, list[dict[str, Any]]] = {wait: [] for wait in WAITS}
    for round_ in range(2):
        for name in batching.turns([f"w{wait}" for wait in WAITS], round_):
            cells[name[1:]] += batching.measure_config(name, model, "fp32", 80.0, [0.1], round_, 25.0)
    for wait in WAITS:
        print(
            wait,
            *(
                [round(c[key], 1) for c in cells[wait]]
                for key in ("e2e_p50_ms", "compute_per_job_ms", "outside_model_p50_ms")
            ),
            flush=True,
        )


if __name__ == "__main__":
    main()
