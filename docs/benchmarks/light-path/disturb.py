"""A lone pass in the pipeline that shares the machine with the next job's Submit runs several
milliseconds over its reference while the other processes take only about a millisecond of CPU
during it (`pass_cpu.py`). Is that the machine's, whatever takes the CPU, or the pipeline's?

Here, with no services running, the bare model's single-item pass (sentences around the median
length, on 2 threads, each after GAP s asleep) four ways taking turns:
- alone;
- with a chain of wake-ups between two helper processes started 5 ms into the pass: HOPS
  messages, each side spinning SPIN_US per message after writing through TOUCH_KIB of its
  memory: about as much CPU as the other processes took during a pass with a Submit in flight
  (1.2-1.5 ms, `pass_cpu.py`), with TOUCH_KIB the caches written through too. Over pipes, or
  with TRANSPORT=tcp over a loopback TCP connection, as the services talk;
- with the same chain ending just before the pass (what it leaves behind, not sharing the pass);
- with the chain in the pass also waking, at every fourth message, a second thread of this
  process that then runs LOOP_US of Python (as the next job's delivery wakes the batcher's event
  loop, which holds the interpreter lock the pass's thread takes between operators).
With CHAIN=rabbitmq or CHAIN=redis the chain is one call to the real local service instead (a
persistent message published to a quorum queue and confirmed; a SET and its GET), the server's
CPU counted with the helpers', and the fourth way is left out. With CHAIN=submit it is one gRPC
Submit of a review to a real ingress (with its stream service, on a queue and key prefix of their
own, no batcher consuming), as the benchmark's client sends it: the ingress's, the stream
service's, RabbitMQ's and Redis's CPU counted with the helpers'. With CONSUME=1 as well, a thread
of this process runs an event loop that consumes that queue as the batcher does (each message
decoded, its text tokenized by the model's tokenizer, acked), so the next job's delivery lands
in the pass's process during the pass, as in the pipeline.
Each pass is read with the helpers' CPU during it, from their CPU clocks. Prints each round's
medians, then the medians over all rounds: each way's pass over the pass alone, against the
helpers' CPU in it.

    PYTHONPATH=src:services:. .venv/bin/python docs/benchmarks/light-path/disturb.py \
        [GAP_S] [ROUNDS] [HOPS] [SPIN_US] [TOUCH_KIB]     # TRANSPORT=tcp, CHAIN=..., CONSUME=1 in the env
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import statistics
import struct
import subprocess
import sys
import threading
import time
from typing import Any

import aiormq
import aiormq.abc
import grpc
import redis.asyncio

from batchline.v1 import inference_pb2, inference_pb2_grpc, job_pb2
from bench import batching, stack, workload

TRANSPORT = os.environ.get("TRANSPORT", "pipe")  # how A and B pass their bytes: pipe or tcp
CHAIN = os.environ.get("CHAIN", "hops")  # the hops between A and B, or one call to rabbitmq, redis or submit
CONSUME = os.environ.get("CONSUME") == "1"  # with CHAIN=submit: this process consumes the jobs
CONSUMED = [0]  # the jobs the CONSUME=1 thread has taken
LOOP_US = 100.0  # Python per wake-up of this process's other thread, holding the interpreter lock


def cpu_ms(pids: list[int]) -> float:
    """CPU time so far of `pids`, from their CPU clocks (CPUCLOCK_SCHED), in ms."""
    return sum(time.clock_gettime((~pid << 3) | 2) for pid in pids) * 1000


def spin(us: float, memory: bytearray) -> None:
    """Busy for `us` microseconds, writing through `memory` (one byte per 64-byte line) once first:
    what a woken interpreter does to the caches it shares with the pass."""
    end = time.perf_counter() + us / 1e6
    if memory:
        memory[::64] = memory[32::64]
    while time.perf_counter() < end:
        pass


def tcp_pair() -> tuple[socket.socket, socket.socket]:
    """Both ends of one TCP connection on 127.0.0.1, Nagle off."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        client = socket.create_connection(server.getsockname())
        accepted, _ = server.accept()
    for end in (client, accepted):
        end.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return client, accepted


async def submits(command_r: int, done_w: int) -> None:
    """Helper A with CHAIN=submit: told the ingress's address (64 bytes, first), then at each
    moment it is told one Submit of a review there, as the benchmark's client sends it; then one
    byte on the done pipe."""
    loop = asyncio.get_running_loop()
    target = (await loop.run_in_executor(None, os.read, command_r, 64)).decode().strip()
    texts = workload.sentences(1000, seed=3)
    async with grpc.aio.insecure_channel(target) as channel:
        inference = inference_pb2_grpc.InferenceServiceStub(channel)
        await inference.Submit(inference_pb2.SubmitRequest(text=texts[-1]), timeout=30)  # connected
        n = 0
        while data := await loop.run_in_executor(None, os.read, command_r, 16):
            at, _ = struct.unpack("dd", data)
            await asyncio.sleep(max(0.0, at - time.perf_counter()))
            await inference.Submit(inference_pb2.SubmitRequest(text=texts[n % len(texts)]), timeout=30)
            n += 1
            os.write(done_w, b"x")


