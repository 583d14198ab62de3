"""The default (`MAX_WAIT_MS=auto`) against the same policy greedy (`MAX_WAIT_MS=0`), side by
side at 24 and 40 req/s: `PYTHONPATH=src:services:. .venv/bin/python
docs/benchmarks/adaptive-wait-ab/adaptive_wait_ab.py` (about 4 minutes)."""

from __future__ import annotations

import json
from pathlib import Path

from bench import batching
from bench.workload import build_model

RATES = [24.0, 40.0]

if __name__ == "__main__":
    batching.CONFIGS.update({"greedy": {"MAX_WAIT_MS": "0"}})
    cells = batching.side_by_side(["default", "greedy"], build_model(), "fp32", RATES, rounds=3)
    print("\n".join(batching.rate_table(cells, RATES)))
    (Path(__file__).parent / "cells.json").write_text(json.dumps(cells, indent=1))
