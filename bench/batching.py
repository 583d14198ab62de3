"""`make bench-batching`: how close the batching engine gets to the model's own limit.

Runs the real services (ingress, batcher with the real `hf` backend) on the local RabbitMQ and
Redis, with a full-size DistilBERT-shaped model with random weights (the same compute as the
real one; built once under .run/, never committed) and review-like sentences of 5-30 words.
All in one run, side by side:

1. the bare model: forward passes per second at batch 16 (random batches, as a naive server
   forms them) and one single-item pass, back to back and spaced as light load spaces jobs,
   in the process, before the services start; the spaced pass again just before and just
   after each light-load cell, with its stack idle (the machine's speed moves over a run this
   long, and from one few-second spell to the next);
2. the stack's capacity: what the default config completes per second while jobs arrive
   faster than it can finish them (the load generator, the ingress, RabbitMQ and Redis share
   the model's cores, so it is below the bare model's rate);
3. configs 1:0 (no batching), 16:50 and 16:0 (FIFO, fixed window / greedy) and the default
   (length-aware, token budget, adaptive wait) at ~10/30/60/90% of that capacity and at
   40 req/s, open loop, the configs taking turns within each repeat; the default also with one
   model lane (`default 1 lane`: one pass at a time on every thread, as before lanes), and
   an identical copy of the default (`default, again`): how far two runs of one config read
   apart here, the yardstick for every difference between configs;
   end-to-end latency is accepted -> result stored, from each job's own trace;
4. saturation: a backlog of jobs through the default config with two lanes and with one, fp32
   and bf16 (where PRECISION=bf16 computes bf16 here), each run just after the bare model's
   batch-16 throughput is measured again (the ratio compares the two).

Writes docs/benchmarks/batching.{md,json,png} and batching-raw.json; while it runs, what it
has measured so far in batching-partial.json, which `--resume` goes on from.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import gc
import json
import math
import os
import shlex
import statistics
import sys
import textwrap
import time
import urllib.request
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
from prometheus_client.parser import text_string_to_metric_families

from batchline import codec
from batchline.v1 import inference_pb2, inference_pb2_grpc, job_pb2
from bench import machine, stack, strict_json
from bench.workload import MODEL_DIR, ROOT, build_model, sentences, warm_model

CONFIGS: dict[str, dict[str, str]] = {
    "1:0": {"MAX_BATCH_SIZE": "1", "MAX_WAIT_MS": "0", "LENGTH_AWARE": "0", "MAX_BATCH_TOKENS": "0"},
    "16:50": {"MAX_BATCH_SIZE": "16", "MAX_WAIT_MS": "50", "LENGTH_AWARE": "0", "MAX_BATCH_TOKENS": "0"},
    "16:0": {"MAX_BATCH_SIZE": "16", "MAX_WAIT_MS": "0", "LENGTH_AWARE": "0", "MAX_BATCH_TOKENS": "0"},
    "default": {},  # MAX_BATCH_SIZE 16, MAX_WAIT_MS auto, length-aware, MAX_BATCH_TOKENS 4096
    # The same policy with one model lane: one pass at a time, on every thread.
    "default 1 lane": {"MODEL_LANES": "1"},
    # The default again, unchanged: the control. Two runs of one config at one load can read
    # 2 x apart on p99 on a shared 2-core machine (docs/benchmarks/noise-floor.md); the report
    # sets each comparison beside that.
    "default, again": {},
}
ONE_LANE = "default 1 lane"
CONTROL = "default, again"
DEFAULTS = ("default", ONE_LANE)  # the default policy, with lanes and with one


# --- 1. the bare model ----------------------------------------------------------------------------


def bare_model(
    path: Path, precision: str, threads: int, seconds: float, light_load: float
) -> dict[str, float]:
    """Forward throughput at batch 16 over random (FIFO) batches, and one single-item pass:
    back to back, and spaced as light load spaces them (the mean gap between arrivals at
    `light_load` of that throughput). A pass after an idle gap ran slower on the machine this
    was measured on (2026-11-30: ~21 ms back to back, ~25 ms after 150 ms idle, one thread as
    with two), so the light-load overhead is given against both."""
    model, encoded = warm_model(path, precision, threads)
    throughput, fifo_padding = fifo_throughput(model, encoded, seconds)
    gap_s = 1 / (light_load * throughput)
    singles, spaced = single_passes(model, encoded, gap_s)
    del model
    gc.collect()
    return {
        "throughput_per_s": throughput,
        "single_pass_ms": singles,
        "single_pass_spaced_ms": spaced,
        "light_load_gap_ms": gap_s * 1000,
        "fifo_padding_efficiency": fifo_padding,
    }


def fifo_throughput(model: Any, encoded: list[Any], seconds: float) -> tuple[float, float]:
    """Sequences per second over batches of 16 in arrival order (as a naive server forms them),
    and their padding efficiency."""
    done, real, padded, started = 0, 0, 0, time.perf_counter()
    while time.perf_counter() - started < seconds:
        at = done % (len(encoded) - 16)
        output = model.predict(encoded[at : at + 16])
        done, real, padded = done + 16, real + output.real_tokens, padded + output.padded_tokens
    return done / (time.perf_counter() - started), real / padded


def single_passes(model: Any, encoded: list[Any], gap_s: float) -> tuple[float, float]:
    """The median single-item pass (ms) over sentences around the median length, back to back
    and each after `gap_s` idle, three rounds of each in turns."""
    singles, spaced = timed_single_passes(model, encoded, gap_s)
    return statistics.median(singles), statistics.median(spaced)


def timed_single_passes(model: Any, encoded: list[Any], gap_s: float) -> tuple[list[float], list[float]]:
    """`single_passes`' passes (ms), each of them: back to back, and each after `gap_s` idle."""
    middle = typical_sentences(encoded)
    singles, spaced = [], []
    for _ in range(3):
        for e in middle:
            singles.append(timed_pass(model.predict, e))
        for e in middle:
            time.sleep(gap_s)
            spaced.append(timed_pass(model.predict, e))
    return singles, spaced


def typical_sentences(encoded: list[Any]) -> list[Any]:
    """The sentences a single-item pass is timed on: the 11 around the median length of the first
    41, so the pass is a typical review's."""
    return sorted(encoded[:41], key=lambda e: e.tokens)[15:26]


def timed_pass(predict: Any, encoded: Any) -> float:
    started = time.perf_counter()
    predict([encoded])
    return (time.perf_counter() - started) * 1000


