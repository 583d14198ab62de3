"""The DESIGN.md invariants, each against the real RabbitMQ and Redis."""

from __future__ import annotations

import asyncio
import collections
import threading
import time

import aio_pika
import grpc
import pytest
from google.protobuf.duration_pb2 import Duration
from google.rpc import code_pb2, error_details_pb2
from grpc_status import rpc_status
from prometheus_client import REGISTRY

from batchline import codec
from batchline.settings import StoreSettings
from batchline.v1 import inference_pb2, job_pb2, stream_pb2
from tests.helpers import RecordingModel, queued_tasks, wait_for
from tests.integration.conftest import MakePipeline, Pipeline


def submit(text: str, **kwargs: object) -> inference_pb2.SubmitRequest:
    return inference_pb2.SubmitRequest(text=text, **kwargs)  # type: ignore[arg-type]


async def job_keys(pipeline: Pipeline) -> int:
    import redis.asyncio as aioredis

    client = aioredis.Redis.from_url(pipeline.store_settings.redis_url)
    keys = [k async for k in client.scan_iter(match=pipeline.store_settings.key_prefix + "job:*")]
    await client.aclose()
    return len(keys)


async def test_a_job_flows_from_submit_to_a_streamed_result(make_pipeline: MakePipeline) -> None:
    pipeline = await make_pipeline(model=RecordingModel(fixed_ms=5))
    answer = await pipeline.inference.Submit(submit("I loved this film"))
    assert answer.status == codec.QUEUED
    assert answer.watch_url == f"/v1/jobs/{answer.job_id}:watch"
    events = await pipeline.watch(answer.job_id)
    statuses = [e.status for e in events]
    assert statuses[-1] == codec.DONE
    assert statuses == sorted(statuses, key=codec.rank)  # never backwards
    assert len(set(statuses)) == len(statuses)  # each state once
    done = events[-1]
    assert done.result.label == "POSITIVE" and done.model == "simulated"
    trace = done.trace
    assert trace.batch_id and trace.batch_size >= 1 and trace.worker == "test-batcher" and trace.attempt == 1
    assert trace.inference_ms >= 5
    assert (
        codec.seconds(trace.accepted_at)
        <= codec.seconds(trace.started_at)
        <= codec.seconds(trace.finished_at)
    )
    assert trace.batch_padded_tokens >= trace.batch_real_tokens > 0


async def test_a_thousand_concurrent_jobs_all_end_done_exactly_once(make_pipeline: MakePipeline) -> None:
    model = RecordingModel(fixed_ms=3, per_token_ms=0.05)
    pipeline = await make_pipeline(model=model)
    events: collections.Counter[tuple[str, int]] = collections.Counter()
    subscribed = asyncio.Event()

    async def on_subscribed() -> None:
        subscribed.set()

    async def listen() -> None:
        async for job in pipeline.store.events(on_subscribed):
            events[(job.job_id, job.status)] += 1

    listener = asyncio.create_task(listen())
    await asyncio.wait_for(subscribed.wait(), 5)
    texts = [f"review number {i} was great" for i in range(1000)]
    answers = await asyncio.gather(*(pipeline.inference.Submit(submit(t)) for t in texts))
    ids = [a.job_id for a in answers]
    assert len(set(ids)) == 1000

    await wait_for(
        lambda: sum(1 for (_, s) in events if s == codec.DONE) >= 1000, 60, what="1000 DONE events"
    )
    await asyncio.sleep(0.3)  # a duplicate would have arrived by now
    listener.cancel()
    assert all(events[(i, codec.DONE)] == 1 for i in ids)
    assert sorted(model.computed) == sorted(texts)  # each computed exactly once
    assert max(model.batch_sizes) > 1
    stats = await pipeline.inference.GetStats(inference_pb2.GetStatsRequest())
    assert stats.finished["JOB_STATUS_DONE"] == 1000 and stats.jobs == 1000
    assert sum(size * n for size, n in stats.batch_size_histogram.items()) == 1000
    assert max(stats.batch_size_histogram) <= 16


