"""The floor (bench.floor's Submit, no work) under gRPC server options that might cut its CPU
per call: each variant its own server process, driven open loop at RATE for SECONDS over 8
connections by batchline-bench, the variants in turns (reversed every other round), ROUNDS
rounds. Per run: the server's CPU µs per Submit (/proc), p99, the generator's µs per Submit.

    PYTHONPATH=src:services:. .venv/bin/python docs/benchmarks/grpc-floor/server_options.py 3 2000 8 \
        base nobdp throughput
"""

from __future__ import annotations

import asyncio
import json
import statistics
import subprocess
import sys
import time

import grpc

from batchline.lifecycle import SERVER_OPTIONS, run_service, stop_on_signals
from batchline.v1 import inference_pb2
from bench import floor, stack
from bench.suite import SUBMIT, SUBMIT_DATA

VARIANTS: dict[str, dict[str, int | str]] = {
    "base": {},
    "nobdp": {"grpc.http2.bdp_probe": 0},  # no BDP pings on received data
    "throughput": {"grpc.optimization_target": "throughput"},
}


async def serve(variant: str) -> None:
    stop = asyncio.Event()
    stop_on_signals(stop)
    server = grpc.aio.server(options=list({**dict(SERVER_OPTIONS), **VARIANTS[variant]}.items()))
    handler = grpc.unary_unary_rpc_method_handler(
        floor.submit,
        request_deserializer=inference_pb2.SubmitRequest.FromString,
        response_serializer=inference_pb2.SubmitResponse.SerializeToString,
    )
    methods = grpc.method_handlers_generic_handler(floor.SERVICE, {"Submit": handler})
    server.add_generic_rpc_handlers([methods])
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    print(port, flush=True)
    await stop.wait()
    await server.stop(0)


def one_run(variant: str, rate: str, seconds: str) -> tuple[float, float, float]:
    server = subprocess.Popen([sys.executable, __file__, "serve", variant], stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        target = f"127.0.0.1:{int(server.stdout.readline())}"
        base = [
            sys.executable, "-m", "bench", "--insecure", "--no-progress",
            "--protoset", "envoy/batchline.pb", "--call", SUBMIT, "-d", json.dumps(SUBMIT_DATA),
            "--rps", rate, "-c", "1000", "--connections", "8", "-O", "json",
        ]  # fmt: skip
        subprocess.run([*base, "-z", "1s", target], capture_output=True, check=True)  # warm-up
        before = stack.cpu_seconds([server.pid])
        run = [*base, "-z", f"{seconds}s", target]
        done = subprocess.run(run, capture_output=True, text=True, check=True)
        used = stack.cpu_seconds([server.pid]) - before
    finally:
        server.terminate()
        server.wait()
    report = json.loads(done.stdout)
    ok = report["statusCodeDistribution"].get("OK", 0)
    p99 = next(d["latency"] for d in report["latencyDistribution"] if d["percentage"] == 99) / 1e6
    return 1e6 * used / ok, p99, 1e6 * report["batchline"]["generatorCpuS"] / ok


def main() -> None:
    rounds, rate, seconds, variants = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4:]
    results: dict[str, list[tuple[float, float, float]]] = {v: [] for v in variants}
    for number in range(rounds):
        for variant in variants if number % 2 == 0 else variants[::-1]:
            results[variant].append(one_run(variant, rate, seconds))
            server_us, p99, generator_us = results[variant][-1]
            line = f"server µs/call {server_us:.0f}  p99 {p99:.1f} ms  generator µs {generator_us:.0f}"
            print(time.strftime("%H:%M:%S"), number, variant, line, flush=True)
    for variant, rows in results.items():
        medians = [statistics.median(row[i] for row in rows) for i in range(3)]
        print(f"{variant}: median server µs/call {medians[0]:.0f}, p99 {medians[1]:.1f} ms, ", end="")
        print(f"generator µs {medians[2]:.0f}")


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        run_service(serve(sys.argv[2]))
    else:
        main()
