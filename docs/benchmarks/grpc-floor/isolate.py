"""Where the floor's latency comes from: the same open-loop schedule over three transports.

    PYTHONPATH=src:services:. .venv/bin/python docs/benchmarks/grpc-floor/isolate.py [rate] [seconds] [rounds]

- `tcp`: 40-byte frames echoed by a uvloop TCP server in another process (no gRPC): the control;
- `aio`: a grpc.aio client (uvloop) calling Submit on `python -m bench.floor` (a grpc.aio server,
  no work) in another process: the suite's floor without the load harness;
- `sync`: gRPC's synchronous client and server in one process, raw bytes (no generated code, so
  it also runs under other grpcio versions: `versions.sh`).

Each request is due at start + i / rate and its latency counts from then. Printed per round:
p50, p99 and max, and how many quarter-seconds had a p99 over 10 ms; with --series, each
quarter-second's p99.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from collections.abc import Callable
from concurrent import futures

Latencies = list[tuple[float, float]]  # (due time from start, latency ms)


def summary(name: str, lats: Latencies, series: bool) -> str:
    quarters: dict[float, list[float]] = {}
    for due, ms in lats:
        quarters.setdefault(int(due * 4) / 4, []).append(ms)
    p99s = {q: sorted(v)[int(0.99 * (len(v) - 1))] for q, v in sorted(quarters.items())}
    ordered = sorted(ms for _, ms in lats)
    p99 = ordered[int(0.99 * (len(ordered) - 1))]
    slow = sum(p > 10 for p in p99s.values())
    line = (
        f"{name:>4}: p50 {statistics.median(ordered):5.2f} ms, p99 {p99:6.2f}, max {ordered[-1]:6.1f}; "
        f"quarter-seconds with p99 > 10 ms: {slow} of {len(p99s)}"
    )
    if series:
        line += "\n      " + " ".join(f"{q:.2f}:{p:.0f}" for q, p in p99s.items())
    return line


async def echo_server() -> None:
    """`isolate.py --echo-server`: echo whatever arrives; the port goes to stdout."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while data := await reader.read(4096):
            writer.write(data)

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    await asyncio.Event().wait()


async def tcp(rate: float, seconds: float) -> Latencies:
    echo = await asyncio.create_subprocess_exec(
        sys.executable, __file__, "--echo-server", stdout=asyncio.subprocess.PIPE
    )
    try:
        assert echo.stdout is not None
        port = int(await echo.stdout.readline())
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        n = int(rate * seconds)
        start = time.perf_counter() + 0.1
        dues: list[float] = []
        lats: Latencies = []

        async def read_answers() -> None:
            for _ in range(n):
                await reader.readexactly(40)
                due = dues.pop(0)
                lats.append((due - start, (time.perf_counter() - due) * 1000))

        answers = asyncio.create_task(read_answers())
        for i in range(n):
            due = start + i / rate
            await asyncio.sleep(max(0.0, due - time.perf_counter()))
            dues.append(due)
            writer.write(b"x" * 40)
        await answers
        writer.close()
        return lats
    finally:
        echo.terminate()
        await echo.wait()


async def aio(rate: float, seconds: float) -> Latencies:
    import grpc

    from batchline.v1 import inference_pb2, inference_pb2_grpc
    from bench import floor

    with floor.serving() as (host, _pid):
        async with grpc.aio.insecure_channel(host) as channel:
            stub = inference_pb2_grpc.InferenceServiceStub(channel)
            await stub.Submit(inference_pb2.SubmitRequest(text="warm"))
            start = time.perf_counter() + 0.1
            lats: Latencies = []

            async def one(i: int) -> None:
                due = start + i / rate
                await asyncio.sleep(max(0.0, due - time.perf_counter()))
                await stub.Submit(inference_pb2.SubmitRequest(text="I loved it"))
                lats.append((due - start, (time.perf_counter() - due) * 1000))

            await asyncio.gather(*(one(i) for i in range(int(rate * seconds))))
            return lats


def answered_at(due: float, start: float, lats: Latencies) -> Callable[[object], None]:
    def record(_answer: object) -> None:
        lats.append((due - start, (time.perf_counter() - due) * 1000))

    return record


def sync(rate: float, seconds: float) -> Latencies:
    import grpc

    def handler(request: bytes, context: object) -> bytes:
        return b"y" * 40

    server = grpc.server(futures.ThreadPoolExecutor(4))
    method = grpc.unary_unary_rpc_method_handler(handler)
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("floor.S", {"M": method}),))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            call = channel.unary_unary("/floor.S/M", None, None)  # bytes in, bytes out
            call(b"warm")
            start = time.perf_counter() + 0.1
            lats: Latencies = []
            pending = []
            for i in range(int(rate * seconds)):
                due = start + i / rate
                if (wait := due - time.perf_counter()) > 0:
                    time.sleep(wait)
                answer = call.future(b"x" * 40)
                answer.add_done_callback(answered_at(due, start, lats))
                pending.append(answer)
            for answer in pending:
                answer.result()
            return lats
    finally:
        server.stop(None)


def main() -> None:
    if "--echo-server" in sys.argv:
        import uvloop

        uvloop.run(echo_server())
        return
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    rate = float(args[0]) if args else 1000.0
    seconds = float(args[1]) if len(args) > 1 else 8.0
    rounds = int(args[2]) if len(args) > 2 else 3
    modes = [m for m in ("tcp", "aio", "sync") if f"--only-{m}" in sys.argv] or ["tcp", "aio", "sync"]
    import grpc
    import uvloop

    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    print(f"# {when}, grpcio {grpc.__version__}, {rate:g}/s for {seconds:g} s")
    for round_ in range(rounds):
        print(f"round {round_ + 1}")
        for mode in modes:
            if mode == "tcp":
                lats = uvloop.run(tcp(rate, seconds))
            elif mode == "aio":
                lats = uvloop.run(aio(rate, seconds))
            else:
                lats = sync(rate, seconds)
            print(summary(mode, lats, "--series" in sys.argv), flush=True)


if __name__ == "__main__":
    main()
