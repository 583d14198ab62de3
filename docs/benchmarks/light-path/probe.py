"""A fixed piece of work, timed by its own CPU clock, every few milliseconds: is the machine slow
for every process at the moments a lone pass runs long? Each round it runs a Python loop (the
core's speed) and sums a 4 MiB array (memory, which a one-item pass leans on: it reads the
model's 260 MB of weights once per pass), and records when it began (the wall clock, the clock of
the services' stamps) and each part's CPU time and wall time. Work that takes a fixed number of
instructions takes more CPU time only if the CPU runs them slower (its clock, its caches, the
memory shared with other tenants); being preempted or waiting for a CPU shows in the wall time
only. Runs until SIGTERM or SIGINT, then writes its rounds to OUT as JSON: a list of [began at
(s), loop CPU (us), loop wall (us), sum CPU (us), sum wall (us)].

    $VENV/bin/python docs/benchmarks/light-path/probe.py OUT [EVERY_MS]
    $VENV/bin/python docs/benchmarks/light-path/probe.py read OUT SLOW_US

`pass_cpu.py` starts it beside the stack when PROBE=1 and files its rounds under each pass
(`machine_or_team` reads them). `read` reads a run of the probe alone: its unpreempted rounds'
loop CPU, the share over SLOW_US, and whether a slow round follows a slow one.
"""

from __future__ import annotations

import itertools
import json
import signal
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType

import numpy as np

LOOP = 1_000  # iterations of the Python loop: about 30-40 us on these machines
ARRAY = np.ones(4 * 1024 * 1024 // 8)  # 4 MiB: past the 1-2 MiB a core's own caches hold


def python_loop() -> int:
    total = 0
    for i in range(LOOP):
        total += i * i
    return total


def timed(work: Callable[[], object]) -> tuple[float, float]:
    """CPU and wall time of one call, in microseconds."""
    cpu, wall = time.thread_time_ns(), time.perf_counter_ns()
    work()
    return (time.thread_time_ns() - cpu) / 1000, (time.perf_counter_ns() - wall) / 1000


def main() -> None:
    out = Path(sys.argv[1])
    every_s = (float(sys.argv[2]) if len(sys.argv) > 2 else 10.0) / 1000
    stop = False

    def on_signal(signum: int, frame: FrameType | None) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    rounds: list[list[float]] = []
    while not stop:
        time.sleep(every_s)
        began = time.time()
        loop_cpu, loop_wall = timed(python_loop)
        sum_cpu, sum_wall = timed(ARRAY.sum)
        rounds.append([began, loop_cpu, loop_wall, sum_cpu, sum_wall])
    out.write_text(json.dumps(rounds))


def read(out: Path, slow_us: float) -> None:
    rounds = [r for r in json.loads(out.read_text()) if r[2] - r[1] < 5 and r[4] - r[3] < 5]  # unpreempted
    median = statistics.median
    pairs = [(a[1] > slow_us, b[1] > slow_us) for a, b in itertools.pairwise(rounds) if b[0] - a[0] < 0.02]
    after_slow = [b for a, b in pairs if a]
    after_quick = [b for a, b in pairs if not a]
    slow = sum(r[1] > slow_us for r in rounds) / len(rounds)
    print(
        f"{len(rounds)} unpreempted rounds over {rounds[-1][0] - rounds[0][0]:.0f} s: loop CPU "
        f"{median(r[1] for r in rounds):.1f} us, sum CPU {median(r[3] for r in rounds):.1f} us, "
        f"{slow:.2f} of "
        f"them slow (loop over {slow_us:g} us); a slow round right after a slow one "
        f"{sum(after_slow) / max(1, len(after_slow)):.2f}, after a quick one "
        f"{sum(after_quick) / max(1, len(after_quick)):.2f}"
    )


if __name__ == "__main__":
    if sys.argv[1:2] == ["read"]:
        read(Path(sys.argv[2]), float(sys.argv[3]))
    else:
        main()