def consume(queue: str, model: Any) -> None:
    """With CONSUME=1, in a thread of its own: an event loop consuming `queue` as the batcher's
    does, each delivery decoded, its text tokenized and acked."""

    async def run() -> None:
        connection = await aiormq.connect("amqp://guest:guest@127.0.0.1/")
        channel = await connection.channel()
        await channel.basic_qos(prefetch_count=64)

        async def on_message(message: aiormq.abc.DeliveredMessage) -> None:
            task = job_pb2.InferenceTask.FromString(message.body)
            model.encode([task.text])
            assert message.delivery_tag is not None  # a consumed message has one
            await channel.basic_ack(message.delivery_tag)
            CONSUMED[0] += 1

        await channel.basic_consume(queue, on_message)
        await asyncio.Event().wait()  # until the process ends

    asyncio.run(run())


async def service_calls(command_r: int, done_w: int) -> None:
    """Helper A with CHAIN=rabbitmq or redis: told a moment, one call to the real service then, as
    a Submit makes it: a persistent 300-byte message published to a quorum queue of its own and
    confirmed, or a 300-byte SET and its GET on Redis; then one byte on the done pipe."""
    loop = asyncio.get_running_loop()
    connection = await aiormq.connect("amqp://guest:guest@127.0.0.1/")
    channel = await connection.channel()  # publisher confirms on
    queue = f"disturb-{os.getpid()}"
    await channel.queue_declare(queue, durable=True, arguments={"x-queue-type": "quorum"})
    store = redis.asyncio.Redis(host="127.0.0.1")
    try:
        while data := await loop.run_in_executor(None, os.read, command_r, 16):
            at, _ = struct.unpack("dd", data)
            await asyncio.sleep(max(0.0, at - time.perf_counter()))
            if CHAIN == "rabbitmq":
                persistent = aiormq.spec.Basic.Properties(delivery_mode=2)
                await channel.basic_publish(b"x" * 300, routing_key=queue, properties=persistent)
            else:
                await store.set(queue, b"x" * 300)
                await store.get(queue)
            os.write(done_w, b"x")
    finally:
        await channel.queue_delete(queue)
        await connection.close()
        await store.delete(queue)
        await store.aclose()