async def test_write_before_publish_every_task_has_its_record(make_pipeline: MakePipeline) -> None:
    def grouped() -> tuple[float, float]:
        count = REGISTRY.get_sample_value("batchline_submit_group_jobs_count") or 0.0
        return count, REGISTRY.get_sample_value("batchline_submit_group_jobs_sum") or 0.0

    pipeline = await make_pipeline(batcher=False)
    groups, jobs = grouped()
    answers = await asyncio.gather(*(pipeline.inference.Submit(submit(f"t{i}")) for i in range(50)))
    seen = []
    for task in await queued_tasks(pipeline.broker_settings):
        record = await pipeline.store.get(task.job_id)
        assert record is not None and record.status == codec.QUEUED
        seen.append(task.job_id)
    assert sorted(seen) == sorted(a.job_id for a in answers)  # each published once
    # Concurrent Submits were stored and published in groups, every one of them in exactly one.
    assert grouped()[1] - jobs == 50
    assert grouped()[0] - groups < 50


async def test_a_submit_batch_publishes_every_task_after_its_record(make_pipeline: MakePipeline) -> None:
    pipeline = await make_pipeline(batcher=False)
    texts = [f"batch text {i}" for i in range(64)]
    answer = await pipeline.inference.SubmitBatch(inference_pb2.SubmitBatchRequest(texts=texts))
    published = await queued_tasks(pipeline.broker_settings)
    assert [t.text for t in published] == texts  # every task, once, in the caller's order
    assert [t.job_id for t in published] == [j.job_id for j in answer.jobs]
    positions = [await pipeline.store.queue_position(j.job_id) for j in answer.jobs]
    assert positions == list(range(1, 65))


async def test_a_vanished_queue_refuses_submits_and_leaves_no_record(make_pipeline: MakePipeline) -> None:
    pipeline = await make_pipeline(batcher=False)
    connection = await aio_pika.connect(pipeline.broker_settings.amqp_url)
    channel = await connection.channel()
    await channel.queue_delete(pipeline.broker_settings.queue)
    await connection.close()
    with pytest.raises(grpc.aio.AioRpcError) as caught:  # never acked into nowhere
        await pipeline.inference.Submit(submit("routed nowhere"))
    assert caught.value.code() == grpc.StatusCode.UNAVAILABLE
    assert pipeline.broker_settings.queue in (caught.value.details() or "")
    assert await job_keys(pipeline) == 0


async def test_a_full_queue_refuses_fast_with_retry_info(make_pipeline: MakePipeline) -> None:
    pipeline = await make_pipeline(batcher=False, broker={"max_length": 5})
    for i in range(5):
        await pipeline.inference.Submit(submit(f"fits {i}"))
    started = time.perf_counter()
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await pipeline.inference.Submit(submit("one too many"))
    assert time.perf_counter() - started < 1.0
    assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    status = rpc_status.from_call(caught.value)  # type: ignore[arg-type]
    assert status is not None
    retry = error_details_pb2.RetryInfo()
    assert status.details[0].Unpack(retry) and retry.retry_delay.ToNanoseconds() > 0
    assert await job_keys(pipeline) == 5  # the refused job left no record behind

    with pytest.raises(grpc.aio.AioRpcError) as batch_refused:
        await pipeline.inference.SubmitBatch(inference_pb2.SubmitBatchRequest(texts=["a", "b"]))
    assert batch_refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED


async def test_a_submit_batch_the_queue_cannot_take_whole_leaves_nothing_behind(
    make_pipeline: MakePipeline,
) -> None:
    pipeline = await make_pipeline(batcher=False, broker={"max_length": 5})
    for i in range(3):
        await pipeline.inference.Submit(submit(f"fits {i}"))
    with pytest.raises(grpc.aio.AioRpcError) as refused:  # 2 places left for 3 texts
        await pipeline.inference.SubmitBatch(inference_pb2.SubmitBatchRequest(texts=["a", "b", "c"]))
    assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    # None of it was published and cancelled: it takes no place in the queue, leaves no record.
    assert await job_keys(pipeline) == 3
    assert (await pipeline.inference.GetStats(inference_pb2.GetStatsRequest())).queue_depth == 3


