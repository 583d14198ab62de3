"""`batchline-bench` / `make bench`: open-loop Submit load and end-to-end latency, repeated,
medians reported, raw numbers written beside the report under docs/benchmarks/."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

from bench import openloop, stack

COLUMNS = [
    ("offered_rps", "offered/s"),
    ("completed_rps", "done/s"),
    ("errors", "errors"),
    ("accept_p50_ms", "accept p50"),
    ("accept_p99_ms", "accept p99"),
    ("e2e_p50_ms", "e2e p50"),
    ("e2e_p90_ms", "e2e p90"),
    ("e2e_p99_ms", "e2e p99"),
    ("queue_wait_p50_ms", "queue wait p50"),
    ("inference_p50_ms", "inference p50"),
    ("mean_batch_size", "mean batch"),
    ("send_lag_p99_ms", "send lag p99"),
]


def table(rows: dict[str, dict[str, float]], label: str) -> str:
    head = f"| {label} | " + " | ".join(title for _, title in COLUMNS) + " |"
    rule = "|" + "---|" * (len(COLUMNS) + 1)
    lines = [head, rule]
    for name, row in rows.items():
        cells = " | ".join(_fmt(row[key]) for key, _ in COLUMNS)
        lines.append(f"| {name} | {cells} |")
    return "\n".join(lines)


def _fmt(value: float) -> str:
    return f"{value:.0f}" if value >= 100 or value == int(value) else f"{value:.1f}"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--stack",
        choices=["local", "embedded"],
        default="local",
        help="local: ingress, stream, batcher on the local RabbitMQ and Redis (default)",
    )
    parser.add_argument("--rate", type=float, nargs="+", default=[100.0], help="offered Submits per second")
    parser.add_argument("--duration", type=float, default=10.0, help="seconds of load per run")
    parser.add_argument("--warmup", type=float, default=2.0, help="seconds of load before measuring")
    parser.add_argument("--repeats", type=int, default=3, help="runs per rate; the report gives medians")
    parser.add_argument("--model-cost", default="6,0.12", help="simulated model cost: fixed ms,ms per token")
    parser.add_argument("--out", type=Path, default=Path("docs/benchmarks"), help="where the report goes")
    parser.add_argument("--name", default="pipeline", help="report file name stem")
    args = parser.parse_args(argv)

    fixed, per_token = args.model_cost.split(",")
    env = {"MODEL_BACKEND": "simulated", "SIM_FIXED_MS": fixed, "SIM_PER_TOKEN_MS": per_token}
    runs: dict[str, list[dict[str, float]]] = {}
    with stack.start(args.stack, env) as targets:
        print(f"stack {args.stack}: ingress {targets.ingress}, stream {targets.stream}", file=sys.stderr)
        asyncio.run(
            openloop.run(targets.ingress, targets.stream, min(args.rate), args.warmup, progress=False)
        )
        for rate in args.rate:
            for repeat in range(args.repeats):
                print(f"rate {rate:.0f}/s, run {repeat + 1}/{args.repeats}", file=sys.stderr)
                result = asyncio.run(openloop.run(targets.ingress, targets.stream, rate, args.duration))
                runs.setdefault(str(rate), []).append(result.summary())
    medians: dict[str, dict[str, float]] = {}
    for rate, summaries in runs.items():
        medians[f"{float(rate):.0f}/s"] = {
            k: statistics.median(s[k] for s in summaries) for k in summaries[0]
        }
        lag = max(s["send_lag_p99_ms"] for s in summaries)
        if lag > 5:
            print(
                f"warning: the load generator fell behind its schedule (send lag p99 {lag:.1f} ms)",
                file=sys.stderr,
            )
    report = table(medians, f"{args.stack}, median of {args.repeats}")
    print(report)
    args.out.mkdir(parents=True, exist_ok=True)
    meta = {
        "stack": args.stack,
        "duration_s": args.duration,
        "repeats": args.repeats,
        "model": {"backend": "simulated", "fixed_ms": float(fixed), "per_token_ms": float(per_token)},
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    (args.out / f"{args.name}-{args.stack}.json").write_text(
        json.dumps({"meta": meta, "runs": runs, "medians": medians}, indent=2)
    )
    (args.out / f"{args.name}-{args.stack}.md").write_text(
        f"# {args.name}: {args.stack} stack\n\n"
        f"Open-loop Submit at a fixed rate; latency from each request's scheduled send time. "
        f"Medians of {args.repeats} runs of {args.duration:.0f} s after {args.warmup:.0f} s of warm-up. "
        f"Simulated model ({fixed} ms + {per_token} ms per padded token). Raw numbers: "
        f"`{args.name}-{args.stack}.json`.\n\n"
        f"Command: `batchline-bench {' '.join(argv if argv is not None else sys.argv[1:])}`\n\n{report}\n"
    )


if __name__ == "__main__":
    main()
