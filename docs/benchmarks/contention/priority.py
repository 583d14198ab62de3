"""What shields a two-thread forward pass from the rest of a 2-vCPU machine?

The bare model (fp32, 2 threads, batches of `--size` of the benchmark's sentences; 3 is what a
batcher runs at 40 req/s) timed pass by pass, each variant in a fresh process of its own, the
variants in turns (reversed every other round), `--rounds` rounds:

- `alone`: nothing beside it;
- `burner`: beside a process that takes a share of one core in short bursts (`--busy-ms` busy,
  `--idle-ms` asleep: the pipeline's other processes in miniature);
- `burner, model nice -N`: the same, every thread of the model's process at nice -N;
- `burner nice 19`: the burner at the lowest priority, the model at the default;
- `spinner nice 19`: nothing but a busy loop at the lowest priority beside it (it keeps the other
  vCPU from halting, and yields to the model at once);
- `GOMP_SPINCOUNT=K`: alone, OpenMP's workers spinning K iterations before they sleep.

    PYTHONPATH=src:services:. .venv/bin/python docs/benchmarks/contention/priority.py [--rounds 3]

Lowering a nice value needs the privilege to (root, or CAP_SYS_NICE).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

BURN = (
    "import sys, time\n"
    "busy, idle = float(sys.argv[1]) / 1000, float(sys.argv[2]) / 1000\n"
    "while True:\n"
    "    e = time.perf_counter() + busy\n"
    "    while time.perf_counter() < e: pass\n"
    "    if idle: time.sleep(idle)\n"
)


def set_nice(value: int) -> None:
    """Every thread of this process (PyTorch's OpenMP workers included) at `value`."""
    for tid in os.listdir("/proc/self/task"):
        os.setpriority(os.PRIO_PROCESS, int(tid), value)


def measure(size: int, seconds: float, nice: int) -> list[float]:
    """Pass times in ms, in this process (`--measure`)."""
    from batcher.hf import HFModel
    from batcher.settings import ModelSettings
    from bench import workload

    model = HFModel(
        ModelSettings(backend="hf", model_path=str(workload.build_model()), torch_threads=2, precision="fp32")
    )
    model.warm_up(16)
    encoded = model.encode(workload.sentences(600, seed=7))
    batches = [encoded[i : i + size] for i in range(0, len(encoded) - size, size)]
    set_nice(nice)
    time.sleep(0.3)
    times, began, i = [], time.perf_counter(), 0
    while time.perf_counter() - began < seconds:
        start = time.perf_counter()
        model.predict(batches[i % len(batches)])
        times.append((time.perf_counter() - start) * 1000)
        i += 1
    return times


def variant_setup(name: str, args: argparse.Namespace) -> tuple[list[str] | None, dict[str, str], int]:
    """(the process beside the model, or None; the model's extra environment; its nice)."""
    burner = [sys.executable, "-c", BURN, str(args.busy_ms), str(args.idle_ms)]
    spinner = ["nice", "-n", "19", sys.executable, "-c", BURN, "1000", "0"]
    if name == "alone":
        return None, {}, 0
    if name == "burner":
        return burner, {}, 0
    if name.startswith("burner, model nice"):
        return burner, {}, -args.nice
    if name == "burner nice 19":
        return ["nice", "-n", "19", *burner], {}, 0
    if name == "spinner nice 19":
        return spinner, {}, 0
    if name.startswith("GOMP_SPINCOUNT="):
        return None, {"GOMP_SPINCOUNT": name.split("=", 1)[1]}, 0
    raise ValueError(name)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--size", type=int, default=3)
    parser.add_argument("--busy-ms", type=float, default=0.5)
    parser.add_argument("--idle-ms", type=float, default=2.0)
    parser.add_argument("--nice", type=int, default=10)
    parser.add_argument("--variants", nargs="*")
    parser.add_argument("--measure", type=int, help=argparse.SUPPRESS)  # the nice, in a child
    args = parser.parse_args()
    if args.measure is not None:
        print(json.dumps(measure(args.size, args.seconds, args.measure)))
        return

    variants = args.variants or [
        "alone",
        "burner",
        f"burner, model nice -{args.nice}",
        "burner nice 19",
        "spinner nice 19",
        "GOMP_SPINCOUNT=3000000",
    ]
    print(
        f"# fp32, 2 threads, batches of {args.size}; burner {args.busy_ms} ms busy / {args.idle_ms} ms "
        f"idle; {args.seconds:g} s per cell, each in a fresh process",
        flush=True,
    )
    results: dict[str, list[tuple[float, float]]] = {v: [] for v in variants}
    for round_ in range(args.rounds):
        for name in variants if round_ % 2 == 0 else variants[::-1]:
            beside, env, nice = variant_setup(name, args)
            other = subprocess.Popen(beside) if beside else None
            try:
                out = subprocess.run(
                    [sys.executable, __file__, "--measure", str(nice), "--size", str(args.size),
                     "--seconds", str(args.seconds)],
                    env={**os.environ, **env}, capture_output=True, text=True, check=True,
                )  # fmt: skip
            finally:
                if other:
                    other.kill()
                    other.wait()
            times = sorted(json.loads(out.stdout.strip().splitlines()[-1]))
            p50, p90 = statistics.median(times), times[int(0.9 * (len(times) - 1))]
            results[name].append((p50, p90))
            print(
                f"round {round_ + 1} {name:>26}: p50 {p50:6.1f} ms, p90 {p90:6.1f} ms, {len(times)} passes",
                flush=True,
            )
    print("medians over the rounds:")
    for name, cells in results.items():
        p50 = statistics.median(c[0] for c in cells)
        p90 = statistics.median(c[1] for c in cells)
        print(f"  {name:>26}: p50 {p50:6.1f} ms, p90 {p90:6.1f} ms")


if __name__ == "__main__":
    main()
