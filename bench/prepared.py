"""`python -m bench.prepared`: does preparing the model for inference pay on this machine?

Eager PyTorch against `torch.jit.trace` + `torch.jit.freeze` and `torch.compile`, in fp32 and
bf16, on the full-size DistilBERT shape (random weights) at batch 16 x 32 tokens, the shape
the batcher runs most under load. Reports the one-time preparation cost and the steady-state
pass time (median of timed passes after warming). Writes docs/benchmarks/prepared-model.{md,json}.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from bench.batching import progress
from bench.workload import MODEL_DIR, ROOT, build_model

Forward = Callable[[torch.Tensor, torch.Tensor], Any]


def timed(forward: Forward, ids: torch.Tensor, mask: torch.Tensor, passes: int) -> float:
    with torch.inference_mode():
        for _ in range(3):
            forward(ids, mask)
        times = []
        for _ in range(passes):
            started = time.perf_counter()
            forward(ids, mask)
            times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def measure(precision: str, passes: int) -> list[dict[str, Any]]:
    from transformers import AutoModelForSequenceClassification

    dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    model = AutoModelForSequenceClassification.from_pretrained(MODEL_DIR).to(dtype).eval()
    model.config.return_dict = False  # tuples trace; dict outputs do not
    ids = torch.randint(10, 300, (16, 32))
    mask = torch.ones_like(ids)
    rows: list[dict[str, Any]] = []

    def eager(i: torch.Tensor, m: torch.Tensor) -> Any:
        return model(input_ids=i, attention_mask=m)

    rows.append(
        {
            "precision": precision,
            "variant": "eager",
            "prepare_s": 0.0,
            "pass_ms": timed(eager, ids, mask, passes),
        }
    )

    started = time.perf_counter()
    with torch.inference_mode():
        traced = torch.jit.freeze(torch.jit.trace(model, (ids, mask), strict=False))  # type: ignore[no-untyped-call]
        traced(ids, mask)
    prepare = time.perf_counter() - started
    rows.append({"precision": precision, "variant": "jit.trace+freeze", "prepare_s": prepare,
                 "pass_ms": timed(traced, ids, mask, passes)})  # fmt: skip

    compiled = torch.compile(eager)
    started = time.perf_counter()
    with torch.inference_mode():
        compiled(ids, mask)
    prepare = time.perf_counter() - started
    rows.append({"precision": precision, "variant": "torch.compile", "prepare_s": prepare,
                 "pass_ms": timed(compiled, ids, mask, passes)})  # fmt: skip
    for row in rows:
        row["speedup"] = rows[0]["pass_ms"] / row["pass_ms"]
        progress(
            f"{precision} {row['variant']}: {row['pass_ms']:.1f} ms/pass, "
            f"prepared in {row['prepare_s']:.1f} s"
        )
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.prepared", description=__doc__.splitlines()[0])
    parser.add_argument("--passes", type=int, default=30)
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks")
    args = parser.parse_args(argv)
    build_model()
    rows = [row for precision in ("fp32", "bf16") for row in measure(precision, args.passes)]
    (args.out / "prepared-model.json").write_text(json.dumps(rows, indent=2) + "\n")
    lines = [
        "# Preparing the model for inference",
        "",
        f"`python -m bench.prepared` on {time.strftime('%Y-%m-%d')}: full-size DistilBERT shape,",
        f"random weights, batch 16 x 32 tokens, {torch.get_num_threads()} threads; median of",
        f"{args.passes} passes after warming.",
        "",
        "| precision | variant | one-time preparation, s | pass, ms | speed-up |",
        "|---|---|---|---|---|",
        *(
            f"| {r['precision']} | {r['variant']} | {r['prepare_s']:.1f} | {r['pass_ms']:.1f} "
            f"| {r['speedup']:.2f}x |"
            for r in rows
        ),
        "",
    ]
    (args.out / "prepared-model.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
