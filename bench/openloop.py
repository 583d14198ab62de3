"""Open-loop load: request i is sent at start + i / rate, and every latency counts from that
scheduled time, so a slow server cannot hide its queueing (no coordinated omission)."""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from dataclasses import dataclass, field

import grpc

from batchline import codec
from batchline.v1 import inference_pb2, inference_pb2_grpc, stream_pb2, stream_pb2_grpc

TEXTS = [
    "I loved this film, the acting was superb and the story kept me hooked until the very end",
    "terrible service, we waited an hour and the food was cold",
    "not bad at all",
    "The hotel was clean, the staff friendly, and breakfast was better than expected.",
    "worst purchase I have made this year; it broke after two days and support never answered",
    "great value",
]


@dataclass
class Sample:
    send_lag_ms: float  # actual send - scheduled send
    accept_ms: float  # scheduled send -> Submit answered
    e2e_ms: float | None  # scheduled send -> DONE seen by the watcher
    server_ms: float | None  # accepted -> finished, from the job's own trace
    queue_wait_ms: float | None
    inference_ms: float | None
    batch_size: int | None
    error: str | None = None


@dataclass
class RunResult:
    rate: float
    duration_s: float
    samples: list[Sample] = field(default_factory=list)
    wall_s: float = 0.0

    def summary(self) -> dict[str, float]:
        ok = [s for s in self.samples if s.error is None and s.e2e_ms is not None]
        accept = [s.accept_ms for s in self.samples if s.error is None]
        e2e = [s.e2e_ms for s in ok if s.e2e_ms is not None]
        return {
            "offered_rps": self.rate,
            "sent": len(self.samples),
            "done": len(ok),
            "errors": len(self.samples) - len(ok),
            "completed_rps": len(ok) / self.wall_s if self.wall_s else 0.0,
            "accept_p50_ms": pct(accept, 50),
            "accept_p99_ms": pct(accept, 99),
            "e2e_p50_ms": pct(e2e, 50),
            "e2e_p90_ms": pct(e2e, 90),
            "e2e_p99_ms": pct(e2e, 99),
            "server_p50_ms": pct([s.server_ms for s in ok if s.server_ms is not None], 50),
            "queue_wait_p50_ms": pct([s.queue_wait_ms for s in ok if s.queue_wait_ms is not None], 50),
            "inference_p50_ms": pct([s.inference_ms for s in ok if s.inference_ms is not None], 50),
            "mean_batch_size": statistics.fmean([s.batch_size for s in ok if s.batch_size]) if ok else 0.0,
            "send_lag_p99_ms": pct([s.send_lag_ms for s in self.samples], 99),
        }


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


async def run(
    target: str, stream_target: str, rate: float, duration_s: float, progress: bool = True
) -> RunResult:
    """Send `rate` Submits per second for `duration_s`, watch each job to its end."""
    result = RunResult(rate, duration_s)
    total = int(rate * duration_s)
    async with grpc.aio.insecure_channel(target) as ic, grpc.aio.insecure_channel(stream_target) as sc:
        inference = inference_pb2_grpc.InferenceServiceStub(ic)
        watcher = stream_pb2_grpc.JobStreamServiceStub(sc)
        start = time.perf_counter() + 0.1

        async def one(i: int) -> None:
            scheduled = start + i / rate
            await asyncio.sleep(max(0.0, scheduled - time.perf_counter()))
            lag_ms = (time.perf_counter() - scheduled) * 1000
            try:
                answer = await inference.Submit(
                    inference_pb2.SubmitRequest(text=TEXTS[i % len(TEXTS)]), timeout=30
                )
                accept_ms = (time.perf_counter() - scheduled) * 1000
                job = None
                async for event in watcher.WatchJob(
                    stream_pb2.WatchJobRequest(job_id=answer.job_id), timeout=60
                ):
                    if event.HasField("job"):
                        job = event.job
                e2e_ms = (time.perf_counter() - scheduled) * 1000
            except grpc.aio.AioRpcError as exc:
                result.samples.append(Sample(lag_ms, 0, None, None, None, None, None, exc.code().name))
                return
            assert job is not None
            t = job.trace
            done = job.status == codec.DONE
            server = (codec.seconds(t.finished_at) - codec.seconds(t.accepted_at)) * 1000
            result.samples.append(
                Sample(
                    lag_ms,
                    accept_ms,
                    e2e_ms,
                    server,
                    t.queue_wait_ms,
                    t.inference_ms,
                    t.batch_size,
                    None if done else codec.status_name(job.status),
                )
            )

        tasks = [asyncio.create_task(one(i)) for i in range(total)]
        reporter = asyncio.create_task(_progress(result, total, start, duration_s)) if progress else None
        await asyncio.gather(*tasks)
        result.wall_s = time.perf_counter() - start
        if reporter:
            reporter.cancel()
            print(file=sys.stderr)
    return result


async def _progress(result: RunResult, total: int, start: float, duration_s: float) -> None:
    while True:
        done = len(result.samples)
        elapsed = max(0.0, time.perf_counter() - start)
        bar = "#" * int(30 * done / total) if total else ""
        print(
            f"\r  [{bar:<30}] {done}/{total} done, {elapsed:5.1f}/{duration_s:.0f}s", end="", file=sys.stderr
        )
        await asyncio.sleep(0.5)
