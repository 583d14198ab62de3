"""Each gRPC client alone, without the harness: CPU µs per Submit and calls/s, 20 callers in a
closed loop over 8 connections against `python -m bench.floor` (a Submit that does no work),
two passes of N calls per client and invocation, in one process on uvloop.

    PYTHONPATH=src:services:. .venv/bin/python -m bench.floor &      # prints its port
    PYTHONPATH=src:services:. .venv/bin/python docs/benchmarks/h2-client-ab/bare_calls.py \\
        127.0.0.1:PORT h2 8000
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Awaitable, Callable

import grpc
import uvloop

from batchline.v1 import inference_pb2
from bench.load import h2
from bench.load.protocols import grpc_frame

PATH = "/batchline.v1.InferenceService/Submit"
CALLERS = 20
CONNECTIONS = 8
PAYLOAD = inference_pb2.SubmitRequest(text="great value (review 12)").SerializeToString()


async def lean(host: str) -> Callable[[], Awaitable[None]]:
    pool = h2.Pool(host, CONNECTIONS)
    await pool.connect()
    block = h2.request_block(pool.authority, PATH, {}, 20.0)
    framed = grpc_frame(PAYLOAD)

    async def one() -> None:
        async with asyncio.timeout(20):
            reply = await pool.request(block, framed)
        inference_pb2.SubmitResponse.FromString(reply.body[5:])

    return one


async def aio(host: str) -> Callable[[], Awaitable[None]]:
    separate = [("grpc.use_local_subchannel_pool", 1)]  # one socket per channel, as the harness did
    channels = [grpc.aio.insecure_channel(host, options=separate) for _ in range(CONNECTIONS)]
    calls = [channel.unary_unary(PATH, None, None) for channel in channels]
    await asyncio.gather(*(channel.channel_ready() for channel in channels))
    turn = [0]

    async def one() -> None:
        turn[0] = (turn[0] + 1) % CONNECTIONS
        inference_pb2.SubmitResponse.FromString(await calls[turn[0]](PAYLOAD, timeout=20))

    return one


async def main(host: str, client: str, calls: int) -> None:
    one = await (lean(host) if client == "h2" else aio(host))

    async def caller(count: int) -> None:
        for _ in range(count):
            await one()

    for _ in range(2):
        cpu, wall = time.process_time(), time.perf_counter()
        await asyncio.gather(*(caller(calls // CALLERS) for _ in range(CALLERS)))
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        rate = calls / wall
        print(f"{client}: {cpu / calls * 1e6:.0f} µs of CPU per call, {rate:,.0f} calls/s", flush=True)


if __name__ == "__main__":
    uvloop.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
