"""RUNNING written while the pass computes (the batcher's way) against written before it, at
light load, side by side: `running-first.patch` applied (by hand: the batcher's `_compute`),
then `PYTHONPATH=src:services:. .venv/bin/python docs/benchmarks/running-write-ab/running_write_ab.py`."""

from __future__ import annotations

import json
from pathlib import Path

from bench import batching
from bench.workload import build_model

if __name__ == "__main__":
    batching.CONFIGS.update({"during": {}, "first": {"AB_RUNNING_FIRST": "1"}})
    cells = batching.side_by_side(["during", "first"], build_model(), "fp32", [9.0], rounds=6)
    print("\n".join(batching.rate_table(cells, [9.0])))
    (Path(__file__).parent / "cells.json").write_text(json.dumps(cells, indent=1))
