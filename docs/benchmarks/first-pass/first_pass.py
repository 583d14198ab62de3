"""What the first forward pass at a shape costs against the same pass warm: the model warmed as
the batcher warms it (`HFModel.warm_up(16)`), then, for each size, every odd length from 17 to
45 tokens run three times; the ratio is the first run over the faster of the other two.

In bf16 the warm-up also runs sizes 1 and 16 at every length up to 64, so those read ~1.0
there; size 4 at these lengths is warmed by neither, and shows what a new shape costs.

    PYTHONPATH=src:services:. .venv/bin/python docs/benchmarks/first-pass/first_pass.py
"""

from __future__ import annotations

import statistics
import time
from typing import Any

from batcher.model import Encoded
from bench import workload


def timed(model: Any, size: int, longest: int) -> float:
    batch = [Encoded("", [5] * longest, longest, False)] * size
    began = time.perf_counter()
    model.predict(batch)
    return time.perf_counter() - began


def main() -> None:
    path = workload.build_model()
    for precision in ("fp32", "bf16"):
        model, _ = workload.warm_model(path, precision, threads=2)
        for size in (16, 4, 1):
            ratios = []
            for longest in range(17, 46, 2):
                first = timed(model, size, longest)
                ratios.append(first / min(timed(model, size, longest), timed(model, size, longest)))
            print(
                f"{precision}, batch of {size:2d}: first pass / warm, median over lengths 17-45 "
                f"{statistics.median(ratios):.2f} (max {max(ratios):.2f})",
                flush=True,
            )


if __name__ == "__main__":
    main()
