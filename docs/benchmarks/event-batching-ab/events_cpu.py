"""CPU the stream's event subscription spends per job event read.

A child process moves 400 batches of 16 jobs to DONE through `RedisJobStore.transition_many`
(as a batcher does); this process reads them with `RedisJobStore.events()` (as the stream's
fan-out does) and prints its own CPU time per event. Only the reader's CPU is counted.

    PYTHONPATH=src:services:. .venv/bin/python docs/benchmarks/event-batching-ab/events_cpu.py
    ... events_cpu.py --no-hiredis     # redis-py's pure-Python reply parser instead

Run it from a checkout of each side (a `git worktree` of the older commit) to compare.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
import uuid
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from batchline.v1.job_pb2 import Job

BATCHES, SIZE = 400, 16
REDIS_URL = "redis://127.0.0.1:6379/0"


def jobs(status: int) -> list[list[Job]]:
    from batchline.v1 import job_pb2

    result = job_pb2.Result(label="POSITIVE", score=0.9)
    return [
        [job_pb2.Job(job_id=f"j{b}-{k}", status=status, result=result) for k in range(SIZE)]  # type: ignore[arg-type]
        for b in range(BATCHES)
    ]


async def write(prefix: str) -> None:
    from batchline import codec
    from batchline.redis_store import RedisJobStore
    from batchline.settings import StoreSettings

    store = RedisJobStore(StoreSettings(redis_url=REDIS_URL, key_prefix=prefix, job_ttl_s=60))
    for batch in jobs(codec.DONE):
        await store.transition_many(batch)
    await store.close()


async def read() -> None:
    from redis.utils import HIREDIS_AVAILABLE

    from batchline import codec
    from batchline.redis_store import RedisJobStore
    from batchline.settings import StoreSettings

    prefix = f"events-cpu-{uuid.uuid4().hex[:8]}:"
    store = RedisJobStore(StoreSettings(redis_url=REDIS_URL, key_prefix=prefix, job_ttl_s=60))
    await store.create_many([job for batch in jobs(codec.QUEUED) for job in batch])
    subscribed = asyncio.Event()

    async def on_subscribed() -> None:
        subscribed.set()

    seen = 0

    async def consume() -> None:
        nonlocal seen
        async for _ in store.events(on_subscribed):
            seen += 1
            if seen == BATCHES * SIZE:
                return

    reader = asyncio.create_task(consume())
    await subscribed.wait()
    writer = await asyncio.create_subprocess_exec(sys.executable, __file__, "--write", prefix)
    started = time.process_time()
    await reader
    cpu_s = time.process_time() - started
    await writer.wait()
    parser = "hiredis" if HIREDIS_AVAILABLE else "pure-Python"
    print(f"{1e6 * cpu_s / seen:.1f} us CPU per event read ({seen} events, {parser} parser)")
    await store.close()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--no-hiredis", action="store_true", help="hide hiredis from redis-py")
    parser.add_argument("--write", metavar="PREFIX", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.no_hiredis:
        sys.modules["hiredis"] = None  # type: ignore[assignment]  # `import hiredis` now fails
    import uvloop

    uvloop.run(write(args.write) if args.write else read())


if __name__ == "__main__":
    main()
