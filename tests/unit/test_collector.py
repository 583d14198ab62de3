from __future__ import annotations

from dataclasses import dataclass

import pytest

from batcher.collector import Policy, next_batch
from batchline.v1 import job_pb2


@dataclass
class Item:
    arrived_at: float


def items(*arrivals: float) -> list[Item]:
    return [Item(a) for a in arrivals]


def test_nothing_waiting_means_wait_for_an_arrival() -> None:
    decision = next_batch([], now=5.0, policy=Policy(16, 0.05))
    assert decision.take == ()
    assert decision.wait_s is None


@pytest.mark.parametrize("size", [1, 4, 16])
def test_a_full_batch_runs_at_once_oldest_first(size: int) -> None:
    waiting = items(*range(size + 3))
    decision = next_batch(waiting, now=0.0, policy=Policy(size, 10.0))
    assert decision.take == tuple(range(size))
    assert decision.close_reason == job_pb2.BATCH_CLOSE_REASON_SIZE


@pytest.mark.parametrize("count", [1, 5, 15])
def test_greedy_runs_whatever_is_there(count: int) -> None:
    decision = next_batch(items(*([1.0] * count)), now=1.0, policy=Policy(16, 0.0))
    assert decision.take == tuple(range(count))
    assert decision.close_reason == job_pb2.BATCH_CLOSE_REASON_DRAINED


@pytest.mark.parametrize(("wait_s", "now", "expected_wait"), [(0.05, 10.01, 0.04), (0.2, 10.0, 0.2)])
def test_a_window_waits_for_the_rest_of_it(wait_s: float, now: float, expected_wait: float) -> None:
    decision = next_batch(items(10.0, 10.005), now=now, policy=Policy(16, wait_s))
    assert decision.take == ()
    assert decision.wait_s == pytest.approx(expected_wait)


def test_a_window_closes_when_the_oldest_has_waited_long_enough() -> None:
    decision = next_batch(items(10.0, 10.04), now=10.05, policy=Policy(16, 0.05))
    assert decision.take == (0, 1)
    assert decision.close_reason == job_pb2.BATCH_CLOSE_REASON_WAIT