async def test_cancel_before_compute_means_never_computed(make_pipeline: MakePipeline) -> None:
    pipeline = await make_pipeline(batcher=False)
    before = REGISTRY.get_sample_value("batchline_jobs_cancelled_total") or 0.0
    doomed = await pipeline.inference.Submit(submit("cancel me please"))
    cancelled = await pipeline.inference.CancelJob(inference_pb2.CancelJobRequest(job_id=doomed.job_id))
    assert cancelled.job.status == codec.CANCELLED
    assert cancelled.job.error.code == code_pb2.CANCELLED
    again = await pipeline.inference.CancelJob(inference_pb2.CancelJobRequest(job_id=doomed.job_id))
    assert again.job.status == codec.CANCELLED  # a second cancel changes and counts nothing
    assert REGISTRY.get_sample_value("batchline_jobs_cancelled_total") == before + 1
    after = await pipeline.inference.Submit(submit("run me"))
    await pipeline.start_batcher()
    await pipeline.wait_status(after.job_id, codec.DONE)
    assert "cancel me please" not in pipeline.model.computed
    assert (await pipeline.job(doomed.job_id)).status == codec.CANCELLED


async def test_cancel_of_a_finished_job_changes_nothing(make_pipeline: MakePipeline) -> None:
    pipeline = await make_pipeline()
    answer = await pipeline.inference.Submit(submit("quick one"))
    done = await pipeline.wait_status(answer.job_id, codec.DONE)
    again = await pipeline.inference.CancelJob(inference_pb2.CancelJobRequest(job_id=answer.job_id))
    assert again.job == done


async def test_an_expired_deadline_is_never_computed(make_pipeline: MakePipeline) -> None:
    pipeline = await make_pipeline(batcher=False)
    options = job_pb2.SubmitOptions(timeout=Duration(nanos=50_000_000))
    late = await pipeline.inference.Submit(submit("too late for me", options=options))
    await asyncio.sleep(0.1)
    await pipeline.start_batcher()
    failed = await pipeline.wait_status(late.job_id, codec.FAILED)
    assert failed.error.code == code_pb2.DEADLINE_EXCEEDED
    assert "too late for me" not in pipeline.model.computed


async def test_a_poison_input_fails_alone_and_is_dead_lettered(make_pipeline: MakePipeline) -> None:
    model = RecordingModel()
    model.gate = threading.Event()  # hold the first pass so the whole call lands in one batch
    pipeline = await make_pipeline(model=model)
    await pipeline.inference.Submit(submit("warm the batcher"))
    texts = [f"fine text {i}" for i in range(7)] + [f"bad {RecordingModel.POISON}"]
    answers = (await pipeline.inference.SubmitBatch(inference_pb2.SubmitBatchRequest(texts=texts))).jobs
    model.gate.set()
    final = [
        await pipeline.wait_status(a.job_id, codec.DONE if i < 7 else codec.FAILED)
        for i, a in enumerate(answers)
    ]
    assert final[-1].error.code == code_pb2.INTERNAL and "poison" in final[-1].error.message
    assert all(j.result.label for j in final[:7])

    async def dead_lettered() -> bool:
        return (await pipeline.inference.GetStats(inference_pb2.GetStatsRequest())).dead_letter_depth == 1

    await wait_for(dead_lettered, 10, what="the poison message in the dead-letter queue")
    after = await pipeline.inference.Submit(submit("still working"))
    await pipeline.wait_status(after.job_id, codec.DONE)


async def test_an_undecodable_message_is_dead_lettered_and_its_job_failed(
    make_pipeline: MakePipeline,
) -> None:
    pipeline = await make_pipeline(batcher=False)
    victim = await pipeline.inference.Submit(submit("will be replaced"))
    connection = await aio_pika.connect(pipeline.broker_settings.amqp_url)
    channel = await connection.channel()
    queue = await channel.get_queue(pipeline.broker_settings.queue)
    assert await queue.get(no_ack=True) is not None  # take the real task away
    await channel.default_exchange.publish(
        aio_pika.Message(b"\xff\xfe not a protobuf", message_id=victim.job_id),
        routing_key=pipeline.broker_settings.queue,
    )
    await connection.close()
    await pipeline.start_batcher()
    failed = await pipeline.wait_status(victim.job_id, codec.FAILED)
    assert failed.error.code == code_pb2.INVALID_ARGUMENT
    after = await pipeline.inference.Submit(submit("next one"))
    await pipeline.wait_status(after.job_id, codec.DONE)
    stats = await pipeline.inference.GetStats(inference_pb2.GetStatsRequest())
    assert stats.dead_letter_depth == 1


