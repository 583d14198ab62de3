"""The hops of `idle_wake.py` with the guest's halt polling off (as these VMs boot, with
`haltpoll.guest_halt_poll_ns=0`) and on (the kernel's own default, 200 µs), in turns.

With polling on, a vCPU that goes idle spins up to that long before it halts, so a wake-up that
comes within it finds the vCPU running; off, every idle vCPU halts at once. Needs root (it
writes `/sys/module/haltpoll/parameters/guest_halt_poll_ns`) and puts the value it found back.

    PYTHONPATH=src:services:. .venv/bin/python docs/benchmarks/idle-wake/haltpoll_ab.py [ROUNDS]
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
from collections import defaultdict
from pathlib import Path

from idle_wake import disk_sync, rabbit_delivery, redis_ping

from bench.batching import turns

KNOB = Path("/sys/module/haltpoll/parameters/guest_halt_poll_ns")
VALUES_NS = (0, 200_000)


def probe() -> dict[str, float]:
    """Every hop's p50 (ms), the RabbitMQ one until the consumer has the task."""
    readings = {}
    for gap, ms in asyncio.run(redis_ping()).items():
        readings[f"Redis PING after {gap * 1000:.0f} ms quiet"] = ms
    for gap, (_, consumer) in asyncio.run(rabbit_delivery()).items():
        readings[f"RabbitMQ publish after {gap * 1000:.0f} ms quiet"] = consumer
    for gap, ms in disk_sync().items():
        readings[f"fdatasync after {gap * 1000:.0f} ms quiet"] = ms
    return readings


def main(rounds: int) -> None:
    if os.geteuid() != 0 or not KNOB.exists():
        sys.exit(f"needs root and {KNOB} (the cpuidle-haltpoll driver)")
    found = KNOB.read_text().strip()
    seen: dict[int, dict[str, list[float]]] = {value: defaultdict(list) for value in VALUES_NS}
    try:
        for turn in range(rounds):
            for value in turns(list(VALUES_NS), turn):
                KNOB.write_text(str(value))
                for what, ms in probe().items():
                    seen[value][what].append(ms)
                print(f"round {turn + 1}/{rounds}, guest_halt_poll_ns={value}: done", flush=True)
    finally:
        KNOB.write_text(found)
    print(f"\nmedian over {rounds} rounds of each probe's p50 (ms); guest_halt_poll_ns put back to {found}")
    print(f"| hop | {' | '.join(f'poll {v // 1000} µs' for v in VALUES_NS)} | runs (off; on) |")
    print(f"|---|{'---|' * len(VALUES_NS)}---|")
    for what in seen[VALUES_NS[0]]:
        cells = [statistics.median(seen[value][what]) for value in VALUES_NS]
        runs = "; ".join(", ".join(f"{ms:.2f}" for ms in seen[value][what]) for value in VALUES_NS)
        print(f"| {what} | {' | '.join(f'{ms:.2f}' for ms in cells)} | {runs} |")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 4)
