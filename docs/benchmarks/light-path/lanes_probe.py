"""Lone fp32 passes after the batcher's own warm-up (`Batcher.warm_up`, the width probe included),
with one model lane or two: whether a two-lane batcher's wide pass runs slower than a one-lane
batcher's, both on every thread. One process per side (OpenMP's teams are per process), JOBS
single-item passes each GAP_S seconds after the last, run as the worker runs them.

    PYTHONPATH=src:services:. .venv/bin/python docs/benchmarks/light-path/lanes_probe.py LANES GAP_S JOBS
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import time
from typing import Any

from batcher.model import load_model
from batcher.settings import BatcherSettings
from batcher.worker import Batcher
from bench.workload import MODEL_DIR, build_model, sentences


async def lone_passes(batcher: Batcher, model: Any, gap_s: float, jobs: int) -> list[float]:
    await batcher.warm_up()
    lanes = batcher._lanes
    times = []
    for text in sentences(jobs, seed=7):
        [encoded] = model.encode([text])
        await asyncio.sleep(gap_s)
        lane = lanes.take(lanes.count > 1)  # alone: wide with two lanes, every thread with one
        started = time.perf_counter()
        await lanes.run(lane, model.predict, [encoded])
        times.append((time.perf_counter() - started) * 1000)
        lanes.give_back(lane)
    lanes.shutdown()
    return times


def main() -> None:
    lanes, gap_s, jobs = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
    build_model()
    env = {
        **os.environ,
        "MODEL_BACKEND": "hf",
        "MODEL_PATH": str(MODEL_DIR),
        "PRECISION": "fp32",
        "MODEL_LANES": lanes,
    }
    settings = BatcherSettings.from_env(env)
    model = load_model(settings.model)
    batcher = Batcher(settings, None, None, model)  # type: ignore[arg-type]  # warm_up uses neither
    times = asyncio.run(lone_passes(batcher, model, gap_s, jobs))
    print(f"lanes={lanes} p50 {statistics.median(times):.2f} ms mean {statistics.mean(times):.2f} ms")


if __name__ == "__main__":
    main()
