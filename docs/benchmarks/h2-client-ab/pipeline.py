"""The pipeline scenario of `make bench` with each client: Submit at 1,100/s open loop for 10 s,
each job watched to DONE (--e2e), 2 batchers on the zero-cost model, a fresh stack per run, the
checkouts in turns (the order reversed in the second round). Whether the generator's gRPC
client changes what the pipeline completes. Each argument is NAME=CHECKOUT.

    git worktree add /tmp/before 31f8023   # Submit and WatchJob over grpc.aio
    git worktree add /tmp/mid 413260b      # Submit over bench.load.h2, WatchJob over grpc.aio
    PYTHONPATH=src:services:. .venv/bin/python docs/benchmarks/h2-client-ab/pipeline.py \
        grpc.aio=/tmp/before submit-h2=/tmp/mid both-h2=.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from ab import harness

from bench import stack
from bench.suite import PIPELINE_OFFERED_RPS, ZERO_COST


def main() -> None:
    variants = [(name, Path(path).resolve()) for name, _, path in (a.partition("=") for a in sys.argv[1:])]
    for number in range(2):
        for name, checkout in variants if number == 0 else variants[::-1]:
            with stack.start("local", ZERO_COST, batchers=2) as targets:
                harness(checkout, targets.ingress, ["--rps", "200", "-z", "1s"])
                flags = [
                    "--rps", str(PIPELINE_OFFERED_RPS), "-z", "10s", "-c", "1000", "--duration-stop", "wait",
                    "--e2e", "--stream-host", targets.stream,
                ]  # fmt: skip
                report = harness(checkout, targets.ingress, flags)
            e2e = report["batchline"]["e2e"]
            print(
                time.strftime("%H:%M:%S"), f"round {number + 1}", name,
                f"accepted {e2e['accepted']} done {e2e['done']} unfinished {e2e['unfinished']}",
                f"done/s {e2e['doneRps']:.0f} generator CPU s {report['batchline']['generatorCpuS']:.2f}",
                flush=True,
            )  # fmt: skip


if __name__ == "__main__":
    main()
