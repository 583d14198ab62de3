"""gpu.png from results.txt: jobs per second against batch size, per precision and forward.

.venv/bin/python docs/benchmarks/gpu/plot.py
"""

from __future__ import annotations

import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

HERE = Path(__file__).resolve().parent


def rows(text: str) -> dict[str, list[tuple[int, float, float]]]:
    """precision -> (batch, padded jobs/s, packed jobs/s) from the tables."""
    tables: dict[str, list[tuple[int, float, float]]] = {}
    precision = ""
    for line in text.splitlines():
        if header := re.match(r"\| (\w+) \| batch \|", line):
            precision = header.group(1)
        elif cells := re.match(r"\| \| (\d+) \| [\d.]+ \| [\d.]+ \| [\d.]+ \| ([\d,]+) \| ([\d,]+) \|", line):
            batch, padded, packed = (float(c.replace(",", "")) for c in cells.groups())
            tables.setdefault(precision, []).append((int(batch), padded, packed))
    return tables


def main() -> None:
    tables = rows((HERE / "results.txt").read_text())
    figure, axes = plt.subplots(figsize=(7, 4.5))
    for precision, table in tables.items():
        batches = [b for b, _, _ in table]
        style = "-" if precision == "bf16" else "--"
        axes.plot(batches, [p for _, _, p in table], "o" + style, label=f"{precision} packed")
        axes.plot(batches, [p for _, p, _ in table], "s" + style, label=f"{precision} padded", alpha=0.6)
    axes.set(xscale="log", yscale="log", xlabel="batch size", ylabel="jobs/s (HFModel.predict)")
    axes.set_xticks([1, 4, 16, 64, 256], labels=["1", "4", "16", "64", "256"])
    axes.set_title("DistilBERT on one H200: review-like sentences, random (FIFO) batches")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend()
    figure.tight_layout()
    figure.savefig(HERE.parent / "gpu.png", dpi=110)


if __name__ == "__main__":
    main()
