"""CPU of waiting for a publish's confirmations: asyncio.wait against one countdown future
(tried, not kept), for 1 and 4 futures set on the next loop turn. Medians of 7 rounds of 5,000.

    .venv/bin/python docs/benchmarks/ingress-cpu-ab/wait_cpu.py
"""

import asyncio
import statistics
import time
from collections.abc import Sequence

import uvloop


def all_done(futures: Sequence[asyncio.Future[None]]) -> asyncio.Future[None]:
    done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    left = len(futures)

    def one_done(_: asyncio.Future[None]) -> None:
        nonlocal left
        left -= 1
        if left == 0 and not done.done():
            done.set_result(None)

    for future in futures:
        future.add_done_callback(one_done)
    return done


async def main() -> None:
    loop = asyncio.get_running_loop()
    for n in (1, 4):
        rounds: dict[str, list[float]] = {"asyncio.wait": [], "countdown future": []}
        for _ in range(7):
            for way in rounds:
                started = time.process_time()
                for _ in range(5000):
                    futures = [loop.create_future() for _ in range(n)]
                    for future in futures:
                        loop.call_soon(future.set_result, None)
                    if way == "asyncio.wait":
                        await asyncio.wait(futures, timeout=5)
                    else:
                        async with asyncio.timeout_at(loop.time() + 5):
                            await all_done(futures)
                rounds[way].append((time.process_time() - started) / 5000 * 1e6)
        print(n, "futures:", {way: round(statistics.median(v), 2) for way, v in rounds.items()}, "us")


uvloop.run(main())
