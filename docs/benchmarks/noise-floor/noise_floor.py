"""Two runs of one config side by side: the default against an identical copy of itself, against
`16:0`, and against the default with no pass on both cores (`never wide`: needs
`git apply docs/benchmarks/noise-floor/never-wide.patch` first; without it that config is the
default again), at 24 and 40 req/s, 5 rounds (about 20 minutes; `ROUNDS RATE...` on the
command line for others):
`PYTHONPATH=src:services:. .venv/bin/python docs/benchmarks/noise-floor/noise_floor.py`."""

from pathlib import Path

from bench.batching import CONFIGS, ab_main

if __name__ == "__main__":
    configs = {
        "default": {},
        "default, again": {},
        "16:0": CONFIGS["16:0"],
        "never wide": {"AB_NEVER_WIDE": "1"},
    }
    ab_main(configs, [24.0, 40.0], 5, Path(__file__).parent)
