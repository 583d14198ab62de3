"""The load report's verdicts: each target met only when the numbers say so."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from bench import suite


def summary(done_rps: float, lost: int = 0, p99_ms: float = 12.0, rest: float = 0.8) -> dict[str, Any]:
    return {
        "ingress": {"offered_rps": 2000, "achieved_rps": 1990.0, "accepted": 1.0, "p99_ms": p99_ms},
        "batch": {"jobs_rps": 12_000.0},
        "pipeline": {
            "offered_rps": suite.PIPELINE_OFFERED_RPS,
            "target_rps": suite.PIPELINE_TARGET_RPS,
            "done_rps": done_rps,
            "lost": lost,
        },
        "protocols": {"grpc-direct": {"vs_native": 1.0}, "rest-envoy": {"vs_native": rest}},
    }


def test_the_pipeline_is_offered_more_than_its_target() -> None:
    assert suite.PIPELINE_OFFERED_RPS > suite.PIPELINE_TARGET_RPS == 1000


@pytest.mark.parametrize(
    ("done_rps", "lost", "met"),
    [(1001.0, 0, True), (1000.0, 0, True), (994.0, 0, False), (1050.0, 1, False)],
)
def test_the_pipeline_meets_its_target_only_with_every_job_done_at_the_full_rate(
    done_rps: float, lost: int, met: bool
) -> None:
    assert suite.verdicts(summary(done_rps, lost))["pipeline"] is met


def test_the_ingress_and_edge_verdicts_follow_their_bounds() -> None:
    assert suite.verdicts(summary(1000.0))["ingress"]
    assert not suite.verdicts(summary(1000.0, p99_ms=20.5))["ingress"]
    assert suite.verdicts(summary(1000.0, rest=0.7))["rest-envoy"]
    assert not suite.verdicts(summary(1000.0, rest=0.69))["rest-envoy"]
    assert "grpc-web-envoy" not in suite.verdicts(summary(1000.0))


def full_summary(floor_p99: float | None) -> dict[str, Any]:
    """A summary with every number the report prints; the floor's only when it was measured."""
    run = {
        "offered_rps": 2000,
        "achieved_rps": 1990.0,
        "accepted": 1.0,
        "p50_ms": 4.0,
        "send_lag_p99_ms": 1.0,
    }
    pipeline = dict.fromkeys(
        [
            "accepted",
            "done",
            "done_rps",
            "rewatches",
            "e2e_p50_ms",
            "e2e_p99_ms",
            "queue_wait_p50_ms",
            "mean_batch",
        ],
        1.0,
    )
    floor = {"floor": {**run, "p99_ms": floor_p99}} if floor_p99 is not None else {}
    return {
        "ingress": {**run, "p99_ms": 25.0},
        **floor,
        "batch": {"jobs_rps": 12_000.0, "calls_rps": 190.0, "accepted": 1.0},
        "pipeline": {**pipeline, "offered_rps": 1100, "target_rps": 1000, "lost": 0},
        "protocols": {
            "grpc-direct": {"rps": 900.0, "vs_native": 1.0, "p50_ms": 1.0, "p99_ms": 2.0, "accepted": 1.0}
        },
        "cpu_ms_per_job": {"ingress 2000/s": {"ingress": 0.4}},
    }


def report_text(summary: dict[str, Any]) -> str:
    meta = {"command": "python -m bench.suite", "when": "now", "machine": "a CPU", "cpus": 2}
    results: dict[str, list[dict[str, Any]]] = {"sweep": []}
    return suite.markdown(suite.QUICK, summary, results, meta)


def test_the_report_sets_the_floor_beside_the_ingress() -> None:
    text = report_text(full_summary(floor_p99=31.5))
    assert "p99 25.0 ms (the floor, no work: 31.5 ms) | **missed**" in text
    assert "| ingress, one process | 1,990 | 100.00% | 4.0 | 25.0 | 1.0 |" in text
    assert "| the floor: no work | 1,990 | 100.00% | 4.0 | 31.5 | 1.0 |" in text


def test_a_report_without_a_floor_measurement_leaves_it_out() -> None:
    text = report_text(full_summary(floor_p99=None))
    assert "the floor, no work" not in text and "| the floor: no work |" not in text
    assert "| ingress, one process | 1,990 |" in text


