"""The services' event loop, uvloop against asyncio's own, side by side: single Submits open
loop for 10 s at each rate against a fresh local stack with no batcher (the ingress alone, as
`make bench`'s ingress target runs it), the two loops taking turns within each round.

    PYTHONPATH=src:services:. .venv/bin/python docs/benchmarks/loop-ab/loop_ab.py [ROUNDS] [RATE ...]
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time
from typing import Any

from bench import stack, suite


def measure(loop: str, rate: int) -> dict[str, Any]:
    env = {**suite.HOLD_ALL, "EVENT_LOOP": loop}
    with stack.start("local", env, batchers=0, envoy=False) as targets:
        processes = {name: targets.pids[name] for name in ("ingress", "rabbitmq", "redis")}
        command = [sys.executable, "-m", "bench", "--insecure", "--protoset", str(suite.PROTOSET)]
        command += ["--call", suite.SUBMIT, "-d", json.dumps(suite.SUBMIT_DATA), targets.ingress]
        subprocess.run([*command, "--rps", "200", "-z", "1s", "-O", "json"], capture_output=True, check=True)
        before = {name: stack.cpu_seconds(pids) for name, pids in processes.items()}
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        run = [*command, "--rps", str(rate), "-z", "10s", "-O", "json"]
        answer = subprocess.run(run, capture_output=True, check=True)
        used = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = {name: stack.cpu_seconds(pids) - before[name] for name, pids in processes.items()}
    cpu["generator"] = used.ru_utime + used.ru_stime - children.ru_utime - children.ru_stime
    report = json.loads(answer.stdout)
    jobs = report["statusCodeDistribution"].get("OK", 0)
    latency = {d["percentage"]: round(d["latency"] / 1e6, 1) for d in report["latencyDistribution"]}
    return {
        "loop": loop,
        "offered": rate,
        "ok_per_s": round(jobs / (report["total"] / 1e9)),
        "accepted": round(jobs / max(1, report["count"]), 4),
        "p50_ms": latency[50],
        "p90_ms": latency[90],
        "p99_ms": latency[99],
        "cpu_us_per_job": {name: round(s * 1e6 / max(1, jobs)) for name, s in cpu.items()},
    }


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 4
    rates = [int(r) for r in sys.argv[2:]] or [2000, 3000]
    print(f"# {time.strftime('%Y-%m-%d %H:%M')} UTC, {rounds} rounds, rates {rates}", flush=True)
    for round_ in range(rounds):
        loops = ["asyncio", "uvloop"] if round_ % 2 == 0 else ["uvloop", "asyncio"]
        for rate in rates:
            for loop in loops:
                print(f"#{round_ + 1} {json.dumps(measure(loop, rate))}", flush=True)


if __name__ == "__main__":
    main()
