"""What a Submit costs the load generator's process on two client APIs of grpcio: grpc.aio
on uvloop (what the generator uses) and the sync API's futures (`.future()` with a done
callback, the calls sent from one thread). Open loop at RATE for SECONDS against the floor
(`python -m bench.floor`, its own process), 8 connections, the two APIs in turns, ROUNDS rounds.

    PYTHONPATH=src:services:. .venv/bin/python docs/benchmarks/generator-loop-ab/client_api.py 2000 8 3
"""

from __future__ import annotations

import asyncio
import resource
import sys
import threading
import time
from collections.abc import Callable

import grpc
import uvloop

from batchline.v1 import inference_pb2
from bench import floor

PATH = "/batchline.v1.InferenceService/Submit"
PAYLOAD = inference_pb2.SubmitRequest(text="a perfectly ordinary sentence about a film").SerializeToString()
CONNECTIONS = 8
SEPARATE = [("grpc.use_local_subchannel_pool", 1)]  # one socket per channel


def cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def percentile_ms(latencies: list[float], q: float) -> float:
    ordered = sorted(latencies)
    return ordered[int(q * (len(ordered) - 1))] * 1000


def with_aio(target: str, rate: float, seconds: float) -> tuple[float, list[float]]:
    async def main() -> tuple[float, list[float]]:
        channels = [grpc.aio.insecure_channel(target, options=SEPARATE) for _ in range(CONNECTIONS)]
        calls = [channel.unary_unary(PATH, None, None) for channel in channels]
        await asyncio.gather(*(channel.channel_ready() for channel in channels))
        latencies: list[float] = []

        async def one(i: int, due: float) -> None:
            await calls[i % CONNECTIONS](PAYLOAD)
            latencies.append(time.perf_counter() - due)

        count, started_cpu, start = int(rate * seconds), cpu_s(), time.perf_counter() + 0.05
        tasks = []
        for i in range(count):
            due = start + i / rate
            if (ahead := due - time.perf_counter()) > 0:
                await asyncio.sleep(ahead)
            tasks.append(asyncio.ensure_future(one(i, due)))
        await asyncio.gather(*tasks)
        used = cpu_s() - started_cpu
        await asyncio.gather(*(channel.close() for channel in channels))
        return used / count, latencies

    return uvloop.run(main())


def with_futures(target: str, rate: float, seconds: float) -> tuple[float, list[float]]:
    channels = [grpc.insecure_channel(target, options=SEPARATE) for _ in range(CONNECTIONS)]
    calls = [channel.unary_unary(PATH, None, None) for channel in channels]
    for channel in channels:
        grpc.channel_ready_future(channel).result(timeout=10)
    count = int(rate * seconds)
    latencies = [0.0] * count
    answered = threading.Semaphore(0)

    def done(i: int, due: float) -> Callable[[grpc.Future], None]:
        def record(_: grpc.Future) -> None:
            latencies[i] = time.perf_counter() - due
            answered.release()

        return record

    started_cpu, start = cpu_s(), time.perf_counter() + 0.05
    for i in range(count):
        due = start + i / rate
        if (ahead := due - time.perf_counter()) > 0:
            time.sleep(ahead)
        calls[i % CONNECTIONS].future(PAYLOAD).add_done_callback(done(i, due))
    for _ in range(count):
        answered.acquire()
    used = cpu_s() - started_cpu
    for channel in channels:
        channel.close()
    return used / count, latencies


def main() -> None:
    rate, seconds, rounds = float(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
    apis = [("grpc.aio", with_aio), ("sync futures", with_futures)]
    with floor.serving() as (target, _):
        for round_ in range(rounds):
            for name, run in apis if round_ % 2 == 0 else apis[::-1]:
                per_call_s, latencies = run(target, rate, seconds)
                print(
                    f"round {round_ + 1} {name}: client CPU {per_call_s * 1e6:.0f} us/call, "
                    f"p50 {percentile_ms(latencies, 0.5):.2f} p99 {percentile_ms(latencies, 0.99):.2f} ms",
                    flush=True,
                )


if __name__ == "__main__":
    main()
