"""Invariants 1 and 4 on the real Redis: forward-only writes and exactly-once announcements."""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from urllib.parse import urlsplit

import pytest
import redis.asyncio as aioredis
import uvloop
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError

from batchline import codec
from batchline.errors import Unavailable
from batchline.redis_store import Commands, RedisJobStore
from batchline.settings import StoreSettings
from batchline.store import BatchRecord
from batchline.v1 import job_pb2
from tests.helpers import wait_for
from tests.proxy import TcpProxy


def job(job_id: str, status: int) -> job_pb2.Job:
    return job_pb2.Job(job_id=job_id, status=status)  # type: ignore[arg-type]


@pytest.fixture
async def store(store_settings: StoreSettings) -> RedisJobStore:
    return RedisJobStore(store_settings)


async def collect_events(store: RedisJobStore, into: list[job_pb2.Job]) -> asyncio.Task[None]:
    subscribed = asyncio.Event()

    async def on_subscribed() -> None:
        subscribed.set()

    async def listen() -> None:
        async for event in store.events(on_subscribed):
            into.append(event)

    task = asyncio.create_task(listen())
    await asyncio.wait_for(subscribed.wait(), 5)
    return task


async def test_a_late_queued_write_never_overwrites_done(store: RedisJobStore) -> None:
    await store.create(job("j1", codec.QUEUED))
    assert await store.transition(job("j1", codec.RUNNING))
    assert await store.transition(job("j1", codec.DONE))
    assert not await store.transition(job("j1", codec.QUEUED))
    _, created = await store.create(job("j1", codec.QUEUED))
    assert not created
    stored = await store.get("j1")
    assert stored is not None and stored.status == codec.DONE


async def test_concurrent_duplicate_writes_announce_once(store: RedisJobStore) -> None:
    events: list[job_pb2.Job] = []
    listener = await collect_events(store, events)
    await store.create(job("j2", codec.QUEUED))
    results = await asyncio.gather(*(store.transition(job("j2", codec.DONE)) for _ in range(20)))
    assert sum(results) == 1
    await wait_for(lambda: len(events) >= 1, what="the DONE event")
    await asyncio.sleep(0.2)  # any duplicate would have arrived by now
    listener.cancel()
    assert [e.status for e in events] == [codec.DONE]
    assert (await store.stats()).finished == {"JOB_STATUS_DONE": 1}


async def test_a_batch_change_is_one_message_carrying_each_written_job_in_order(
    store: RedisJobStore, store_settings: StoreSettings
) -> None:
    """The stream pays per message, so a batch's change is announced once: every job the call
    wrote, in the call's order, and none it refused."""
    import redis.asyncio as aioredis

    client = aioredis.Redis.from_url(store_settings.redis_url)
    pubsub = client.pubsub(ignore_subscribe_messages=True)
    await pubsub.subscribe(store.channel)
    await store.create_many([job(f"b{i}", codec.QUEUED) for i in range(5)])
    assert await store.transition(job("b2", codec.CANCELLED))
    written = await store.transition_many([job(f"b{i}", codec.RUNNING) for i in range(5)])
    assert written == [True, True, False, True, True]
    messages = []
    deadline = time.monotonic() + 2
    while time.monotonic() < deadline:  # long enough for any stray message to arrive too
        message = await pubsub.get_message(timeout=0.1)
        if message is not None:
            messages.append(message["data"])
    await pubsub.aclose()  # type: ignore[no-untyped-call]
    await client.aclose()
    assert [[(j.job_id, j.status) for j in codec.decode_events(m)] for m in messages] == [
        [("b2", codec.CANCELLED)],
        [("b0", codec.RUNNING), ("b1", codec.RUNNING), ("b3", codec.RUNNING), ("b4", codec.RUNNING)],
    ]


async def test_unknown_jobs_are_not_created_by_a_transition(store: RedisJobStore) -> None:
    assert not await store.transition(job("ghost", codec.DONE))
    assert await store.get("ghost") is None


async def test_concurrent_idempotent_creates_make_one_job(store: RedisJobStore) -> None:
    results = await asyncio.gather(*(store.create(job(f"k{i}", codec.QUEUED), "same-key") for i in range(20)))
    winners = {stored.job_id for stored, _ in results}
    assert len(winners) == 1
    assert sum(created for _, created in results) == 1