def helpers(hops: int, spin_us: float, touch_kib: int, notify_w: int) -> tuple[list[int], int, int]:
    """Two processes, A and B. Told a moment (perf_counter's clock, CLOCK_MONOTONIC, the same in
    every process) on its command pipe, A sleeps until then and passes a byte back and forth with
    B `hops` times, each side spinning `spin_us` per byte (after writing through `touch_kib` KiB of
    its own memory), then writes one byte on its done pipe; told to, it also writes a byte on
    `notify_w` at every fourth message of the chain. Returns their pids, the command pipe's
    write end and the done pipe's read end; each process closes the pipe ends it does not use, so
    closing the command pipe ends both helpers."""
    command_r, command_w = os.pipe()
    done_r, done_w = os.pipe()
    if TRANSPORT == "tcp":  # A and B over a loopback TCP connection, as the services talk
        a_side, b_side = tcp_pair()
        a_to_b_w, b_to_a_r = os.dup(a_side.fileno()), os.dup(a_side.fileno())
        a_to_b_r, b_to_a_w = os.dup(b_side.fileno()), os.dup(b_side.fileno())
        a_side.close()
        b_side.close()
    else:
        a_to_b_r, a_to_b_w = os.pipe()
        b_to_a_r, b_to_a_w = os.pipe()
    memory = bytearray(touch_kib * 1024)
    b = os.fork()
    if b == 0:  # B: answers each byte
        for fd in (command_r, command_w, done_r, done_w, a_to_b_w, b_to_a_r):
            os.close(fd)
        while os.read(a_to_b_r, 1):
            spin(spin_us, memory)
            os.write(b_to_a_w, b"x")
        os._exit(0)
    a = os.fork()
    if a == 0 and CHAIN != "hops":  # A: one call to a real service per command
        for fd in (command_w, done_r, a_to_b_r, a_to_b_w, b_to_a_r, b_to_a_w):
            os.close(fd)
        asyncio.run(submits(command_r, done_w) if CHAIN == "submit" else service_calls(command_r, done_w))
        os._exit(0)
    if a == 0:  # A: one chain per command
        for fd in (command_w, done_r, a_to_b_r, b_to_a_w):
            os.close(fd)
        while data := os.read(command_r, 16):
            at, notify = struct.unpack("dd", data)
            time.sleep(max(0.0, at - time.perf_counter()))
            for hop in range(hops // 2):
                if notify and hop % 2 == 0:
                    os.write(notify_w, b"x")
                os.write(a_to_b_w, b"x")
                os.read(b_to_a_r, 1)
                spin(spin_us, memory)
            os.write(done_w, b"x")
        os._exit(0)
    for fd in (command_r, done_w, a_to_b_r, a_to_b_w, b_to_a_r, b_to_a_w):
        os.close(fd)
    return [a, b], command_w, done_r


def main() -> None:
    gap = float(sys.argv[1]) if len(sys.argv) > 1 else 0.12
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 6
    hops = int(sys.argv[3]) if len(sys.argv) > 3 else 16
    spin_us = float(sys.argv[4]) if len(sys.argv) > 4 else 60.0
    touch_kib = int(sys.argv[5]) if len(sys.argv) > 5 else 0
    notify_r, notify_w = os.pipe()
    pids, command, done = helpers(hops, spin_us, touch_kib, notify_w)  # forked before any thread starts
    os.close(notify_w)
    # With a real service, its own CPU during the pass counts with the helpers'.
    server = {"rabbitmq": "beam.smp", "redis": "redis-server"}.get(CHAIN)
    found = subprocess.run(["pgrep", "-f", server], capture_output=True, text=True).stdout if server else ""
    measured = pids + [int(pid) for pid in found.split()]
    with contextlib.ExitStack() as services:
        if CHAIN == "submit":  # an ingress and a stream service, no batcher: the jobs wait in the queue
            targets = services.enter_context(stack.start("local", {}, batchers=0, envoy=False))
            measured += [pid for group in targets.pids.values() for pid in group]
            os.write(command, targets.ingress.encode().ljust(64))
            queue = targets.queue if CONSUME else None
        else:
            queue = None
        take_turns(gap, rounds, hops, spin_us, touch_kib, command, done, notify_r, measured, queue)
    for pid in pids:
        os.waitpid(pid, 0)


def take_turns(
    gap: float,
    rounds: int,
    hops: int,
    spin_us: float,
    touch_kib: int,
    command: int,
    done: int,
    notify_r: int,
    measured: list[int],
    queue: str | None,
) -> None:
    """The four ways taking turns, ROUNDS rounds; prints each round's and the overall medians,
    then closes the command pipe, which ends the helpers."""

    def loop() -> (
        None
    ):  # the batcher's event loop, as the next job's delivery wakes it: Python, holding the GIL
        while os.read(notify_r, 1):
            spin(LOOP_US, bytearray())

    threading.Thread(target=loop, daemon=True).start()
    model, encoded = workload.warm_model(workload.build_model(), "fp32", 2)
    middle = batching.typical_sentences(encoded)
    if queue is not None:
        threading.Thread(target=consume, args=(queue, model), daemon=True).start()
    # When each way starts its chain, relative to the pass's start (None: no chain).
    ways: dict[str, tuple[float, bool] | None] = {
        "alone": None,
        "chain in the pass": (0.005, False),
        "chain just before": (-0.012, False),
        "chain in the pass, waking a thread of this process": (0.005, True),
    }
    if CHAIN != "hops":  # one call to a service wakes no thread here
        del ways["chain in the pass, waking a thread of this process"]
    passes: dict[str, list[float]] = {name: [] for name in ways}
    helper_cpu: dict[str, list[float]] = {name: [] for name in ways}
    print(
        f"gap {gap * 1000:.0f} ms, a chain of {hops} messages over {TRANSPORT}, {spin_us:.0f} us spun per "
        f"message after writing through {touch_kib} KiB"
        if CHAIN == "hops"
        else f"gap {gap * 1000:.0f} ms, the chain one call to {CHAIN} (its servers' CPU counted too)"
        + (", its jobs consumed by this process" if queue else ""),
        flush=True,
    )
    for round_ in range(rounds):
        for name in batching.turns(list(ways), round_):
            chain = ways[name]
            for e in middle:
                starts_at = time.perf_counter() + gap
                if chain is not None:
                    os.write(command, struct.pack("dd", starts_at + chain[0], float(chain[1])))
                time.sleep(max(0.0, starts_at - time.perf_counter()))
                before = cpu_ms(measured)
                passes[name].append(batching.timed_pass(model.predict, e))
                helper_cpu[name].append(cpu_ms(measured) - before)
                if chain is not None:
                    os.read(done, 1)  # the chain is over before the next pass's gap begins
        line = ", ".join(
            f"{k} {statistics.median(v[-len(middle) :]):.2f} ms (helpers' CPU in it "
            f"{statistics.median(helper_cpu[k][-len(middle) :]):.2f})"
            for k, v in passes.items()
        )
        print(f"round {round_ + 1}: {line}", flush=True)
    alone = statistics.median(passes["alone"])
    for name, times in passes.items():
        print(
            f"{name}: median {statistics.median(times):.2f} ms ({statistics.median(times) - alone:+.2f} over "
            f"alone), the helpers' CPU in it {statistics.median(helper_cpu[name]):.2f} ms"
        )
    if queue is not None:
        print(f"this process consumed {CONSUMED[0]} jobs")
    os.close(command)


if __name__ == "__main__":
    main()
