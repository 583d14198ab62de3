"""The default (`MAX_WAIT_MS=auto`) against the same policy greedy (`MAX_WAIT_MS=0`), side by
side at 24 and 40 req/s, 3 rounds (about 4 minutes; `ROUNDS RATE...` on the command line for
others): `PYTHONPATH=src:services:. .venv/bin/python docs/benchmarks/adaptive-wait-ab/adaptive_wait_ab.py`."""

from pathlib import Path

from bench.batching import ab_main

if __name__ == "__main__":
    ab_main({"default": {}, "greedy": {"MAX_WAIT_MS": "0"}}, [24.0, 40.0], 3, Path(__file__).parent)
