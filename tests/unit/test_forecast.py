"""The measurements behind the adaptive wait."""

from __future__ import annotations

import random
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from batcher.forecast import MIN_SECONDS, ArrivalRate, ForwardTime


def test_arrival_rate_counts_the_window_only() -> None:
    rate = ArrivalRate(window_s=2.0)
    assert rate.rate(0.0) == 0.0
    for i in range(100):
        rate.add(i * 0.01)  # 100 jobs/s for one second
    assert rate.rate(1.0) == pytest.approx(50.0)  # 100 jobs over a 2 s window
    assert rate.rate(3.5) == 0.0  # all of them older than the window


def test_a_steady_client_spaced_wider_than_the_pass_is_held_up_by_none_of_it() -> None:
    arrivals = ArrivalRate(window_s=2.0)
    assert arrivals.held_up(0.0, 0.025) is None  # nothing seen
    for i in range(20):
        arrivals.add(i * 0.0625)  # 16 jobs/s, evenly spaced
    assert arrivals.held_up(1.25, 0.025) == 0.0


def test_arrivals_closer_than_the_pass_each_wait_what_is_left_of_it() -> None:
    arrivals = ArrivalRate(window_s=2.0)
    for i in range(50):
        arrivals.add(i * 0.010)  # every 10 ms
    # A 25 ms pass from any arrival holds up the next two: 15 and 5 ms.
    assert arrivals.held_up(0.5, 0.025) == pytest.approx(0.020)
    burst = ArrivalRate(window_s=2.0)
    burst.add(0.0, count=3)  # delivered together: two wait the whole pass
    burst.add(1.0)
    assert burst.held_up(0.5, 0.025) == pytest.approx((2 * 0.025 + 0.025 + 0) / 3)


def test_arrivals_at_random_are_held_up_as_the_rule_assumes_unmeasured() -> None:
    rng = random.Random(7)
    arrivals, now, rate, pass_s = ArrivalRate(window_s=10_000.0), 0.0, 20.0, 0.030
    for _ in range(20_000):
        now += rng.expovariate(rate)
        arrivals.add(now)
    measured = arrivals.held_up(now, pass_s, starts=20_000)
    assert measured == pytest.approx(rate * pass_s * pass_s / 2, rel=0.1)


def test_forward_time_fits_fixed_plus_per_token() -> None:
    forward = ForwardTime()
    for size, longest in [(1, 16), (4, 16), (16, 16), (16, 64), (8, 32)]:
        forward.add(size, longest, size * longest, 0.005 + 0.0002 * size * longest)
    assert forward.fixed_s == pytest.approx(0.005)
    assert forward.per_token_s == pytest.approx(0.0002)
    assert forward(10, 20, 150) == pytest.approx(0.005 + 0.0002 * 200)


def test_forward_time_with_one_shape_is_all_per_token() -> None:
    forward = ForwardTime()
    forward.add(4, 10, 40, 0.04)
    forward.add(4, 10, 40, 0.04)
    assert forward(8, 10, 60) == pytest.approx(0.08)


def test_forward_time_never_goes_negative() -> None:
    forward = ForwardTime()
    forward.add(1, 10, 10, 0.05)
    forward.add(16, 10, 160, 0.01)  # noise: bigger was faster
    assert forward.per_token_s >= 0 and forward.fixed_s >= 0


def test_the_warm_up_keeps_the_fit_anchored_through_a_long_run_of_one_shape() -> None:
    forward = ForwardTime(keep=8)
    for size, longest in [(1, 16), (4, 16), (16, 16), (16, 64)]:
        forward.add(size, longest, size * longest, 0.005 + 0.0002 * size * longest, anchor=True)
    for _ in range(100):  # saturation: only full batches of one length
        forward.add(16, 30, 16 * 30, 0.005 + 0.0002 * 16 * 30)
    assert forward.fixed_s == pytest.approx(0.005)
    assert forward.per_token_s == pytest.approx(0.0002)


def test_forward_time_fits_what_the_model_says_a_pass_computes() -> None:
    forward = ForwardTime(work=lambda size, longest, real: float(real))  # a packed model
    shapes = [(1, 16, 16), (4, 40, 90), (16, 40, 330), (16, 16, 256), (8, 30, 150)]
    for size, longest, real in shapes:
        forward.add(size, longest, real, 0.005 + 0.0002 * real)
    assert forward.fixed_s == pytest.approx(0.005)
    assert forward.per_token_s == pytest.approx(0.0002)
    assert forward(16, 64, 200) == pytest.approx(0.005 + 0.0002 * 200)  # padding costs nothing


def plain_fit(samples: Sequence[tuple[float, float]]) -> tuple[float, float]:
    """The weighted least squares written out one sample at a time: (fixed, per token)."""
    weights = [1 / max(y, MIN_SECONDS) ** 2 for _, y in samples]
    total = sum(weights)
    mean_x = sum(w * x for w, (x, _) in zip(weights, samples, strict=True)) / total
    mean_y = sum(w * y for w, (_, y) in zip(weights, samples, strict=True)) / total
    if len({x for x, _ in samples}) == 1:
        return 0.0, mean_y / mean_x if mean_x else 0.0
    spread = sum(w * (x - mean_x) ** 2 for w, (x, _) in zip(weights, samples, strict=True))
    slope = sum(w * (x - mean_x) * (y - mean_y) for w, (x, y) in zip(weights, samples, strict=True)) / spread
    per_token = max(0.0, slope)
    return max(0.0, mean_y - per_token * mean_x), per_token


@settings(max_examples=200, deadline=None)
@given(
    keep=st.integers(2, 12),
    anchors=st.lists(st.tuples(st.integers(1, 16), st.integers(1, 512), st.floats(1e-5, 2.0)), max_size=6),
    passes=st.lists(st.tuples(st.integers(1, 16), st.integers(1, 512), st.floats(1e-5, 2.0)), max_size=40),
)
def test_the_fit_is_over_the_anchors_and_the_latest_passes_only(
    keep: int, anchors: list[tuple[int, int, float]], passes: list[tuple[int, int, float]]
) -> None:
    forward = ForwardTime(keep=keep, fixed_s=0.01, per_token_s=0.0)
    for size, longest, seconds in anchors:
        forward.add(size, longest, size * longest, seconds, anchor=True)
    for size, longest, seconds in passes:
        forward.add(size, longest, size * longest, seconds)
    samples = [(size * longest, seconds) for size, longest, seconds in [*anchors, *passes[-keep:]]]
    expected = plain_fit(samples) if len(samples) >= 2 else (0.01, 0.0)
    assert forward.fixed_s == pytest.approx(expected[0], rel=1e-6, abs=1e-12)
    assert forward.per_token_s == pytest.approx(expected[1], rel=1e-6, abs=1e-15)
