"""The width rule with the ratios of small passes timed in pairs at warm-up (`paired ratios`,
in use) against the rule on the warm-up's fitted times alone (`fits only`: needs
`git apply docs/benchmarks/width-probe-ab/fits-only.patch` first; without it both configs
are the same), side by side at 7, 24 and 40 req/s, 3 rounds (about 10 minutes; `ROUNDS
RATE...` on the command line for others):
`PYTHONPATH=src:services:. .venv/bin/python docs/benchmarks/width-probe-ab/width_probe_ab.py`."""

from pathlib import Path

from bench.batching import ab_main

if __name__ == "__main__":
    configs = {"paired ratios": {}, "fits only": {"AB_FITS_ONLY": "1"}}
    ab_main(configs, [7.0, 24.0, 40.0], 3, Path(__file__).parent)
