"""What each process of an idle default stack does with its CPU, thread by thread: one fp32
stack on the local RabbitMQ and Redis, warmed, left quiet 5 s, then each thread's time on a CPU
(/proc/PID/task/TID/schedstat) over SECONDS more. Prints, per process, its CPU per second of
quiet and its six busiest threads. With checks-every.patch applied, CHECKS_EVERY_S=30 shows what
the services' dependency checks and the ingress's samplers take of it.

    PYTHONPATH=src:services:. $VENV/bin/python docs/benchmarks/light-path/idle_threads.py [SECONDS]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from bench import batching, stack, workload


def threads(pid: int) -> dict[str, float]:
    """Each thread of `pid` ("name:tid"): its time on a CPU so far, in seconds."""
    out = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            name = (task / "comm").read_text().strip()
            run_ns = int((task / "schedstat").read_text().split()[0])
        except OSError:  # the thread ended
            continue
        out[f"{name}:{task.name}"] = run_ns / 1e9
    return out


def main() -> None:
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 30.0
    env, batchers = batching.stack_env("default", workload.build_model(), "fp32")
    with stack.start("local", env, batchers=batchers, envoy=False) as targets:
        batching.warm(targets.ingress)
        time.sleep(5)
        before = {name: {pid: threads(pid) for pid in pids} for name, pids in targets.pids.items()}
        started = time.monotonic()
        time.sleep(seconds)
        elapsed = time.monotonic() - started
        for name, pids in targets.pids.items():
            spent = [
                (cpu - before[name][pid].get(thread, 0.0), thread)
                for pid in pids
                for thread, cpu in threads(pid).items()
            ]
            total = sum(cpu for cpu, _ in spent)
            busiest = sorted(spent, reverse=True)[:6]
            print(
                f"{name}: {total * 1000 / elapsed:.2f} ms of CPU a second over {elapsed:.0f} s quiet; "
                + ", ".join(f"{thread} {cpu * 1000 / elapsed:.2f}" for cpu, thread in busiest)
            )


if __name__ == "__main__":
    main()
