"""Every kept run of `make bench-batching` and `make bench-full`, one row each, against the targets.

A single run on a shared 2-vCPU machine says little about a target: the same commit read 2 x
apart between machines and between hours of one machine. This table puts every report kept in
docs/benchmarks/ side by side with its machine, so a reader sees which targets hold everywhere,
which only on some machines, and which nowhere.

    python -m bench.history     # writes docs/benchmarks/history.md and history.png

`make bench-batching` and `make bench-full` rewrite it when they finish.

It reads only the reports' own JSON summaries (and the line under each batching report's title
for runs whose raw file predates the machine line), so it runs in a second and needs no services.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import suite
from bench.batching import CONTROL, medians, p99_against_best

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "benchmarks"


@dataclass(frozen=True)
class Column:
    """One column: its heading, how to read the value from a summary, and for a target whether it
    is met (from the value, and the summary for a target with a second condition); None for a
    measurement with no target."""

    heading: str
    value: Callable[[dict[str, Any]], float | None]
    met: Callable[[float, dict[str, Any]], bool] | None
    digits: int = 2
    suffix: str = ""
    aside: Callable[[dict[str, Any]], str] = lambda summary: ""  # another reading, after the value


def _get(*path: str) -> Callable[[dict[str, Any]], float | None]:
    """The number at `path` in a summary, or None where the run did not measure it."""

    def read(summary: dict[str, Any]) -> float | None:
        value: Any = summary
        for key in path:
            if not isinstance(value, dict) or key not in value:
                return None
            value = value[key]
        return None if value is None else float(value)

    return read


def _ratio(top: str, bottom: str) -> Callable[[dict[str, Any]], float | None]:
    """`top` over `bottom` in a summary, or None where the run measured only one of them."""

    def read(summary: dict[str, Any]) -> float | None:
        a, b = summary.get(top), summary.get(bottom)
        return None if a is None or not b else float(a) / float(b)

    return read


def light_overhead(summary: dict[str, Any]) -> float | None:
    """End-to-end p50 at 10% load over one single-item pass. Since the runs time that pass again
    just before and just after each light cell, against both pooled; from the runs that timed it
    just before each cell, against that; before, against the pass timed once at the start,
    back to back or spaced, whichever gives the larger overhead (the start's spaced pass could
    land in a slow moment and read far slower than the cells' passes)."""
    for key in ("light_load_overhead_vs_spaced_around_ms", "light_load_overhead_vs_spaced_before_ms"):
        if summary.get(key) is not None:
            return float(summary[key])
    readings = [summary.get(k) for k in ("light_load_overhead_ms", "light_load_overhead_vs_spaced_ms")]
    present = [float(r) for r in readings if r is not None]
    return max(present) if present else None


def light_aside(summary: dict[str, Any]) -> str:
    """For a run read against the passes timed around each cell: the reading against those before
    it alone, as the runs before it read. For a run read against the start's passes: the other of
    its two readings, which its own report may have judged by."""
    before = summary.get("light_load_overhead_vs_spaced_before_ms")
    if summary.get("light_load_overhead_vs_spaced_around_ms") is not None and before is not None:
        return f" (before it alone {float(before):+.1f})"
    if before is not None:
        return ""
    readings = {
        "back to back": summary.get("light_load_overhead_ms"),
        "spaced": summary.get("light_load_overhead_vs_spaced_ms"),
    }
    shown = light_overhead(summary)
    others = [
        f"{name} {value:+.1f}" for name, value in readings.items() if value is not None and value != shown
    ]
    return f" ({', '.join(others)})" if others else ""


def control_aside(summary: dict[str, Any]) -> str:
    """The same ratio for the default's identical copy (`default, again`), where the run had one:
    what the measurement gives a policy that cannot differ from the default; and the stack's
    capacity, where the run's loads were fractions of it rather than of the bare rate."""
    copy, capacity = summary.get("control_vs_best_p99_ratio"), summary.get("stack_capacity_per_s")
    said = [] if copy is None else [f"its copy {copy:.2f}"]
    said += [] if capacity is None else [f"loads of the stack's {capacity:.0f}/s"]
    return f" ({'; '.join(said)})" if said else ""


BATCHING = [
    Column("saturation fp32 (≥ 0.9 x bare)", _get("saturation_ratio"), lambda v, _: v >= 0.9),
    Column("saturation bf16 (≥ 0.9 x bare)", _get("saturation_ratio_bf16"), lambda v, _: v >= 0.9),
    Column("padding (≥ 0.85)", _get("padding_efficiency"), lambda v, _: v >= 0.85),
    Column("p99 at 40 req/s (≤ 200 ms)", _get("p99_near_40_rps_ms"), lambda v, _: v <= 200, 0, " ms"),
    Column(
        "light load p50 over the pass (≤ 5 ms)", light_overhead, lambda v, _: v <= 5, 1, " ms", light_aside
    ),
    Column(
        "default p99 / best fixed (≤ 1.1)",
        _get("default_vs_best_p99_ratio"),
        lambda v, _: v <= 1.1,
        aside=control_aside,
    ),
]


# What the targets are read against, and what decides two of the defaults (`PRECISION`,
# `MODEL_LANES`): measured in the same runs, no target of their own.
SPEEDS = [
    Column("bare fp32, sequences/s", _get("bare_fp32_throughput_per_s"), None, 0),
    Column("bare bf16, sequences/s", _get("bare_bf16_throughput_per_s"), None, 0),
    Column("bf16 / fp32", _ratio("bare_bf16_throughput_per_s", "bare_fp32_throughput_per_s"), None),
    Column(
        "stack's capacity / bare fp32", _ratio("stack_capacity_per_s", "bare_fp32_throughput_per_s"), None
    ),
    Column(
        "two lanes / one, fp32",
        _ratio("saturation_fp32_jobs_per_s", "saturation_one_lane_fp32_jobs_per_s"),
        None,
    ),
    Column(
        "two lanes / one, bf16",
        _ratio("saturation_bf16_jobs_per_s", "saturation_one_lane_bf16_jobs_per_s"),
        None,
    ),
]


def _achieved(summary: dict[str, Any]) -> float:
    return float(summary["ingress"]["achieved_rps"] / summary["ingress"]["offered_rps"])


def _condition(name: str) -> Callable[[float, dict[str, Any]], bool]:
    """Met as `bench.suite.conditions` judges it, what each load.md reports."""
    return lambda _, summary: suite.conditions(summary)[name]


LOAD = [
    Column(
        "ingress p99 at 2,000/s (≤ 20 ms, 100% accepted)",
        _get("ingress", "p99_ms"),
        _condition("ingress latency"),
        1,
        " ms",
    ),
    Column("ingress achieved / offered (≥ 0.99)", _achieved, _condition("ingress rate")),
    Column("SubmitBatch jobs/s (≥ 10,000)", _get("batch", "jobs_rps"), _condition("batch"), 0),
    Column("pipeline done/s (≥ 1,000, none lost)", _get("pipeline", "done_rps"), _condition("pipeline"), 0),
    Column("REST / native (≥ 0.70)", _get("protocols", "rest-envoy", "vs_native"), _condition("rest-envoy")),
    Column(
        "grpc-web / native (≥ 0.70)",
        _get("protocols", "grpc-web-envoy", "vs_native"),
        _condition("grpc-web-envoy"),
    ),
]


def machine_kind(machine: str) -> str:
    """The kinds of 2-vCPU machine the runs met: the CPU and what it computes bf16 with, from
    `bench.machine.describe`'s line ('..., avx512_bf16 amx_bf16, ...' or '..., no
    avx512_bf16/amx_bf16, ...')."""
    flags = set(machine.replace(",", " ").split()) if "no avx512_bf16" not in machine else set()
    bf16 = "AMX" if "amx_bf16" in flags else "AVX512-BF16" if "avx512_bf16" in flags else "no bf16"
    for cpu in ("Xeon", "EPYC"):
        if cpu in machine:
            return f"{cpu}, {bf16}"
    return "not recorded"


def _cell(value: float | None, met: bool | None, digits: int, suffix: str) -> str:
    if value is None:
        return "-"
    text = f"{value:,.{digits}f}{suffix}"
    return text if met or met is None else f"**{text}**"


def batching_runs(folder: Path) -> list[dict[str, Any]]:
    """Every batching report with a summary: its name, when, machine and summary, oldest first."""
    runs = []
    for summary_path in [*folder.glob("batching*.json"), *folder.glob("*/batching.json")]:
        if summary_path.name.endswith(("-raw.json", "-partial.json")):
            continue
        report = summary_path.with_suffix(".md")
        raw = summary_path.with_name(summary_path.stem + "-raw.json")
        meta = json.loads(raw.read_text()) if raw.exists() else {}
        when, machine = meta.get("when"), meta.get("machine")
        if (when is None or machine is None) and report.exists():
            line = report.read_text().splitlines()[2]
            if found := re.search(r"Measured (\S+ \S+) on (.*?); reproduce", line):
                when, machine = found.group(1), found.group(2)
        summary = json.loads(summary_path.read_text())
        if "control_vs_best_p99_ratio" not in summary and meta.get("runs"):  # reports before it
            table = medians(meta["runs"])
            against = p99_against_best(table, CONTROL).values()
            if against:
                summary["control_vs_best_p99_ratio"] = max(ratio for ratio, _ in against)
        runs.append(
            {
                "report": report.relative_to(folder).as_posix(),
                "when": when or "?",
                "machine": machine or "not recorded",
                "summary": summary,
            }
        )
    return sorted(runs, key=lambda run: run["when"])


def without_summary(folder: Path) -> list[str]:
    """Batching reports kept with their raw output only (the runs before the summary file)."""
    return sorted(md.name for md in folder.glob("batching*.md") if not md.with_suffix(".json").exists())


def load_runs(folder: Path) -> list[dict[str, Any]]:
    """Every full load-suite report (the quick one's short runs are not the documented numbers)."""
    runs = []
    for path in folder.glob("load*.json"):
        data = json.loads(path.read_text())
        if not data["meta"]["command"].endswith("--full"):
            continue
        summary = data["summary"]
        summary["pipeline"].setdefault("target_rps", suite.PIPELINE_TARGET_RPS)  # older reports lack it
        # The edge ratios side by side within each repeat, as reports from 2026-12-04 04:20 on
        # take them; the older reports' pages took the ratio of the medians.
        if runs_by_protocol := data.get("reports", {}).get("protocols"):
            summary["protocols"] = suite.protocols(runs_by_protocol)
        runs.append(
            {
                "report": path.with_suffix(".md").name,
                "when": data["meta"]["when"].removesuffix(" UTC"),
                "machine": data["meta"].get("machine") or "not recorded",
                "summary": summary,
            }
        )
    return sorted(runs, key=lambda run: run["when"])


Row = list[tuple[float | None, bool | None]]  # one run's (value, met) per column


def _tally(rows: list[Row], columns: list[Column]) -> list[str]:
    """'k of n': per column, how many of the runs that measured it met the target."""
    cells = []
    for index in range(len(columns)):
        verdicts = [met for row in rows if (met := row[index][1]) is not None]
        cells.append(f"{sum(verdicts)} of {len(verdicts)}" if verdicts else "-")
    return cells


def _spread(rows: list[Row], columns: list[Column]) -> list[str]:
    """'lowest-highest (median m, n runs)', or one value and its count where all read the same:
    per column, over the runs that measured it."""
    cells = []
    for index, column in enumerate(columns):
        values = sorted(v for row in rows if (v := row[index][0]) is not None)
        if not values:
            cells.append("-")
            continue
        low, high, middle = (
            f"{v:,.{column.digits}f}" for v in (values[0], values[-1], statistics.median(values))
        )
        runs = f"{len(values)} run{'s' if len(values) > 1 else ''}"
        cells.append(f"{low} ({runs})" if low == high else f"{low}-{high} (median {middle}, {runs})")
    return cells


def _table(runs: list[dict[str, Any]], columns: list[Column]) -> list[str]:
    """One row per run, then per column over all runs and over each machine kind's: how many met
    the target (columns with one) or the range of the values (columns without)."""
    targets = all(column.met is not None for column in columns)
    summarize, label = (_tally, "met") if targets else (_spread, "range")
    headings = [column.heading for column in columns]
    lines = [
        "| report | measured | machine | " + " | ".join(headings) + " |",
        "|---" * (3 + len(headings)) + "|",
    ]
    rows = []
    for run in runs:
        row = read(run["summary"], columns)
        rows.append(row)
        cells = [
            _cell(v, m, c.digits, c.suffix) + c.aside(run["summary"])
            for (v, m), c in zip(row, columns, strict=True)
        ]
        lines.append(
            f"| [{run['report']}]({run['report']}) | {run['when']} | {machine_kind(run['machine'])} | "
            + " | ".join(cells)
            + " |"
        )
    kinds = sorted({machine_kind(run["machine"]) for run in runs})
    lines.append(f"| **{label}, all runs** | | | " + " | ".join(summarize(rows, columns)) + " |")
    for kind in kinds:
        mine = [row for row, run in zip(rows, runs, strict=True) if machine_kind(run["machine"]) == kind]
        lines.append(f"| {label}, {kind} | | | " + " | ".join(summarize(mine, columns)) + " |")
    return lines


def read(summary: dict[str, Any], columns: list[Column]) -> Row:
    """Each column's value in a run's summary, and whether it meets the column's target (None
    where the run did not measure it, or the column has no target)."""
    values = [(column, column.value(summary)) for column in columns]
    return [(v, None if v is None or c.met is None else c.met(v, summary)) for c, v in values]


def markdown(folder: Path) -> str:
    batching, load, unread = batching_runs(folder), load_runs(folder), without_summary(folder)

    lines = [
        "# Every kept run, against the targets",
        "",
        "Generated by `python -m bench.history` from the reports in this folder (`make bench-batching`",
        "and `make bench-full` regenerate it when they finish); oldest first. A value in **bold** misses",
        "its target; `-` was not measured in that run. Each run is one report; its own page gives the",
        "medians of its repeats, the raw output and the commands. The machines are 2-vCPU VMs of the",
        "kinds named; the same code ran up to 2 x faster on one kind than another, and moved between",
        "hours on one machine, so a target is read across the rows, per kind.",
        "",
        "![four of the open targets, run by run, coloured by machine](history.png)",
        "",
        "## Batching (`make bench-batching`)",
        "",
        "Saturation: end-to-end jobs/s over the bare model's rate timed just before (median over the",
        "runs). Light load: end-to-end p50 at 10% of capacity over a single-item pass timed just before",
        "and just after each light cell, in brackets against those before it alone (the earlier runs",
        "timed it just before each cell only). The runs before that pass was re-timed for each cell",
        "read it against the pass timed at the start, back to back and after an idle gap; the table",
        "judges them by the larger overhead (a",
        "spaced pass timed in a slow moment read up to 61 ms against 25 back to back) and gives the",
        "other reading in brackets, which some of those reports judged by. Default p99 / best fixed:",
        "the worst load's ratio; in brackets the same for the default's identical copy (`default,",
        "again`), where the run had one. The copy cannot differ from the default, and below a full",
        "batch waiting neither differs from `16:0` in any batch it forms: a copy over 1.1 is this",
        "measurement failing a policy against itself. In the runs whose brackets give the stack's",
        "capacity (from 2026-12-07) the loads were fractions of it, timed first in the run: what the",
        "stack completes while jobs arrive faster than it can finish them. In the others they were",
        "fractions of the bare model's batch-16 rate, at whose 90% the stack fell behind the offered",
        "rate in most runs, so those cells' p99 measured the backlog 15 s of overload built.",
        "",
        *_table(batching, BATCHING),
        "",
        *([f"Not in the table, kept with their raw output only: {', '.join(unread)}.", ""] if unread else []),
        "## The bare model, the stack and its lanes (`make bench-batching`)",
        "",
        "What the batching targets are read against, and what two defaults rest on, from the same",
        "runs: the bare model's rate at batch 16 in fp32 and in bf16 (sequences/s, timed at the start",
        "of the run; `-` for bf16 where the CPU computes no bf16 natively), bf16 over fp32 (what",
        "`PRECISION` trades), the stack's capacity over the bare fp32 rate (what the whole stack",
        "completes while jobs arrive faster than it can finish them, timed from 2026-12-07 02:34 on),",
        "and the jobs/s at saturation with two model lanes over one pass at a time on both cores, side",
        "by side in the run (what `MODEL_LANES` trades). The last rows give each column's range over",
        "all runs and over each machine kind's.",
        "",
        *_table(batching, SPEEDS),
        "",
        "## Load (`make bench-full`)",
        "",
        "Full runs (30 s, medians of 3) on the zero-cost simulated model. The ingress is met only with",
        "100% accepted and at least 99% of the offered 2,000/s achieved, as in each report. REST and",
        "grpc-web over native are taken side by side here, for every run: the median of each repeat's",
        "ratio to native gRPC in the same repeat. The pages of the runs before 2026-12-04 04:20 give",
        "the ratio of the medians instead, which a machine that slowed between repeats moved. From",
        "2026-12-06 the generator sends REST and grpc-web with a lean HTTP/1.1 client; before, with",
        "aiohttp, which cost it about twice the CPU per call on the cores it shares with the system",
        "([`http1-client-ab.md`](http1-client-ab.md)). From 2026-12-06 06:00 its native gRPC calls",
        "go over a lean HTTP/2 client too; before, over grpc.aio's client, which cost it 1.5-1.9 times",
        "the CPU per call and stalled most of the floor's slow calls ([`h2-client-ab.md`](h2-client-ab.md)).",
        "",
        *_table(load, LOAD),
        "",
    ]
    return "\n".join(lines)


# Four of the open targets, drawn run by run: (title, which runs, column, target).
PLOTTED = (
    ("batching: p99 at 40 req/s, ms", "batching", BATCHING[3], 200.0),
    ("batching: light load p50 over the pass, ms", "batching", BATCHING[4], 5.0),
    ("load: ingress p99 at 2,000/s, ms", "load", LOAD[0], 20.0),
    ("load: pipeline done/s", "load", LOAD[3], 1000.0),
)


def plot(folder: Path, path: Path) -> None:
    """The PLOTTED targets, each run a point in time order, coloured by machine kind, with the
    target as a dashed line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = {"batching": batching_runs(folder), "load": load_runs(folder)}
    kinds = sorted({machine_kind(run["machine"]) for group in runs.values() for run in group})
    colours = {kind: plt.get_cmap("tab10")(i) for i, kind in enumerate(kinds)}
    fig, axes = plt.subplots(2, 2, figsize=(12, 7.5))
    for ax, (title, group, column, target) in zip(axes.flat, PLOTTED, strict=True):
        points = [(i, column.value(run["summary"]), run) for i, run in enumerate(runs[group])]
        for kind in kinds:
            mine = [(i, v) for i, v, run in points if v is not None and machine_kind(run["machine"]) == kind]
            if mine:
                ax.plot(*zip(*mine, strict=True), "o", color=colours[kind], label=kind)
        ax.axhline(target, color="black", linestyle="--", linewidth=1)
        ax.set_title(title)
        ax.set_xticks(
            range(len(runs[group])), [run["when"][5:] for run in runs[group]], rotation=60, fontsize=7
        )
        if title.startswith("load: ingress"):
            ax.set_yscale("log")
        ax.grid(True, alpha=0.3)
    if axes.flat[0].get_legend_handles_labels()[0]:  # a folder whose runs measured none of it has none
        axes.flat[0].legend(title="machine", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def write(folder: Path = OUT) -> Path:
    path = folder / "history.md"
    path.write_text(markdown(folder))
    plot(folder, folder / "history.png")
    return path


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.history", description=__doc__.splitlines()[0])
    parser.add_argument("--folder", type=Path, default=OUT, help="where the reports are, and history.md goes")
    args = parser.parse_args(argv)
    print(write(args.folder))


if __name__ == "__main__":
    main()
