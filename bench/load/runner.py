"""Runs the load: worker processes that share one schedule, a progress bar, one report.

Open loop (`--rps` or a step/line schedule): request i is due at start + offsets[i]; worker w
sends the requests with i % workers == w at their due times, whatever earlier ones are doing,
and every latency counts from the due time (no coordinated omission). `-c` still caps the
requests in flight; a request that waits for a slot waits on the clock, so the wait shows.
Closed loop (no rate): `-c` requests back to back, as ghz does, latency from each send.

The processes share CLOCK_MONOTONIC (`time.perf_counter`), so one start instant serves all.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import math
import multiprocessing
import multiprocessing.connection
import os
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from google.protobuf import json_format

from batchline.lifecycle import freeze_startup_heap, run_service
from batchline.v1 import job_pb2
from bench.load import report, schedule
from bench.load.calldata import CallData
from bench.load.options import OptionError, Options
from bench.load.protocols import TERMINAL, GrpcCaller, Outcome, load_method, make_caller
from bench.load.report import Record

# Requests per second to plan per load-generator process. One process reached 2,200-2,500
# Submit/s over each protocol closed-loop against the embedded server on the 2-core development
# machine; 2,000 leaves it room to keep a schedule. --e2e follows every job too, so half.
PER_PROCESS_RPS = 2000
LAG_WARN_MS = 5.0
STOPPED = "grpc: the client connection is closing"
# A job not seen to its end within -t is looked up again after the run, this often, for as long
# as -t again (this long without -t).
LOOK_AGAIN_EVERY_S = 0.5
LOOK_AGAIN_S = 20.0
LOOK_AGAIN_AT_ONCE = 200  # reads in flight at once: a stalled pipeline leaves thousands


@dataclass(frozen=True)
class Plan:
    options: Options
    schema: bytes  # serialized FileDescriptorSet
    due: list[float]  # open loop: every request's due offset in seconds; closed loop: empty
    workers: int


def make_plan(options: Options, schema: bytes) -> Plan:
    """Check the method and data once, lay out the schedule, pick the process count."""
    method = load_method(schema, options.call)
    data = CallData(options.data, method.info)
    for number in range(len(data)):  # every message must fit the schema before the run
        try:
            json_format.ParseDict(data.message(number), method.input())
        except json_format.ParseError as exc:
            raise OptionError(f"-d/--data: not a {method.info.input_name}: {exc}") from exc
    if options.e2e and "job_id" not in method.output.DESCRIPTOR.fields_by_name:
        raise OptionError(f"--e2e: {method.info.output_name} carries no job_id to follow")
    due = schedule.offsets(options) if options.open_loop else []
    cpus = os.cpu_count() or 1
    if options.cpus:
        workers = options.cpus
    elif options.open_loop:
        per_process = PER_PROCESS_RPS / (2 if options.e2e else 1)
        workers = min(cpus, max(1, math.ceil(schedule.peak_rate(options, due) / per_process)))
    else:
        workers = min(cpus, max(1, math.ceil(options.concurrency / 64)))
    workers = min(workers, options.concurrency, len(due) or options.concurrency)
    return Plan(options, schema, due, max(1, workers))


@dataclass(frozen=True)
class Finished:
    """What a worker process sends back when its share is done."""

    records: list[Record]
    last_answer: float  # perf_counter of its last answer
    last_finish: float  # perf_counter of the last job it saw end (--e2e)
    timed_out: bool  # -z or -x cut it short
    cpu_s: float  # CPU time it used during the run


# --- one worker process ------------------------------------------------------------------------


class Worker:
    """One process's share of the run, on its own event loop and connections."""

    def __init__(self, index: int, plan: Plan, counters: Any) -> None:
        self.index, self.plan, self.options = index, plan, plan.options
        self.counters = counters  # [sent, answered, finished] per worker, this one writes its own
        self.method = load_method(plan.schema, self.options.call)
        self.data = CallData(self.options.data, self.method.info)
        c = self.options.concurrency
        self.share = max(1, c // plan.workers + (index < c % plan.workers))
        self.records: list[Record] = []
        self.follows: set[asyncio.Task[None]] = set()
        self.unseen: list[tuple[int, str]] = []  # (record index, job id): followed, its end not seen
        self.payloads: dict[int, bytes] = {}
        self.stopping = False
        self.last_answer = self.last_finish = 0.0
        self.wall_offset = time.time() - time.perf_counter()

    def payload(self, number: int) -> tuple[dict[str, Any], bytes]:
        message = self.data.message(number, str(self.index))
        key = number % len(self.data)
        if self.data.templated or key not in self.payloads:
            encoded = json_format.ParseDict(message, self.method.input()).SerializeToString()
            if self.data.templated:
                return message, encoded
            self.payloads[key] = encoded
        return message, self.payloads[key]

    def count(self, slot: int) -> None:
        self.counters[self.index * 3 + slot] += 1

    async def one(self, number: int, due: float, slots: asyncio.Semaphore | None) -> None:
        """Send request `number`, due at `due`; record it; with --e2e, follow its job."""
        message, payload = self.payload(number)
        sent = due
        try:
            if slots is not None:
                async with slots:
                    sent = time.perf_counter()
                    self.count(0)
                    outcome = await self.caller.call(message, payload)
            else:
                self.count(0)
                outcome = await self.caller.call(message, payload)
        except asyncio.CancelledError:
            if self.options.duration_stop == "ignore":
                return
            outcome = Outcome(1, STOPPED)
        answered = time.perf_counter()
        self.last_answer = max(self.last_answer, answered)
        self.count(1)
        record = Record(
            timestamp=self.wall_offset + due,
            latency_ns=int((answered - due) * 1e9),
            status=outcome.status,
            error=outcome.error,
            lag_ns=int((sent - due) * 1e9),
        )
        if self.options.e2e and outcome.code == 0 and outcome.response is not None:
            job_id = getattr(outcome.response, "job_id")  # noqa: B009 - a dynamic message
            task = asyncio.create_task(self.follow(record, job_id, due))
            self.follows.add(task)
            task.add_done_callback(self.follows.discard)
        else:
            self.records.append(record)

    async def follow(self, record: Record, job_id: str, due: float) -> None:
        try:  # bounded by -t like every call, however the job is followed
            async with asyncio.timeout(self.options.timeout or None):
                job, rewatches = await self.caller.follow(job_id, poll=self.options.e2e == "poll")
            record = record._replace(rewatches=rewatches)
        except Exception as exc:  # the call was accepted; the job is counted unfinished, and why
            job = None
            record = record._replace(follow_error=f"{type(exc).__name__}: {exc}"[:200])
            self.unseen.append((len(self.records), job_id))  # where its record goes, just below
        seen = time.perf_counter()
        if job is not None:
            self.last_finish = max(self.last_finish, seen)
            trace = job.trace
            status = {3: "DONE", 4: "FAILED", 5: "CANCELLED"}.get(job.status, "")
            record = record._replace(
                e2e_ns=int((seen - due) * 1e9),
                job_status=status,
                queue_wait_ms=trace.queue_wait_ms,
                inference_ms=trace.inference_ms,
                batch_size=trace.batch_size,
            )
        self.count(2)
        self.records.append(record)

    async def look_again(self) -> None:
        """Look up the jobs whose end was not seen within -t again, after the run, every
        LOOK_AGAIN_EVERY_S for as long as -t again: a job that finished late is told apart from
        one the system never finished."""
        waiting = dict(self.unseen)  # record index -> job id
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self.options.timeout or LOOK_AGAIN_S):
                while waiting:
                    indexes = list(waiting)
                    for at in range(0, len(indexes), LOOK_AGAIN_AT_ONCE):
                        chunk = indexes[at : at + LOOK_AGAIN_AT_ONCE]
                        jobs = await asyncio.gather(
                            *(self.caller.get_job(waiting[i]) for i in chunk), return_exceptions=True
                        )
                        for index, job in zip(chunk, jobs, strict=True):
                            if isinstance(job, job_pb2.Job) and job.status in TERMINAL:
                                status = job_pb2.JobStatus.Name(job.status).removeprefix("JOB_STATUS_")
                                self.records[index] = self.records[index]._replace(late_status=status)
                                del waiting[index]
                    if waiting:
                        await asyncio.sleep(LOOK_AGAIN_EVERY_S)

    async def run(self, conn: multiprocessing.connection.Connection) -> None:
        self.caller = make_caller(self.options, self.method, self.share)
        if isinstance(self.caller, GrpcCaller):
            try:
                async with asyncio.timeout(self.options.connect_timeout or None):
                    await self.caller.ready()
            except (TimeoutError, OSError) as exc:
                why = f": {exc}" if str(exc) else ""
                conn.send(("error", f"host: cannot connect to {self.options.host}{why}"))
                return
        conn.send(("ready", None))
        start: float = conn.recv()
        cpu_at_start = time.process_time()
        limit = self.options.duration or self.options.max_duration
        stop_at = start + limit if limit else math.inf
        if self.plan.due:
            sending = asyncio.create_task(self.open_loop(start))
        else:
            sending = asyncio.create_task(self.closed_loop(start, stop_at))
        done, _ = await asyncio.wait(
            {sending}, timeout=None if math.isinf(stop_at) else stop_at - time.perf_counter() + 0.05
        )
        if not done:
            timed_out = True
            if self.options.duration_stop == "wait":
                await sending
            else:
                self.stopping = True
                sending.cancel()
                await asyncio.gather(sending, return_exceptions=True)
        else:
            timed_out = False
        if self.follows:
            await asyncio.gather(*list(self.follows), return_exceptions=True)
        if self.unseen:
            await self.look_again()
        await self.caller.close()
        conn.send(
            (
                "done",
                Finished(
                    self.records,
                    self.last_answer,
                    self.last_finish,
                    timed_out,
                    time.process_time() - cpu_at_start,
                ),
            )
        )

    async def open_loop(self, start: float) -> None:
        slots = asyncio.Semaphore(self.share)
        inflight: set[asyncio.Task[None]] = set()
        workers = self.plan.workers
        try:
            for number in range(self.index, len(self.plan.due), workers):
                due = start + self.plan.due[number]
                wait = due - time.perf_counter()
                if wait > 0:
                    await asyncio.sleep(wait)
                task = asyncio.create_task(self.one(number, due, slots))
                inflight.add(task)
                task.add_done_callback(inflight.discard)
            await asyncio.gather(*list(inflight))
        except asyncio.CancelledError:
            for task in list(inflight):
                task.cancel()
            await asyncio.gather(*list(inflight), return_exceptions=True)
            raise

    async def closed_loop(self, start: float, stop_at: float) -> None:
        count = None if self.options.duration else self.options.total
        numbers: Iterator[int] = (
            itertools.count(self.index, self.plan.workers)
            if count is None
            else iter(range(self.index, count, self.plan.workers))
        )
        await asyncio.sleep(max(0.0, start - time.perf_counter()))

        async def back_to_back() -> None:
            for number in numbers:
                now = time.perf_counter()
                if self.stopping or now >= stop_at:
                    return
                await self.one(number, now, None)

        loops = [asyncio.create_task(back_to_back()) for _ in range(self.share)]
        try:
            await asyncio.gather(*loops)
        except asyncio.CancelledError:
            for loop in loops:
                loop.cancel()
            await asyncio.gather(*loops, return_exceptions=True)
            raise


