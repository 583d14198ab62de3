"""The job store on Redis: records in hashes, forward-only writes and their events in Lua."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections.abc import AsyncIterator, Iterable, Sequence
from typing import Any, cast
from urllib.parse import urlsplit

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import AuthenticationError, NoScriptError, RedisError, ResponseError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from batchline import codec, names
from batchline.codec import Job
from batchline.errors import Unavailable
from batchline.settings import StoreSettings, redact_url
from batchline.store import BatchRecord, OnSubscribed, StatsSnapshot, WorkerCounters

log = logging.getLogger(__name__)

# Create a QUEUED record unless the id exists; with an idempotency key, the first job wins. The
# record keeps its number in the order jobs entered the queue (t), for its queue position, and
# the job waits in a sorted set by acceptance time, for the oldest queued job's age.
# KEYS: job, idempotency key, entered counter, waiting set.
# ARGV: status, record, ttl ms, job id, use-key flag, accepted at (unix seconds).
CREATE_LUA = """
if redis.call('EXISTS', KEYS[1]) == 1 then return {0, ARGV[4]} end
if ARGV[5] == '1' then
  local existing = redis.call('GET', KEYS[2])
  if existing then return {0, existing} end
  redis.call('SET', KEYS[2], ARGV[4], 'PX', ARGV[3])
end
redis.call('HSET', KEYS[1], 's', ARGV[1], 'd', ARGV[2], 't', redis.call('INCR', KEYS[3]))
redis.call('ZADD', KEYS[4], ARGV[6], ARGV[4])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return {1, ARGV[4]}
"""

# CREATE_LUA for a SubmitBatch's jobs (new ids, no idempotency key) in one call: one script run
# instead of one per job. KEYS: entered counter, waiting set, then each job.
# ARGV: status, ttl ms, then per job: record, job id, accepted at.
CREATE_MANY_LUA = """
for i = 3, #KEYS do
  local at = (i - 3) * 3 + 3
  if redis.call('EXISTS', KEYS[i]) == 0 then
    redis.call('HSET', KEYS[i], 's', ARGV[1], 'd', ARGV[at], 't', redis.call('INCR', KEYS[1]))
    redis.call('ZADD', KEYS[2], ARGV[at + 2], ARGV[at + 1])
    redis.call('PEXPIRE', KEYS[i], ARGV[2])
  end
