"""The model on a CUDA GPU: what the batcher's passes cost there, per batch size, packed
against padded, fp32 against bf16.

Through `HFModel.predict`, the call the batcher makes (tokens already encoded; the pass, the
softmax, the copy back and the per-job results), on the full-size DistilBERT shape with random
weights and the benchmark's sentences. Batches are drawn at random (FIFO: the lengths of
whatever arrived together). For each batch size the two forwards alternate, five rounds; the
table gives medians. Also: the warm-up the batcher runs before it turns SERVING, the first pass
at an input length the warm-up did not cover, and the memory a pass of the largest batch holds.

    PYTHONPATH=src:services:. python3 docs/benchmarks/gpu/gpu_bench.py [fp32] [bf16]

ROUNDS=N sets the rounds; each size's per-round times are printed under the table.
"""

from __future__ import annotations

import os
import platform
import random
import statistics
import sys
import time
from collections.abc import Sequence
from typing import Any

import torch
import transformers

from batcher.hf import HFModel
from batcher.model import Encoded
from batcher.settings import ModelSettings
from bench import workload

SIZES = (1, 4, 16, 64, 256)
ROUNDS = int(os.environ.get("ROUNDS", "5"))


def load(path: Any, precision: str, forward: str) -> tuple[HFModel, float]:
    model = HFModel(
        ModelSettings(backend="hf", model_path=str(path), device="cuda", precision=precision, forward=forward)
    )
    if os.environ.get("CUDNN_SDP") == "1":  # what HFModel turns off, back on to compare
        torch.backends.cuda.enable_cudnn_sdp(True)
    started = time.perf_counter()
    model.warm_up(max(SIZES))
    return model, time.perf_counter() - started


def pass_ms(model: HFModel, batches: Sequence[Sequence[Encoded]]) -> float:
    started = time.perf_counter()
    for batch in batches:
        model.predict(batch)  # ends in a copy to the host: the GPU has finished
    return (time.perf_counter() - started) * 1000 / len(batches)


def first_pass(model: HFModel, encoded: list[Encoded], size: int, length: int) -> tuple[float, float]:
    """A pass at a length no earlier pass had, then the same pass again."""
    batch = [Encoded("", (e.ids * 20)[:length], length, False) for e in encoded[:size]]
    return pass_ms(model, [batch]), pass_ms(model, [batch])


def main() -> None:
    assert torch.cuda.is_available(), "no CUDA device"
    loading = os.environ.get("CUDA_MODULE_LOADING", "default")
    cudnn = os.environ.get("CUDNN_SDP", "0")
    print(f"CUDA_MODULE_LOADING={loading}, CUDNN_SDP={cudnn}, ROUNDS={ROUNDS}")
    versions = f"torch {torch.__version__} · transformers {transformers.__version__}"
    print(f"{torch.cuda.get_device_name()} · {versions}")
    print(f"host: {platform.processor() or platform.machine()}, {torch.get_num_threads()} torch threads\n")
    path = workload.build_model()
    rng = random.Random(1)
    for precision in sys.argv[1:] or ("fp32", "bf16"):
        models: dict[str, HFModel] = {}
        for forward in ("packed", "padded"):
            models[forward], warm_s = load(path, precision, forward)
            print(f"{precision} {forward}: {models[forward].dtype}, warm-up {warm_s:.1f} s")
        encoded = models["packed"].encode(workload.sentences(4000, seed=7))
        rounds: dict[int, dict[str, list[float]]] = {}
        columns = "padded ms/pass | packed ms/pass | padded jobs/s | packed jobs/s"
        print(f"\n| {precision} | batch | padding | {columns} |")
        print("|---|---|---|---|---|---|---|")
        for size in SIZES:
            times: dict[str, list[float]] = {"padded": [], "packed": []}
            real = padded = 0
            for round_ in range(ROUNDS):
                batches = [rng.sample(encoded, size) for _ in range(max(4, 512 // size))]
                real += sum(e.tokens for b in batches for e in b)
                padded += sum(len(b) * max(e.tokens for e in b) for b in batches)
                order = ["padded", "packed"] if round_ % 2 else ["packed", "padded"]
                for forward in order:
                    times[forward].append(pass_ms(models[forward], batches))
            a, b = statistics.median(times["padded"]), statistics.median(times["packed"])
            cells = f"{a:.2f} | {b:.2f} | {size * 1000 / a:,.0f} | {size * 1000 / b:,.0f}"
            print(f"| | {size} | {real / padded:.2f} | {cells} |", flush=True)
            rounds[size] = times
        print()
        for size, times in rounds.items():
            listed = " · ".join(f"{f} " + " ".join(f"{t:.1f}" for t in times[f]) for f in times)
            print(f"{precision} batch {size}, ms/pass by round: {listed}")
        print()
        for forward, model in models.items():
            for size, length in ((1, 100), (256, 101)):
                cold, warm = first_pass(model, encoded, size, length)
                again = f"{cold:.1f} ms, again {warm:.1f} ms"
                print(f"{precision} {forward}: first pass at {size} x {length} {again}")
        longest = sorted(encoded, key=lambda e: e.tokens)[-max(SIZES) :]
        before = torch.cuda.memory_allocated()
        for forward, model in models.items():
            torch.cuda.reset_peak_memory_stats()
            model.predict(longest)
            peak = (torch.cuda.max_memory_allocated() - before) / 2**20
            print(f"{precision} {forward}: a pass of the {max(SIZES)} longest sentences holds {peak:.0f} MiB")
        del models
        torch.cuda.empty_cache()
        print()


if __name__ == "__main__":
    main()
