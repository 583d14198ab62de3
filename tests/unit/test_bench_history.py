"""The table of every kept run: each value read from its report, each target judged as the
report judges it, and the committed table the one the committed reports give."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench import batching, history, suite

BENCHMARKS = Path(__file__).resolve().parents[2] / "docs" / "benchmarks"
XEON = "Intel(R) Xeon(R) Processor, x86_64, 2 CPUs, avx512_bf16 amx_bf16, Python 3.11.7"
EPYC = "AMD EPYC, x86_64, 2 CPUs, no avx512_bf16/amx_bf16, Python 3.11.7"


def batching_report(folder: Path, name: str, when: str, machine: str, **summary: Any) -> None:
    (folder / f"{name}.json").write_text(json.dumps(summary))
    (folder / f"{name}-raw.json").write_text(json.dumps({"when": when, "machine": machine, "runs": []}))
    (folder / f"{name}.md").write_text(f"# Batching\n\nMeasured {when} on {machine}; reproduce with `x`.\n")


def load_report(folder: Path, name: str, command: str, p99_ms: float, achieved: float = 2000.0) -> None:
    summary = {
        "ingress": {"offered_rps": 2000, "achieved_rps": achieved, "accepted": 1.0, "p99_ms": p99_ms},
        "batch": {"jobs_rps": 12_000.0},
        "pipeline": {"done_rps": 1010.0, "lost": 0},  # no target_rps: as the oldest reports
        "protocols": {"rest-envoy": {"vs_native": 0.69}, "grpc-web-envoy": {"vs_native": 0.9}},
    }
    meta = {"command": command, "when": "2026-12-01 10:00 UTC", "machine": XEON}
    (folder / f"{name}.json").write_text(json.dumps({"meta": meta, "summary": summary, "reports": {}}))


def rows(text: str, section: str = "## Batching") -> dict[str, list[str]]:
    """Each row's cells after the first, by its first cell, in the table under the heading that
    starts with `section`."""
    (part,) = [part for part in text.split("\n## ") if f"## {part}".startswith(section)]
    out = {}
    for line in part.splitlines():
        if line.startswith("| ") and not line.startswith("| report"):
            cells = [cell.strip() for cell in line.strip("|").split("|")]
            out[cells[0]] = cells[1:]
    return out


def test_each_value_is_bold_only_where_it_misses_its_target(tmp_path: Path) -> None:
    batching_report(
        tmp_path,
        "batching-0800",
        "2026-12-01 08:00",
        XEON,
        saturation_ratio=0.95,
        saturation_ratio_bf16=0.66,
        padding_efficiency=0.91,
        p99_near_40_rps_ms=199.6,
        light_load_overhead_vs_spaced_before_ms=4.9,
        default_vs_best_p99_ratio=1.2,
    )
    table = rows(history.markdown(tmp_path))
    cells = table["[batching-0800.md](batching-0800.md)"]
    assert cells == [
        "2026-12-01 08:00",
        "Xeon, AMX",
        "0.95",
        "**0.66**",
        "0.91",
        "200 ms",
        "4.9 ms",
        "**1.20**",
    ]
    assert table["**met, all runs**"][2:] == ["1 of 1", "0 of 1", "1 of 1", "1 of 1", "1 of 1", "0 of 1"]


def test_the_default_against_the_best_fixed_config_stands_beside_its_identical_copy(tmp_path: Path) -> None:
    batching_report(
        tmp_path,
        "batching-0700",
        "2026-12-01 07:00",
        XEON,
        default_vs_best_p99_ratio=1.4,
        control_vs_best_p99_ratio=1.6,
        stack_capacity_per_s=88.4,
    )
    # An older report: no copy's ratio in its summary, so it is read from the raw runs beside it.
    batching_report(tmp_path, "batching-0800", "2026-12-01 08:00", XEON, default_vs_best_p99_ratio=1.2)
    cells = [("16:0", 0.3, 100.0), ("default, again", 0.3, 130.0), ("16:0", 0.6, 200.0), ("1:0", 0.6, 150.0)]
    cells.append(("default, again", 0.6, 180.0))
    runs = [
        {**dict.fromkeys(batching.TABLE_KEYS, 1.0), "config": config, "load": load, "e2e_p99_ms": p99}
        for config, load, p99 in cells
    ]
    raw = tmp_path / "batching-0800-raw.json"
    raw.write_text(json.dumps({**json.loads(raw.read_text()), "runs": runs}))
    table = rows(history.markdown(tmp_path))
    # Its loads were fractions of the stack's capacity, timed first: said beside the copy.
    cell = table["[batching-0700.md](batching-0700.md)"][-1]
    assert cell == "**1.40** (its copy 1.60; loads of the stack's 88/s)"
    # The worse of 130 / 100 (16:0 best at 30%) and 180 / 150 (1:0 best at 60%).
    assert table["[batching-0800.md](batching-0800.md)"][-1] == "**1.20** (its copy 1.30)"


def test_a_target_a_run_did_not_measure_is_not_counted(tmp_path: Path) -> None:
    batching_report(
        tmp_path, "batching-0900", "2026-12-01 09:00", EPYC, saturation_ratio=1.0, saturation_ratio_bf16=None
    )
    batching_report(
        tmp_path, "batching-1000", "2026-12-01 10:00", XEON, saturation_ratio=0.8, saturation_ratio_bf16=1.0
    )
    table = rows(history.markdown(tmp_path))
    assert table["[batching-0900.md](batching-0900.md)"][1:4] == ["EPYC, no bf16", "1.00", "-"]
    assert table["**met, all runs**"][2:4] == ["1 of 2", "1 of 1"]
    assert table["met, EPYC, no bf16"][2:4] == ["1 of 1", "-"]
    assert table["met, Xeon, AMX"][2:4] == ["0 of 1", "1 of 1"]


def test_the_bare_rates_and_the_lanes_read_as_ratios_with_each_kinds_range(tmp_path: Path) -> None:
    rates = {"bare_fp32_throughput_per_s": 100.0, "saturation_fp32_jobs_per_s": 110.0}
    batching_report(
        tmp_path,
        "batching-0800",
        "2026-12-01 08:00",
        XEON,
        **rates,
        bare_bf16_throughput_per_s=300.0,
        stack_capacity_per_s=81.0,
        saturation_one_lane_fp32_jobs_per_s=100.0,
        saturation_bf16_jobs_per_s=320.0,
        saturation_one_lane_bf16_jobs_per_s=0.0,  # a side that completed nothing is not a ratio
    )
    batching_report(tmp_path, "batching-0900", "2026-12-01 09:00", EPYC, **rates)
    batching_report(
        tmp_path, "batching-1000", "2026-12-01 10:00", XEON, **rates, bare_bf16_throughput_per_s=200.0
    )
    table = rows(history.markdown(tmp_path), "## The bare model")
    assert table["[batching-0800.md](batching-0800.md)"][2:] == ["100", "300", "3.00", "0.81", "1.10", "-"]
    assert table["[batching-0900.md](batching-0900.md)"][2:] == ["100", "-", "-", "-", "-", "-"]
    assert table["range, Xeon, AMX"][4] == "2.00-3.00 (median 2.50, 2 runs)"
    assert table["**range, all runs**"][2] == "100 (3 runs)"
    assert table["range, EPYC, no bf16"][2] == "100 (1 run)"
    assert table["range, EPYC, no bf16"][3:] == ["-"] * 5


def test_runs_before_the_pass_was_timed_per_cell_are_read_against_the_worse_of_the_start_passes() -> None:
    # A spaced pass timed in a slow moment at the start must not make the overhead look small.
    assert (
        history.light_overhead({"light_load_overhead_ms": 12.2, "light_load_overhead_vs_spaced_ms": -23.8})
        == 12.2
    )
    before = {"light_load_overhead_ms": 1.0, "light_load_overhead_vs_spaced_before_ms": 10.6}
    assert history.light_overhead(before) == 10.6
    assert history.light_overhead({}) is None
    # The other reading stays in sight, since the run's own report may have judged by it.
    assert history.light_aside({"light_load_overhead_ms": 5.8, "light_load_overhead_vs_spaced_ms": 4.0}) == (
        " (spaced +4.0)"
    )
    assert history.light_aside(before) == ""


def test_runs_that_timed_the_pass_around_each_cell_are_read_against_both_sides() -> None:
    both = {
        "light_load_overhead_ms": 1.0,
        "light_load_overhead_vs_spaced_around_ms": 4.2,
        "light_load_overhead_vs_spaced_before_ms": 6.3,
    }
    assert history.light_overhead(both) == 4.2
    assert history.light_aside(both) == " (before it alone +6.3)"  # as the runs before it read


def test_reports_without_a_summary_are_named_not_dropped_silently(tmp_path: Path) -> None:
    (tmp_path / "batching-1050.md").write_text(
        "# Batching\n\nMeasured 2026-11-30 10:50 on x86_64; reproduce.\n"
    )
    assert "kept with their raw output only: batching-1050.md." in history.markdown(tmp_path)


def test_only_full_load_runs_count_and_old_reports_get_the_target_of_their_day(tmp_path: Path) -> None:
    load_report(tmp_path, "load-1000", "python -m bench.suite --full", p99_ms=12.0)
    load_report(tmp_path, "load-quick", "python -m bench.suite", p99_ms=3.0)
    table = rows(history.markdown(tmp_path), "## Load")
    assert "[load-quick.md](load-quick.md)" not in table
    cells = table["[load-1000.md](load-1000.md)"]
    assert cells[2:] == ["12.0 ms", "1.00", "12,000", "1,010", "**0.69**", "0.90"]


def test_write_draws_the_plotted_targets_beside_the_table(tmp_path: Path) -> None:
    batching_report(tmp_path, "batching-0900", "2026-12-01 09:00", EPYC, p99_near_40_rps_ms=250.0)
    load_report(tmp_path, "load-1000", "python -m bench.suite --full", p99_ms=30.0)
    history.write(tmp_path)
    assert "](history.png)" in (tmp_path / "history.md").read_text()
    assert (tmp_path / "history.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_load_columns_judge_every_kept_report_as_the_report_did() -> None:
    for run in history.load_runs(BENCHMARKS):
        verdicts = suite.verdicts(run["summary"])
        values = [column.value(run["summary"]) for column in history.LOAD]
        assert None not in values, run["report"]  # every full run measured all six
        met = [met for _, met in history.read(run["summary"], history.LOAD)]
        assert (met[0] and met[1]) == verdicts["ingress"], run["report"]
        assert met[2:] == [verdicts[k] for k in ("batch", "pipeline", "rest-envoy", "grpc-web-envoy")]


def test_the_committed_table_is_the_one_the_committed_reports_give() -> None:
    # make bench-batching and make bench-full rewrite it; a report committed without it fails here.
    assert (BENCHMARKS / "history.md").read_text() == history.markdown(BENCHMARKS)