def _worker_main(index: int, plan: Plan, counters: Any, conn: multiprocessing.connection.Connection) -> None:
    freeze_startup_heap()  # imports out of the collector's reach: a full collection is no latency spike
    with contextlib.suppress(KeyboardInterrupt):  # the parent reports the interruption
        run_service(Worker(index, plan, counters).run(conn))  # on uvloop, as the services run


# --- the parent --------------------------------------------------------------------------------


class Progress:
    """A bar on stderr: redrawn in place on a terminal, a line every 10 s in a log."""

    def __init__(self, plan: Plan, enabled: bool) -> None:
        self.plan, self.enabled = plan, enabled
        self.tty = sys.stderr.isatty()
        self.last_line = time.monotonic()
        options = plan.options
        self.expected = len(plan.due) or (0 if options.duration else options.total)
        self.limit = options.duration or options.max_duration

    def show(self, counters: Any, elapsed: float, final: bool = False) -> None:
        if not self.enabled or (not self.tty and not final and time.monotonic() - self.last_line < 10):
            return
        self.last_line = time.monotonic()
        sent = sum(counters[i] for i in range(0, len(counters), 3))
        answered = sum(counters[i] for i in range(1, len(counters), 3))
        finished = sum(counters[i] for i in range(2, len(counters), 3))
        if self.expected:
            fraction = answered / self.expected
        else:
            fraction = min(1.0, elapsed / self.limit) if self.limit else 0.0
        bar = "#" * int(30 * fraction)
        line = f"[{bar:<30}] {elapsed:5.1f}s  sent {sent}  answered {answered}"
        if self.plan.options.e2e:
            line += f"  finished {finished}"
        line += f"  ({answered / elapsed:.0f}/s)" if elapsed > 0 else ""
        print(("\r" if self.tty else "") + line, end="" if self.tty and not final else "\n", file=sys.stderr)


