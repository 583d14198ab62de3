"""The event loop through the whole pipeline, EVENT_LOOP=asyncio against uvloop in every
service, the default policy with the real model (fp32), three rounds taking turns.

    PYTHONPATH=src:services:. .venv/bin/python docs/benchmarks/loop-ab/pipeline_ab.py [LOAD]
    PYTHONPATH=src:services:. .venv/bin/python docs/benchmarks/loop-ab/pipeline_ab.py saturation

With LOAD (default 0.1), open loop at LOAD x 80 req/s for 25 s; prints per loop the end-to-end
p50 and p99, the compute per job and the time outside the pass, one value per round. With
`saturation`, a backlog of 600 jobs, each just after the bare model's batch-16 throughput is
measured again (the progress lines give jobs/s and the ratio).
"""

from __future__ import annotations

import sys

from bench import batching, workload

LOOPS = ["asyncio", "uvloop"]


def main() -> None:
    model = workload.build_model()
    for loop in LOOPS:
        batching.CONFIGS[loop] = {"EVENT_LOOP": loop}
    if sys.argv[1:] == ["saturation"]:
        for round_ in range(3):
            for name in batching.turns(LOOPS, round_):
                batching.measure_saturation(name, model, "fp32", 600, 1, 2)
        return
    load = float(sys.argv[1]) if len(sys.argv) > 1 else 0.1
    cells = batching.side_by_side(LOOPS, model, "fp32", [load * 80.0], 3, duration_s=25.0)
    for loop in LOOPS:
        keys = ("e2e_p50_ms", "e2e_p99_ms", "compute_per_job_ms", "outside_model_p50_ms")
        print(loop, *([round(c[key], 1) for c in cells[loop]] for key in keys), flush=True)


if __name__ == "__main__":
    main()
