"""Medians of the light-path stamps that `stages.patch` makes the services write, per stage of a
lone job's way (the batcher's passes of one job only, on every thread: the light-load case).

    git apply docs/benchmarks/light-path/stages.patch
    rm -f /tmp/light-path-*.txt
    PYTHONPATH=src:services:. .venv/bin/python docs/benchmarks/light-path/light_path.py 5 2
    git apply -R docs/benchmarks/light-path/stages.patch
    python3 docs/benchmarks/light-path/stages.py
"""

from __future__ import annotations

import ast
import glob
import statistics
from pathlib import Path
from typing import Any

WARM_UP = 32  # the jobs the probe sends first, as a backlog

STAGES = [
    ("acc", "arr", "accepted -> delivered to the batcher (ingress, Redis, RabbitMQ)"),
    ("arr", "enc", "tokenized"),
    ("enc", "dec0", "to the batch decision"),
    ("dec0", "dec1", "the batch decision"),
    ("dec1", "adm0", "to the status read"),
    ("adm0", "adm1", "the status read (Redis)"),
    ("adm1", "st", "to started_at"),
    ("st", "task", "the RUNNING records, the pass's task made"),
    ("task", "p0", "to the pass's hand-off"),
    ("p0", "t0", "the lane's thread wakes"),
    ("t0", "t1", "the forward pass, in the thread"),
    ("t1", "p1", "the event loop wakes"),
    ("p1", "back", "to the lane given back"),
    ("back", "formed", "the next decision (none waiting)"),
    ("formed", "fin", "the result records, finished_at"),
]


def stamps(pattern: str) -> list[Any]:
    """Every line the services wrote to the files matching `pattern`, in file order."""
    rows = []
    for path in sorted(glob.glob(pattern)):
        rows += [ast.literal_eval(line) for line in Path(path).read_text().splitlines()]
    return rows


def main() -> None:
    rows = stamps("/tmp/light-path-batcher-*.txt")
    rows = [r for r in rows[WARM_UP:] if r.get("size") == 1 and r.get("wide") and "fin" in r]
    print(f"{len(rows)} lone jobs on every thread")
    print("| stage | p50 ms |\n|---|---|")
    for a, b, name in STAGES:
        print(f"| {name} | {statistics.median((r[b] - r[a]) * 1000 for r in rows):.3f} |")
    outside = statistics.median(((r["fin"] - r["acc"]) - (r["t1"] - r["t0"])) * 1000 for r in rows)
    print(f"| everything but the pass in its thread | {outside:.2f} |")
    ingress = stamps("/tmp/light-path-ingress-*.txt")
    ingress = [r for r in ingress if r[0] == 1]
    if ingress:
        print(f"\ningress, {len(ingress)} groups of one Submit:")
        for i, name in ((2, "the group's flush starts"), (3, "stored in Redis"), (4, "published, confirmed")):
            print(
                f"  {name}: {statistics.median((r[i] - r[1]) * 1000 for r in ingress):.3f} ms after accepted"
            )


if __name__ == "__main__":
    main()
