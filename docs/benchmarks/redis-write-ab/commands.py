"""One Redis command through the store's Commands, redis-py's write (a task and a timer per
command, under asyncio.wait_for) against `Connection`'s with own-write.patch (in the caller's
step), against the local Redis.

- `cpu ROUNDS`: CPU per HGET, one after another and 16 at once; rounds in turns, medians and
  every round.
- `latency`: wall time of one HGET after 30 ms idle (as at light load) and back to back; 6
  rounds in turns, p50 and p90.

    git apply docs/benchmarks/redis-write-ab/own-write.patch
    PYTHONPATH=src:services:. .venv/bin/python docs/benchmarks/redis-write-ab/commands.py cpu 7
    PYTHONPATH=src:services:. .venv/bin/python docs/benchmarks/redis-write-ab/commands.py latency
    git apply -R docs/benchmarks/redis-write-ab/own-write.patch
"""

import asyncio
import statistics
import sys
import time
import uuid

import redis.asyncio as aioredis
import uvloop

from batchline import redis_store
from batchline.redis_store import RedisJobStore
from batchline.settings import StoreSettings

KEY = "cpu:nokey"


class Old(redis_store.Connection):
    send_packed_command = aioredis.Connection.send_packed_command


def stores() -> dict[str, RedisJobStore]:
    made = {}
    for name, cls in (("redis-py write", Old), ("own write", redis_store.Connection)):
        orig = redis_store.connection_options
        redis_store.connection_options = lambda url, cls=cls: {"connection_class": cls}
        settings = StoreSettings(
            redis_url="redis://127.0.0.1:6379/0", key_prefix=f"cpu:{uuid.uuid4().hex[:8]}:", job_ttl_s=60
        )
        made[name] = RedisJobStore(settings)
        redis_store.connection_options = orig
    return made


async def cpu(ways: dict[str, RedisJobStore], rounds: int) -> None:
    times = {f"{n} {k}": [] for n in ways for k in ("HGET", "16 HGET at once")}
    for _ in range(rounds):
        for name, s in ways.items():
            for _ in range(50):
                await s._commands.call("HGET", KEY, "d")
            t = time.process_time()
            for _ in range(2000):
                await s._commands.call("HGET", KEY, "d")
            times[f"{name} HGET"].append((time.process_time() - t) / 2000 * 1e6)
            t = time.process_time()
            for _ in range(200):
                await asyncio.gather(*(s._commands.call("HGET", KEY, "d") for _ in range(16)))
            times[f"{name} 16 HGET at once"].append((time.process_time() - t) / 3200 * 1e6)
    for name, v in times.items():
        print(f"{name:32s} {statistics.median(v):6.1f} us  ({', '.join(f'{x:.0f}' for x in v)})")


async def latency(ways: dict[str, RedisJobStore]) -> None:
    times = {n: {"idle": [], "busy": []} for n in ways}
    for _ in range(6):
        for name, s in ways.items():
            for gap_s, kind, count in ((0.03, "idle", 40), (0.0, "busy", 400)):
                for _ in range(count):
                    if gap_s:
                        await asyncio.sleep(gap_s)
                    t = time.perf_counter()
                    await s._commands.call("HGET", KEY, "d")
                    times[name][kind].append((time.perf_counter() - t) * 1e6)
    for n, d in times.items():
        spread = {
            k: (round(statistics.median(v)), round(statistics.quantiles(v, n=10)[8])) for k, v in d.items()
        }
        print(n, spread, "(p50, p90 us)")


async def main() -> None:
    ways = stores()
    if sys.argv[1] == "cpu":
        await cpu(ways, int(sys.argv[2]))
    else:
        await latency(ways)
    for s in ways.values():
        await s.close()


uvloop.run(main())