end
return 1
"""

# Jobs' transitions, and a batch's statistics, in one call: each job is written only if its
# status moves forward (rank = min(status, 3)), announced only if written, and counted as
# leaving QUEUED if it was QUEUED. The written jobs' events (each a one-job JobEvents) go out
# concatenated as one message: a batch's change costs the stream one message, not one per job.
# KEYS: finished counters, left counter, waiting set, workers set, the worker's counters, batch
# sizes, close reasons, then each job.
# ARGV: ttl ms, channel, then per job: status, record, event, status name, job id; then, if a
# batch is counted: worker, size, real tokens, padded tokens, inference ms, queue wait ms, close
# reason. Returns 1 or 0 per job: written or not.
TRANSITION_LUA = """
local jobs = #KEYS - 7
local written, events = {}, {}
for i = 1, jobs do
  local job, at = KEYS[7 + i], 3 + (i - 1) * 5
  local cur = redis.call('HGET', job, 's')
  local new = tonumber(ARGV[at])
  written[i] = 0
  if cur and math.min(new, 3) > math.min(tonumber(cur), 3) then
    if cur == '1' then
      redis.call('INCR', KEYS[2])
      redis.call('ZREM', KEYS[3], ARGV[at + 4])
    end
    redis.call('HSET', job, 's', ARGV[at], 'd', ARGV[at + 1])
    redis.call('PEXPIRE', job, ARGV[1])
    if new >= 3 then redis.call('HINCRBY', KEYS[1], ARGV[at + 3], 1) end
    events[#events + 1] = ARGV[at + 2]
    written[i] = 1
  end
end
if #events > 0 then redis.call('PUBLISH', ARGV[2], table.concat(events)) end
local b = 3 + jobs * 5
if ARGV[b] then
  redis.call('SADD', KEYS[4], ARGV[b])
  redis.call('HINCRBY', KEYS[5], 'batches', 1)
  redis.call('HINCRBY', KEYS[5], 'jobs', ARGV[b + 1])
  redis.call('HINCRBY', KEYS[5], 'real_tokens', ARGV[b + 2])
  redis.call('HINCRBY', KEYS[5], 'padded_tokens', ARGV[b + 3])
  redis.call('HINCRBYFLOAT', KEYS[5], 'inference_ms', ARGV[b + 4])
  redis.call('HINCRBYFLOAT', KEYS[5], 'queue_wait_ms', ARGV[b + 5])
  redis.call('HINCRBY', KEYS[6], ARGV[b + 1], 1)
  redis.call('HINCRBY', KEYS[7], ARGV[b + 6], 1)
end
return written
"""

# One field of each job's hash (s: status, d: record), nil for a job with no record.
# KEYS: each job. ARGV: the field.
FIELD_OF_EACH_LUA = """
local values = {}
for i = 1, #KEYS do values[i] = redis.call('HGET', KEYS[i], ARGV[1]) end
return values
"""

# Mark a job's task published: a field of the job's own hash, so it expires with the record;
# never on a record that is gone (HSET alone would create a hash with no TTL). KEYS: job.
MARK_PUBLISHED_LUA = """
if redis.call('EXISTS', KEYS[1]) == 1 then redis.call('HSET', KEYS[1], 'p', 1) end
return 1
"""

# Remove a record (counted as leaving the queue) and the idempotency key that points to it.
# KEYS: job, idempotency key, left counter, waiting set. ARGV: job id.
DISCARD_LUA = """
if redis.call('HGET', KEYS[1], 's') == '1' then
  redis.call('INCR', KEYS[3])
  redis.call('ZREM', KEYS[4], ARGV[1])
end
redis.call('DEL', KEYS[1])
if redis.call('GET', KEYS[2]) == ARGV[1] then redis.call('DEL', KEYS[2]) end
return 1
"""


class Connection(aioredis.Connection):
    """A connection whose write to a transport the peer has closed fails as a lost connection
    on either event loop. On asyncio's own loop that write raises ConnectionResetError, which
    redis-py turns into ConnectionError; uvloop raises RuntimeError instead, which redis-py
    would pass on as it is (an INTERNAL error where UNAVAILABLE is right). Writes go through
    here when the connection has a socket timeout, as every connection of this store has."""

    async def _send_packed_command(self, command: Iterable[bytes]) -> None:
        transport = self._writer.transport if self._writer is not None else None
        try:
            await super()._send_packed_command(command)
        except RuntimeError as exc:
            if transport is None or not transport.is_closing():
                raise
            raise ConnectionResetError(f"the connection to Redis is closed ({exc})") from exc


class Commands:
    """The commands on a job's way through the store (create, move, read), each sent on a
    connection of the store's own and its reply read, with none of redis-py's per-command work
    around them.

    Around each command redis-py 8's client takes a connection from its pool under a lock and a
    condition, reads the socket once to check it, and times the command for its observability
    hooks. Measured on a 2-vCPU EPYC with this store's settings (medians of 7 rounds side by
    side, docs/benchmarks/ingress-cpu-ab.md): the EVALSHA that creates a group of four
    Submits' jobs cost the caller 208 µs of CPU through redis-py's client and 134 µs here; the
    HGET of a job's record, 162 µs and 93 µs; a batch of 16's status read (a pipeline before,
    one script here), 475 µs and 131 µs.
    The other commands (statistics, queue positions, the event subscription) go through
    redis-py's client.

    A connection goes back to the idle list only once its reply was read in full. An error or a
    cancellation on the way (a timeout, a caller that went away) closes it instead, so an idle
    connection never holds half a reply. A reused connection whose peer is gone (Redis restarted)
    fails its command; the command is sent once more on a fresh connection, as redis-py's client
    did with this store's retry setting. Where the reply alone was lost, the command runs twice:
    the job writes here are safe to repeat (each writes only what moves a job forward or does not
    exist yet); a batch's statistics would count it twice, as they would have under redis-py."""

    def __init__(self, pool: aioredis.ConnectionPool, limit: int, timeout_s: float) -> None:
        self._pool = pool  # makes the connections, with the store's address, credentials and timeouts
        self._idle: list[aioredis.connection.AbstractConnection] = []
        self._free = asyncio.Semaphore(limit)
        self._timeout_s = timeout_s
        self._scripts: dict[str, bytes] = {}  # sha1 -> source, for a Redis that lost its script cache

    def script(self, source: str) -> str:
        """Register a Lua script; returns the name `run` takes (its SHA1)."""
        sha = hashlib.sha1(source.encode()).hexdigest()
        self._scripts[sha] = source.encode()
        return sha

    async def run(self, sha: str, keys: Sequence[str], args: Sequence[str | int | float | bytes]) -> Any:
        """EVALSHA; EVAL with the source when Redis does not hold the script (restarted, flushed)."""
        try:
            return await self.call("EVALSHA", sha, len(keys), *keys, *args)
        except NoScriptError:
            return await self.call("EVAL", self._scripts[sha], len(keys), *keys, *args)

    async def call(self, *command: str | int | float | bytes) -> Any:
        """One command and its reply. Raises RedisError (ConnectionError, TimeoutError, a reply
        error) like redis-py's client; waits up to the store's timeout for a free connection."""
        if self._free.locked():
            try:
                async with asyncio.timeout(self._timeout_s):
                    await self._free.acquire()
            except TimeoutError:
                raise RedisConnectionError("no Redis connection free in time") from None
        else:
            await self._free.acquire()  # returns at once
        try:
            if self._idle:
                try:
                    return await self._send(self._idle.pop(), command)
                except (RedisConnectionError, RedisTimeoutError):
                    pass  # a connection left idle may have been closed by its peer: once more, fresh
            return await self._send(self._pool.make_connection(), command)  # type: ignore[no-untyped-call]
        finally:
            self._free.release()

    async def _send(
        self,
        connection: aioredis.connection.AbstractConnection,
        command: tuple[str | int | float | bytes, ...],
    ) -> Any:
        try:
            await connection.send_command(*command)
            reply = await connection.read_response()
        except ResponseError:  # an error reply, read in full: the connection is fine
            self._idle.append(connection)
            raise
        except BaseException:
            await connection.disconnect(nowait=True)
            raise
        self._idle.append(connection)
        return reply

    async def close(self) -> None:
        idle, self._idle = self._idle, []
        for connection in idle:
            await connection.disconnect()


