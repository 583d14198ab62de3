"""How finely three repeats of a cell can tell two p99s apart, from one config measured many times.

`make bench-batching` reads each cell's p99 as the median of its three repeats' p99s, and the
default's target as its p99 within 1.1 x the best fixed config's. Here the default alone runs
CELLS cells of 15 s at RATE (as the benchmark's cells are), one after another on one stack,
and every job's end-to-end latency is kept. Then, over every way of drawing two disjoint sets
of three cells (the same config twice, as the benchmark's `default, again` is), how far apart
the two sets read by two estimators: the median of the three p99s (the benchmark's) and the
p99 of the three cells' jobs pooled; and the same for sets of five (five repeats). Last,
the target's own reading on the same cells: how often a copy of the best fixed config reads
over 1.1 x the better of two configs identical to it, three cells each, at one load, and at
one or more of five loads taken as independent.

    PYTHONPATH=src:services:. .venv/bin/python docs/benchmarks/noise-floor/p99_resolution.py \\
        [RATE 27] [CELLS 12] [OUT p99-resolution.json]
    PYTHONPATH=src:services:. .venv/bin/python docs/benchmarks/noise-floor/p99_resolution.py KEPT.json
"""

from __future__ import annotations

import asyncio
import itertools
import json
import statistics
import sys
import time
from pathlib import Path

from batchline import codec
from bench import batching, machine, stack, workload

HERE = Path(__file__).parent


def measure(rate: float, cells: int) -> list[list[float]]:
    model = workload.build_model()
    env, batchers = batching.stack_env("default", model, "fp32")
    latencies = []
    with stack.start("local", env, batchers=batchers, envoy=False) as targets:
        batching.warm(targets.ingress)
        for n in range(cells):
            baseline = asyncio.run(batching.finished_count(targets.ingress))
            texts = workload.sentences(int(rate * 15), seed=n)
            ids, _, _ = asyncio.run(batching.open_loop(targets.ingress, texts, rate))
            jobs = asyncio.run(batching.collect(targets.ingress, ids, baseline))
            e2e = [round(batching.e2e_ms(j), 2) for j in jobs if j.status == codec.DONE]
            latencies.append(e2e)
            print(
                f"cell {n + 1}: {len(e2e)} jobs, p50 {batching.pct(e2e, 50):.1f} ms, "
                f"p99 {batching.pct(e2e, 99):.1f} ms",
                flush=True,
            )
    return latencies


def apart(a: float, b: float) -> float:
    return max(a, b) / min(a, b)


def main() -> None:
    kept = len(sys.argv) > 1 and sys.argv[1].endswith(".json")  # the analysis again, on a kept run
    if kept:
        latencies: list[list[float]] = json.loads(Path(sys.argv[1]).read_text())["e2e_ms"]
        cells = len(latencies)
    else:
        rate = float(sys.argv[1]) if len(sys.argv) > 1 else 27.0
        cells = int(sys.argv[2]) if len(sys.argv) > 2 else 12
    if cells < 10:  # checked before a run, not after it
        sys.exit("p99_resolution.py needs at least 10 cells: two disjoint sets of five")
    if not kept:
        out = HERE / (sys.argv[3] if len(sys.argv) > 3 else "p99-resolution.json")
        print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {machine.describe()}")
        print(f"# the default, fp32, {cells} cells of 15 s at {rate}/s on one stack")
        latencies = measure(rate, cells)
        out.write_text(json.dumps({"rate": rate, "e2e_ms": latencies}) + "\n")
    p99 = [batching.pct(cell, 99) for cell in latencies]

    def median_of_p99s(group: tuple[int, ...]) -> float:
        return statistics.median(p99[i] for i in group)

    def pooled_p99(group: tuple[int, ...]) -> float:
        return batching.pct([x for i in group for x in latencies[i]], 99)

    for size in (3, 5):
        sets = list(itertools.combinations(range(cells), size))
        pairs = [(a, b) for a, b in itertools.combinations(sets, 2) if not set(a) & set(b)]
        print(f"two disjoint sets of {size} cells, every pair ({len(pairs)}):")
        for name, estimate in (
            ("median of the p99s", median_of_p99s),
            ("p99 of the jobs pooled", pooled_p99),
        ):
            value = {group: estimate(group) for group in sets}
            ratios = sorted(apart(value[a], value[b]) for a, b in pairs)
            over = sum(r > 1.1 for r in ratios) / len(ratios)
            print(
                f"{name:>24}: apart median {statistics.median(ratios):.3f}, 90th percentile "
                f"{ratios[int(0.9 * len(ratios))]:.3f}, more than 1.1 apart in {over:.0%}"
            )
    # The target's own reading: a config identical to the fixed ones, against the better of two
    # of them (the fixed configs that behave alike at light load), each from three disjoint cells.
    triples = list(itertools.combinations(range(cells), 3))
    draws = [
        (a, b, c)
        # about 60 of the triples (every third of 12 cells' 220): thousands of draws, not millions
        for a, b, c in itertools.permutations(triples[:: max(1, len(triples) // 60)], 3)
        if not (set(a) & set(b) or set(a) & set(c) or set(b) & set(c))
    ]
    over = sum(
        median_of_p99s(a) > 1.1 * min(median_of_p99s(b), median_of_p99s(c)) for a, b, c in draws
    ) / len(draws)
    print(
        f"a copy against the better of two identical configs, three cells each ({len(draws)} draws): "
        f"over 1.1 x in {over:.0%} at one load; at one or more of five such loads, "
        f"taken as independent: {1 - (1 - over) ** 5:.0%}"
    )


if __name__ == "__main__":
    main()
