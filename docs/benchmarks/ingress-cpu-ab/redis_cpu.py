"""CPU per command, redis-py's client against the store's own connections (Commands), on the
local Redis: the EVALSHA that stores a group of four Submits' jobs, the HGET of a record, and
a batch's status read (statuses(): a redis-py pipeline of HGETs before, one script now).
Seven rounds of 1,000 each, in turns; medians and every round.

    PYTHONPATH=src:services:. .venv/bin/python docs/benchmarks/ingress-cpu-ab/redis_cpu.py
"""

import statistics
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import uvloop

from batchline import codec
from batchline.redis_store import CREATE_MANY_LUA, RedisJobStore
from batchline.settings import StoreSettings
from batchline.v1 import job_pb2


async def main() -> None:
    prefix = f"cpu:{uuid.uuid4().hex[:8]}:"
    settings = StoreSettings(redis_url="redis://127.0.0.1:6379/0", key_prefix=prefix, job_ttl_s=60)
    store = RedisJobStore(settings)
    jobs = []
    for _ in range(4):
        task = job_pb2.InferenceTask(job_id=codec.new_job_id(), text="the food was great (review 123)")
        task.accepted_at.CopyFrom(codec.now_ts())
        jobs.append(codec.queued_job(task))
    args: list[Any] = [jobs[0].status, 60_000]
    for job in jobs:
        args += [codec.encode_record(job), job.job_id, codec.seconds(job.trace.accepted_at)]
    keys = [settings.key_prefix + "entered", settings.key_prefix + "waiting"]
    keys += [store.job_key(job.job_id) for job in jobs]
    script = store._redis.register_script(CREATE_MANY_LUA)  # redis-py's way, as before
    sha = store._commands.script(CREATE_MANY_LUA)
    ways: dict[str, Callable[[], Awaitable[Any]]] = {
        "EVALSHA, redis-py's client": lambda: script(keys=keys, args=args),
        "EVALSHA, Commands": lambda: store._commands.run(sha, keys, args),
        "HGET, redis-py's client": lambda: store._redis.hget(keys[2], "d"),
        "HGET, Commands": lambda: store._commands.call("HGET", keys[2], "d"),
    }

    async def pipelined(keys: list[str]) -> Any:  # statuses() before: a pipeline of HGETs
        async with store._redis.pipeline(transaction=False) as pipe:
            for key in keys:
                pipe.hget(key, "s")
            return await pipe.execute()

    batch = [store.job_key(f"s{i}") for i in range(16)]
    ways |= {
        "1 status, redis-py pipeline": lambda: pipelined(batch[:1]),
        "1 status, Commands script": lambda: store.statuses(["s0"]),
        "16 statuses, redis-py pipeline": lambda: pipelined(batch),
        "16 statuses, Commands script": lambda: store.statuses([f"s{i}" for i in range(16)]),
    }
    rounds: dict[str, list[float]] = {name: [] for name in ways}
    for _ in range(7):
        for name, call in ways.items():
            for _ in range(50):
                await call()
            started = time.process_time()
            for _ in range(1000):
                await call()
            rounds[name].append((time.process_time() - started) / 1000 * 1e6)
    for name, values in rounds.items():
        print(f"{name:32s} {statistics.median(values):6.1f} us  ({', '.join(f'{v:.0f}' for v in values)})")
    await store._redis.delete(*keys)
    await store.close()


uvloop.run(main())
