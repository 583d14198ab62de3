"""The bare model (bf16, 2 threads, length-sorted batches of 16 of the benchmark's sentences)
alone, next to a process that burns 20% of one core (1 ms busy, 4 ms asleep), and next to a
Python thread doing the same in the model's own process. Twice each, alternating.

    PYTHONPATH=src:services:. .venv/bin/python docs/benchmarks/contention/contention.py
"""

from __future__ import annotations

import random
import subprocess
import sys
import threading
import time

from batcher.hf import HFModel
from batcher.settings import ModelSettings
from bench import workload

BURN = (
    "import time\n"
    "while True:\n"
    "    e = time.perf_counter() + 0.001\n"
    "    while time.perf_counter() < e: pass\n"
    "    time.sleep(0.004)\n"
)


def main() -> None:
    path = workload.build_model()
    model = HFModel(ModelSettings(backend="hf", model_path=str(path), torch_threads=2, precision="bf16"))
    model.warm_up(16)
    encoded = sorted(model.encode(workload.sentences(1600, seed=7)), key=lambda e: e.tokens)
    batches = [encoded[i : i + 16] for i in range(0, 1600, 16)]
    random.Random(1).shuffle(batches)

    def throughput(seconds: float = 8.0) -> float:
        done, began, i = 0, time.perf_counter(), 0
        while time.perf_counter() - began < seconds:
            model.predict(batches[i % len(batches)])
            done, i = done + 16, i + 1
        return done / (time.perf_counter() - began)

    stop = threading.Event()

    def burn() -> None:
        while not stop.is_set():
            end = time.perf_counter() + 0.001
            while time.perf_counter() < end:
                pass
            time.sleep(0.004)

    for beside in ["nothing", "a thread", "a process"] * 2:
        stop.clear()
        thread = threading.Thread(target=burn) if beside == "a thread" else None
        process = subprocess.Popen([sys.executable, "-c", BURN]) if beside == "a process" else None
        if thread:
            thread.start()
        time.sleep(0.3)
        print(f"bf16, sorted batches of 16, beside {beside}: {throughput():.1f} sequences/s", flush=True)
        stop.set()
        if thread:
            thread.join()
        if process:
            process.kill()


if __name__ == "__main__":
    main()
