"""A lone batch that finds the other lane busy with a narrow pass about to end: held for it and
run wide, against started narrow at once, side by side at 25 and 40 req/s, 3 rounds, each
config on a fresh stack: `git apply docs/benchmarks/hold-for-wide-ab/hold-for-wide.patch`, then
`PYTHONPATH=src:services:. .venv/bin/python docs/benchmarks/hold-for-wide-ab/hold_for_wide_ab.py`
(`AB_NO_HOLD=1`, a switch the patch adds for this run, turns the hold off)."""

from pathlib import Path

from bench.batching import ab_main

if __name__ == "__main__":
    ab_main(
        {"start narrow": {"AB_NO_HOLD": "1"}, "hold for wide": {}}, [25.0, 40.0], 3, Path(__file__).parent
    )
