"""Each watch's read on its own (`AB_OLD_READ=1`, the patch's switch) against watches reading
together (the stream service's grouped read), through the pipeline, in turns (the order reversed
every other round), a fresh local stack each run; one JSON line per run.

The load suite's pipeline scenario: Submit open loop, each job watched to DONE, 2 batchers, the
zero-cost simulated model. Per run: done/s, CPU ms per job by process, and the stream service's
reads' mean group, from its /metrics; the ingress's mean group commit
(warm-up included), the batchers' mean batch.

    git apply docs/benchmarks/watch-read-ab/old-read.patch
    PYTHONPATH=src:services:clients/python:. .venv/bin/python \\
        docs/benchmarks/watch-read-ab/pipeline_ab.py 1100 15 7  # and 1500 15 5
    git apply -R docs/benchmarks/watch-read-ab/old-read.patch
"""

import json
import os
import re
import sys
import urllib.request

sys.path.insert(0, os.getcwd())
from bench import stack, suite


def scrape(port: int, name: str) -> float:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    found = re.search(rf"^{name} (\S+)$", text, re.M)
    return float(found.group(1)) if found else 0.0


def one(old: bool, rate: int, dur: float) -> dict:
    env = dict(suite.ZERO_COST, **({"AB_OLD_READ": "1"} if old else {}))
    with stack.start("local", env, batchers=2, metrics=True) as t:
        opts = suite.pipeline("load", rate, dur, host=t.ingress, stream_host=t.stream, progress=False)
        rep = suite.run_counted(opts, t.pids, "<ingress>")
        port = t.metrics["stream"][0]
        reads = scrape(port, "batchline_watch_read_group_jobs_count")
        grouped = scrape(port, "batchline_watch_read_group_jobs_sum")
        ingress = t.metrics["ingress"][0]
        commits = scrape(ingress, "batchline_submit_group_jobs_count")
        submits = scrape(ingress, "batchline_submit_group_jobs_sum")
    e = rep["batchline"]["e2e"]
    n = max(1, e["done"])
    cpu = {("gen" if k == suite.GENERATOR else k): v for k, v in rep["batchline"]["cpuS"].items()}
    return {
        "way": "old" if old else "new",
        "rate": rate,
        "done_rps": round(e["doneRps"]),
        "lost": e.get("neverFinished"),
        "e2e_p50": round(e["latencyMs"].get("p50", 0)),
        "mean_read_group": round(grouped / reads, 2) if reads else None,
        "mean_batch": round(e["batchSize"]["mean"], 1),
        "mean_submit_group": round(submits / commits, 2) if commits else None,
        "cpu_ms": {k: round(1000 * v / n, 3) for k, v in cpu.items()},
        "total": round(sum(1000 * v / n for v in cpu.values()), 3),
    }


def main() -> None:
    rate, dur, rounds = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
    for r in range(rounds):
        for old in (True, False) if r % 2 == 0 else (False, True):
            print(json.dumps(one(old, rate, dur)), flush=True)


if __name__ == "__main__":
    main()
