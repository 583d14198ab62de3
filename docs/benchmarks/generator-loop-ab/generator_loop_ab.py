"""The load generator's event loop, uvloop against asyncio's own, side by side: single Submits
open loop for 10 s against a fresh local stack with no batcher (the ingress alone, as
`make bench`'s ingress target runs it), the generator's worker processes on one loop or the
other (EVENT_LOOP in the generator's environment only), taking turns within each round.

    PYTHONPATH=src:services:. .venv/bin/python \
        docs/benchmarks/generator-loop-ab/generator_loop_ab.py [ROUNDS] [RATE ...]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Any

from bench import stack, suite


def measure(loop: str, rate: int) -> dict[str, Any]:
    with stack.start("local", suite.HOLD_ALL, batchers=0, envoy=False) as targets:
        processes = {name: targets.pids[name] for name in ("ingress", "rabbitmq", "redis")}
        command = [sys.executable, "-m", "bench", "--insecure", "--protoset", str(suite.PROTOSET)]
        command += ["--call", suite.SUBMIT, "-d", json.dumps(suite.SUBMIT_DATA), targets.ingress]
        env = {**os.environ, "EVENT_LOOP": loop}
        warm = [*command, "--rps", "200", "-z", "1s", "-O", "json"]
        subprocess.run(warm, capture_output=True, check=True, env=env)
        before = {name: stack.cpu_seconds(pids) for name, pids in processes.items()}
        run = [*command, "--rps", str(rate), "-z", "10s", "-O", "json"]
        answer = subprocess.run(run, capture_output=True, check=True, env=env)
        cpu = {name: stack.cpu_seconds(pids) - before[name] for name, pids in processes.items()}
    report = json.loads(answer.stdout)
    cpu["generator"] = report["batchline"]["generatorCpuS"]  # its workers, during the run
    jobs = report["statusCodeDistribution"].get("OK", 0)
    latency = {d["percentage"]: round(d["latency"] / 1e6, 1) for d in report["latencyDistribution"]}
    return {
        "loop": loop,
        "offered": rate,
        "ok_per_s": round(jobs / (report["total"] / 1e9)),
        "accepted": round(jobs / max(1, report["count"]), 4),
        "p50_ms": latency[50],
        "p99_ms": latency[99],
        "send_lag_p99_ms": round(report["batchline"]["sendLagMs"]["p99"], 2),
        "workers": report["batchline"]["workers"],
        "cpu_us_per_job": {name: round(s * 1e6 / max(1, jobs)) for name, s in cpu.items()},
    }


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    rates = [int(r) for r in sys.argv[2:]] or [800, 1200]
    print(f"# {time.strftime('%Y-%m-%d %H:%M')} UTC, {rounds} rounds, rates {rates}", flush=True)
    for round_ in range(rounds):
        loops = ["asyncio", "uvloop"] if round_ % 2 == 0 else ["uvloop", "asyncio"]
        for rate in rates:
            for loop in loops:
                print(f"#{round_ + 1} {json.dumps(measure(loop, rate))}", flush=True)


if __name__ == "__main__":
    main()