async def test_a_redelivered_finished_job_is_acked_without_recompute(make_pipeline: MakePipeline) -> None:
    pipeline = await make_pipeline()
    answer = await pipeline.inference.Submit(submit("compute me once"))
    await pipeline.wait_status(answer.job_id, codec.DONE)
    task = job_pb2.InferenceTask(job_id=answer.job_id, text="compute me once")
    connection = await aio_pika.connect(pipeline.broker_settings.amqp_url)
    channel = await connection.channel()
    await channel.default_exchange.publish(
        aio_pika.Message(task.SerializeToString(), message_id=task.job_id),
        routing_key=pipeline.broker_settings.queue,
    )
    await connection.close()
    marker = await pipeline.inference.Submit(submit("after the duplicate"))
    await pipeline.wait_status(marker.job_id, codec.DONE)
    assert pipeline.model.computed.count("compute me once") == 1


async def test_concurrent_duplicate_submits_with_one_idempotency_key_make_one_job(
    make_pipeline: MakePipeline,
) -> None:
    pipeline = await make_pipeline(batcher=False)
    answers = await asyncio.gather(
        *(pipeline.inference.Submit(submit("same request", idempotency_key="order-42")) for _ in range(20))
    )
    assert len({a.job_id for a in answers}) == 1
    assert sum(not a.deduplicated for a in answers) == 1
    stats = await pipeline.inference.GetStats(inference_pb2.GetStatsRequest())
    assert stats.queue_depth == 1


async def test_bad_input_names_the_field(make_pipeline: MakePipeline) -> None:
    pipeline = await make_pipeline(batcher=False)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await pipeline.inference.Submit(submit("x" * 2001))
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    status = rpc_status.from_call(caught.value)  # type: ignore[arg-type]
    assert status is not None
    bad = error_details_pb2.BadRequest()
    assert status.details[0].Unpack(bad)
    assert bad.field_violations[0].field == "text"
    with pytest.raises(grpc.aio.AioRpcError) as unknown:
        await pipeline.inference.GetJob(inference_pb2.GetJobRequest(job_id="no-such-job"))
    assert unknown.value.code() == grpc.StatusCode.NOT_FOUND
    assert await job_keys(pipeline) == 0


async def test_redis_down_means_unavailable_fast(make_pipeline: MakePipeline) -> None:
    dead = StoreSettings(redis_url="redis://127.0.0.1:1/0", key_prefix="test:dead:", timeout_s=0.5)
    pipeline = await make_pipeline(batcher=False, store=dead)
    started = time.perf_counter()
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await pipeline.inference.Submit(submit("anyone there?"))
    assert caught.value.code() == grpc.StatusCode.UNAVAILABLE
    assert time.perf_counter() - started < 3.0


async def test_the_next_batch_fills_while_the_model_computes(make_pipeline: MakePipeline) -> None:
    """Invariant 6: the forward pass runs in the model thread, so the event loop keeps
    receiving deliveries while it computes."""
    model = RecordingModel()
    model.gate = threading.Event()
    pipeline = await make_pipeline(model=model)
    first = await pipeline.inference.Submit(submit("first alone"))
    await pipeline.wait_status(first.job_id, codec.RUNNING)
    rest = (await pipeline.inference.SubmitBatch(inference_pb2.SubmitBatchRequest(texts=["next"] * 10))).jobs

    async def all_delivered() -> bool:  # no ready messages: all ten reached the batcher mid-pass
        return (await pipeline.inference.GetStats(inference_pb2.GetStatsRequest())).queue_depth == 0

    await wait_for(all_delivered, 10, what="deliveries while the first pass is blocked")
    model.gate.set()
    for answer in rest:
        await pipeline.wait_status(answer.job_id, codec.DONE)
    assert model.batch_sizes == [1, 10]


