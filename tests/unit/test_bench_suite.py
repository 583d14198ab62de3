"""The load report's verdicts: each target met only when the numbers say so."""

from __future__ import annotations

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
