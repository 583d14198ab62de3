"""The packed bf16 pass in this process, on two one-thread lanes (as a batcher runs them at
saturation): 2,400 new sentences cut into batches as the batcher cuts them (pools of 128 sorted
by length, batches of 16), run once at shapes met for the first time, then again.

    PYTHONPATH=src:services:. .venv/bin/python docs/benchmarks/row-buckets-ab/in_process.py

Run it from a checkout of each side to compare (`git worktree add` of the older commit).
"""

from __future__ import annotations

import threading
import time
from typing import Any

import torch

from bench.workload import MODEL_DIR, build_model, sentences


def lanes(model: Any, batches: list[list[Any]]) -> float:
    """Sequences per second over `batches`, alternate batches on each of two one-thread lanes."""
    done: list[tuple[int, float]] = []

    def lane(k: int) -> None:
        torch.set_num_threads(1)
        started, n = time.perf_counter(), 0
        for batch in batches[k::2]:
            model.predict(batch)
            n += len(batch)
        done.append((n, time.perf_counter() - started))

    threads = [threading.Thread(target=lane, args=(k,)) for k in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sum(n for n, _ in done) / max(seconds for _, seconds in done)


def main() -> None:
    from batcher.hf import HFModel
    from batcher.settings import ModelSettings

    path = build_model(MODEL_DIR)
    model = HFModel(ModelSettings(backend="hf", model_path=str(path), torch_threads=2, precision="bf16"))
    model.warm_up(16)
    for seed in (11, 12):
        encoded = model.encode(sentences(2400, seed=seed))
        batches = []
        for i in range(0, len(encoded), 128):
            pool = sorted(encoded[i : i + 128], key=lambda e: e.tokens)
            batches += [pool[j : j + 16] for j in range(0, len(pool), 16)]
        first, again = lanes(model, batches), lanes(model, batches)
        print(f"sentences seed {seed}: first time {first:.0f}/s, again {again:.0f}/s", flush=True)


if __name__ == "__main__":
    main()
