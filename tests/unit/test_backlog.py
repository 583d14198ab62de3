"""The drain rate and what follows from it, on a fake counter and a fake clock."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from ingress.backlog import MAX_RETRY_S, MIN_RETRY_S, UNMEASURED_RETRY_S, Backlog


class Counter:
    """Stands in for the store: only `left_queue` is asked."""

    def __init__(self) -> None:
        self.left = 0

    async def left_queue(self) -> int:
        return self.left


def backlog_at(times: list[float], lefts: list[int], window_s: float = 30.0) -> Backlog:
    store, clock = Counter(), iter(times)
    backlog = Backlog(store, window_s=window_s, clock=lambda: next(clock))  # type: ignore[arg-type]
    for left in lefts:
        store.left = left
        asyncio.run(backlog.sample())
    return backlog


def test_no_rate_until_two_samples_a_second_apart() -> None:
    assert backlog_at([], []).rate() is None
    assert backlog_at([0.0], [5]).rate() is None
    assert backlog_at([0.0, 0.5], [5, 9]).rate() is None
    assert backlog_at([0.0, 1.0], [5, 9]).rate() == pytest.approx(4.0)


def test_the_rate_covers_the_window_only() -> None:
    # 100 jobs/s for 40 s, then 10 jobs/s for 30 s: a 30 s window sees only the new rate.
    times = [float(t) for t in range(71)]
    lefts = [100 * t if t <= 40 else 4000 + 10 * (t - 40) for t in range(71)]
    assert backlog_at(times, lefts).rate() == pytest.approx(10.0)


def test_eta_and_drain_time_follow_the_rate() -> None:
    backlog = backlog_at([0.0, 2.0], [0, 20])  # 10 jobs/s
    assert backlog.eta_s(25) == pytest.approx(2.5)
    assert backlog.drain_s(300) == pytest.approx(30.0)
    stalled = backlog_at([0.0, 2.0], [7, 7])
    assert stalled.eta_s(1) is None and stalled.drain_s(10) is None


@pytest.mark.parametrize(
    ("lefts", "room", "expected"),
    [
        (None, 1000, UNMEASURED_RETRY_S),  # nothing measured yet
        ([0, 0], 1000, MAX_RETRY_S),  # nothing drains: retrying soon cannot succeed
        ([0, 100], 1000, 10.0),  # 100/s: a thousand places in 10 s
        ([0, 100_000], 1000, MIN_RETRY_S),  # fast drain: never below the floor
        ([0, 1], 1000, MAX_RETRY_S),  # slow drain: never past the ceiling
    ],
)
def test_retry_delay_is_the_time_to_make_room(lefts: Any, room: int, expected: float) -> None:
    backlog = backlog_at([0.0, 1.0], lefts) if lefts else backlog_at([], [])
    assert backlog.retry_after_s(room) == pytest.approx(expected)