def bare_instances(path: Path, precision: str, seconds: float) -> float:
    """The bare model as two one-thread processes running at once (as two one-thread batchers run it):
    their summed sequences per second over batches of 16 in arrival order."""
    import multiprocessing

    with multiprocessing.get_context("spawn").Pool(2) as pool:
        return float(sum(pool.starmap(_bare_one_thread, [(path, precision, seconds)] * 2)))


def _bare_one_thread(path: Path, precision: str, seconds: float) -> float:
    model, encoded = warm_model(path, precision, 1)
    return fifo_throughput(model, encoded, seconds)[0]


# --- 2. open-loop runs through the services ---------------------------------------------------------


def e2e_ms(job: job_pb2.Job) -> float:
    """A job's end to end: accepted -> result stored, from its trace."""
    return (codec.seconds(job.trace.finished_at) - codec.seconds(job.trace.accepted_at)) * 1000


def over_reference(jobs: list[job_pb2.Job], reference_ms: float) -> str:
    """The light-path scripts' reading of a round of lone jobs (DONE ones) against the bare
    spaced pass timed around it: e2e p50 and the trace's pass p50 over the pass, and the p50 of
    accepted -> started."""
    done = [j for j in jobs if j.status == codec.DONE]
    e2e = statistics.median(map(e2e_ms, done))
    compute = statistics.median(j.trace.inference_ms for j in done)
    started = [(codec.seconds(j.trace.started_at) - codec.seconds(j.trace.accepted_at)) * 1000 for j in done]
    return (
        f"reference {reference_ms:.2f} ms; e2e p50 over it {e2e - reference_ms:+.2f}, the trace's pass "
        f"over it {compute - reference_ms:+.2f}, accepted->started {statistics.median(started):.2f}; "
        f"done {len(done)}/{len(jobs)}"
    )


def warm(ingress: str) -> None:
    """The first calls through a fresh stack: a backlog of 32 sentences, submitted and read back."""
    asyncio.run(collect(ingress, asyncio.run(backlog(ingress, sentences(32, seed=1))), 0))


@dataclass
class Run:
    config: str
    load: float  # fraction of capacity
    offered_rps: float
    jobs: list[job_pb2.Job]
    wall_s: float
    send_lag_p99_ms: float

    def summary(self) -> dict[str, Any]:
        done = [j for j in self.jobs if j.status == codec.DONE]
        e2e = [e2e_ms(j) for j in done]
        per_job = [j.trace.inference_ms / max(1, j.trace.batch_size) for j in done]
        # Everything but the forward pass: queue wait, broker and store hops, batching wait.
        outside = [e - j.trace.inference_ms for e, j in zip(e2e, done, strict=True)]
        batches = {j.trace.batch_id: j.trace for j in done}
        real = sum(t.batch_real_tokens for t in batches.values())
        padded = sum(t.batch_padded_tokens for t in batches.values())
        reasons: dict[str, int] = {}
        for t in batches.values():
            name = job_pb2.BatchCloseReason.Name(t.close_reason).removeprefix("BATCH_CLOSE_REASON_").lower()
            reasons[name] = reasons.get(name, 0) + 1
        finished = [codec.seconds(j.trace.finished_at) for j in done]
        return {
            "config": self.config,
            "load": self.load,
            "offered_rps": self.offered_rps,
            "jobs": len(self.jobs),
            "done": len(done),
            "not_done": len(self.jobs) - len(done),
            "completed_rps": len(done) / (max(finished) - min(finished)) if len(finished) > 1 else 0.0,
            "e2e_p50_ms": pct(e2e, 50),
            "e2e_p90_ms": pct(e2e, 90),
            "e2e_p99_ms": pct(e2e, 99),
            "compute_per_job_ms": pct(per_job, 50),
            "outside_model_p50_ms": pct(outside, 50),
            "mean_batch_size": len(done) / len(batches) if batches else 0.0,
            "padding_efficiency": real / padded if padded else 0.0,
            "close_reasons": reasons,
            "send_lag_p99_ms": self.send_lag_p99_ms,
        }


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


async def paced(
    count: int, rate: float, send: Callable[[int], Awaitable[str]]
) -> tuple[list[str], float, float]:
    """Call send(i) at start + i / rate for i < count, open loop; what the calls return, the wall
    time and the p99 send lag (ms)."""
    start = time.perf_counter() + 0.05
    lags: list[float] = []

    async def one(i: int) -> str:
        scheduled = start + i / rate
        await asyncio.sleep(max(0.0, scheduled - time.perf_counter()))
        lags.append((time.perf_counter() - scheduled) * 1000)
        return await send(i)

    ids = await asyncio.gather(*(one(i) for i in range(count)))
    return list(ids), time.perf_counter() - start, pct(lags, 99)


async def open_loop(
    target: str,
    texts: list[str],
    rate: float,
    round_trips: list[float] | None = None,
    answered: dict[str, float] | None = None,
) -> tuple[list[str], float, float]:
    """Submit texts[i] at start + i / rate; the job ids, the wall time and the p99 send lag.
    Each Submit's round trip (ms, as the client saw it) goes to `round_trips` if given, and the
    wall-clock time its answer came back (the services' clock for their stamps) to `answered`."""
    async with grpc.aio.insecure_channel(target) as channel:
        inference = inference_pb2_grpc.InferenceServiceStub(channel)

        async def submit(i: int) -> str:
            sent = time.perf_counter()
            answer = await inference.Submit(inference_pb2.SubmitRequest(text=texts[i]), timeout=30)
            if answered is not None:
                answered[answer.job_id] = time.time()
            if round_trips is not None:
                round_trips.append((time.perf_counter() - sent) * 1000)
            return answer.job_id

        return await paced(len(texts), rate, submit)


async def backlog(target: str, texts: list[str]) -> list[str]:
    """Submit every text at once (SubmitBatch of 64): the batcher runs flat out."""
    async with grpc.aio.insecure_channel(target) as channel:
        inference = inference_pb2_grpc.InferenceServiceStub(channel)
        ids: list[str] = []
        for i in range(0, len(texts), 64):
            answer = await inference.SubmitBatch(inference_pb2.SubmitBatchRequest(texts=texts[i : i + 64]))
            ids += [job.job_id for job in answer.jobs]
        return ids


async def finished_count(target: str) -> int:
    """Jobs that reached a terminal state in this stack so far (GetStats: one cheap call)."""
    async with grpc.aio.insecure_channel(target) as channel:
        stats = await inference_pb2_grpc.InferenceServiceStub(channel).GetStats(
            inference_pb2.GetStatsRequest()
        )
        return sum(stats.finished.values())