async def test_records_carry_the_ttl(store: RedisJobStore, store_settings: StoreSettings) -> None:
    await store.create(job("t1", codec.QUEUED), "ttl-key")
    import redis.asyncio as aioredis

    client = aioredis.Redis.from_url(store_settings.redis_url)
    ttl = await client.pttl(store.job_key("t1"))
    await client.aclose()
    assert 0 < ttl <= store_settings.job_ttl_s * 1000


async def test_batch_statistics_and_statuses(store: RedisJobStore) -> None:
    await store.create_many([job("s1", codec.QUEUED), job("s2", codec.QUEUED)])
    written = await store.transition_many(
        [job("s1", codec.DONE), job("s2", codec.DONE)],
        BatchRecord(
            worker="w1",
            size=2,
            real_tokens=10,
            padded_tokens=12,
            inference_ms=5.0,
            close_reason="BATCH_CLOSE_REASON_DRAINED",
        ),
    )
    assert written == [True, True]
    assert await store.statuses(["s1", "s2", "nope"]) == [codec.DONE, codec.DONE, None]
    assert await store.statuses([]) == []
    records = await store.get_many(["s2", "nope", "s1"])
    assert [r.job_id if r else None for r in records] == ["s2", None, "s1"]
    assert [r.status for r in records if r] == [codec.DONE, codec.DONE]
    assert await store.get_many([]) == []
    stats = await store.stats()
    assert stats.batch_sizes == {2: 1}
    assert stats.workers["w1"].padded_tokens == 12
    assert stats.close_reasons == {"BATCH_CLOSE_REASON_DRAINED": 1}


async def test_a_batch_write_applies_the_forward_only_rule_to_each_job(store: RedisJobStore) -> None:
    """One script call for a whole batch: each job is written (and announced) only if it moves
    forward; the batch is counted once; the QUEUED bookkeeping follows each job that left."""
    events: list[job_pb2.Job] = []
    listener = await collect_events(store, events)
    await store.create_many([job("m1", codec.QUEUED), job("m2", codec.QUEUED), job("m3", codec.QUEUED)])
    assert await store.transition(job("m2", codec.CANCELLED))
    before = await store.left_queue()
    record = BatchRecord("w2", 2, 7, 9, 3.5, "BATCH_CLOSE_REASON_SIZE", queue_wait_ms=4.25)
    written = await store.transition_many(
        [job("m1", codec.DONE), job("m2", codec.DONE), job("gone", codec.DONE), job("m3", codec.RUNNING)],
        record,
    )
    assert written == [True, False, False, True]
    assert await store.statuses(["m1", "m2", "gone", "m3"]) == [
        codec.DONE,
        codec.CANCELLED,
        None,
        codec.RUNNING,
    ]
    assert await store.left_queue() == before + 2  # m1 and m3 left QUEUED; m2 had already
    await wait_for(lambda: len(events) >= 3, what="the three written states")
    await asyncio.sleep(0.2)  # a refused write's event would have arrived by now
    listener.cancel()
    assert [(e.job_id, e.status) for e in events] == [
        ("m2", codec.CANCELLED),
        ("m1", codec.DONE),
        ("m3", codec.RUNNING),
    ]
    assert await store.transition_many([job("m3", codec.DONE)]) == [True]  # no batch: not counted
    stats = await store.stats()
    worker = stats.workers["w2"]
    assert (worker.batches, worker.jobs, worker.real_tokens, worker.padded_tokens) == (1, 2, 7, 9)
    assert worker.inference_ms == 3.5 and worker.queue_wait_ms == 4.25
    assert stats.batch_sizes == {2: 1} and stats.close_reasons == {"BATCH_CLOSE_REASON_SIZE": 1}
    assert stats.finished == {"JOB_STATUS_DONE": 2, "JOB_STATUS_CANCELLED": 1}


async def test_discard_removes_record_and_its_idempotency_key(store: RedisJobStore) -> None:
    await store.create(job("d1", codec.QUEUED), "dk")
    await store.discard("d1", "dk")
    assert await store.get("d1") is None
    fresh, created = await store.create(job("d2", codec.QUEUED), "dk")
    assert created and fresh.job_id == "d2"


async def test_a_burst_past_the_pool_waits_for_connections_instead_of_failing(
    store_settings: StoreSettings,
) -> None:
    """More concurrent calls than pooled connections queue for one; none reads as Redis down."""
    from dataclasses import replace

    small = RedisJobStore(replace(store_settings, max_connections=4))
    jobs = [job(f"burst-{i}", codec.QUEUED) for i in range(400)]
    results = await asyncio.gather(*(small.create(j) for j in jobs), return_exceptions=True)
    assert [r for r in results if isinstance(r, BaseException)] == []
    assert all(created for _, created in results)  # type: ignore[misc]
    stored = await asyncio.gather(*(small.get(j.job_id) for j in jobs[::50]))
    assert all(record is not None and record.status == codec.QUEUED for record in stored)
    await small.close()