def test_the_report_sets_several_ingress_processes_beside_the_default_one() -> None:
    summary = full_summary(floor_p99=31.5)
    summary["ingress_processes"] = {**summary["ingress"], "p99_ms": 90.0}
    meta = {"command": "c", "when": "now", "machine": "a CPU", "cpus": 2, "ingress_processes": 2}
    text = suite.markdown(suite.QUICK, summary, {"sweep": []}, meta)
    assert "(open loop, gRPC direct, one ingress process)" in text
    assert "p99 25.0 ms; 2 processes: p99 90.0 ms (the floor, no work: 31.5 ms) | **missed**" in text
    assert "| ingress, one process | 1,990 | 100.00% | 4.0 | 25.0 | 1.0 |" in text
    assert "| ingress, 2 processes | 1,990 | 100.00% | 4.0 | 90.0 | 1.0 |" in text


def test_a_runs_command_names_its_connections_and_its_target() -> None:
    options = suite.submit("ingress-one-process", rps=2000, duration=30.0, concurrency=1000, connections=8)
    command = suite.command_line(options, "<ingress>")
    assert "--rps 2000 -c 1000 -z 30s --connections 8 " in command and command.endswith(" <ingress>")
    assert "--connections" not in suite.command_line(suite.submit("x", concurrency=50), "<envoy>")


def test_the_reports_json_has_null_where_python_would_write_nan_or_infinity() -> None:
    from bench import strict_json

    text = strict_json.dumps({"p99": math.nan, "load": math.inf, "runs": [(1.5, -math.inf)], "n": 3})
    assert "NaN" not in text and "Infinity" not in text
    assert json.loads(text) == {"p99": None, "load": None, "runs": [[1.5, None]], "n": 3}
    assert text.endswith("}\n")


def test_the_proxys_share_is_taken_side_by_side_within_each_repeat() -> None:
    """A machine that slows between repeats must not move the ratio: native gRPC ran 2,000/s in
    the first repeat and 1,000/s in the other two, REST at 70% of it each time. Ratio of
    medians would read 1,400 / 1,000 = 140%."""

    def run(name: str, rps: float) -> dict[str, Any]:
        return {"name": f"saturation-{name}", "rps": rps, "latencyDistribution": [], "count": 1,
                "statusCodeDistribution": {"OK": 1}}  # fmt: skip

    repeats = [(2000.0, 1400.0), (1000.0, 700.0), (1000.0, 700.0)]
    reports = [r for (native, rest) in repeats for r in (run("grpc-direct", native), run("rest-envoy", rest))]
    ratios = suite.protocols(reports)["rest-envoy"]["vs_native_runs"]
    assert ratios == [0.7, 0.7, 0.7] and suite.protocols(reports)["rest-envoy"]["vs_native"] == 0.7
    summary = full_summary(floor_p99=None)
    row = {"rps": 700.0, "vs_native": 0.7, "vs_native_runs": ratios, "p50_ms": 1.0, "p99_ms": 2.0}
    summary["protocols"]["rest-envoy"] = {**row, "accepted": 1.0}
    assert "| rest | through Envoy | 700 | 70% (70%, 70%, 70%) |" in report_text(summary)


def test_each_protocols_system_cpu_is_set_beside_its_throughput_without_the_generator() -> None:
    summary = full_summary(floor_p99=None)
    row = {"p50_ms": 1.0, "p99_ms": 2.0, "accepted": 1.0}
    summary["protocols"]["rest-envoy"] = {**row, "rps": 900.0, "vs_native": 1.0}
    summary["cpu_ms_per_job"] |= {
        "saturation grpc-direct": {"ingress": 0.4, "rabbitmq": 0.1, suite.GENERATOR: 0.2},
        "saturation rest-envoy": {"ingress": 0.35, "envoy": 0.15, "rabbitmq": 0.1, suite.GENERATOR: 0.1},
    }
    text = report_text(summary)
    # Same throughput, but REST costs the system 0.60 ms against 0.50: it would keep 83%.
    assert "| grpc | direct | 900 | 100% | 1.0 | 2.0 | 100.0% | 0.50 | 0.20 | 100% |" in text
    assert "| rest | through Envoy | 900 | 100% | 1.0 | 2.0 | 100.0% | 0.60 | 0.10 | 83% |" in text
