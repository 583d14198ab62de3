"""The pipeline scenario of `make bench` alone: Submit at 1,100/s (or RPS) for 10 s (or SECONDS),
each job watched to DONE, 2 batchers, the simulated zero-cost model; one JSON line per run with
CPU ms per job.

    PYTHONPATH=src:services:. .venv/bin/python docs/benchmarks/event-batching-ab/pipeline.py \
        [runs [RPS [SECONDS]]]
"""

from __future__ import annotations

import json
import sys

from bench import suite


def main() -> None:
    args = sys.argv[1:]
    runs = int(args[0]) if args else 1
    rps = int(args[1]) if len(args) > 1 else 1100
    seconds = float(args[2]) if len(args) > 2 else 10.0
    for _ in range(runs):
        options = suite.submit("pipeline-direct", rps=rps, duration=seconds, concurrency=1000, e2e="watch")
        report = suite.measure(options, suite.ZERO_COST, batchers=2)
        e2e = report["batchline"]["e2e"]
        cpu = {
            name: round(1000 * s / max(1, e2e["accepted"]), 3)
            for name, s in report["batchline"]["cpuS"].items()
        }
        row = {
            "done_rps": round(e2e["doneRps"]),
            "done": e2e["done"],
            "accepted": e2e["accepted"],
            "rewatch": e2e.get("rewatches"),
            "p50": round(e2e["latencyMs"].get("p50", 0)),
            "p99": round(e2e["latencyMs"].get("p99", 0)),
            "batch": round(e2e["batchSize"].get("mean", 0), 1),
            "cpu": cpu,
            "total": round(sum(cpu.values()), 2),
        }
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
