"""The RabbitMQ hop of `idle_wake.py` (a confirmed publish to a quorum queue until its consumer has
it, after 0-100 ms quiet) on RabbitMQ nodes started with different Erlang VM flags, in turns.

Each node is started beside the machine's own (which is not touched) by
`rabbit_nodes.sh start`, on ports 5674-5676:
    5674  as RabbitMQ starts by default (two schedulers, `+sbwt none`)
    5675  `+S 1:1`: one scheduler, so the queue's Erlang processes hand a task on without
          waking a second thread
    5676  `+sbwt short +sbwtdcpu short +sbwtdio short`: schedulers spin a little before sleeping

    docs/benchmarks/idle-wake/rabbit_nodes.sh start
    PYTHONPATH=src:services:. .venv/bin/python docs/benchmarks/idle-wake/rabbit_args_ab.py [ROUNDS]
    docs/benchmarks/idle-wake/rabbit_nodes.sh stop
"""

from __future__ import annotations

import asyncio
import statistics
import sys
from collections import defaultdict

from idle_wake import rabbit_delivery

from bench.batching import turns

NODES = {"default": 5674, "+S 1:1": 5675, "+sbwt short": 5676}


def main(rounds: int) -> None:
    seen: dict[str, dict[str, list[float]]] = {name: defaultdict(list) for name in NODES}
    for turn in range(rounds):
        for name in turns(list(NODES), turn):
            url = f"amqp://guest:guest@127.0.0.1:{NODES[name]}/"
            for gap, (_, consumer) in asyncio.run(rabbit_delivery(url)).items():
                seen[name][f"{gap * 1000:.0f} ms quiet"].append(consumer)
        print(f"round {turn + 1}/{rounds} done", flush=True)
    print(f"\npublish -> at the consumer, median over {rounds} rounds of each round's p50 (ms)")
    print(f"| after | {' | '.join(NODES)} |")
    print(f"|---|{'---|' * len(NODES)}")
    for gap in seen["default"]:
        cells = " | ".join(
            f"{statistics.median(seen[name][gap]):.2f} ({', '.join(f'{ms:.2f}' for ms in seen[name][gap])})"
            for name in NODES
        )
        print(f"| {gap} | {cells} |")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 4)
