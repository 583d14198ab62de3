"""The load generator's REST and grpc-web client: aiohttp (before) against bench.load.http1
(after), the harness itself run from two checkouts against one stack, side by side.

The saturation scenario of `make bench`: Submit, 50 callers in a closed loop for SECONDS,
through Envoy, on a stack with no batcher (jobs held). Each round starts a fresh stack and runs
native gRPC direct, then REST and grpc-web from each checkout, in turns. Per run: Submits/s,
and CPU µs per Submit of the generator (its own count), Envoy and the ingress (/proc).

    git worktree add /tmp/before 726e486     # the generator on aiohttp
    PYTHONPATH=src:services:. .venv/bin/python docs/benchmarks/http1-client-ab/ab.py /tmp/before . 3 8
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench import stack
from bench.suite import HOLD_ALL, SUBMIT, SUBMIT_DATA


def run(
    checkout: Path, protocol: str, host: str, seconds: float, pids: dict[str, list[int]]
) -> dict[str, Any]:
    before = {name: stack.cpu_seconds(ids) for name, ids in pids.items()}
    command = [
        sys.executable, "-m", "bench", "--insecure", "--no-progress", "--protoset", "envoy/batchline.pb",
        "--call", SUBMIT, "-d", json.dumps(SUBMIT_DATA), "-c", "50", "-z", f"{seconds}s",
        "--protocol", protocol, "-O", "json", host,
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": f"{checkout}/src:{checkout}/services:{checkout}"}
    done = subprocess.run(command, cwd=checkout, env=env, capture_output=True, text=True, check=True)
    report = json.loads(done.stdout)
    ok = report["statusCodeDistribution"].get("OK", 0)
    cpu = {name: stack.cpu_seconds(ids) - before[name] for name, ids in pids.items()}
    return {
        "rps": ok / (report["total"] / 1e9),
        "errors": report["count"] - ok,
        "generator": 1e6 * report["batchline"]["generatorCpuS"] / max(1, ok),
        "envoy": 1e6 * cpu.get("envoy", 0.0) / max(1, ok),
        "ingress": 1e6 * cpu.get("ingress", 0.0) / max(1, ok),
    }


def main() -> None:
    old, new = Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve()
    rounds, seconds = int(sys.argv[3]), float(sys.argv[4])
    variants = [
        ("grpc direct", new, "grpc"),
        ("rest, aiohttp", old, "rest"),
        ("rest, http1", new, "rest"),
        ("grpc-web, aiohttp", old, "grpc-web"),
        ("grpc-web, http1", new, "grpc-web"),
    ]
    rows: dict[str, list[dict[str, float]]] = {name: [] for name, _, _ in variants}
    for number in range(rounds):
        with stack.start("local", HOLD_ALL, batchers=0) as targets:
            order = variants if number % 2 == 0 else [variants[0], *reversed(variants[1:])]
            for name, checkout, protocol in order:
                host = targets.ingress if protocol == "grpc" else targets.edge
                result = run(checkout, protocol, host, seconds, targets.pids)
                rows[name].append(result)
                print(time.strftime("%H:%M:%S"), f"round {number + 1}", name, json.dumps(result), flush=True)
    native = statistics.median(r["rps"] for r in rows["grpc direct"])
    print("\n| client | Submits/s (each round) | of native | generator µs | Envoy µs | ingress µs |")
    print("|---|---|---|---|---|---|")
    for name, results in rows.items():
        rates = [r["rps"] for r in results]
        med = {key: statistics.median(r[key] for r in results) for key in ("generator", "envoy", "ingress")}
        each = ", ".join(f"{rate:,.0f}" for rate in rates)
        print(
            f"| {name} | {statistics.median(rates):,.0f} ({each}) | {statistics.median(rates) / native:.0%} "
            f"| {med['generator']:.0f} | {med['envoy']:.0f} | {med['ingress']:.0f} |"
        )


if __name__ == "__main__":
    main()
