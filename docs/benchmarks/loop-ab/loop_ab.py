"""The event loop, uvloop against asyncio's own, side by side: single Submits open loop for 10 s
at each rate against a fresh local stack with no batcher (the ingress alone, as `make bench`'s
ingress target runs it), the two loops taking turns within each round. EVENT_LOOP goes to the
services (loop-ab.md), or with `generator` first to the load generator only
(generator-loop-ab.md).

    PYTHONPATH=src:services:. .venv/bin/python docs/benchmarks/loop-ab/loop_ab.py [ROUNDS] [RATE...]
    PYTHONPATH=src:services:. .venv/bin/python docs/benchmarks/loop-ab/loop_ab.py generator [ROUNDS] [RATE...]
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from typing import Any

from bench import stack, suite


def measure(loop: str, rate: int, side: str = "services") -> dict[str, Any]:
    services = {"EVENT_LOOP": loop} if side == "services" else {}
    generator_env = {**os.environ, "EVENT_LOOP": loop} if side == "generator" else None
    with stack.start("local", {**suite.HOLD_ALL, **services}, batchers=0, envoy=False) as targets:
        processes = {name: targets.pids[name] for name in ("ingress", "rabbitmq", "redis")}
        command = [sys.executable, "-m", "bench", "--insecure", "--protoset", str(suite.PROTOSET)]
        command += ["--call", suite.SUBMIT, "-d", json.dumps(suite.SUBMIT_DATA), targets.ingress]
        warm = [*command, "--rps", "200", "-z", "1s", "-O", "json"]
        subprocess.run(warm, capture_output=True, check=True, env=generator_env)
        before = {name: stack.cpu_seconds(pids) for name, pids in processes.items()}
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        run = [*command, "--rps", str(rate), "-z", "10s", "-O", "json"]
        answer = subprocess.run(run, capture_output=True, check=True, env=generator_env)
        used = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = {name: stack.cpu_seconds(pids) - before[name] for name, pids in processes.items()}
    report = json.loads(answer.stdout)
    if side == "generator":  # its worker processes during the run, the part the loop runs
        cpu["generator"] = report["batchline"]["generatorCpuS"]
    else:  # the whole command, as first measured
        cpu["generator"] = used.ru_utime + used.ru_stime - children.ru_utime - children.ru_stime
    jobs = report["statusCodeDistribution"].get("OK", 0)
    latency = {d["percentage"]: round(d["latency"] / 1e6, 1) for d in report["latencyDistribution"]}
    result = {
        "loop": loop,
        "offered": rate,
        "ok_per_s": round(jobs / (report["total"] / 1e9)),
        "accepted": round(jobs / max(1, report["count"]), 4),
        "p50_ms": latency[50],
        "p90_ms": latency[90],
        "p99_ms": latency[99],
    }
    if side == "generator":
        result |= {"send_lag_p99_ms": round(report["batchline"]["sendLagMs"]["p99"], 2)}
        result |= {"workers": report["batchline"]["workers"]}
    result["cpu_us_per_job"] = {name: round(s * 1e6 / max(1, jobs)) for name, s in cpu.items()}
    return result


def main() -> None:
    args = sys.argv[1:]
    side = "generator" if args[:1] == ["generator"] else "services"
    args = args[1:] if side == "generator" else args
    rounds = int(args[0]) if args else (3 if side == "generator" else 4)
    rates = [int(r) for r in args[1:]] or ([800, 1200] if side == "generator" else [2000, 3000])
    print(f"# {time.strftime('%Y-%m-%d %H:%M')} UTC, {rounds} rounds, rates {rates}", flush=True)
    for round_ in range(rounds):
        loops = ["asyncio", "uvloop"] if round_ % 2 == 0 else ["uvloop", "asyncio"]
        for rate in rates:
            for loop in loops:
                print(f"#{round_ + 1} {json.dumps(measure(loop, rate, side))}", flush=True)


if __name__ == "__main__":
    main()
