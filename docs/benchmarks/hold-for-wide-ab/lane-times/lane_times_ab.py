"""The hold of ../hold-for-wide.patch with the narrow pass priced from the passes on a lane in
traffic (the policy's fit) instead of the warm-up's pass alone on one thread, against starting
narrow at once, side by side at 25 and 40 req/s, 3 rounds: `git apply
docs/benchmarks/hold-for-wide-ab/lane-times/lane-times.patch`, then `PYTHONPATH=src:services:.
.venv/bin/python docs/benchmarks/hold-for-wide-ab/lane-times/lane_times_ab.py`. In the patch,
`AB_NO_HOLD=1` turns the hold off and `AB_ALONE_TIMES=1` prices the narrow pass as the first hold
did."""

from pathlib import Path

from bench.batching import ab_main

if __name__ == "__main__":
    ab_main(
        {"start narrow": {"AB_NO_HOLD": "1"}, "hold, lane times": {}}, [25.0, 40.0], 3, Path(__file__).parent
    )
