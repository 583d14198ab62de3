"""LoneWidths exploring a narrow pass at any rate (as is) against only when the next arrival
would find it done (arrival rate x the narrow pass's expected time < 1), side by side in fp32 at
20 and 30 req/s, 5 rounds on fresh stacks. Needs `explore-gap.patch` applied (the variant
behind EXPLORE_GAP=1, experiment only):

    git apply docs/benchmarks/explore-gap-ab/explore-gap.patch
    PYTHONPATH=src:services:. .venv/bin/python docs/benchmarks/explore-gap-ab/explore_gap_ab.py
    git apply -R docs/benchmarks/explore-gap-ab/explore-gap.patch
"""

from pathlib import Path

from bench.batching import ab_main

if __name__ == "__main__":
    ab_main(
        {"explore as is": {"EXPLORE_GAP": "0"}, "explore narrow only between arrivals": {"EXPLORE_GAP": "1"}},
        [20.0, 30.0],
        5,
        Path(__file__).parent,
    )
