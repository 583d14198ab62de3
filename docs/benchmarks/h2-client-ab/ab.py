"""The load generator's native gRPC client: grpc.aio (before) against bench.load.h2 (after), the
harness itself run from two checkouts against the same stack, side by side.

Three scenarios of `make bench`, each run on a fresh server, the two checkouts in turns, the
order reversed every other round:
- the ingress target: Submit at 2,000/s open loop for SECONDS over 8 connections, to the
  ingress of a stack with no batcher (jobs held);
- the floor: the same load to `python -m bench.floor`, a Submit that does no work;
- saturation: Submit, 50 callers in a closed loop for 8 s, to the ingress.
Per run: p50 and p99, Submits/s, and CPU µs per Submit of the generator (its own count) and of
the server process (/proc).

    git worktree add /tmp/before 31f8023     # the generator's gRPC calls on grpc.aio
    PYTHONPATH=src:services:. .venv/bin/python docs/benchmarks/h2-client-ab/ab.py /tmp/before . 3 15
"""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench import floor, stack
from bench.suite import HOLD_ALL, INGRESS_CONNECTIONS, INGRESS_RPS, SUBMIT, SUBMIT_DATA


def harness(checkout: Path, host: str, flags: list[str]) -> dict[str, Any]:
    command = [
        sys.executable, "-m", "bench", "--insecure", "--no-progress", "--protoset", "envoy/batchline.pb",
        "--call", SUBMIT, "-d", json.dumps(SUBMIT_DATA), "-O", "json", *flags, host,
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": f"{checkout}/src:{checkout}/services:{checkout}"}
    done = subprocess.run(command, cwd=checkout, env=env, capture_output=True, text=True, check=True)
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def run(checkout: Path, scenario: str, seconds: float) -> dict[str, Any]:
    flags = ["-c", "50", "-z", "8s"]  # saturation
    if scenario in ("ingress", "floor"):
        flags = [
            "--rps", str(INGRESS_RPS), "-z", f"{seconds}s", "-c", "1000",
            "--connections", str(INGRESS_CONNECTIONS), "--duration-stop", "wait",
        ]  # fmt: skip
    with contextlib.ExitStack() as stop:
        if scenario == "floor":
            host, pid = stop.enter_context(floor.serving())
            server = [pid]
        else:
            targets = stop.enter_context(stack.start("local", HOLD_ALL, batchers=0))
            host, server = targets.ingress, targets.pids["ingress"]
        harness(checkout, host, ["--rps", "200", "-z", "1s"])  # warm, as the suite does
        before = stack.cpu_seconds(server)
        report = harness(checkout, host, flags)
        server_cpu = stack.cpu_seconds(server) - before
    ok = report["statusCodeDistribution"].get("OK", 0)
    latency = {e["percentage"]: e["latency"] / 1e6 for e in report["latencyDistribution"]}
    return {
        "rps": ok / (report["total"] / 1e9),
        "errors": report["count"] - ok,
        "p50": latency[50],
        "p99": latency[99],
        "generator": 1e6 * report["batchline"]["generatorCpuS"] / max(1, ok),
        "server": 1e6 * server_cpu / max(1, ok),
        "statuses": {k: v for k, v in report["statusCodeDistribution"].items() if k != "OK"},
    }


def main() -> None:
    old, new = Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve()
    rounds, seconds = int(sys.argv[3]), float(sys.argv[4])
    variants = [("grpc.aio", old), ("h2", new)]
    rows: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for number in range(rounds):
        order = variants if number % 2 == 0 else variants[::-1]
        for scenario in ("ingress", "floor", "saturation"):
            for name, checkout in order:
                result = run(checkout, scenario, seconds)
                rows.setdefault((scenario, name), []).append(result)
                line = json.dumps({k: v if isinstance(v, dict) else round(v, 1) for k, v in result.items()})
                print(time.strftime("%H:%M:%S"), f"round {number + 1}", scenario, name, line, flush=True)
    print("\n| scenario | client | p50 ms | p99 ms (each round) | Submits/s | generator µs | server µs |")
    print("|---|---|---|---|---|---|---|")
    for (scenario, name), results in rows.items():
        med = {key: statistics.median(r[key] for r in results) for key in results[0] if key != "statuses"}
        each = ", ".join(f"{r['p99']:.1f}" for r in results)
        print(
            f"| {scenario} | {name} | {med['p50']:.1f} | {med['p99']:.1f} ({each}) | {med['rps']:,.0f} "
            f"| {med['generator']:.0f} | {med['server']:.0f} |"
        )


if __name__ == "__main__":
    main()
