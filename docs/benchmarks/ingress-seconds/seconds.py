"""The ingress target's scenario (Submit at 2,000/s open loop for 30 s, no batcher), with each
second of the run on its own: that second's p99 and slowest Submit, in ms, as `second:p99/max`;
after each run, the share of one core the ingress process used in each second (from /proc).

    PYTHONPATH=src:services:. .venv/bin/python docs/benchmarks/ingress-seconds/seconds.py [runs]
"""

from __future__ import annotations

import datetime
import itertools
import sys
import threading
import time
from dataclasses import replace

from bench import stack, suite
from bench.load import runner


class CpuEachSecond:
    """The share of one core that `pids` use, second by second, sampled from /proc in a thread."""

    def __init__(self, pids: list[int]) -> None:
        self._pids, self._done = pids, threading.Event()
        self._samples: list[tuple[float, float]] = []  # (wall time, CPU seconds so far)
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while True:
            self._samples.append((time.time(), stack.cpu_seconds(self._pids)))
            if self._done.wait(max(0.0, self._samples[-1][0] + 1.0 - time.time())):
                return

    def stop(self) -> list[float]:
        self._done.set()
        self._thread.join()
        return [(b[1] - a[1]) / (b[0] - a[0]) for a, b in itertools.pairwise(self._samples)]


def main() -> None:
    for run_number in range(int(sys.argv[1]) if len(sys.argv) > 1 else 1):
        with stack.start("local", suite.HOLD_ALL, batchers=0) as targets:
            warm = suite.submit("warm", host=targets.ingress, rps=200, duration=1.0, progress=False)
            runner.run(runner.make_plan(warm.validate(), suite.PROTOSET.read_bytes()))
            connections = suite.INGRESS_CONNECTIONS  # the generator's calls spread as the suite spreads them
            options = suite.submit(
                "ingress-direct", rps=2000, duration=30, concurrency=1000, connections=connections
            )
            cpu = CpuEachSecond(targets.pids["ingress"])
            report = runner.run(
                runner.make_plan(
                    replace(options, host=targets.ingress).validate(), suite.PROTOSET.read_bytes()
                )
            )
            shares = cpu.stop()
        seconds: dict[int, list[float]] = {}
        for detail in report["details"]:
            sent = datetime.datetime.fromisoformat(detail["timestamp"][:26].rstrip("Z")).timestamp()
            seconds.setdefault(int(sent), []).append(detail["latency"] / 1e6)
        first = min(seconds)
        cells = []
        for second in sorted(seconds):
            ordered = sorted(seconds[second])
            cells.append(f"{second - first}:{ordered[int(0.99 * (len(ordered) - 1))]:.0f}/{ordered[-1]:.0f}")
        print(f"run {run_number + 1}: p99 {suite.percentile(report, 99):.1f} ms")
        print("  " + " ".join(cells), flush=True)
        print("  ingress, share of one core each second: " + " ".join(f"{s:.0%}" for s in shares), flush=True)


if __name__ == "__main__":
    main()