def connection_options(url: str) -> dict[str, Any]:
    """`Connection` for plain TCP URLs; TLS (rediss://) and unix sockets keep redis-py's own."""
    return {"connection_class": Connection} if urlsplit(url).scheme == "redis" else {}


class RedisJobStore:
    """`JobStore` on Redis. Every Redis failure surfaces as `Unavailable`."""

    def __init__(self, settings: StoreSettings) -> None:
        self._settings = settings
        self._prefix = settings.key_prefix
        self._ttl_ms = settings.job_ttl_s * 1000
        self.channel = self._prefix + names.EVENTS_CHANNEL
        self._entered = self._prefix + names.QUEUE_ENTERED
        self._left = self._prefix + names.QUEUE_LEFT
        self._waiting = self._prefix + names.QUEUE_WAITING
        # redis-py's default pool refuses a command outright once its connections are all busy
        # (MaxConnectionsError); a blocking pool makes the command wait for one instead.
        pool = aioredis.BlockingConnectionPool.from_url(
            settings.redis_url,
            max_connections=settings.max_connections,
            timeout=settings.timeout_s,
            socket_timeout=settings.timeout_s,
            socket_connect_timeout=settings.timeout_s,
            retry=Retry(NoBackoff(), 1),
            health_check_interval=15,
            **connection_options(settings.redis_url),
        )
        self._redis = aioredis.Redis.from_pool(pool)  # owns the pool: aclose() closes it
        # The job commands on connections of their own, as many again as the pool's.
        self._commands = Commands(pool, settings.max_connections, settings.timeout_s)
        self._create = self._commands.script(CREATE_LUA)
        self._create_many = self._commands.script(CREATE_MANY_LUA)
        self._transition = self._commands.script(TRANSITION_LUA)
        self._discard = self._commands.script(DISCARD_LUA)
        self._mark_published = self._commands.script(MARK_PUBLISHED_LUA)
        self._field_of_each = self._commands.script(FIELD_OF_EACH_LUA)

    def job_key(self, job_id: str) -> str:
        return self._prefix + names.JOB_KEY + job_id

    def _idem_key(self, key: str) -> str:
        return self._prefix + names.IDEMPOTENCY_KEY + key

    async def ping(self) -> None:
        try:
            await self._redis.ping()
        except AuthenticationError as exc:
            where = redact_url(self._settings.redis_url)
            raise Unavailable(
                f"Redis at {where} refused the password in REDIS_URL (missing or wrong)"
            ) from exc
        except RedisError as exc:
            raise Unavailable(f"Redis at {redact_url(self._settings.redis_url)} is unreachable") from exc

    async def create(self, job: Job, idempotency_key: str = "") -> tuple[Job, bool]:
        try:
            created, job_id = await self._commands.run(
                self._create,
                [
                    self.job_key(job.job_id),
                    self._idem_key(idempotency_key),
                    self._entered,
                    self._waiting,
                ],
                [
                    job.status,
                    codec.encode_record(job),
                    self._ttl_ms,
                    job.job_id,
                    int(bool(idempotency_key)),
                    codec.seconds(job.trace.accepted_at),
                ],
            )
            if created:
                return job, True
            existing = await self.get(job_id.decode())
        except RedisError as exc:
            raise Unavailable("Redis is unreachable") from exc
        if existing is None:  # expired between the two calls: nothing to deduplicate against
            return await self.create(job, idempotency_key)
        return existing, False

    async def create_many(self, jobs: Sequence[Job]) -> None:
        if not jobs:
            return
        args: list[str | int | float | bytes] = [jobs[0].status, self._ttl_ms]
        for job in jobs:
            args += [codec.encode_record(job), job.job_id, codec.seconds(job.trace.accepted_at)]
        try:
            await self._commands.run(
                self._create_many,
                [self._entered, self._waiting, *(self.job_key(job.job_id) for job in jobs)],
                args,
            )
        except RedisError as exc:
            raise Unavailable("Redis is unreachable") from exc

    async def discard(self, job_id: str, idempotency_key: str = "") -> None:
        try:
            await self._commands.run(
                self._discard,
                [self.job_key(job_id), self._idem_key(idempotency_key), self._left, self._waiting],
                [job_id],
            )
        except RedisError as exc:
            raise Unavailable("Redis is unreachable") from exc

    async def mark_published(self, job_id: str) -> None:
        try:
            await self._commands.run(self._mark_published, [self.job_key(job_id)], [])
        except RedisError as exc:
            raise Unavailable("Redis is unreachable") from exc

    async def published(self, job_id: str) -> bool:
        try:
            return bool(await self._redis.hexists(self.job_key(job_id), "p"))
        except RedisError as exc:
            raise Unavailable("Redis is unreachable") from exc

    async def transition(self, job: Job) -> bool:
        [written] = await self.transition_many([job])
        return written

    async def transition_many(self, jobs: Sequence[Job], batch: BatchRecord | None = None) -> list[bool]:
        """Every job's transition and the batch's statistics in one script call: one command for
        Redis, and no SCRIPT EXISTS round trip (which a pipeline holding scripts costs)."""
        if not jobs and batch is None:
            return []
        p = self._prefix
        worker = batch.worker if batch is not None else ""
        keys = [
            p + names.STATS_FINISHED,
            self._left,
            self._waiting,
            p + names.STATS_WORKERS,
            p + names.STATS_WORKER + worker,
            p + names.STATS_BATCH_SIZES,
            p + names.STATS_CLOSE_REASONS,
        ]
        args: list[str | int | float | bytes] = [self._ttl_ms, self.channel]
        for job in jobs:
            keys.append(self.job_key(job.job_id))
            args += [
                job.status,
                codec.encode_record(job),
                codec.encode_event(job),
                codec.status_key(job.status),
                job.job_id,
            ]
        if batch is not None:
            args += [
                worker,
                batch.size,
                batch.real_tokens,
                batch.padded_tokens,
                batch.inference_ms,
                batch.queue_wait_ms,
                batch.close_reason,
            ]
        try:
            written = await self._commands.run(self._transition, keys, args)
        except RedisError as exc:
            raise Unavailable("Redis is unreachable") from exc
        return [bool(w) for w in written]

    async def get(self, job_id: str) -> Job | None:
        try:
            data = cast(bytes | None, await self._commands.call("HGET", self.job_key(job_id), "d"))
        except RedisError as exc:
            raise Unavailable("Redis is unreachable") from exc
        return None if data is None else Job.FromString(data)

    async def get_many(self, job_ids: Sequence[str]) -> list[Job | None]:
        """Each job's record: one script call, for the reads of jobs watched together."""
        raw = await self._fields("d", job_ids)
        return [None if data is None else Job.FromString(data) for data in raw]

    async def _fields(self, field: str, job_ids: Sequence[str]) -> list[bytes | None]:
        if not job_ids:
            return []
        keys = [self.job_key(job_id) for job_id in job_ids]
        try:
            return cast(list[bytes | None], await self._commands.run(self._field_of_each, keys, [field]))
        except RedisError as exc:
            raise Unavailable("Redis is unreachable") from exc

    async def left_queue(self) -> int:
        try:
            return int(await self._redis.get(self._left) or 0)
        except RedisError as exc:
            raise Unavailable("Redis is unreachable") from exc

    async def oldest_queued_s(self) -> float | None:
        try:
            async with self._redis.pipeline(transaction=False) as pipe:
                # A record that expired while QUEUED leaves its entry behind: drop those first.
                pipe.zremrangebyscore(self._waiting, "-inf", time.time() - self._settings.job_ttl_s)
                pipe.zrange(self._waiting, 0, 0, withscores=True)
                _, oldest = await pipe.execute()
        except RedisError as exc:
            raise Unavailable("Redis is unreachable") from exc
        return float(oldest[0][1]) if oldest else None

    async def queue_position(self, job_id: str) -> int | None:
        try:
            async with self._redis.pipeline(transaction=False) as pipe:
                pipe.hmget(self.job_key(job_id), ["s", "t"])
                pipe.get(self._left)
                (status, entered), left = await pipe.execute()
        except RedisError as exc:
            raise Unavailable("Redis is unreachable") from exc
        if status != str(codec.QUEUED).encode() or entered is None:
            return None
        return max(1, int(entered) - int(left or 0))

    async def statuses(self, job_ids: Sequence[str]) -> list[int | None]:
        """Each job's status (None: no record): one script call, on a batch's way to its pass."""
        return [None if r is None else int(r) for r in await self._fields("s", job_ids)]

    async def stats(self) -> StatsSnapshot:
        p = self._prefix
        try:
            members = cast(set[bytes], await self._redis.smembers(p + names.STATS_WORKERS))
            workers = sorted(w.decode() for w in members)
            async with self._redis.pipeline(transaction=False) as pipe:
                for worker in workers:
                    pipe.hgetall(p + names.STATS_WORKER + worker)
                pipe.hgetall(p + names.STATS_BATCH_SIZES)
                pipe.hgetall(p + names.STATS_CLOSE_REASONS)
                pipe.hgetall(p + names.STATS_FINISHED)
                *per_worker, sizes, reasons, finished = await pipe.execute()
        except RedisError as exc:
            raise Unavailable("Redis is unreachable") from exc
        snapshot = StatsSnapshot(
            batch_sizes={int(k): int(v) for k, v in sizes.items()},
            close_reasons={k.decode(): int(v) for k, v in reasons.items()},
            finished={k.decode(): int(v) for k, v in finished.items()},
        )
        for worker, fields in zip(workers, per_worker, strict=True):
            f = {k.decode(): v for k, v in fields.items()}
            snapshot.workers[worker] = WorkerCounters(
                batches=int(f.get("batches", 0)),
                jobs=int(f.get("jobs", 0)),
                real_tokens=int(f.get("real_tokens", 0)),
                padded_tokens=int(f.get("padded_tokens", 0)),
                inference_ms=float(f.get("inference_ms", 0.0)),
                queue_wait_ms=float(f.get("queue_wait_ms", 0.0)),
            )
        return snapshot

    async def events(self, on_subscribed: OnSubscribed | None = None) -> AsyncIterator[Job]:
        # A connection of its own. Its reads wait as long as get_message says; the socket
        # timeout bounds its writes (SUBSCRIBE, health-check PINGs).
        backoff_s = 0.1
        while True:
            client = aioredis.Redis.from_url(
                self._settings.redis_url,
                socket_connect_timeout=self._settings.timeout_s,
                socket_timeout=self._settings.timeout_s,
                health_check_interval=15,
                **connection_options(self._settings.redis_url),
            )
            pubsub = client.pubsub(ignore_subscribe_messages=True)
            try:
                await pubsub.subscribe(self.channel)
                log.info("subscribed to %s", self.channel)
                backoff_s = 0.1
                if on_subscribed is not None:
                    await on_subscribed()
                while True:
                    message = await pubsub.get_message(timeout=1.0)
                    if message is not None and message["type"] == "message":
                        for job in codec.decode_events(message["data"]):
                            yield job
            except (RedisError, OSError) as exc:
                log.warning("event subscription lost (%s); resubscribing in %.1fs", exc, backoff_s)
                await asyncio.sleep(backoff_s)
                backoff_s = min(backoff_s * 2, 2.0)
            finally:
                await pubsub.aclose()  # type: ignore[no-untyped-call]
                await client.aclose()

    async def close(self) -> None:
        await self._commands.close()
        await self._redis.aclose()