async def collect(target: str, ids: list[str], baseline: int, timeout_s: float = 300) -> list[job_pb2.Job]:
    """Every job's final record. Waits on GetStats (one call a second, so the benchmark does not
    steal the CPU it measures) until `baseline + len(ids)` jobs have finished, then reads each
    job once, in modest chunks, retrying a refused read."""
    async with grpc.aio.insecure_channel(target) as channel:
        inference = inference_pb2_grpc.InferenceServiceStub(channel)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            stats = await inference.GetStats(inference_pb2.GetStatsRequest())
            if sum(stats.finished.values()) >= baseline + len(ids):
                break
            await asyncio.sleep(1.0)

        async def get(job_id: str) -> job_pb2.Job:
            for attempt in range(5):
                try:
                    reply = await inference.GetJob(inference_pb2.GetJobRequest(job_id=job_id), timeout=10)
                    return reply.job
                except grpc.aio.AioRpcError as exc:
                    if exc.code() not in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                        raise
                    await asyncio.sleep(0.2 * (attempt + 1))
            raise RuntimeError(f"could not read job {job_id}")

        jobs: list[job_pb2.Job] = []
        for i in range(0, len(ids), 50):
            jobs += await asyncio.gather(*(get(j) for j in ids[i : i + 50]))
        return jobs


