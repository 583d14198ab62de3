"""redis-py's write (`AB_OLD_WRITE=1`) against `Connection`'s with own-write.patch, through the
pipeline, in turns (the order reversed every other round), a fresh local stack each run; one JSON
line per run.

- `load RATE SECONDS ROUNDS`: the load suite's pipeline scenario: Submit open loop, each job
  watched to DONE, 2 batchers, the zero-cost simulated model; done/s and CPU ms per job by process.
- `light RATE SECONDS ROUNDS`: each job watched to DONE, one batcher whose simulated pass takes
  25 ms; p50s in ms: end to end as the watcher saw it, queue wait and inference from each job's
  trace, the Submit's answer.

    git apply docs/benchmarks/redis-write-ab/own-write.patch
    PYTHONPATH=src:services:clients/python:. .venv/bin/python \\
        docs/benchmarks/redis-write-ab/pipeline_ab.py load 1100 15 3
    PYTHONPATH=src:services:clients/python:. .venv/bin/python \\
        docs/benchmarks/redis-write-ab/pipeline_ab.py light 8 20 6
    git apply -R docs/benchmarks/redis-write-ab/own-write.patch
"""

import json
import os
import sys

sys.path.insert(0, os.getcwd())
from bench import stack, suite
from bench.load import runner

LIGHT = {"MODEL_BACKEND": "simulated", "SIM_FIXED_MS": "25", "SIM_PER_TOKEN_MS": "0"}


def one(mode: str, old: bool, rate: int, dur: float) -> dict:
    env = dict(suite.ZERO_COST if mode == "load" else LIGHT, **({"AB_OLD_WRITE": "1"} if old else {}))
    with stack.start("local", env, batchers=2 if mode == "load" else 1) as t:
        opts = suite.pipeline(mode, rate, dur, host=t.ingress, stream_host=t.stream, progress=False)
        warm_rps = 200 if mode == "load" else 20
        warm = suite.submit("warm", host=t.ingress, rps=warm_rps, duration=1.0, progress=False)
        runner.run(runner.make_plan(warm.validate(), suite.PROTOSET.read_bytes()))
        before = {k: stack.cpu_seconds(v) for k, v in t.pids.items()}
        rep = runner.run(runner.make_plan(opts.validate(), suite.PROTOSET.read_bytes()))
        cpu = {k: stack.cpu_seconds(v) - before[k] for k, v in t.pids.items()}
        e = rep["batchline"]["e2e"]
        row = {"way": "old" if old else "new"}
        if mode == "light":
            return row | {
                "e2e_p50": round(e["latencyMs"]["p50"], 2),
                "queue_wait_p50": round(e["queueWaitMs"]["p50"], 2),
                "inference_p50": round(e["inferenceMs"]["p50"], 2),
                "accept_p50": round(rep["batchline"]["acceptMs"]["p50"], 2),
            }
        n = max(1, e["done"])
        cpu["gen"] = rep["batchline"]["generatorCpuS"]
        return row | {
            "rate": rate,
            "done_rps": round(e["doneRps"]),
            "lost": e.get("neverFinished"),
            "e2e_p50": round(e["latencyMs"].get("p50", 0)),
            "cpu_ms": {k: round(1000 * v / n, 3) for k, v in cpu.items()},
            "total": round(sum(1000 * v / n for v in cpu.values()), 3),
        }


def main() -> None:
    mode, rate, dur, rounds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
    for r in range(rounds):
        for old in (True, False) if r % 2 == 0 else (False, True):
            print(json.dumps(one(mode, old, rate, dur)), flush=True)


if __name__ == "__main__":
    main()
