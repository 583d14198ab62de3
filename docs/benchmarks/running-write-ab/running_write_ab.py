"""RUNNING written while the pass computes (the batcher's way) against written before it, at
9 req/s, 6 rounds: `git apply docs/benchmarks/running-write-ab/running-first.patch`, then
`PYTHONPATH=src:services:. .venv/bin/python docs/benchmarks/running-write-ab/running_write_ab.py`
(`AB_RUNNING_FIRST=1` selects the write before the pass)."""

from pathlib import Path

from bench.batching import ab_main

if __name__ == "__main__":
    ab_main({"during": {}, "first": {"AB_RUNNING_FIRST": "1"}}, [9.0], 6, Path(__file__).parent)