def progress(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def stack_env(name: str, model: Path, precision: str) -> tuple[dict[str, str], int]:
    """The services' environment for a config, and how many batchers it runs (its `BATCHERS`,
    1 when it names none)."""
    env = {"MODEL_BACKEND": "hf", "MODEL_PATH": str(model), "PRECISION": precision, **CONFIGS[name]}
    return env, int(env.pop("BATCHERS", "1"))


def pass_widths(ports: list[int]) -> dict[str, float]:
    """The batchers' forward passes so far by width, from their /metrics: `wide` (alone, on
    every thread) and `lane` (on one lane's share)."""
    counts = {"wide": 0.0, "lane": 0.0}
    for port in ports:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
            text = reply.read().decode()
        for family in text_string_to_metric_families(text):
            if family.name == "batchline_passes":
                for sample in family.samples:
                    if sample.name.endswith("_total"):
                        counts[sample.labels["width"]] += sample.value
    return counts


def measure_config(
    name: str,
    model: Path,
    precision: str,
    capacity: float,
    loads: list[float],
    repeat: int,
    duration_s: float,
    spaced_passes: Callable[[float], list[float]] | None = None,
) -> list[dict[str, Any]]:
    """One pass over `loads` on a fresh stack: repeat `repeat` of every cell of this config.
    Every config sees the same arrivals at a given load and repeat. With `spaced_passes` (the
    bare model's single-item passes in this process, each after an idle gap of the given
    seconds, in ms), the lightest load's cell is preceded and followed by those passes, timed
    with the stack idle and spaced as the cell spaces its jobs: what the light-load overhead is
    read against. Timed on both sides: the machine's pass moves from one few-second spell to the
    next (docs/benchmarks/light-path/results.txt, "reference"), and a 15 s cell spans several."""
    env, batchers = stack_env(name, model, precision)
    results = []
    with stack.start("local", env, batchers=batchers, envoy=False, metrics=True) as targets:
        warm(targets.ingress)
        for load in loads:
            rate = load * capacity
            # At least 200 jobs, so a p99 is not just the slowest of a few dozen.
            texts = sentences(max(200, int(rate * duration_s)), seed=1000 * repeat + int(load * 100))
            timed = spaced_passes if load == min(loads) else None  # the light cell's reference
            before = timed(1 / rate) if timed is not None else []
            baseline = asyncio.run(finished_count(targets.ingress))
            widths = pass_widths(targets.metrics["batcher"])
            ids, wall, lag = asyncio.run(open_loop(targets.ingress, texts, rate))
            jobs = asyncio.run(collect(targets.ingress, ids, baseline))
            summary = Run(name, load, rate, jobs, wall, lag).summary()
            counted = pass_widths(targets.metrics["batcher"])
            summary |= {f"{width}_passes": counted[width] - widths[width] for width in counted}
            if timed is not None:
                after = timed(1 / rate)
                summary["bare_spaced_pass_before_ms"] = statistics.median(before)
                summary["bare_spaced_pass_after_ms"] = statistics.median(after)
                summary["bare_spaced_pass_around_ms"] = statistics.median(before + after)
            results.append(summary)
            progress(
                f"{name:>7} {precision} load {load:.0%} ({rate:.0f}/s) #{repeat + 1}: "
                f"p50 {summary['e2e_p50_ms']:.0f} ms, p99 {summary['e2e_p99_ms']:.0f} ms, "
                f"batch {summary['mean_batch_size']:.1f}, padding {summary['padding_efficiency']:.2f}, "
                f"passes wide / on a lane {summary['wide_passes']:.0f} / {summary['lane_passes']:.0f}"
            )
    return results


def measure_saturation(
    name: str, model: Path, precision: str, jobs: int, repeats: int, threads: int
) -> list[dict[str, Any]]:
    """A backlog through the services, each repeat just after the bare model's throughput is
    measured again, in this process, with the services idle: the ratio compares the two on the
    machine as it is at that moment (a shared machine drifts over a run this long)."""
    bare, encoded = warm_model(model, precision, threads)
    env, batchers = stack_env(name, model, precision)
    results = []
    with stack.start("local", env, batchers=batchers, envoy=False) as targets:
        for repeat in range(repeats):
            bare_per_s, _ = fifo_throughput(bare, encoded, seconds=10.0)
            texts = sentences(jobs, seed=500 + repeat)
            baseline = asyncio.run(finished_count(targets.ingress))
            ids = asyncio.run(backlog(targets.ingress, texts))
            records = asyncio.run(collect(targets.ingress, ids, baseline))
            summary = Run(name, float("inf"), 0.0, records, 0.0, 0.0).summary()
            summary["precision"] = precision
            summary["bare_throughput_per_s"] = bare_per_s
            results.append(summary)
            progress(
                f"saturation {name} {precision} #{repeat + 1}: {summary['completed_rps']:.1f} jobs/s, "
                f"bare just before {bare_per_s:.1f}/s (ratio {summary['completed_rps'] / bare_per_s:.2f}), "
                f"padding {summary['padding_efficiency']:.2f}, batch {summary['mean_batch_size']:.1f}"
            )
    return results


# The stack's capacity is timed offered this multiple of the bare rate, at first: more than it
# finished on the machines measured here (its completed rate at 0.9 x the bare rate: 0.76-1.00
# x the offered, bench.batching's runs before 2026-12-07). A backlog drained up to 1.41 x the
# bare model's rate (batching-1837.md), so a stack that keeps up is offered twice as much again.
OVERLOAD = 1.2
KEPT_UP = 0.95  # a stack that completes this share of the offered rate was not overloaded
CAPACITY_S = 15.0  # seconds of arrivals
CAPACITY_READINGS = 2  # the capacity is the highest of this many readings (stack_capacity)
SETTLE_S = 3.0  # the first seconds of them, before the lanes run full batches, left out


def completed_while_arriving(accepted: list[float], finished: list[float], settle_s: float) -> float:
    """Jobs finished per second from `settle_s` after the first arrival to the last arrival
    (seconds, one clock): what a stack completes while jobs keep coming. The drain after the last
    arrival, which has the cores to itself, is left out."""
    start, end = min(accepted) + settle_s, max(accepted)
    if end <= start:
        spread = max(accepted) - min(accepted)
        raise ValueError(f"arrivals over {spread:.1f} s leave nothing after {settle_s} s")
    return sum(start <= t <= end for t in finished) / (end - start)


def stack_capacity(model: Path, bare_per_s: float) -> dict[str, Any]:
    """The machine's capacity for this service: jobs/s the whole stack (the default config, fp32)
    completes while they arrive, open loop, faster than it can finish them. On a 2-core machine
    the load generator, the ingress, RabbitMQ and Redis take their CPU from the cores the model
    runs on, so this is below the bare model's rate; the loads are fractions of it (a load at
    0.9 x the bare rate fell behind in most runs: docs/benchmarks/history.md). Every load scales
    with it, and one reading can fall far short: the first stack on a machine booted minutes
    before completed 37.4 jobs/s, and two more 68.1 and 69.4, a minute later
    (docs/benchmarks/batching.md, 2026-12-08). So it is timed CAPACITY_READINGS times, each on a
    fresh stack, and the highest reading kept; `readings_rps` keeps them all."""
    readings = [capacity_reading(model, bare_per_s) for _ in range(CAPACITY_READINGS)]
    best = max(readings, key=lambda r: r["completed_rps"])
    return best | {"readings_rps": [r["completed_rps"] for r in readings]}


def capacity_reading(model: Path, bare_per_s: float, overload: float = OVERLOAD) -> dict[str, float]:
    """One reading of the stack's capacity. Offered more than it can do, the ingress does a little
    more work per second than at the capacity itself, so the reading errs low; offered less, it
    would read the offered rate, so a stack that keeps up is timed again at twice the rate (up to
    4.8 x the bare rate)."""
    reading = completed_under(model, overload * bare_per_s) | {"bare_fp32_per_s": bare_per_s}
    if reading["completed_rps"] >= KEPT_UP * reading["offered_rps"] and overload < 4:
        progress(
            f"  it kept up with {reading['offered_rps']:.0f}/s: again at {2 * overload:.1f} x the bare rate"
        )
        return capacity_reading(model, bare_per_s, 2 * overload)
    progress(f"  {reading['completed_rps']:.1f} jobs/s done while {reading['offered_rps']:.0f}/s arrived")
    return reading


def completed_under(model: Path, rate: float) -> dict[str, float]:
    """What a fresh stack of the default config (fp32) completes per second while `rate` jobs/s
    arrive for `CAPACITY_S`, after the first `SETTLE_S`."""
    env, batchers = stack_env("default", model, "fp32")
    with stack.start("local", env, batchers=batchers, envoy=False) as targets:
        warm(targets.ingress)
        baseline = asyncio.run(finished_count(targets.ingress))
        texts = sentences(int(rate * CAPACITY_S), seed=700)
        ids, _, lag = asyncio.run(open_loop(targets.ingress, texts, rate))
        jobs = asyncio.run(collect(targets.ingress, ids, baseline))
    accepted = [codec.seconds(j.trace.accepted_at) for j in jobs]
    finished = [codec.seconds(j.trace.finished_at) for j in jobs if j.status == codec.DONE]
    return {
        "completed_rps": completed_while_arriving(accepted, finished, SETTLE_S),
        "offered_rps": rate,
        "jobs": len(jobs),
        "done": len(finished),
        "send_lag_p99_ms": lag,
    }


def side_by_side(
    names: list[str], model: Path, precision: str, rates: list[float], rounds: int, duration_s: float = 15.0
) -> dict[str, list[dict[str, Any]]]:
    """Open-loop cells at each of `rates` (req/s) for each config in `names`, `rounds` times, the
    configs taking turns on fresh stacks: the side-by-side experiments under docs/benchmarks/."""
    nominal = 80.0  # loads are passed as shares of this, so each cell runs at its rate
    loads = [rate / nominal for rate in rates]
    cells: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    for round_ in range(rounds):
        for name in turns(names, round_):
            cells[name] += measure_config(name, model, precision, nominal, loads, round_, duration_s)
    return cells


def ab_main(configs: dict[str, dict[str, str]], rates: list[float], rounds: int, here: Path) -> None:
    """An A/B script's whole run: `configs` (name -> the services' environment) side by side in
    fp32, `rounds` rounds at each of `rates`, or at the rounds and rates given on the command
    line (`script.py ROUNDS RATE...`); prints the table of medians and writes every cell to
    `here/cells.json`."""
    if len(sys.argv) > 2:
        rounds, rates = int(sys.argv[1]), [float(x) for x in sys.argv[2:]]
    CONFIGS.update(configs)
    cells = side_by_side(list(configs), build_model(), "fp32", rates, rounds)
    print("\n".join(rate_table(cells, rates)))
    (here / "cells.json").write_text(json.dumps(cells, indent=1))


def rate_table(
    cells: dict[str, list[dict[str, Any]]], rates: list[float], label: str = "config"
) -> list[str]:
    """Markdown rows of medians per rate and config, with each round's p99."""
    lines = [
        f"| req/s | {label} | p50 ms | p90 ms | p99 ms (each round) | compute/job ms | mean batch |",
        "|---|---|---|---|---|---|---|",
    ]
    for rate in rates:
        for name, runs in cells.items():
            mine = [c for c in runs if abs(c["offered_rps"] - rate) < 1e-6]
            each = ", ".join(f"{c['e2e_p99_ms']:.0f}" for c in mine)
            lines.append(
                f"| {rate:.0f} | {name} | {median_of(mine, 'e2e_p50_ms'):.0f} | "
                f"{median_of(mine, 'e2e_p90_ms'):.0f} | **{median_of(mine, 'e2e_p99_ms'):.0f}** ({each}) | "
                f"{median_of(mine, 'compute_per_job_ms'):.1f} | {median_of(mine, 'mean_batch_size'):.1f} |"
            )
    return lines


# --- report ---------------------------------------------------------------------------------------------


def turns(configs: list[str], repeat: int) -> list[str]:
    """The order the configs run in, in one repeat. They take turns within each repeat, so a slow
    spell of this shared machine falls on all of them rather than on whichever config was running
    then, and the order rotates between repeats, so no config always runs first or last (the
    machine drifts over the minutes a round takes)."""
    shift = repeat % len(configs)
    return configs[shift:] + configs[:shift]


TABLE_KEYS = ("offered_rps", "completed_rps", "e2e_p50_ms", "e2e_p90_ms", "e2e_p99_ms", "compute_per_job_ms",
              "outside_model_p50_ms", "mean_batch_size", "padding_efficiency")  # fmt: skip


def medians(runs: list[dict[str, Any]]) -> dict[tuple[str, float], dict[str, float]]:
    """Each (config, load) cell: the median of its runs' readings."""
    cells: dict[tuple[str, float], list[dict[str, Any]]] = {}
    for r in runs:
        cells.setdefault((r["config"], r["load"]), []).append(r)
    return {cell: {k: median_of(group, k) for k in TABLE_KEYS} for cell, group in cells.items()}


def p99_against_best(
    table: dict[tuple[str, float], dict[str, float]], config: str
) -> dict[float, tuple[float, str]]:
    """At each load, `config`'s p99 over the best fixed config's (the lowest median p99 of those
    not a variant of the default), and which config that was."""
    against: dict[float, tuple[float, str]] = {}
    for load in sorted({load for _, load in table}):
        fixed = {
            c: row["e2e_p99_ms"]
            for (c, at), row in table.items()
            if at == load and c not in (*DEFAULTS, CONTROL)
        }
        if fixed and (config, load) in table:
            best = min(fixed, key=lambda c: fixed[c])
            against[load] = (table[(config, load)]["e2e_p99_ms"] / fixed[best], best)
    return against


def median_of(runs: list[dict[str, Any]], key: str) -> float:
    return float(statistics.median(r[key] for r in runs))


def light_against_reference(runs: list[dict[str, Any]], light: float, key: str = "around") -> float:
    """The default's end-to-end p50 at light load over the bare spaced pass timed with its cell:
    the passes just before and just after it (`around`, pooled) or just before (`before`); the
    median over its cells; NaN for runs that did not time them."""
    field = f"bare_spaced_pass_{key}_ms"
    group = [
        r["e2e_p50_ms"] - r[field]
        for r in runs
        if r["config"] == "default" and r["load"] == light and field in r
    ]
    return float(statistics.median(group)) if group else float("nan")


def against_cells_pass(summary: dict[str, Any]) -> str:
    """The report's words for the light-load overhead over the passes timed with each cell."""
    around, before = (summary[f"light_load_overhead_vs_spaced_{key}_ms"] for key in ("around", "before"))
    if not math.isnan(around):
        return (
            f"{around:+.1f} ms over the spaced pass timed again just before and just after each cell "
            f"(median over the cells; {before:+.1f} against those before it alone); "
        )
    if not math.isnan(before):
        return (
            f"{before:+.1f} ms over the spaced pass timed again just before each cell "
            "(median over the cells); "
        )
    return ""


def light_widths(runs: list[dict[str, Any]], light: float) -> tuple[float, float]:
    """The default's passes at light load, on every thread and on a lane, summed over its
    cells; NaN for runs that did not count them."""
    group = [r for r in runs if r["config"] == "default" and r["load"] == light and "wide_passes" in r]
    if not group:
        return float("nan"), float("nan")
    return sum(r["wide_passes"] for r in group), sum(r["lane_passes"] for r in group)


def what_the_loads_are(
    capacity: dict[str, Any] | None, start: float, beside: float, loads: list[float]
) -> list[str]:
    """The report's words for what the loads are fractions of: the stack's capacity timed first
    (`stack_capacity`), or, in runs that did not time it, the bare fp32 rate timed at the start.
    The machine's speed moves over a run this long, so also what they were of the bare rate
    timed beside the saturation runs, at the end (where that was timed)."""
    base = capacity["completed_rps"] if capacity else start

    def shares(of: float) -> str:
        return ", ".join(f"{load * base / of:.0%}" for load in loads)

    if capacity:
        readings = capacity.get("readings_rps", [])  # runs before 2026-12-08 timed it once
        highest = (
            f" (the highest of {len(readings)} readings, each on a fresh stack: "
            + ", ".join(f"{r:.1f}" for r in readings)
            + ")"
            if len(readings) > 1
            else ""
        )
        said = (
            f"The loads are fractions of the stack's capacity, {base:.1f} jobs/s: what the default (fp32) "
            f"completed per second while jobs arrived at {capacity['offered_rps']:.0f}/s, "
            f"{capacity['offered_rps'] / start:.1f} x the bare rate, timed first{highest}. Against the bare "
            f"fp32 rate timed at the start, {start:.1f} sequences/s, they were {shares(start)}"
        )
    elif math.isnan(beside):
        return []
    else:
        said = f"The loads are fractions of the bare fp32 rate timed at the start, {start:.1f} sequences/s"
    if not math.isnan(beside):
        said += f"; against the one timed beside the saturation runs, {beside:.1f}/s, "
        said += f"they were {shares(beside)}"
    return [*textwrap.wrap(said + ".", 96), ""]


def shown(value: float, spec: str = ".1f") -> str:
    """A number for a table cell; a dash for one not measured."""
    return "-" if math.isnan(value) else format(value, spec)


def native_bf16() -> bool:
    """Whether PRECISION=bf16 computes in bf16 here. Where it does not, the batcher runs fp32,
    and a bf16 column would measure fp32 twice under another name."""
    import torch

    from batcher.hf import resolve_device, resolve_dtype

    return resolve_dtype("bf16", resolve_device("auto")) != torch.float32


def report(raw: dict[str, Any], out: Path, command: str) -> dict[str, Any]:
    bare, runs, saturation = raw["bare"], raw["runs"], raw["saturation"]
    configs = list(CONFIGS)
    loads = sorted({r["load"] for r in runs})
    table = medians(runs)

    def runs_of(precision: str, config: str) -> list[dict[str, Any]]:
        return [r for r in saturation if r["precision"] == precision and r.get("config", "default") == config]

    def sat(precision: str, key: str, config: str = "default") -> float:
        group = runs_of(precision, config)
        return median_of(group, key) if group else float("nan")

    def ratio(precision: str, config: str = "default") -> float:
        """Median over the saturation runs of jobs/s against the bare model measured just before
        each (older runs: against the bare model measured at the start)."""
        group = runs_of(precision, config)
        if not group or precision not in bare:
            return float("nan")
        start = bare[precision]["throughput_per_s"]
        return float(
            statistics.median(r["completed_rps"] / r.get("bare_throughput_per_s", start) for r in group)
        )

    def bare_beside(precision: str) -> float:
        group = [
            r["bare_throughput_per_s"] for r in runs_of(precision, "default") if "bare_throughput_per_s" in r
        ]
        return float(statistics.median(group)) if group else float("nan")

    def cell(config: str, load: float, key: str) -> float:
        return table[(config, load)][key] if (config, load) in table else float("nan")

    fp32, bf16 = bare["fp32"], bare.get("bf16", {})
    light = min(loads)
    against_best = p99_against_best(table, "default")  # load -> (default p99 / best's, best)
    control_against_best = p99_against_best(table, CONTROL)
    against_control: dict[float, float] = {}
    for load in loads:
        if (CONTROL, load) in table and ("default", load) in table:
            pair = (table[("default", load)]["e2e_p99_ms"], table[(CONTROL, load)]["e2e_p99_ms"])
            against_control[load] = max(pair) / min(pair)
    at_40 = min(
        (load for load in loads if ("default", load) in table),
        key=lambda load: abs(table[("default", load)]["offered_rps"] - 40),
    )
    light_wide, light_lane = light_widths(runs, light)
    summary = {
        "bare_fp32_throughput_per_s": fp32["throughput_per_s"],
        # What the loads are fractions of, where the run timed it (else the bare fp32 rate).
        "stack_capacity_per_s": (raw.get("capacity") or {}).get("completed_rps", float("nan")),
        "bare_bf16_throughput_per_s": bf16.get("throughput_per_s", float("nan")),
        "saturation_fp32_jobs_per_s": sat("fp32", "completed_rps"),
        "saturation_bf16_jobs_per_s": sat("bf16", "completed_rps"),
        "bare_fp32_beside_saturation_per_s": bare_beside("fp32"),
        "bare_bf16_beside_saturation_per_s": bare_beside("bf16"),
        "saturation_ratio": ratio("fp32"),
        "saturation_ratio_bf16": ratio("bf16"),
        "padding_efficiency": sat("fp32", "padding_efficiency"),
        "fifo_padding_efficiency": fp32["fifo_padding_efficiency"],
        "single_pass_ms": fp32["single_pass_ms"],
        "light_load": light,
        "light_load_p50_ms": table[("default", light)]["e2e_p50_ms"],
        "light_load_overhead_ms": table[("default", light)]["e2e_p50_ms"] - fp32["single_pass_ms"],
        # The same pass as light load runs it: after an idle gap of the light load's spacing.
        "single_pass_spaced_ms": fp32.get("single_pass_spaced_ms", float("nan")),
        "light_load_overhead_vs_spaced_ms": table[("default", light)]["e2e_p50_ms"]
        - fp32.get("single_pass_spaced_ms", float("nan")),
        "light_load_outside_model_p50_ms": table[("default", light)]["outside_model_p50_ms"],
        # Each light-load cell against the spaced passes timed just before and just after it
        # (the machine's speed moves over a run this long, and between spells of a few
        # seconds), the median over the default's cells; and against those before it alone.
        "light_load_overhead_vs_spaced_around_ms": light_against_reference(runs, light, "around"),
        "light_load_overhead_vs_spaced_before_ms": light_against_reference(runs, light, "before"),
        # Whether its lone passes ran on every thread (`MODEL_LANES`' width rule).
        "light_load_wide_passes": light_wide,
        "light_load_lane_passes": light_lane,
        "p99_near_40_rps_ms": table[("default", at_40)]["e2e_p99_ms"],
        "p99_near_40_rps_offered": table[("default", at_40)]["offered_rps"],
        "p99_at_90pct_ms": table[("default", max(loads))]["e2e_p99_ms"],
        "default_vs_best_p99_ratio": max((r for r, _ in against_best.values()), default=float("nan")),
        # The same for the default's identical copy: what the measurement gives a policy that
        # cannot differ from the default.
        "control_vs_best_p99_ratio": max((r for r, _ in control_against_best.values()), default=float("nan")),
        # The control: the larger p99 of the default and its identical copy over the smaller.
        "default_vs_itself_p99_ratio": max(against_control.values(), default=float("nan")),
        # The default policy with one model lane, against the same bare model.
        "saturation_one_lane_fp32_jobs_per_s": sat("fp32", "completed_rps", ONE_LANE),
        "saturation_one_lane_bf16_jobs_per_s": sat("bf16", "completed_rps", ONE_LANE),
        "saturation_ratio_one_lane": ratio("fp32", ONE_LANE),
        "saturation_ratio_one_lane_bf16": ratio("bf16", ONE_LANE),
        "light_load_p50_one_lane_ms": cell(ONE_LANE, light, "e2e_p50_ms"),
        "p99_near_40_rps_one_lane_ms": cell(ONE_LANE, at_40, "e2e_p99_ms"),
    }
    (out / "batching.json").write_text(strict_json.dumps(summary))
    (out / "batching-raw.json").write_text(strict_json.dumps(raw))
    plot(table, [c for c in configs if c != CONTROL], loads, out / "batching.png")

    lines = [
        "# Batching: end to end against the bare model",
        "",
        f"Measured {raw['when']} on {raw['machine']}; reproduce with `{command}`.",
        "Full-size DistilBERT shape with random weights (same compute as the real model), review-like",
        "sentences of 5-30 words; ingress and the batcher as processes on the local RabbitMQ and Redis;",
        "end-to-end latency = accepted -> result stored, from each job's trace. Medians of",
        f"{raw['repeats']} runs of {raw['duration_s']:.0f} s per cell. Raw numbers: `batching-raw.json`.",
        "",
        "## The limit, and how close the pipeline gets",
        "",
        "| | fp32 | bf16 |",
        "|---|---|---|",
        f"| bare model, batch 16 (FIFO batches), sequences/s | {fp32['throughput_per_s']:.1f} | "
        f"{shown(bf16.get('throughput_per_s', float('nan')))} |",
        "| the same, measured just before each saturation run (median) | "
        f"{shown(summary['bare_fp32_beside_saturation_per_s'])} | "
        f"{shown(summary['bare_bf16_beside_saturation_per_s'])} |",
        "| end to end at saturation (default policy), jobs/s | "
        f"{summary['saturation_fp32_jobs_per_s']:.1f} | "
        f"{shown(summary['saturation_bf16_jobs_per_s'])} |",
        "| ratio (median over the runs of each run against the bare model just before it) | "
        f"{summary['saturation_ratio']:.2f} | {shown(summary['saturation_ratio_bf16'], '.2f')} |",
        "| end to end at saturation, the default with one model lane, jobs/s | "
        f"{shown(summary['saturation_one_lane_fp32_jobs_per_s'])} | "
        f"{shown(summary['saturation_one_lane_bf16_jobs_per_s'])} |",
        "| its ratio, against the same bare model just before each run | "
        f"{shown(summary['saturation_ratio_one_lane'], '.2f')} | "
        f"{shown(summary['saturation_ratio_one_lane_bf16'], '.2f')} |",
        "",
        *([f"bf16 not measured: {raw['bf16_skipped']}.", ""] if raw.get("bf16_skipped") else []),
        f"Padding efficiency at saturation: **{summary['padding_efficiency']:.2f}** real/padded tokens "
        "with the",
        f"default policy; FIFO batches of 16 of the same sentences: {fp32['fifo_padding_efficiency']:.2f}.",
        f"One single-item forward pass: {fp32['single_pass_ms']:.1f} ms back to back, "
        f"{summary['single_pass_spaced_ms']:.1f} ms after",
        f"{fp32.get('light_load_gap_ms', float('nan')):.0f} ms idle (the mean gap between jobs at "
        f"{light:.0%} of the bare rate). End-to-end p50 at {light:.0%} load: "
        f"{summary['light_load_p50_ms']:.1f} ms: "
        f"{summary['light_load_overhead_ms']:+.1f} ms over the",
        f"back-to-back pass, {summary['light_load_overhead_vs_spaced_ms']:+.1f} ms over the spaced one; "
        + against_cells_pass(summary)
        + "time outside the forward pass, from each",
        f"job's trace: p50 {summary['light_load_outside_model_p50_ms']:.1f} ms."
        + (
            f" Its passes at {light:.0%} load: {wide:.0f} on every thread, "
            f"{summary['light_load_lane_passes']:.0f} on one lane's share."
            if not math.isnan(wide := summary["light_load_wide_passes"])
            else ""
        ),
        f"p99 at {summary['p99_near_40_rps_offered']:.0f} req/s (fp32, default): "
        f"**{summary['p99_near_40_rps_ms']:.0f} ms**. Default p99 / best fixed config p99, worst load: "
        f"{summary['default_vs_best_p99_ratio']:.2f} (its identical copy `{CONTROL}` against the best fixed "
        f"config: {summary['control_vs_best_p99_ratio']:.2f}); two runs of the default itself, worst load: "
        f"{summary['default_vs_itself_p99_ratio']:.2f} apart.",
        (
            f"With one model lane (`default 1 lane`): p99 at {summary['p99_near_40_rps_offered']:.0f} "
            f"req/s **{summary['p99_near_40_rps_one_lane_ms']:.0f} ms**, "
            f"p50 at {light:.0%} load {summary['light_load_p50_one_lane_ms']:.1f} ms."
            if any(r["config"] == ONE_LANE for r in raw["runs"])
            else f"`{ONE_LANE}` not measured in this run."
        ),
        "",
        "The default's p99 against the best fixed config's at each load, beside the control: its",
        "identical copy's p99 against the same config, and the default's and the copy's, the larger",
        "over the smaller. A ratio to the best fixed config within the control's is a difference this",
        "run cannot tell from noise. Until more jobs wait than fill one batch the default forms the",
        "batch greedy FIFO (`16:0`) forms, job for job, on inputs of review length",
        "(`tests/unit/test_collector.py`): at the loads where no backlog builds, the two differ only",
        "by the machine's moments.",
        "",
        "| load | best fixed config | default p99 / its p99 | the copy's p99 / its p99 "
        "| default and its copy, apart |",
        "|---|---|---|---|---|",
        *(
            f"| {load:.0%} | {against_best[load][1]} | {against_best[load][0]:.2f} | "
            f"{control_against_best.get(load, (float('nan'), ''))[0]:.2f} | "
            f"{against_control.get(load, float('nan')):.2f} |"
            for load in loads
            if load in against_best
        ),
        "",
        "## Configs side by side (fp32)",
        "",
        "Config `size:wait_ms`; the fixed configs batch FIFO; `default` is length-aware with a",
        "4096-token budget and `MAX_WAIT_MS=auto`; every config runs with the batcher's default two",
        "model lanes (a pass on one core each, or alone on both); `default 1 lane` is the default",
        "policy with one pass at a time on both cores; `default, again` is the default unchanged, the",
        "control.",
        "",
        *what_the_loads_are(
            raw.get("capacity"), fp32["throughput_per_s"], summary["bare_fp32_beside_saturation_per_s"], loads
        ),
        "| load | config | offered/s | done/s | p50 ms | p90 ms | p99 ms | compute/job ms "
        "| mean batch | padding |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for load in loads:
        for config in configs:
            row = table.get((config, load))
            if row:
                lines.append(
                    f"| {load:.0%} | {config} | {row['offered_rps']:.0f} | {row['completed_rps']:.1f} | "
                    f"{row['e2e_p50_ms']:.0f} | {row['e2e_p90_ms']:.0f} | {row['e2e_p99_ms']:.0f} | "
                    f"{row['compute_per_job_ms']:.1f} | {row['mean_batch_size']:.1f} | "
                    f"{row['padding_efficiency']:.2f} |"
                )
    lines += ["", "![latency against load per config](batching.png)", ""]
    (out / "batching.md").write_text("\n".join(lines))
    return summary


def plot(
    table: dict[tuple[str, float], dict[str, float]],
    configs: list[str],
    loads: list[float],
    path: Path,
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharex=True)
    for config in configs:
        xs = [table[(config, load)]["offered_rps"] for load in loads if (config, load) in table]
        for ax, key in zip(axes, ("e2e_p50_ms", "e2e_p99_ms"), strict=True):
            ax.plot(
                xs,
                [table[(config, load)][key] for load in loads if (config, load) in table],
                "o-",
                label=config,
            )
    for ax, title in zip(axes, ("p50", "p99"), strict=True):
        ax.set_title(f"end-to-end {title}")
        ax.set_xlabel("offered load, requests/s")
        ax.set_ylabel("ms")
        ax.set_yscale("log")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].legend(title="config")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


class Checkpoint:
    """What a run has measured so far, written after every step to `path`: a run that dies
    (a machine hiccup 40 minutes in) can go on with `--resume` instead of starting over. A
    step is one config's cells of one repeat, or one config's saturation runs at one precision.
    Removed once the report is written."""

    def __init__(self, path: Path, settings: dict[str, Any]) -> None:
        self.path, self.settings = path, settings
        self.bare: dict[str, Any] = {}
        self.capacity: dict[str, Any] = {}
        self.runs: list[dict[str, Any]] = []
        self.saturation: list[dict[str, Any]] = []
        self.steps: list[str] = []

    @classmethod
    def resume(cls, path: Path, settings: dict[str, Any]) -> Checkpoint:
        """The checkpoint at `path`, if it was made with the same `settings`; else a fresh one
        (nothing there) or SystemExit (other settings: resuming would mix two benchmarks)."""
        checkpoint = cls(path, settings)
        if not path.exists():
            return checkpoint
        saved = json.loads(path.read_text())
        if saved["settings"] != settings:
            raise SystemExit(f"--resume: {path} was made with {saved['settings']}, not {settings}")
        checkpoint.bare, checkpoint.runs = saved["bare"], saved["runs"]
        checkpoint.capacity = saved.get("capacity", {})
        checkpoint.saturation, checkpoint.steps = saved["saturation"], saved["steps"]
        return checkpoint

    def save(self) -> None:
        fields = ("settings", "bare", "capacity", "runs", "saturation", "steps")
        self.path.write_text(json.dumps({name: getattr(self, name) for name in fields}))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.batching", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--loads", type=float, nargs="+", default=[0.1, 0.3, 0.6, 0.9], help="fractions of capacity"
    )
    parser.add_argument(
        "--capacity",
        choices=["stack", "bare"],
        default="stack",
        help="what the loads are fractions of: the stack's, timed first (stack_capacity), or the "
        "bare model's batch-16 rate (the runs before 2026-12-07)",
    )
    parser.add_argument(
        "--rps", type=float, nargs="*", default=[40.0], help="absolute rates to add to --loads"
    )
    parser.add_argument("--configs", nargs="+", default=list(CONFIGS), choices=list(CONFIGS))
    parser.add_argument("--duration", type=float, default=15.0, help="seconds of open-loop load per run")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--saturation-jobs", type=int, default=1200, help="backlog size per saturation run")
    parser.add_argument(
        "--threads", type=int, default=0, help="torch threads for the bare model (0 = all cores)"
    )
    parser.add_argument("--no-bf16", action="store_true", help="skip the bf16 measurements")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks")
    parser.add_argument(
        "--resume", action="store_true", help="go on from OUT/batching-partial.json, left by a run that died"
    )
    parser.add_argument(
        "--render",
        type=Path,
        metavar="RAW",
        help="rebuild the report in OUT from a run's raw JSON instead of running",
    )
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.render:
        raw = json.loads(args.render.read_text())
        print(json.dumps(report(raw, args.out, raw.get("command", "python -m bench.batching")), indent=2))
        return
    threads = args.threads or os.cpu_count() or 1
    precisions = ["fp32"]
    if args.no_bf16:
        bf16_skipped = "--no-bf16"
    elif native_bf16():
        bf16_skipped = ""
        precisions.append("bf16")
    else:
        bf16_skipped = "this CPU has neither AVX512-BF16 nor AMX, so PRECISION=bf16 runs fp32 here"
        progress(f"bf16 not measured: {bf16_skipped}")
    settings = {
        name: getattr(args, name) for name in ("loads", "capacity", "rps", "configs", "duration", "repeats")
    }
    settings |= {"saturation_jobs": args.saturation_jobs, "threads": threads, "precisions": precisions}
    partial = args.out / "batching-partial.json"
    done = Checkpoint.resume(partial, settings) if args.resume else Checkpoint(partial, settings)
    if done.steps:
        progress(f"resuming from {partial}: {len(done.steps)} steps measured")

    progress(f"building (or reusing) the model at {MODEL_DIR}")
    model = build_model()
    for precision in [p for p in precisions if p not in done.bare]:
        progress(f"bare model, {precision}, {threads} threads")
        done.bare[precision] = bare_model(model, precision, threads, seconds=20.0, light_load=min(args.loads))
        progress(f"  {done.bare[precision]}")
        done.save()
    bare_per_s = done.bare["fp32"]["throughput_per_s"]
    if args.capacity == "stack" and not done.capacity:
        progress(
            f"the stack's capacity: the default, fp32, offered {OVERLOAD} x the bare rate, "
            f"{CAPACITY_S:.0f} s, the highest of {CAPACITY_READINGS} readings"
        )
        done.capacity = stack_capacity(model, bare_per_s)
        progress(f"  {done.capacity}")
        done.save()
    capacity = done.capacity["completed_rps"] if done.capacity else bare_per_s
    loads = sorted({*args.loads, *(round(rps / capacity, 3) for rps in args.rps)})

    @functools.cache
    def reference() -> tuple[Any, list[Any]]:  # loaded for the first cell measured, if any
        return warm_model(model, "fp32", threads)

    def spaced_passes(gap_s: float) -> list[float]:  # the light-load cells' own reference
        return timed_single_passes(*reference(), gap_s)[1]

    for repeat in range(args.repeats):
        for config in turns(args.configs, repeat):
            if (step := f"cells {config} #{repeat + 1}") not in done.steps:
                done.runs += measure_config(
                    config, model, "fp32", capacity, loads, repeat, args.duration, spaced_passes
                )
                done.steps.append(step)
                done.save()
    for precision in precisions:
        for config in [c for c in DEFAULTS if c in args.configs]:
            if (step := f"saturation {config} {precision}") not in done.steps:
                done.saturation += measure_saturation(
                    config, model, precision, args.saturation_jobs, args.repeats, threads
                )
                done.steps.append(step)
                done.save()
    raw = {
        "when": time.strftime("%Y-%m-%d %H:%M"),
        "machine": machine.describe(),
        "duration_s": args.duration,
        "repeats": args.repeats,
        "bare": done.bare,
        # What the loads are fractions of: the stack's capacity, or (absent) the bare fp32 rate.
        **({"capacity": done.capacity} if done.capacity else {}),
        "runs": done.runs,
        "saturation": done.saturation,
        "bf16_skipped": bf16_skipped,
    }
    raw["command"] = (
        "python -m bench.batching " + shlex.join(argv if argv is not None else sys.argv[1:])
    ).strip()
    summary = report(raw, args.out, raw["command"])
    partial.unlink(missing_ok=True)
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