async def test_published_is_a_mark_on_the_record_and_never_creates_one(store: RedisJobStore) -> None:
    await store.create(job("pub-1", codec.QUEUED))
    assert not await store.published("pub-1")
    await store.mark_published("pub-1")
    assert await store.published("pub-1")
    await store.mark_published("gone")  # a record that is not there stays not there
    assert await store.get("gone") is None and not await store.published("gone")


async def test_queue_positions_count_the_jobs_still_ahead(store: RedisJobStore) -> None:
    ids = [f"q{i}" for i in range(4)]
    await store.create(job_pb2.Job(job_id=ids[0], status=codec.QUEUED))
    await store.create_many([job_pb2.Job(job_id=i, status=codec.QUEUED) for i in ids[1:]])
    assert [await store.queue_position(i) for i in ids] == [1, 2, 3, 4]
    assert await store.transition(job_pb2.Job(job_id=ids[0], status=codec.RUNNING))
    await store.discard(ids[1])
    assert [await store.queue_position(i) for i in ids] == [None, None, 1, 2]
    assert await store.transition(job_pb2.Job(job_id=ids[0], status=codec.DONE))  # not a queue exit
    assert await store.left_queue() == 2
    stored = await store.get(ids[0])
    assert stored is not None and stored.sequence == 3  # stamped by the store on every write


async def test_the_oldest_queued_job_is_tracked_as_jobs_leave(store: RedisJobStore) -> None:
    now = time.time()

    def queued(job_id: str, accepted: float) -> job_pb2.Job:
        job = job_pb2.Job(job_id=job_id, status=codec.QUEUED)
        job.trace.accepted_at.CopyFrom(codec.ts_from_seconds(accepted))
        return job

    assert await store.oldest_queued_s() is None
    await store.create(queued("stale", now - 2 * 24 * 3600))  # older than the TTL: left out
    await store.create_many([queued("a", now - 3), queued("b", now - 2), queued("c", now - 1)])
    assert await store.oldest_queued_s() == pytest.approx(now - 3)
    assert await store.transition(job_pb2.Job(job_id="a", status=codec.RUNNING))
    assert await store.oldest_queued_s() == pytest.approx(now - 2)
    await store.discard("b")
    assert await store.transition(job_pb2.Job(job_id="c", status=codec.CANCELLED))
    assert await store.oldest_queued_s() is None


async def test_create_many_stores_records_once_and_never_overwrites(store: RedisJobStore) -> None:
    assert await store.transition(job("kept", codec.QUEUED)) is False  # no record, nothing written
    await store.create(job("kept", codec.QUEUED))
    assert await store.transition(job("kept", codec.DONE))
    await store.create_many([job("kept", codec.QUEUED), job("fresh", codec.QUEUED)])
    kept, fresh = await store.get("kept"), await store.get("fresh")
    assert kept is not None and kept.status == codec.DONE  # a late QUEUED never overwrites
    assert fresh is not None and fresh.status == codec.QUEUED
    assert await store.queue_position("fresh") == 1
    await store.create_many([])  # nothing to store is no error


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_a_cut_connection_is_unavailable_on_either_event_loop(
    store_settings: StoreSettings, loop: str
) -> None:
    """A pooled connection whose peer went away fails the next command as Unavailable (the
    ingress answers UNAVAILABLE), not as uvloop's RuntimeError, and the pool reconnects after."""
    upstream = urlsplit(store_settings.redis_url)

    async def scenario() -> None:
        with TcpProxy((upstream.hostname or "127.0.0.1", upstream.port or 6379)) as proxy:
            store = RedisJobStore(replace(store_settings, redis_url=f"redis://127.0.0.1:{proxy.port}/0"))
            await store.create(job("before", codec.QUEUED))  # leaves an open connection in the pool
            proxy.cut()
            await asyncio.sleep(0.2)  # the reset reaches the client's transport
            with pytest.raises(Unavailable):
                await store.create_many([job("during", codec.QUEUED)])
            proxy.restore()
            await store.create_many([job("after", codec.QUEUED)])
            assert await store.get("after") is not None
            await store.close()

    (uvloop.run if loop == "uvloop" else asyncio.run)(scenario())


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_a_write_redis_stops_taking_fails_within_the_timeout_as_unavailable(
    store_settings: StoreSettings, loop: str
) -> None:
    """Redis stops reading, its connections left open: a command whose bytes the kernel cannot
    take waits for the store's timeout at most, and the caller hears Unavailable, not a hang.
    Once Redis reads again the store works."""
    upstream = urlsplit(store_settings.redis_url)
    timeout_s = 0.5

    async def scenario() -> None:
        with TcpProxy((upstream.hostname or "127.0.0.1", upstream.port or 6379)) as proxy:
            settings = replace(
                store_settings, redis_url=f"redis://127.0.0.1:{proxy.port}/0", timeout_s=timeout_s
            )
            store = RedisJobStore(settings)
            await store.create(job("before", codec.QUEUED))  # leaves an open connection in the pool
            proxy.stall()
            huge = job("huge", codec.QUEUED)
            huge.error.message = "x" * (64 << 20)  # more than the kernel's buffers hold
            started = time.monotonic()
            with pytest.raises(Unavailable):
                await store.create_many([huge])
            # the command once on the idle connection, once on a fresh one, each bounded
            assert time.monotonic() - started < 6 * timeout_s
            proxy.flow()
            await store.create_many([job("after", codec.QUEUED)])
            assert await store.get("after") is not None
            assert await store.get("huge") is None
            await store.close()

    (uvloop.run if loop == "uvloop" else asyncio.run)(scenario())


