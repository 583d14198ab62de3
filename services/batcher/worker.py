"""The batch loop: collect deliveries, form a batch, one forward pass in a model lane, store
every result (and its event) in one round trip, then ack. The round trips overlap the model:
RUNNING is written while the pass computes, and a batch's results are stored while the next
batch computes; when a pass ends, the next batch is formed, admitted and handed to the model
first, and only then are the finished pass's results stored. With two lanes (batcher/lanes.py)
two passes compute at once, each on its share of the cores, or one alone on all of them.

At-least-once delivery with idempotent results: a job already finished is acked without
recompute, and the store refuses any write that would move a status backwards.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from dataclasses import dataclass

from google.protobuf.message import DecodeError
from google.rpc import code_pb2
from opentelemetry.trace import Span, SpanKind, StatusCode

from batcher import metrics
from batcher.collector import Load, Policy, next_batch
from batcher.forecast import ArrivalRate, ForwardTime
from batcher.lanes import Lane, Lanes, LoneWidths, WidthRatios, lane_count, runs_wide
from batcher.model import BatchOutput, Encoded, Model, ModelError, Prediction
from batcher.settings import BatcherSettings
from batchline import codec, tracing
from batchline.broker import Broker, Delivery
from batchline.errors import Unavailable
from batchline.store import BatchRecord, JobStore
from batchline.v1 import job_pb2

log = logging.getLogger(__name__)

RETRY_AFTER_STORE_FAILURE_S = 0.5
# The small passes timed both ways at warm-up for the width rule: batches of 1 and 4 copies of
# a sentence of a review's typical length (19 words, 21 tokens), each width PROBE_ROUNDS
# times. A pass here varies by 20% from one to the next on a shared machine; with 3 rounds the
# ratio at one job read 0.95, 1.14 and 1.23 in three warm-ups a minute apart.
PROBE_SIZES = (1, 4)
PROBE_ROUNDS = 8
PROBE_TEXT = "the food was good and the staff were kind but the wait was long so we may come back"


@dataclass
class Pending:
    """A delivered task waiting for its batch, tokenized once on arrival."""

    task: job_pb2.InferenceTask
    delivery: Delivery
    encoded: Encoded
    arrived_at: float  # monotonic seconds
    deadline: float | None  # monotonic seconds, from the task's wall-clock deadline

    @property
    def tokens(self) -> int:
        return self.encoded.tokens

    @property
    def priority(self) -> int:
        return self.task.priority


@dataclass
class Counters:
    batches: int = 0
    done: int = 0
    failed: int = 0
    skipped: int = 0  # already finished or cancelled: acked without compute
    poison: int = 0


@dataclass
class Computed:
    """A batch whose forward pass ran: what storing its results needs."""

    runnable: list[Pending]
    passes: list[Pass]
    batch_id: str
    started: float  # wall-clock seconds
    lane: Lane
    spans: dict[str, Span | None]


@dataclass
class Pass:
    """One forward pass over `items`: its output, or the error it raised."""

    items: list[Pending]
    output: BatchOutput | None
    error: Exception | None
    inference_ms: float


class Batcher:
    def __init__(self, settings: BatcherSettings, store: JobStore, broker: Broker, model: Model) -> None:
        self._settings = settings
        self._store = store
        self._broker = broker
        self._model = model
        self._policy = Policy(
            max_batch_size=settings.max_batch_size,
            max_wait_s=settings.max_wait_ms / 1000,
            adaptive=settings.adaptive_wait,
            max_batch_tokens=settings.max_batch_tokens,
            length_aware=settings.length_aware,
            group_min_saving=settings.group_min_saving,
            pool=settings.prefetch,
            aging_s=settings.priority_aging_ms / 1000,
        )
        self.arrivals = ArrivalRate()
        self._lanes = Lanes(lane_count(settings.model_lanes, model.threads), model.threads, model.use_threads)
        # Pass time on a lane's share of the threads (all of them with one lane), fitted as the
        # batcher runs: what the batch policy plans with.
        self.forward = ForwardTime(work=model.work)
        # Pass time on a lane's share and on every thread, from the warm-up's passes only: with
        # the ratios of small passes timed in pairs, they decide whether a lone pass runs wide.
        # Fitted live, the two drifted apart (only the width in use gets new passes) and
        # flipped the choice back and forth at a steady 8 jobs/s.
        self.warm_times = {wide: ForwardTime(work=model.work) for wide in (False, True)}
        self.width_ratios = WidthRatios()
        self.lone_widths = LoneWidths()  # the two times as lone passes in traffic show them
        self._waiting: list[Pending] = []
        self._wake = asyncio.Event()  # an arrival, a lane freed, or the stop
        self._lane_freed = asyncio.Event()  # a lane freed, or the stop: arrivals cannot help then
        # Set, and replaced, each time the loop hands a batch to the model or finds none to run:
        # a finished pass's results are stored after that, so they never delay the next pass.
        self._formed = asyncio.Event()
        self._forming = True  # until the loop stops: no next batch after that
        self._batches: set[asyncio.Task[None]] = set()
        self._crashed: BaseException | None = None  # an unexpected error in a batch's task
        self.counters = Counters()

    async def warm_up(self) -> None:
        """Run the model over the shapes traffic will use, in a model lane, before health turns
        SERVING; on all the threads and, with two lanes or more, on one lane's share. The
        timings seed the forward-time forecasts."""
        started = time.perf_counter()
        lanes = self._lanes
        for wide in (True, False) if lanes.count > 1 else (False,):
            lane = lanes.take(wide)
            try:
                timings = await lanes.run(lane, self._model.warm_up, self._settings.max_batch_size)
            finally:
                lanes.give_back(lane)
            fits = [self.warm_times[wide]] + ([] if wide else [self.forward])
            for size, longest, seconds in timings:
                for forward in fits:
                    forward.add(size, longest, size * longest, seconds, anchor=True)
            log.info(
                "model warm on %d threads: %d shapes; forward pass ~ %.1f ms + %.3f ms per token computed",
                lane.threads,
                len(timings),
                fits[0].fixed_s * 1000,
                fits[0].per_token_s * 1000,
            )
        if lanes.count > 1:
            await self._probe_widths()
        log.info("model warm in %.1f s; %d lanes", time.perf_counter() - started, lanes.count)

    async def _probe_widths(self) -> None:
        """Time the small passes a lone job or two meets at light load on both widths, in
        pairs: what running wide saves there (batcher/lanes.py, WidthRatios)."""
        [encoded] = self._model.encode([PROBE_TEXT])
        for size in [n for n in PROBE_SIZES if n <= self._settings.max_batch_size]:
            narrow, wide = await self._lanes.paired(
                self._model.predict, [encoded] * size, rounds=PROBE_ROUNDS
            )
            self.width_ratios.add(size, encoded.tokens, narrow, wide)
        log.info("one lane's pass over every thread's, small passes timed in pairs: %s", self.width_ratios)

    async def run(self, stop: asyncio.Event) -> None:
        """Consume and run batches until `stop`; then finish the passes in progress, store
        their results, and hand the jobs still waiting back to the queue."""
        async with asyncio.TaskGroup() as tasks:
            consumer = tasks.create_task(self._consume())
            tasks.create_task(self._wake_on(stop))
            try:
                await self._loop(stop)
                self._forming = False
                self._form()  # release the stores waiting for a next batch
                await asyncio.gather(*self._batches)
            finally:
                consumer.cancel()
        for pending in self._waiting:
            await pending.delivery.requeue()
        self._waiting.clear()
        self._lanes.shutdown()
        c = self.counters
        log.info(
            "batcher stopped: %d batches, %d done, %d failed, %d skipped, %d poison",
            c.batches,
            c.done,
            c.failed,
            c.skipped,
            c.poison,
        )

    async def _wake_on(self, stop: asyncio.Event) -> None:
        await stop.wait()
        self._wake.set()
        self._lane_freed.set()

    async def _consume(self) -> None:
        async for delivery in self._broker.consume(self._settings.prefetch):
            try:
                task = job_pb2.InferenceTask.FromString(delivery.body)
                if not task.job_id or not task.text:
                    raise DecodeError("job_id and text are required")
            except DecodeError as exc:
                await self._poison(delivery, exc)
                continue
            now = time.monotonic()
            deadline = None
            if task.HasField("deadline"):
                deadline = now + (codec.seconds(task.deadline) - time.time())
            [encoded] = self._model.encode([task.text])
            if delivery.attempt > 1:
                metrics.REDELIVERIES.inc()
            self._waiting.append(Pending(task, delivery, encoded, now, deadline))
            self.arrivals.add(now)
            self._wake.set()

    async def _poison(self, delivery: Delivery, exc: Exception) -> None:
        """An undecodable message: dead-letter it, and fail its job if we can name it."""
        self.counters.poison += 1
        metrics.JOBS.labels("poison").inc()
        log.warning(
            "undecodable task rejected to the dead-letter queue: %s",
            exc,
            extra={"job_id": delivery.message_id},
        )
        if delivery.message_id:
            job = job_pb2.Job(job_id=delivery.message_id, status=codec.FAILED)
            job.error.code = code_pb2.INVALID_ARGUMENT
            job.error.message = f"the task message could not be decoded: {exc}"
            job.trace.finished_at.CopyFrom(codec.now_ts())
            try:
                await self._store.transition(job)
            except Unavailable:
                log.warning("could not mark poison job failed", extra={"job_id": delivery.message_id})
        await delivery.reject()

    async def _loop(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            if self._crashed is not None:
                raise self._crashed
            if not self._lanes.free:
                self._lane_freed.clear()  # before any await: a lane freed from here on ends the wait
                self._form()  # nothing can be handed to the model: finished passes may store
                await self._lane_freed.wait()
                continue
            now = time.monotonic()
            load = Load(self.arrivals.rate(now), self.forward)
            decision = next_batch(self._waiting, now, self._policy, load)
            chosen, dropped = set(decision.take), set(decision.expired)
            batch = [p for i, p in enumerate(self._waiting) if i in chosen]
            expired = [p for i, p in enumerate(self._waiting) if i in dropped]
            self._waiting = [p for i, p in enumerate(self._waiting) if i not in chosen | dropped]
            if expired:
                await self._expire(expired)
            if not batch:
                self._wake.clear()  # before any await: an arrival from here on ends the wait
                self._form()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(decision.wait_s):  # wait_for would make a task per wait
                        await self._wake.wait()
                continue
            wide, expected_s = self._width(batch, now, load.arrival_rate)
            lane = self._lanes.take(wide)
            handed = asyncio.get_running_loop().create_future()
            running = self._run_batch(batch, decision.close_reason, lane, handed, expected_s)
            task = asyncio.create_task(running)
            self._batches.add(task)
            task.add_done_callback(self._batch_done)
            await handed  # admitted and computing (or nothing in it could run)
            self._form()

    def _width(self, batch: list[Pending], now: float, arrival_rate: float) -> tuple[bool, float | None]:
        """Whether the pass runs wide, and for a pass that would run alone (every lane free,
        nothing else waiting) the time the warm-up expects of it on that width. A lone pass
        takes all the threads when that pays for the arrivals it makes wait, as the recent
        arrivals show, on each width's time as lone passes in traffic show it (`LoneWidths`)."""
        if self._lanes.count == 1 or not self._lanes.idle or self._waiting:
            return False, None
        shape = (len(batch), max(p.tokens for p in batch), sum(p.tokens for p in batch))
        wide_s = self.warm_times[True](*shape)
        ratio = self.width_ratios(len(batch), shape[1])
        narrow_s = wide_s * ratio if ratio is not None else self.warm_times[False](*shape)
        expected = {True: wide_s, False: narrow_s}
        narrow_s, wide_s = (expected[w] * self.lone_widths.scale(w) for w in (False, True))
        wide = self.lone_widths.choose(
            runs_wide(len(batch), narrow_s, wide_s, arrival_rate, self.arrivals.held_up(now, wide_s))
        )
        return wide, expected[wide]

    def _batch_done(self, task: asyncio.Task[None]) -> None:
        """A batch's task ended; if it failed in a way the batcher does not handle, the loop
        raises it, as it would have had it run the batch itself."""
        self._batches.discard(task)
        if not task.cancelled() and task.exception() is not None:
            self._crashed = task.exception()
            self._wake.set()
            self._lane_freed.set()

    def _form(self) -> None:
        self._formed.set()
        self._formed = asyncio.Event()

    async def _run_batch(
        self,
        batch: list[Pending],
        close_reason: int,
        lane: Lane,
        handed: asyncio.Future[None],
        expected_s: float | None = None,
    ) -> None:
        """Admit, then start the forward pass at once: RUNNING is written while the model
        computes. When the pass ends its lane is free; the results are stored (and acked) once
        the loop has handed the model its next batch, or found none: stored first (their
        records, Redis's script), they held up the next batch's status read, 2.5 of the 4.3 ms
        between two bf16 passes at saturation here. A store outage sends the batch back to the
        queue and holds the lane a moment before it is tried again."""
        try:
            computed = await self._compute(batch, lane, handed, expected_s)
        except Unavailable as exc:
            if not handed.done():
                handed.set_result(None)  # the loop may use the other lanes meanwhile
            log.warning("store unavailable (%s); %d jobs go back to the queue", exc, len(batch))
            for pending in batch:
                await pending.delivery.requeue()
            await asyncio.sleep(RETRY_AFTER_STORE_FAILURE_S)
            computed = None
        finally:
            if not handed.done():
                handed.set_result(None)
            formed = self._formed
            self._lanes.give_back(lane)
            self._wake.set()
            self._lane_freed.set()
        if computed is not None:
            if self._forming:
                await formed.wait()
            await self._store_results(computed, close_reason)

    async def _compute(
        self, batch: list[Pending], lane: Lane, handed: asyncio.Future[None], expected_s: float | None = None
    ) -> Computed | None:
        runnable = await self._admit(batch)
        if not runnable:
            return None
        batch_id = uuid.uuid4().hex[:16]
        started = time.time()
        # One span per job, in the job's own trace (from the message headers): its forward pass.
        spans = {
            p.task.job_id: tracing.start_span(
                "inference",
                SpanKind.CONSUMER,
                parent=p.delivery.headers,
                start_s=started,
                attributes={"batchline.job_id": p.task.job_id, "batchline.batch_id": batch_id},
            )
            for p in runnable
        }
        running = [self._running(p, batch_id, len(runnable), started) for p in runnable]
        _mark(running, spans)
        computing = asyncio.create_task(self._infer(runnable, lane))
        handed.set_result(None)
        try:
            await self._store.transition_many(running)  # forward-only: never lands after DONE
        except Unavailable:
            await asyncio.gather(computing, return_exceptions=True)  # a thread cannot be stopped
            for span in spans.values():
                if span is not None:
                    span.end()
            raise
        passes = await computing
        # A lone pass's time against the warm-up's, if it ran what was planned, in one pass.
        if expected_s is not None and len(runnable) == len(batch) and len(passes) == 1:
            self.lone_widths.add(lane.wide, passes[0].inference_ms / 1000, expected_s)
        return Computed(runnable, passes, batch_id, started, lane, spans)

    async def _store_results(self, batch: Computed, close_reason: int) -> None:
        runnable, passes, batch_id, started, spans = (
            batch.runnable,
            batch.passes,
            batch.batch_id,
            batch.started,
            batch.spans,
        )
        finished: list[job_pb2.Job] = []
        real = padded = 0
        inference_ms = 0.0
        for n, done in enumerate(passes):
            pass_id = batch_id if len(passes) == 1 else f"{batch_id}.{n}"
            inference_ms += done.inference_ms
            if done.output is None:
                finished += [self._failed(p, pass_id, started, done) for p in done.items]
                continue
            real, padded = real + done.output.real_tokens, padded + done.output.padded_tokens
            finished += [
                self._done(p, pass_id, started, done, prediction, close_reason)
                for p, prediction in zip(done.items, done.output.predictions, strict=True)
            ]
        computed = sum(len(d.items) for d in passes if d.output is not None)
        waited_ms = sum(
            max(0.0, started - codec.seconds(p.task.accepted_at)) * 1000
            for d in passes
            if d.output is not None
            for p in d.items
        )
        record = BatchRecord(
            worker=self._settings.worker,
            size=computed,
            real_tokens=real,
            padded_tokens=padded,
            inference_ms=inference_ms,
            close_reason=job_pb2.BatchCloseReason.Name(close_reason),  # type: ignore[arg-type]
            queue_wait_ms=waited_ms,
        )
        _mark(finished, spans)
        try:
            await self._store.transition_many(finished, record if computed else None)
        except Unavailable as exc:
            log.warning("store unavailable (%s); %d computed jobs go back to the queue", exc, len(runnable))
            for pending in runnable:
                await pending.delivery.requeue()
            return
        finally:
            for job in finished:
                _end(spans[job.job_id], job)

        # Ack only after the results are stored; poison goes to the dead-letter queue.
        for done in passes:
            for pending in done.items:
                await (pending.delivery.ack() if done.output is not None else pending.delivery.reject())
        self.counters.batches += 1
        self.counters.done += computed
        self.counters.failed += len(runnable) - computed
        self._observe(record, finished, [started - codec.seconds(p.task.accepted_at) for p in runnable])
        log.info(
            "batch done",
            extra={
                "batch_id": batch_id,
                "size": len(runnable),
                "passes": len(passes),
                "inference_ms": round(inference_ms, 2),
                "real_tokens": real,
                "padded_tokens": padded,
                "close_reason": record.close_reason,
                "threads": batch.lane.threads,
            },
        )
        metrics.PASSES.labels("wide" if batch.lane.wide else "lane").inc(len(passes))

    async def _expire(self, expired: list[Pending]) -> None:
        """Past their deadline before they could start: FAILED DEADLINE_EXCEEDED, never computed."""
        try:
            await self._store.transition_many([self._expired(p) for p in expired])
        except Unavailable as exc:
            log.warning("store unavailable (%s); %d expired jobs go back to the queue", exc, len(expired))
            for pending in expired:
                await pending.delivery.requeue()
            return
        for pending in expired:
            await pending.delivery.ack()
        self.counters.failed += len(expired)
        metrics.JOBS.labels("expired").inc(len(expired))

    @staticmethod
    def _observe(record: BatchRecord, finished: list[job_pb2.Job], waits_s: list[float]) -> None:
        size = len(finished)
        metrics.BATCHES.labels(record.close_reason.removeprefix("BATCH_CLOSE_REASON_").lower()).inc()
        metrics.BATCH_SIZE.observe(size)
        metrics.BATCH_PADDED_TOKENS.observe(record.padded_tokens)
        metrics.REAL_TOKENS.inc(record.real_tokens)
        metrics.PADDED_TOKENS.inc(record.padded_tokens)
        metrics.INFERENCE_SECONDS.observe(record.inference_ms / 1000)
        for wait in waits_s:
            metrics.QUEUE_WAIT_SECONDS.observe(max(0.0, wait))
        metrics.JOBS.labels("done").inc(record.size)
        metrics.JOBS.labels("failed").inc(size - record.size)
        for job in finished:
            if job.status == codec.DONE:
                trace = job.trace
                metrics.JOB_SECONDS.observe(
                    max(0.0, codec.seconds(trace.finished_at) - codec.seconds(trace.accepted_at))
                )

    async def _admit(self, batch: list[Pending]) -> list[Pending]:
        """Drop what must not run: finished (a redelivery), cancelled, unknown, or past its deadline."""
        statuses = await self._store.statuses([p.task.job_id for p in batch])
        now = time.time()
        runnable, expired = [], []
        for pending, status in zip(batch, statuses, strict=True):
            if status is None or codec.is_terminal(status):
                self.counters.skipped += 1
                metrics.JOBS.labels("skipped").inc()
                await pending.delivery.ack()
            elif pending.task.HasField("deadline") and codec.seconds(pending.task.deadline) <= now:
                expired.append(pending)
            else:
                runnable.append(pending)
        if expired:  # the policy dropped the expired ones; these ran out during the status read
            await self._expire(expired)
        return runnable

    async def _infer(self, items: list[Pending], lane: Lane) -> list[Pass]:
        """One forward pass; if it fails, retry each half, so only the bad input fails."""
        batch = [p.encoded for p in items]
        started = time.perf_counter()
        try:
            output = await self._lanes.run(lane, self._model.predict, batch)
            if len(output.predictions) != len(batch):
                raise ModelError(f"model returned {len(output.predictions)} results for {len(batch)} inputs")
        except Exception as exc:
            elapsed_ms = (time.perf_counter() - started) * 1000
            if len(items) == 1:
                log.warning("forward pass failed: %s", exc, extra={"job_id": items[0].task.job_id})
                return [Pass(items, None, exc, elapsed_ms)]
            half = len(items) // 2
            return [*await self._infer(items[:half], lane), *await self._infer(items[half:], lane)]
        seconds = time.perf_counter() - started
        if not lane.wide:  # what the policy plans with: a lane's pass
            self.forward.add(len(batch), max(e.tokens for e in batch), output.real_tokens, seconds)
        return [Pass(items, output, None, seconds * 1000)]

    # --- records -------------------------------------------------------------------------------

    def _base(self, pending: Pending, status: int) -> job_pb2.Job:
        job = codec.queued_job(pending.task)
        job.status = status  # type: ignore[assignment]
        job.trace.worker = self._settings.worker
        job.trace.attempt = pending.delivery.attempt
        return job

    def _running(self, pending: Pending, batch_id: str, size: int, started: float) -> job_pb2.Job:
        job = self._base(pending, codec.RUNNING)
        _stamp_start(job, started)
        job.trace.batch_id = batch_id
        job.trace.batch_size = size
        return job

    def _done(
        self,
        pending: Pending,
        pass_id: str,
        started: float,
        done: Pass,
        prediction: Prediction,
        close_reason: int,
    ) -> job_pb2.Job:
        assert done.output is not None
        job = self._base(pending, codec.DONE)
        job.model = self._model.name
        job.result.label = prediction.label
        job.result.score = prediction.score
        job.result.input_tokens = prediction.input_tokens
        job.result.truncated = prediction.truncated
        for label, score in prediction.scores:
            job.result.scores.add(label=label, score=score)
        _stamp_start(job, started)
        trace = job.trace
        trace.finished_at.CopyFrom(codec.now_ts())
        trace.inference_ms = done.inference_ms
        trace.batch_id = pass_id
        trace.batch_size = len(done.items)
        trace.batch_real_tokens = done.output.real_tokens
        trace.batch_padded_tokens = done.output.padded_tokens
        trace.close_reason = close_reason  # type: ignore[assignment]
        return job

    def _failed(self, pending: Pending, pass_id: str, started: float, done: Pass) -> job_pb2.Job:
        job = self._base(pending, codec.FAILED)
        job.model = self._model.name
        job.error.code = code_pb2.INTERNAL
        job.error.message = f"the model failed on this input: {type(done.error).__name__}: {done.error}"
        _stamp_start(job, started)
        job.trace.finished_at.CopyFrom(codec.now_ts())
        job.trace.inference_ms = done.inference_ms
        job.trace.batch_id = pass_id
        job.trace.batch_size = len(done.items)
        return job

    def _expired(self, pending: Pending) -> job_pb2.Job:
        job = self._base(pending, codec.FAILED)
        job.error.code = code_pb2.DEADLINE_EXCEEDED
        job.error.message = "the job's deadline passed before it could start; it was not computed"
        job.trace.finished_at.CopyFrom(codec.now_ts())
        return job


def _mark(jobs: list[job_pb2.Job], spans: dict[str, Span | None]) -> None:
    """Each record names the span that wrote it, so the stream (and a client) can continue its trace."""
    for job in jobs:
        if (span := spans[job.job_id]) is not None:
            job.trace.traceparent = tracing.traceparent(span)


def _end(span: Span | None, job: job_pb2.Job) -> None:
    if span is None:
        return
    span.set_attribute("batchline.batch_size", job.trace.batch_size)
    span.set_attribute("batchline.queue_wait_ms", job.trace.queue_wait_ms)
    span.set_attribute("batchline.status", codec.status_name(job.status))
    if job.status != codec.DONE:
        span.set_status(StatusCode.ERROR, job.error.message)
    span.end()


def _stamp_start(job: job_pb2.Job, started: float) -> None:
    job.trace.started_at.CopyFrom(codec.ts_from_seconds(started))
    job.trace.queue_wait_ms = max(0.0, (started - codec.seconds(job.trace.accepted_at)) * 1000)
