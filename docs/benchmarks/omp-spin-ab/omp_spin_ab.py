"""The batcher with libgomp's default spin (GOMP_SPINCOUNT=300000: a worker thread spins about
8 ms on its core after each parallel region before it sleeps) against a short one (30000),
side by side in fp32 at 10, 20 and 30 req/s, 5 rounds (README.md: the first run, at 20, 40 and
60 req/s, left the default arm's variable unset, which libgomp reads as 300000):
`PYTHONPATH=src:services:. .venv/bin/python docs/benchmarks/omp-spin-ab/omp_spin_ab.py [ROUNDS RATE...]`."""

from pathlib import Path

from bench.batching import ab_main

if __name__ == "__main__":
    ab_main(
        {"spin 300000": {"GOMP_SPINCOUNT": "300000"}, "spin 30000": {"GOMP_SPINCOUNT": "30000"}},
        [10.0, 20.0, 30.0],
        5,
        Path(__file__).parent,
    )