def commands(settings: StoreSettings, limit: int = 4, wait_s: float = 1.0) -> Commands:
    pool = aioredis.BlockingConnectionPool.from_url(settings.redis_url, socket_timeout=2.0)
    return Commands(pool, limit, wait_s)


async def test_a_command_cancelled_before_its_reply_never_leaves_that_reply_to_the_next(
    store_settings: StoreSettings,
) -> None:
    """The connection of a command cancelled mid-way is closed, not reused: its late reply can
    never be read as another command's."""
    key = store_settings.key_prefix + "list"
    lean = commands(store_settings, limit=1)
    waiting = asyncio.create_task(lean.call("BLPOP", key, 5))
    await asyncio.sleep(0.2)  # BLPOP is blocked in Redis
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    other = aioredis.Redis.from_url(store_settings.redis_url)
    await other.rpush(key, "late")
    assert await lean.call("GET", store_settings.key_prefix + "unset") is None
    assert await other.llen(key) == 1  # the cancelled BLPOP took nothing
    await other.aclose()
    await lean.close()


async def test_an_error_reply_raises_and_keeps_its_connection(store_settings: StoreSettings) -> None:
    key = store_settings.key_prefix + "text"
    lean = commands(store_settings, limit=1)
    await lean.call("SET", key, "not a number")
    first = await lean.call("CLIENT", "ID")
    with pytest.raises(ResponseError, match="not an integer"):
        await lean.call("INCR", key)
    assert await lean.call("CLIENT", "ID") == first  # the same connection, reply read in full
    await lean.close()


async def test_an_idle_connection_closed_by_redis_is_replaced_without_an_error(
    store_settings: StoreSettings,
) -> None:
    lean = commands(store_settings, limit=1)
    first = await lean.call("CLIENT", "ID")
    other = aioredis.Redis.from_url(store_settings.redis_url)
    await other.client_kill_filter(_id=first)
    await other.aclose()
    second = await lean.call("CLIENT", "ID")  # the dead one fails, the command goes again on a new one
    assert second != first
    await lean.close()


async def test_a_script_redis_no_longer_holds_is_sent_whole(store_settings: StoreSettings) -> None:
    lean = commands(store_settings)
    sha = lean.script("return ARGV[1] .. KEYS[1]")
    other = aioredis.Redis.from_url(store_settings.redis_url)
    await other.script_flush()
    await other.aclose()
    assert await lean.run(sha, ["k"], ["v"]) == b"vk"
    assert await lean.run(sha, ["k"], ["w"]) == b"wk"  # EVAL cached it again
    await lean.close()


async def test_past_its_connections_a_command_waits_then_gives_up_as_redis_unreachable(
    store_settings: StoreSettings,
) -> None:
    lean = commands(store_settings, limit=1, wait_s=0.3)
    busy = asyncio.create_task(lean.call("BLPOP", store_settings.key_prefix + "empty", 1))
    await asyncio.sleep(0.05)
    with pytest.raises(RedisConnectionError, match="no Redis connection free"):
        await lean.call("PING")
    assert await busy is None  # BLPOP timed out empty
    assert await lean.call("PING") == b"PONG"  # its connection is free again
    await lean.close()
