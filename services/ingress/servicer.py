"""InferenceService: Submit, SubmitBatch, GetJob, CancelJob, GetStats."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager

import grpc
from google.rpc import code_pb2
from opentelemetry.trace import Span, SpanKind

from batchline import access, codec, tracing
from batchline.broker import Broker
from batchline.errors import BatchlineError, NotFound, QueueFull, Unavailable
from batchline.store import JobStore
from batchline.v1 import inference_pb2, inference_pb2_grpc, job_pb2
from ingress import metrics, validation
from ingress.backlog import Backlog
from ingress.group import GroupCommit
from ingress.settings import IngressSettings

log = logging.getLogger(__name__)

Context = grpc.aio.ServicerContext[object, object]


class InferenceServicer(inference_pb2_grpc.InferenceServiceServicer):
    """Write before publish: every job is stored QUEUED before its task reaches RabbitMQ."""

    def __init__(self, settings: IngressSettings, store: JobStore, broker: Broker, backlog: Backlog) -> None:
        self._settings = settings
        self._store = store
        self._broker = broker
        self._backlog = backlog
        self._groups = GroupCommit(store, broker)
        self._inflight = 0
        self._full_until = 0.0  # monotonic time until which the queue counts as full
        self._seen_full = False  # RabbitMQ's last answer to a publish was that the queue is full
        self._asking = False  # a call is asking RabbitMQ again after that answer

    def _retry_after_s(self) -> float:
        """The time the queue takes to free a tenth of its places at the measured drain rate, so
        refused clients come back as room is made instead of all at once."""
        return self._backlog.retry_after_s(max(1, self._settings.broker.max_length // 10))

    @contextmanager
    def _admit(self) -> Iterator[None]:
        """Take the call, or refuse it at once: past the limit of calls in progress, and while the
        queue counts as full. The queue counts as full for queue_full_hold_s after RabbitMQ
        refused a publish, then while the one call let through asks RabbitMQ again. The hold runs
        from RabbitMQ's refusal only, so the queue is asked again soon after; the calls that come
        while it is asked do not wait on the answer. A broker slow to answer would otherwise
        hold every one of them: with RabbitMQ stalled for 0.5 s during a flood of a full queue,
        67-68 of the 100 Submits sent in the stall waited over 50 ms for their refusal, up to
        376-388 ms; this way one did, the call asking (docs/benchmarks/slow-broker/results.txt,
        tests/faults/test_slow_broker.py)."""
        if self._inflight >= self._settings.max_inflight:
            raise QueueFull("ingress is at its in-flight limit", retry_after_s=0.1)
        if time.monotonic() < self._full_until or self._asking:
            refused = QueueFull(f"queue {self._settings.broker.queue} is full")
            refused.retry_after_s = self._retry_after_s()
            raise refused
        asking = self._asking = self._seen_full
        self._inflight += 1
        try:
            yield
        finally:
            self._inflight -= 1
            if asking:
                self._asking = False

    def _task(self, text: str, options: job_pb2.SubmitOptions) -> job_pb2.InferenceTask:
        now = time.time()
        task = job_pb2.InferenceTask(
            job_id=codec.new_job_id(), text=text, priority=options.priority, owner=access.owner()
        )
        task.accepted_at.CopyFrom(codec.ts_from_seconds(now))
        if options.HasField("timeout"):
            task.deadline.CopyFrom(codec.ts_from_seconds(now + options.timeout.ToNanoseconds() / 1e9))
        return task

    async def Submit(
        self, request: inference_pb2.SubmitRequest, context: Context
    ) -> inference_pb2.SubmitResponse:
        with metrics.measured("Submit") as outcome, _span("Submit", context):
            return await self._submit(request, outcome)

    async def _submit(
        self, request: inference_pb2.SubmitRequest, outcome: metrics.Outcome
    ) -> inference_pb2.SubmitResponse:
        text = validation.clean_text(request.text, "text", self._settings.max_text_chars)
        validation.check_options(request.options)
        validation.check_idempotency_key(request.idempotency_key)
        idempotency_key = access.scoped(request.idempotency_key)
        with self._admit():
            task = self._task(text, request.options)
            if idempotency_key:
                job, created = await self._store.create(_queued(task), idempotency_key)
                if not created:
                    log.debug("deduplicated submit", extra={"job_id": job.job_id})
                    outcome.name = "deduplicated"
                    if job.status == codec.QUEUED:
                        await self._ensure_published(job, text)
                    return _answer(job, deduplicated=True)
                [error] = await self._broker.publish([task])
            else:  # nothing to deduplicate against: stored and published with its neighbours
                job = _queued(task)
                error = await self._groups.submit(task, job)
            if error is not None:
                await self._forget([task.job_id], idempotency_key)
                raise self._refusal(error)
            self._seen_full = False
            if idempotency_key:  # only a retry with the key can find this job again
                await self._store.mark_published(task.job_id)
            log.debug("job accepted", extra={"job_id": job.job_id})
            return _answer(job)

    def _refusal(self, error: BatchlineError) -> BatchlineError:
        """What a failed publish answers. A full queue's refusal starts the hold and carries a
        retry delay from the measured drain rate."""
        if isinstance(error, QueueFull):
            self._full_until = time.monotonic() + self._settings.queue_full_hold_s
            self._seen_full = self._settings.queue_full_hold_s > 0  # 0: every call asks
            error.retry_after_s = self._retry_after_s()
        return error

    async def _ensure_published(self, job: job_pb2.Job, text: str) -> None:
        """An idempotent retry found its job QUEUED. If the call that stored it never published
        it (its ingress died in between), no batcher will ever see it: once that call's publish
        could no longer be running, publish the task again."""
        lease_ends = codec.seconds(job.trace.accepted_at) + self._settings.broker.publish_timeout_s + 0.5
        while not await self._store.published(job.job_id):
            if time.time() >= lease_ends:
                await self._republish(job, text)
                await self._store.mark_published(job.job_id)
                return
            await asyncio.sleep(0.05)

    async def _republish(self, job: job_pb2.Job, text: str) -> None:
        """Publish a queued job's task again on an idempotent retry: an ingress that died between
        storing a job and publishing it left a record no batcher would ever see. A second copy of
        a task that was published costs a little work and changes nothing: a batcher acks a
        finished job without computing it, and a result is written and announced once."""
        task = job_pb2.InferenceTask(job_id=job.job_id, text=text, priority=job.priority, owner=job.owner)
        task.accepted_at.CopyFrom(job.trace.accepted_at)
        if job.HasField("deadline"):
            task.deadline.CopyFrom(job.deadline)
        [error] = await self._broker.publish([task])
        if error is not None:
            raise error
        log.info("re-published a queued job on an idempotent retry", extra={"job_id": job.job_id})

    async def SubmitBatch(
        self, request: inference_pb2.SubmitBatchRequest, context: Context
    ) -> inference_pb2.SubmitBatchResponse:
        with metrics.measured("SubmitBatch") as outcome, _span("SubmitBatch", context):
            outcome.jobs = max(1, len(request.texts))
            return await self._submit_batch(request)

    async def _submit_batch(
        self, request: inference_pb2.SubmitBatchRequest
    ) -> inference_pb2.SubmitBatchResponse:
        texts = validation.clean_texts(
            list(request.texts), self._settings.max_batch_items, self._settings.max_text_chars
        )
        validation.check_options(request.options)
        with self._admit():
            tasks = [self._task(text, request.options) for text in texts]
            jobs = [_queued(task) for task in tasks]
            await self._store.create_many(jobs)
            errors = await self._broker.publish(tasks, whole=True)
            failed = [e for e in errors if e is not None]
            if failed:
                await self._undo_batch(jobs, errors)
                raise self._refusal(next((e for e in failed if isinstance(e, QueueFull)), failed[0]))
            self._seen_full = False
            log.debug("batch accepted", extra={"jobs": len(jobs)})
            return inference_pb2.SubmitBatchResponse(jobs=[_answer(job) for job in jobs])

    async def _undo_batch(self, jobs: Sequence[job_pb2.Job], errors: Sequence[BatchlineError | None]) -> None:
        """All-or-nothing for the caller: published jobs are cancelled (never computed),
        the others forgotten."""
        published = [job for job, e in zip(jobs, errors, strict=True) if e is None]
        refused = [job.job_id for job, e in zip(jobs, errors, strict=True) if e is not None]
        try:
            await self._store.transition_many(
                [_cancelled(job, "the rest of its SubmitBatch call was refused") for job in published]
            )
        except Unavailable:
            log.warning("could not cancel %d jobs of a refused batch", len(published))
        await self._forget(refused, "")

    async def _forget(self, job_ids: Sequence[str], idempotency_key: str) -> None:
        """Remove the QUEUED records of tasks RabbitMQ never accepted: none is left dangling."""
        for job_id in job_ids:
            try:
                await self._store.discard(job_id, idempotency_key)
            except Unavailable:
                log.warning("could not remove the record of unpublished job", extra={"job_id": job_id})

    async def GetJob(
        self, request: inference_pb2.GetJobRequest, context: Context
    ) -> inference_pb2.GetJobResponse:
        job = await self._existing(request.job_id)
        response = inference_pb2.GetJobResponse(job=job)
        if job.status == codec.QUEUED and (position := await self._store.queue_position(job.job_id)):
            response.queue_position = position
            if (eta := self._backlog.eta_s(position)) is not None:
                response.eta.FromNanoseconds(int(eta * 1e9))
        return response

    async def CancelJob(
        self, request: inference_pb2.CancelJobRequest, context: Context
    ) -> inference_pb2.CancelJobResponse:
        job = await self._existing(request.job_id)
        if codec.is_terminal(job.status):
            return inference_pb2.CancelJobResponse(job=job)
        cancelled = _cancelled(job, "cancelled by the client")
        if await self._store.transition(cancelled):
            metrics.CANCELLED.inc()
            log.info("job cancelled", extra={"job_id": job.job_id})
            return inference_pb2.CancelJobResponse(job=cancelled)
        # It finished while we looked: answer with what it finished as.
        return inference_pb2.CancelJobResponse(job=await self._existing(request.job_id))

    async def GetStats(
        self, request: inference_pb2.GetStatsRequest, context: Context
    ) -> inference_pb2.GetStatsResponse:
        started = time.perf_counter()
        snapshot = await self._store.stats()
        queue_depth, dead_depth = await self._broker.depth()
        response = inference_pb2.GetStatsResponse(
            finished=snapshot.finished,
            batch_size_histogram=snapshot.batch_sizes,
            close_reasons=snapshot.close_reasons,
            queue_depth=queue_depth,
            dead_letter_depth=dead_depth,
        )
        real = padded = 0
        inference_ms = queue_wait_ms = 0.0
        for name, c in snapshot.workers.items():
            response.workers.add(
                worker=name,
                batches=c.batches,
                jobs=c.jobs,
                real_tokens=c.real_tokens,
                padded_tokens=c.padded_tokens,
                inference_ms=c.inference_ms,
                queue_wait_ms=c.queue_wait_ms,
            )
            queue_wait_ms += c.queue_wait_ms
            response.batches += c.batches
            response.jobs += c.jobs
            real, padded, inference_ms = (
                real + c.real_tokens,
                padded + c.padded_tokens,
                inference_ms + c.inference_ms,
            )
        response.padding_efficiency = real / padded if padded else 0.0
        response.mean_inference_ms = inference_ms / response.batches if response.batches else 0.0
        response.mean_queue_wait_ms = queue_wait_ms / response.jobs if response.jobs else 0.0
        response.elapsed.FromNanoseconds(int((time.perf_counter() - started) * 1e9))
        return response

    async def _existing(self, job_id: str) -> job_pb2.Job:
        codec.check_job_id(job_id)
        job = await self._store.get(job_id)
        if job is None or not access.may_see(job):  # another owner's job reads as no job at all
            raise NotFound(f"job {job_id} does not exist or has expired")
        return job


def _span(name: str, context: Context | None) -> AbstractContextManager[Span | None]:
    """The call's server span, continuing the caller's trace (a `traceparent` in its metadata)."""
    metadata = dict(context.invocation_metadata() or ()) if context is not None and tracing.enabled() else {}
    return tracing.span(name, SpanKind.SERVER, parent=metadata)


def _queued(task: job_pb2.InferenceTask) -> job_pb2.Job:
    job = codec.queued_job(task)
    job.trace.traceparent = tracing.traceparent()  # the Submit span: where the job's trace starts
    return job


def _answer(job: job_pb2.Job, deduplicated: bool = False) -> inference_pb2.SubmitResponse:
    return inference_pb2.SubmitResponse(
        job_id=job.job_id,
        status=job.status,
        status_url=codec.status_url(job.job_id),
        watch_url=codec.watch_url(job.job_id),
        deduplicated=deduplicated,
    )


def _cancelled(job: job_pb2.Job, why: str) -> job_pb2.Job:
    cancelled = job_pb2.Job()
    cancelled.CopyFrom(job)
    cancelled.status = codec.CANCELLED
    cancelled.error.code = code_pb2.CANCELLED
    cancelled.error.message = why
    cancelled.trace.finished_at.CopyFrom(codec.now_ts())
    return cancelled
