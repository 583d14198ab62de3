"""`make bench-scale`: how throughput grows with batchers (competing consumers on one queue).

For 1..6 batchers, a fresh local stack; each batcher runs the simulated model (20 ms + 0.5 ms
per padded token per forward pass, spent waiting, the way a GPU pass leaves the CPU free), and
capacity is measured as a burst of jobs drained. Each point is the median of repeats. What
limits the curve on this machine is CPU per job in the services, RabbitMQ and Redis, which the
report gives too. Writes docs/benchmarks/scale.{md,json,png}.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import Any

from bench import stack, strict_json
from bench.reliability import COST, capacity
from bench.suite import ROOT, say


def measure(batchers: int, jobs: int) -> dict[str, Any]:
    with stack.start(
        "local", {**COST, "QUEUE_MAX_LENGTH": "100000"}, batchers=batchers, envoy=False
    ) as targets:
        capacity(targets.ingress, jobs=200)  # warm every process
        before = {name: stack.cpu_seconds(pids) for name, pids in targets.pids.items()}
        rate = capacity(targets.ingress, jobs=jobs)
        cpu = {name: stack.cpu_seconds(pids) - before[name] for name, pids in targets.pids.items()}
    return {
        "batchers": batchers,
        "jobs_per_s": rate,
        "cpu_ms_per_job": {k: 1000 * v / jobs for k, v in cpu.items()},
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--max-batchers", type=int, default=6)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--jobs", type=int, default=2000, help="jobs per burst")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks")
    args = parser.parse_args(argv)
    runs: dict[int, list[dict[str, Any]]] = {}
    for repeat in range(args.repeats):
        for n in range(1, args.max_batchers + 1):
            say(f"{n} batcher(s), run {repeat + 1}/{args.repeats}: a burst of {args.jobs} jobs")
            runs.setdefault(n, []).append(measure(n, args.jobs))
    rows = []
    for n, results in runs.items():
        rate = statistics.median(r["jobs_per_s"] for r in results)
        cpu = {
            k: statistics.median(r["cpu_ms_per_job"][k] for r in results)
            for k in results[0]["cpu_ms_per_job"]
        }
        rows.append({"batchers": n, "jobs_per_s": rate, "cpu_ms_per_job": cpu})
    one = rows[0]["jobs_per_s"]
    names = list(rows[0]["cpu_ms_per_job"])
    lines = [
        "# Scale-out: throughput against batchers",
        "",
        f"`python -m bench.scale` ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}): "
        f"a burst of {args.jobs} "
        f"jobs drained by 1..{args.max_batchers} batchers on one queue; simulated model "
        f"{COST['SIM_FIXED_MS']} ms + {COST['SIM_PER_TOKEN_MS']} ms per padded token per pass (time spent "
        f"waiting, not computing); median of {args.repeats}; 2 CPUs for everything. The ingress's CPU "
        "includes the GetStats polls that time the drain. Raw: `scale.json`.",
        "",
        "| batchers | jobs/s | vs one | " + " | ".join(f"{n} CPU ms/job" for n in names) + " |",
        "|---|---|---|" + "---|" * len(names),
    ]
    for row in rows:
        cells = " | ".join(f"{row['cpu_ms_per_job'][n]:.2f}" for n in names)
        lines.append(
            f"| {row['batchers']} | {row['jobs_per_s']:.0f} | {row['jobs_per_s'] / one:.2f}x | {cells} |"
        )
    lines += ["", "![jobs/s against batchers](scale.png)", ""]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "scale.json").write_text(strict_json.dumps({"rows": rows, "runs": runs}, indent=1))
    (args.out / "scale.md").write_text("\n".join(lines))
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(6, 4))
    xs = [r["batchers"] for r in rows]
    axis.plot(xs, [r["jobs_per_s"] for r in rows], marker="o", label="measured")
    axis.plot(xs, [one * x for x in xs], "--", color="grey", label="linear")
    axis.set_xlabel("batchers")
    axis.set_ylabel("jobs/s drained")
    axis.set_xticks(xs)
    axis.set_title("Throughput against batchers (2 CPUs)")
    axis.legend()
    figure.tight_layout()
    figure.savefig(args.out / "scale.png", dpi=120)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