async def test_higher_priority_overtakes_jobs_waiting_in_the_batcher(make_pipeline: MakePipeline) -> None:
    model = RecordingModel()
    model.gate = threading.Event()
    pipeline = await make_pipeline(model=model, batch={"max_batch_size": 1, "prefetch": 64})
    first = await pipeline.inference.Submit(submit("holding the model"))
    await pipeline.wait_status(first.job_id, codec.RUNNING)
    low = [await pipeline.inference.Submit(submit(f"low {i}")) for i in range(4)]
    urgent = job_pb2.SubmitOptions(priority=9)
    high = await pipeline.inference.Submit(submit("high", options=urgent))

    async def all_delivered() -> bool:
        return (await pipeline.inference.GetStats(inference_pb2.GetStatsRequest())).queue_depth == 0

    await wait_for(all_delivered, 10, what="every job in the batcher's buffer")
    model.gate.set()
    for answer in [*low, high]:
        await pipeline.wait_status(answer.job_id, codec.DONE)
    assert model.computed[:2] == ["holding the model", "high"]
    assert model.computed[2:] == [f"low {i}" for i in range(4)]  # the rest in arrival order
    stats = await pipeline.inference.GetStats(inference_pb2.GetStatsRequest())
    assert stats.jobs == 6 and stats.mean_queue_wait_ms > 0  # they all waited behind the gate
    assert sum(stats.close_reasons.values()) == stats.batches


async def test_jobs_that_expire_or_are_cancelled_while_buffered_are_never_computed(
    make_pipeline: MakePipeline,
) -> None:
    model = RecordingModel()
    model.gate = threading.Event()
    pipeline = await make_pipeline(model=model, batch={"max_batch_size": 1, "prefetch": 64})
    first = await pipeline.inference.Submit(submit("holding the model"))
    await pipeline.wait_status(first.job_id, codec.RUNNING)
    short = job_pb2.SubmitOptions(timeout=Duration(nanos=100_000_000))
    expiring = await pipeline.inference.Submit(submit("in a hurry", options=short))
    doomed = await pipeline.inference.Submit(submit("changed my mind"))
    kept = await pipeline.inference.Submit(submit("still wanted"))
    await pipeline.inference.CancelJob(inference_pb2.CancelJobRequest(job_id=doomed.job_id))
    await asyncio.sleep(0.3)  # the deadline passes while the model is busy
    model.gate.set()

    await pipeline.wait_status(kept.job_id, codec.DONE)
    failed = await pipeline.wait_status(expiring.job_id, codec.FAILED)
    assert failed.error.code == code_pb2.DEADLINE_EXCEEDED
    assert (await pipeline.job(doomed.job_id)).status == codec.CANCELLED
    assert model.computed == ["holding the model", "still wanted"]


async def test_a_batch_moves_the_batch_metrics(make_pipeline: MakePipeline) -> None:
    def sample(name: str, **labels: str) -> float:
        return REGISTRY.get_sample_value(name, labels) or 0.0

    before = {
        "batches": sum(
            sample("batchline_batches_total", close_reason=r) for r in ("size", "drained", "wait")
        ),
        "size_count": sample("batchline_batch_size_count"),
        "size_sum": sample("batchline_batch_size_sum"),
        "real": sample("batchline_real_tokens_total"),
        "padded": sample("batchline_padded_tokens_total"),
        "waits": sample("batchline_queue_wait_seconds_count"),
        "passes": sample("batchline_inference_seconds_count"),
        "done": sample("batchline_batcher_jobs_total", outcome="done"),
        "jobs_timed": sample("batchline_job_seconds_count"),
        "jobs_time": sample("batchline_job_seconds_sum"),
    }
    pipeline = await make_pipeline(batcher=False)
    answers = (
        await pipeline.inference.SubmitBatch(inference_pb2.SubmitBatchRequest(texts=["a b c", "d e"] * 3))
    ).jobs
    await pipeline.start_batcher()  # all six wait in the queue: one batch of six
    for answer in answers:
        await pipeline.wait_status(answer.job_id, codec.DONE)

    after_batches = sum(
        sample("batchline_batches_total", close_reason=r) for r in ("size", "drained", "wait")
    )
    assert after_batches - before["batches"] == len(pipeline.model.batch_sizes)
    assert sample("batchline_batch_size_count") - before["size_count"] == len(pipeline.model.batch_sizes)
    assert sample("batchline_batch_size_sum") - before["size_sum"] == 6
    assert sample("batchline_queue_wait_seconds_count") - before["waits"] == 6
    assert sample("batchline_inference_seconds_count") - before["passes"] == len(pipeline.model.batch_sizes)
    assert sample("batchline_batcher_jobs_total", outcome="done") - before["done"] == 6
    assert sample("batchline_job_seconds_count") - before["jobs_timed"] == 6  # end to end, per job
    assert sample("batchline_job_seconds_sum") - before["jobs_time"] > 0
    real = sample("batchline_real_tokens_total") - before["real"]
    padded = sample("batchline_padded_tokens_total") - before["padded"]
    assert real == 3 * (5 + 4) and padded >= real  # [CLS] a b c [SEP], [CLS] d e [SEP]


