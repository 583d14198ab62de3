"""The packed pass's attention: PyTorch's fused kernel against plain matrix products.

The packed pass (services/batcher/packed.py) sends each layer's queries, keys and values in the
padded layout to `scaled_dot_product_attention`, which on a CPU runs its flash-attention kernel:
5.0-5.7% of the time of FIFO batches of 16 reviews (`op_profile.py`, fp32: `profile.txt`), where
attention's multiply-adds are 1.2% of the pass's (`../group-saving/results.txt`). The other way
is attention written out: scores = q k^T, masked, softmax (in fp32), times v. Both ways run the
same full passes, in turns, over the benchmark's sentences: FIFO batches (arrival order) of
1, 4 and 16, and batches of 16 neighbours in length; `ROUNDS` rounds of `BATCHES` batches each,
milliseconds per job, the median of the rounds.

    PYTHONPATH=src:services:. .venv/bin/python docs/benchmarks/attention-ab/attention_ab.py fp32
    PYTHONPATH=src:services:. .venv/bin/python docs/benchmarks/attention-ab/attention_ab.py bf16
    PYTHONPATH=src:services:. .venv/bin/python docs/benchmarks/attention-ab/attention_ab.py bf16 8 12 16 16

Sizes after the precision: FIFO batches of those sizes only.
"""

from __future__ import annotations

import random
import statistics
import sys
import time
from types import SimpleNamespace

import torch
from torch.nn import functional

from batcher import packed
from batcher.model import Encoded
from bench import workload

ROUNDS = 7
BATCHES = 8


def products(
    queries: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, attn_mask: torch.Tensor, scale: float
) -> torch.Tensor:
    """`scaled_dot_product_attention` written out: scores, masked, softmax in fp32, times values."""
    scores = torch.matmul(queries, keys.transpose(-1, -2)).float() * scale
    weights = scores.masked_fill(~attn_mask, float("-inf")).softmax(dim=-1).to(values.dtype)
    return torch.matmul(weights, values)


# What the packed pass finds as `functional` (batcher/packed.py calls its attention through it).
WAYS = {
    "fused kernel": SimpleNamespace(scaled_dot_product_attention=functional.scaled_dot_product_attention),
    "matrix products": SimpleNamespace(scaled_dot_product_attention=products),
}


CELLS = ((1, "FIFO"), (4, "FIFO"), (16, "FIFO"), (16, "neighbours"))


def main(precision: str, cells: tuple[tuple[int, str], ...] = CELLS) -> None:
    model, encoded = workload.warm_model(workload.build_model(), precision, threads=2)
    forward = model._packed
    assert forward is not None
    rng = random.Random(1)
    print(
        f"# {time.strftime('%Y-%m-%d %H:%M')} UTC, {precision}, 2 threads, "
        f"{ROUNDS} rounds of {BATCHES} batches"
    )
    print(
        f"| {precision} batches | padding | "
        + " | ".join(f"{w} ms/job" for w in WAYS)
        + " | fused / products (rounds) |"
    )
    print("|---|---|---|---|---|")
    with torch.inference_mode():
        for size, kind in cells:
            times: dict[str, list[float]] = {w: [] for w in WAYS}
            real = padded = 0
            for round_ in range(ROUNDS):
                if kind == "FIFO":
                    batches = [rng.sample(encoded, size) for _ in range(BATCHES)]
                else:
                    pool = sorted(rng.sample(encoded, BATCHES * size), key=lambda e: e.tokens)
                    batches = [pool[i : i + size] for i in range(0, BATCHES * size, size)]
                real += sum(e.tokens for b in batches for e in b)
                padded += sum(len(b) * max(e.tokens for e in b) for b in batches)
                ways = list(WAYS.items())
                for name, way in ways if round_ % 2 else ways[::-1]:
                    setattr(packed, "functional", way)  # noqa: B010 (the pass reads it by this name)
                    times[name].append(per_job_ms(forward, batches))
            ratios = [a / b for a, b in zip(*times.values(), strict=True)]
            medians = " | ".join(f"{statistics.median(t):.2f}" for t in times.values())
            each = ", ".join(f"{r:.2f}" for r in ratios)
            print(
                f"| {size} {kind} | {real / padded:.2f} | {medians} "
                f"| {statistics.median(ratios):.3f} ({each}) |",
                flush=True,
            )


def per_job_ms(forward: packed.PackedForward, batches: list[list[Encoded]]) -> float:
    started = time.perf_counter()
    for batch in batches:
        forward([e.ids for e in batch]).float().softmax(-1).tolist()
    return (time.perf_counter() - started) * 1000 / sum(len(b) for b in batches)


if __name__ == "__main__":
    sizes = tuple((int(size), "FIFO") for size in sys.argv[2:])
    main(sys.argv[1] if len(sys.argv) > 1 else "fp32", sizes or CELLS)