def run(plan: Plan) -> dict[str, Any]:
    """Run the plan across its worker processes; the ghz report."""
    options = plan.options
    context = multiprocessing.get_context("spawn")  # no inherited gRPC state in the children
    counters = context.RawArray("q", plan.workers * 3)
    pipes = [context.Pipe() for _ in range(plan.workers)]
    processes = [
        context.Process(target=_worker_main, args=(i, plan, counters, child), daemon=True)
        for i, (_, child) in enumerate(pipes)
    ]
    for process in processes:
        process.start()
    conns = [parent for parent, _ in pipes]
    progress = Progress(plan, options.progress)
    end_reason = "normal"
    try:
        for conn in conns:
            kind, detail = conn.recv()
            if kind == "error":
                raise OptionError(detail)
        start = time.perf_counter() + 0.2
        wall_start = time.time() + 0.2
        for conn in conns:
            conn.send(start)
        results: dict[int, Finished] = {}
        while len(results) < len(conns):
            waiting = [conn for i, conn in enumerate(conns) if i not in results]
            for ready in multiprocessing.connection.wait(waiting, timeout=0.5):
                index = conns.index(ready)  # type: ignore[arg-type]
                try:
                    kind, detail = conns[index].recv()
                except EOFError:
                    raise RuntimeError(f"load-generator process {index} died") from None
                results[index] = detail
            progress.show(counters, max(0.0, time.perf_counter() - start))
        progress.show(counters, time.perf_counter() - start, final=True)
    except KeyboardInterrupt:
        end_reason = "cancel"
        for process in processes:
            process.terminate()
        raise
    finally:
        for process in processes:
            process.join(5)
    finished = list(results.values())
    records = sorted((r for f in finished for r in f.records), key=lambda r: r.timestamp + r.latency_ns / 1e9)
    last_answer = max(f.last_answer for f in finished)
    last_finish = max(f.last_finish for f in finished)
    if options.duration or any(f.timed_out for f in finished):
        end_reason = "timeout"
    total_s = max(last_answer - start, 1e-9)
    extra: dict[str, Any] = {"workers": plan.workers, "generatorCpuS": sum(f.cpu_s for f in finished)}
    if options.e2e and last_finish:
        extra["finishS"] = last_finish - start
    built = report.build(records, options, total_s, end_reason, extra, date=wall_start)
    if options.e2e and last_finish:
        built["batchline"]["e2e"]["doneRps"] = built["batchline"]["e2e"]["done"] / (last_finish - start)
    lag = built["batchline"].get("sendLagMs", {})
    if lag and lag["p99"] > LAG_WARN_MS:
        print(
            f"warning: the load generator fell behind its schedule (send lag p99 {lag['p99']:.1f} ms "
            f"with {plan.workers} process(es)); latencies still count from the due times. "
            "Try --cpus, a lower rate, or fewer other programs on this machine.",
            file=sys.stderr,
        )
    return built
