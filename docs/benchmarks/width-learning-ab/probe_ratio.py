"""One job's narrow-over-wide ratio as the warm-up's probe measures it (`Lanes.paired`'s way:
the widths in turns, the other order each round, after a first round that warms the shape),
on the probe's own sentence, in a process of its own: for each GAP given, 8 pairs with GAP
seconds of idle before every pass (0: back to back, as the probe runs them).

    PYTHONPATH=src:services:. .venv/bin/python docs/benchmarks/width-learning-ab/probe_ratio.py 0 0.06 0 0.06
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time

import uvloop

from batcher.hf import HFModel
from batcher.lanes import Lanes
from batcher.settings import ModelSettings
from batcher.worker import PROBE_ROUNDS, PROBE_TEXT
from bench import workload


async def main() -> None:
    path = workload.build_model()
    model = HFModel(ModelSettings(backend="hf", model_path=str(path), torch_threads=2, precision="fp32"))
    lanes = Lanes(2, 2, model.use_threads)
    for wide in (True, False):  # as the batcher warms up: every thread, then one lane's share
        lane = lanes.take(wide)
        await lanes.run(lane, model.warm_up, 16)
        lanes.give_back(lane)
    [encoded] = model.encode([PROBE_TEXT])
    for gap_s in [float(g) for g in sys.argv[1:]]:
        times: dict[bool, list[float]] = {True: [], False: []}
        for round_ in range(PROBE_ROUNDS + 1):
            for wide in (True, False) if round_ % 2 else (False, True):
                await asyncio.sleep(gap_s)
                lane = lanes.take(wide)
                started = time.perf_counter()
                await lanes.run(lane, model.predict, [encoded])
                elapsed = time.perf_counter() - started
                lanes.give_back(lane)
                if round_:
                    times[wide].append(elapsed * 1000)
        wide_ms, narrow_ms = statistics.median(times[True]), statistics.median(times[False])
        ratio = narrow_ms / wide_ms
        line = f"gap {gap_s * 1000:.0f} ms: wide {wide_ms:.2f} narrow {narrow_ms:.2f} ratio {ratio:.2f}"
        print(line, flush=True)
    lanes.shutdown()


if __name__ == "__main__":
    uvloop.run(main())
