"""The load suite's ingress and pipeline scenarios, once each, on fresh local stacks: CPU
milliseconds per job by process, achieved rates and latencies, one JSON line per scenario.
Run from the checkout to measure (an older commit from a `git worktree`):

    PYTHONPATH=src:services:clients/python:. /work/main/.venv/bin/python \\
        docs/benchmarks/ingress-cpu-ab/scenarios.py LABEL >> results.jsonl
"""

import json
import os
import sys
import time
from dataclasses import replace

sys.path.insert(0, os.getcwd())
from bench import suite


def line(label: str, scenario: str, report: dict, jobs: float) -> str:
    cpu = {name: round(1000 * s / max(1.0, jobs), 3) for name, s in report["batchline"]["cpuS"].items()}
    row = {
        "tree": label,
        "scenario": scenario,
        "achieved_per_s": round(jobs / (report["total"] / 1e9)),
        "accepted": suite.accepted(report),
        "p50_ms": round(suite.percentile(report, 50), 1),
        "p99_ms": round(suite.percentile(report, 99), 1),
        "cpu_ms_per_job": cpu,
    }
    if e2e := report["batchline"].get("e2e"):
        row |= {
            "done_per_s": round(e2e["doneRps"]),
            "lost": e2e["neverFinished"],
            "e2e_p99_ms": round(e2e["latencyMs"].get("p99", 0)),
        }
    return json.dumps(row)


def machine_speed() -> float:
    """Seconds for 5M additions in a Python loop: how fast this machine is this minute."""
    started = time.perf_counter()
    total = 0
    for i in range(5_000_000):
        total += i
    return round(time.perf_counter() - started, 3)


def main() -> None:
    label = sys.argv[1]
    print(json.dumps({"tree": label, "scenario": "machine", "loop_5m_s": machine_speed()}), flush=True)
    for rate in (2000, 1200):
        options = suite.submit(f"ingress-{rate}", rps=rate, duration=15, concurrency=1000, connections=8)
        report = suite.measure(options, suite.HOLD_ALL)
        print(line(label, f"Submit {rate}/s, one process", report, suite.jobs_of(report)), flush=True)
    options = replace(
        suite.submit("batch", duration=10, concurrency=8), call=suite.SUBMIT_BATCH, data=suite.BATCH_DATA
    )
    report = suite.measure(options, suite.HOLD_ALL)
    print(line(label, "SubmitBatch of 64, 8 callers", report, suite.jobs_of(report)), flush=True)
    options = suite.submit("pipeline", rps=700, duration=15, concurrency=1000, e2e="watch")
    report = suite.measure(options, suite.ZERO_COST, batchers=2)
    print(line(label, "pipeline 700/s, watched to DONE", report, suite.jobs_of(report)), flush=True)


if __name__ == "__main__":
    main()
