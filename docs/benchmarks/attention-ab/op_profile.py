"""Where a packed pass's time goes, by operator: torch.profiler over 20 FIFO batches of 16
benchmark sentences and 40 single-item passes, fp32 on 2 threads.

    PYTHONPATH=src:services:. .venv/bin/python docs/benchmarks/attention-ab/op_profile.py
"""

from __future__ import annotations

from torch.profiler import ProfilerActivity, profile

from bench import workload


def main() -> None:
    model, _ = workload.warm_model(workload.build_model(), "fp32", threads=2)
    jobs = model.encode(workload.sentences(1600, seed=11))
    for title, batches in (
        ("20 FIFO batches of 16", [jobs[i : i + 16] for i in range(0, 320, 16)]),
        ("40 single-item passes", [[job] for job in jobs[:40]]),
    ):
        for batch in batches:  # once untimed: every shape warm
            model.predict(batch)
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for batch in batches:
                model.predict(batch)
        print(f"## {title}")
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=12))


if __name__ == "__main__":
    main()
