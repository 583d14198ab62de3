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

LOOP = 1_000  # iterations of the Python loop: 50-60 us of CPU on the Xeon measured here, when quick
ARRAY_BYTES = 4 * 1024 * 1024  # past the 1-2 MiB a core's own caches hold
PREEMPTED_US = 5.0  # a part whose wall time ran this far over its CPU time was preempted
SPELL_S = 0.02  # two rounds this close are neighbours (spells)

Round = list[float]  # [began at (s), loop CPU, loop wall, sum CPU, sum wall (us)]


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
    array = np.ones(ARRAY_BYTES // 8)
    rounds: list[Round] = []
    while not stop:
        time.sleep(every_s)
        began = time.time()
        loop_cpu, loop_wall = timed(python_loop)
        sum_cpu, sum_wall = timed(array.sum)
        rounds.append([began, loop_cpu, loop_wall, sum_cpu, sum_wall])
    out.write_text(json.dumps(rounds))


def unpreempted(rounds: list[Round]) -> list[Round]:
    """The rounds whose two parts ran without being preempted: a context switch costs the work
    cache refills of its own, which its CPU clock counts."""
    return [r for r in rounds if r[2] - r[1] < PREEMPTED_US and r[4] - r[3] < PREEMPTED_US]


def spells(rounds: list[Round], slow_us: float) -> tuple[float, float]:
    """How often a round ran slow (its loop over `slow_us`) right after a slow one, and right after
    a quick one: rounds in time order, neighbours SPELL_S apart or less."""
    pairs = [(a[1] > slow_us, b[1] > slow_us) for a, b in itertools.pairwise(rounds) if b[0] - a[0] < SPELL_S]
    after_slow = [b for a, b in pairs if a]
    after_quick = [b for a, b in pairs if not a]
    return sum(after_slow) / max(1, len(after_slow)), sum(after_quick) / max(1, len(after_quick))


def read(out: Path, slow_us: float) -> None:
    rounds = unpreempted(json.loads(out.read_text()))
    median = statistics.median
    slow = sum(r[1] > slow_us for r in rounds) / len(rounds)
    after_slow, after_quick = spells(rounds, slow_us)
    print(
        f"{len(rounds)} unpreempted rounds over {rounds[-1][0] - rounds[0][0]:.0f} s: loop CPU "
        f"{median(r[1] for r in rounds):.1f} us, sum CPU {median(r[3] for r in rounds):.1f} us, "
        f"{slow:.2f} of them slow (loop over {slow_us:g} us); a slow round right after a slow one "
        f"{after_slow:.2f}, after a quick one {after_quick:.2f}"
    )


if __name__ == "__main__":
    if sys.argv[1:2] == ["read"]:
        read(Path(sys.argv[2]), float(sys.argv[3]))
    else:
        main()
