"""The wide-pass rule in use against "wide only if the pass should end before the next job
arrives", side by side: `arrival-bound.patch` applied to e144901 (`git apply`; `AB_OLD_WIDE=1`
keeps the rule in use), then
`PYTHONPATH=src:services:. .venv/bin/python docs/benchmarks/wide-rule-ab/wide_rule_ab.py 3 8 24 40`
(rounds, then rates; about 8 minutes)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from bench import batching
from bench.workload import build_model

if __name__ == "__main__":
    batching.CONFIGS.update({"old rule": {"AB_OLD_WIDE": "1"}, "new rule": {}})
    rounds, rates = int(sys.argv[1]), [float(x) for x in sys.argv[2:]]
    cells = batching.side_by_side(["old rule", "new rule"], build_model(), "fp32", rates, rounds)
    print("\n".join(batching.rate_table(cells, rates)))
    (Path(__file__).parent / "cells.json").write_text(json.dumps(cells, indent=1))