async def test_submits_and_watches_move_the_ingress_and_stream_metrics(make_pipeline: MakePipeline) -> None:
    def sample(name: str, **labels: str) -> float:
        return REGISTRY.get_sample_value(name, labels) or 0.0

    accepted = sample("batchline_submits_total", rpc="Submit", outcome="accepted")
    invalid = sample("batchline_submits_total", rpc="Submit", outcome="invalid")
    dedup = sample("batchline_submits_total", rpc="Submit", outcome="deduplicated")
    batched = sample("batchline_submits_total", rpc="SubmitBatch", outcome="accepted")
    timed = sample("batchline_submit_seconds_count", rpc="Submit")
    events = sample("batchline_events_total")
    watchers = sample("batchline_watchers")

    model = RecordingModel()
    model.gate = threading.Event()
    pipeline = await make_pipeline(model=model)
    first = await pipeline.inference.Submit(submit("watched", idempotency_key="k-1"))
    await pipeline.inference.Submit(submit("watched", idempotency_key="k-1"))
    with pytest.raises(grpc.aio.AioRpcError):
        await pipeline.inference.Submit(submit(""))
    await pipeline.inference.SubmitBatch(inference_pb2.SubmitBatchRequest(texts=["x", "y", "z"]))

    open_watchers = []
    async for _ in pipeline.stream.WatchJob(stream_pb2.WatchJobRequest(job_id=first.job_id)):
        open_watchers.append(sample("batchline_watchers"))  # while the stream is open
        model.gate.set()
    assert open_watchers[0] == watchers + 1
    assert sample("batchline_watchers") == watchers

    assert sample("batchline_submits_total", rpc="Submit", outcome="accepted") - accepted == 1
    assert sample("batchline_submits_total", rpc="Submit", outcome="deduplicated") - dedup == 1
    assert sample("batchline_submits_total", rpc="Submit", outcome="invalid") - invalid == 1
    assert sample("batchline_submits_total", rpc="SubmitBatch", outcome="accepted") - batched == 3
    assert sample("batchline_submit_seconds_count", rpc="Submit") - timed == 3
    assert sample("batchline_events_total") - events >= 2  # RUNNING and DONE of the watched job


async def test_an_idempotent_retry_publishes_a_job_its_ingress_stored_but_never_published(
    make_pipeline: MakePipeline,
) -> None:
    """An ingress that dies between storing a job and publishing it leaves a QUEUED record that
    no batcher will see; the client's retry with the same key must get it computed."""
    pipeline = await make_pipeline()
    orphan = job_pb2.InferenceTask(job_id=codec.new_job_id(), text="stored, then the ingress died")
    orphan.accepted_at.CopyFrom(codec.ts_from_seconds(time.time() - 30))  # its publish lease is long over
    await pipeline.store.create(codec.queued_job(orphan), "order-7")
    answer = await pipeline.inference.Submit(
        submit("stored, then the ingress died", idempotency_key="order-7")
    )
    assert answer.deduplicated and answer.job_id == orphan.job_id
    await pipeline.wait_status(orphan.job_id, codec.DONE)
    assert pipeline.model.computed.count("stored, then the ingress died") == 1
