"""Waiting for a busy lane to run a batch wide, against starting it narrow at once, side by
side: `wait-for-wide.patch` applied to 9f16a2c (`git apply`), then
`PYTHONPATH=src:services:. .venv/bin/python docs/benchmarks/wait-for-wide-ab/wait_for_wide_ab.py`."""

from __future__ import annotations

import json
from pathlib import Path

from bench import batching
from bench.workload import build_model

RATES = [40.0, 60.0]

if __name__ == "__main__":
    batching.CONFIGS.update({"no hold": {"AB_NO_HOLD": "1"}, "hold": {}})
    cells = batching.side_by_side(["no hold", "hold"], build_model(), "fp32", RATES, rounds=3)
    print("\n".join(batching.rate_table(cells, RATES)))
    (Path(__file__).parent / "cells.json").write_text(json.dumps(cells, indent=1))
