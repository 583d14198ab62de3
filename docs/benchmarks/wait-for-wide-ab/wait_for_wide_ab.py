"""Waiting for a busy lane to run a batch wide, against starting it narrow at once, side by
side at 40 and 60 req/s, 3 rounds: `git apply docs/benchmarks/wait-for-wide-ab/wait-for-wide.patch`,
then `PYTHONPATH=src:services:. .venv/bin/python docs/benchmarks/wait-for-wide-ab/wait_for_wide_ab.py`
(`AB_NO_HOLD=1` turns the wait off)."""

from pathlib import Path

from bench.batching import ab_main

if __name__ == "__main__":
    ab_main({"no hold": {"AB_NO_HOLD": "1"}, "hold": {}}, [40.0, 60.0], 3, Path(__file__).parent)
