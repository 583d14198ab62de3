"""The batch-formation policy: every rule and edge case, with no queue and no clock."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from batcher import collector
from batcher.collector import DEADLINE, DRAINED, SIZE, TOKENS, WAIT, Load, Policy, next_batch
from batcher.forecast import ForwardTime
from batcher.model import packed_work, padded_work


@dataclass
class Item:
    arrived_at: float
    tokens: int = 10
    priority: int = 0
    deadline: float | None = None


def items(*arrivals: float, tokens: int = 10) -> list[Item]:
    return [Item(a, tokens) for a in arrivals]


def linear(fixed_s: float = 0.01, per_token_s: float = 0.0001) -> Load:
    """A load forecast with a forward pass of fixed + per padded token seconds."""
    return Load(0.0, lambda size, longest, real: fixed_s + per_token_s * size * longest)


# --- basics ----------------------------------------------------------------------------------------


def test_nothing_waiting_means_wait_for_an_arrival() -> None:
    decision = next_batch([], now=5.0, policy=Policy(16, 0.05))
    assert decision.take == () and decision.expired == ()
    assert decision.wait_s is None


@pytest.mark.parametrize("size", [1, 4, 16])
def test_a_full_batch_runs_at_once_oldest_first(size: int) -> None:
    waiting = items(*range(size + 3))
    decision = next_batch(waiting, now=float(size + 3), policy=Policy(size, 10.0))
    assert decision.take == tuple(range(size))
    assert decision.close_reason == SIZE


@pytest.mark.parametrize("count", [1, 5, 15])
def test_greedy_runs_whatever_is_there(count: int) -> None:
    decision = next_batch(items(*([1.0] * count)), now=1.0, policy=Policy(16, 0.0))
    assert decision.take == tuple(range(count))
    assert decision.close_reason == DRAINED


@pytest.mark.parametrize(("wait_s", "now", "expected_wait"), [(0.05, 10.01, 0.04), (0.2, 10.0, 0.2)])
def test_a_window_waits_for_the_rest_of_it(wait_s: float, now: float, expected_wait: float) -> None:
    decision = next_batch(items(10.0, 10.005), now=now, policy=Policy(16, wait_s))
    assert decision.take == ()
    assert decision.wait_s == pytest.approx(expected_wait)


def test_a_window_closes_when_the_oldest_has_waited_long_enough() -> None:
    decision = next_batch(items(10.0, 10.04), now=10.05, policy=Policy(16, 0.05))
    assert decision.take == (0, 1)
    assert decision.close_reason == WAIT


# --- length-aware grouping and the token budget -----------------------------------------------------


def test_neighbours_of_similar_length_are_batched_together() -> None:
    lengths = [12, 80, 11, 78, 13, 82, 10, 79]
    waiting = [Item(float(i), n) for i, n in enumerate(lengths)]
    decision = next_batch(waiting, now=10.0, policy=Policy(4, 0.0))
    assert sorted(lengths[i] for i in decision.take) == [10, 11, 12, 13]  # the oldest (12) seeds
    fifo = next_batch(waiting, now=10.0, policy=Policy(4, 0.0, length_aware=False))
    assert fifo.take == (0, 1, 2, 3)


def test_a_long_input_is_not_starved_it_seeds_once_it_is_oldest() -> None:
    waiting = [Item(0.0, 300)] + [Item(1.0 + i, 10) for i in range(20)]
    decision = next_batch(waiting, now=30.0, policy=Policy(4, 0.0))
    assert 0 in decision.take  # the oldest job always rides in the next batch


def test_all_same_length_is_plain_fifo() -> None:
    waiting = items(*[float(i) for i in range(10)], tokens=20)
    decision = next_batch(waiting, now=20.0, policy=Policy(4, 0.0))
    assert decision.take == (0, 1, 2, 3)


def test_the_token_budget_closes_a_batch_early() -> None:
    waiting = items(*[float(i) for i in range(10)], tokens=50)
    decision = next_batch(waiting, now=20.0, policy=Policy(16, 10.0, max_batch_tokens=200))
    assert decision.take == (0, 1, 2, 3)  # 4 x 50 = 200 padded tokens
    assert decision.close_reason == TOKENS


def test_one_huge_input_runs_alone_even_over_the_budget() -> None:
    waiting = [Item(0.0, 512), Item(1.0, 10)]
    decision = next_batch(waiting, now=2.0, policy=Policy(16, 0.0, max_batch_tokens=256))
    assert decision.take == (0,)
    assert decision.close_reason == TOKENS
    after = next_batch([Item(1.0, 10)], now=2.0, policy=Policy(16, 0.0, max_batch_tokens=256))
    assert after.take == (0,)


def test_the_budget_skips_a_long_candidate_but_takes_shorter_ones() -> None:
    waiting = [Item(0.0, 20), Item(1.0, 100), Item(2.0, 22), Item(3.0, 21)]
    decision = next_batch(waiting, now=4.0, policy=Policy(16, 0.0, max_batch_tokens=120, length_aware=False))
    assert decision.take == (0, 2, 3)


# --- splitting mixed lengths by cost (with a measured forward-time model) ---------------------------

# The shape measured here for a full-size DistilBERT on 2 threads: 16 ms + 0.46 ms per padded token.
MEASURED = linear(fixed_s=0.016, per_token_s=0.00046)
# The same for a model that computes the real tokens only, plus DistilBERT's padded attention
# (`packed_work`: size x longest^2 / (2 x 768 + 3072) on top of the real tokens).
PACKED = Load(0.0, lambda size, longest, real: 0.016 + 0.00046 * (real + size * longest * longest / 4608))


def test_mixed_lengths_split_when_the_padding_saved_outweighs_a_pass() -> None:
    # One pass: 5 x 40 = 200 padded tokens (108 ms). Two: 3 x 10 and 2 x 40 (30 + 53 ms).
    waiting = [Item(0.0, 10), Item(1.0, 40), Item(2.0, 10), Item(3.0, 40), Item(4.0, 10)]
    decision = next_batch(waiting, now=5.0, policy=Policy(16, 0.0), load=MEASURED)
    assert decision.take == (0, 2, 4)  # the oldest's run: the short ones
    assert decision.close_reason == TOKENS
    rest = next_batch([Item(1.0, 40), Item(3.0, 40)], now=5.0, policy=Policy(16, 0.0), load=MEASURED)
    assert rest.take == (0, 1) and rest.close_reason == DRAINED


def test_a_packed_model_keeps_mixed_lengths_in_one_pass() -> None:
    # The same five jobs as above, for a model that computes real tokens only (plus DistilBERT's
    # padded attention): 110 real tokens cost 16 + 0.46 x ~111 ms in one pass, and two passes
    # would pay the fixed 16 ms twice to save nearly nothing.
    waiting = [Item(0.0, 10), Item(1.0, 40), Item(2.0, 10), Item(3.0, 40), Item(4.0, 10)]
    decision = next_batch(waiting, now=5.0, policy=Policy(16, 0.0), load=PACKED)
    assert decision.take == (0, 1, 2, 3, 4) and decision.close_reason == DRAINED
    # A backlog of these keeps its order too: grouping it by length would save under 1% of the
    # time (attention's padding), and the jobs it left behind would wait a pass longer.
    lengths = [10 + (i * 7) % 40 for i in range(32)]
    backlog = [Item(float(i), n) for i, n in enumerate(lengths)]
    assert next_batch(backlog, 100.0, Policy(16, 0.0), PACKED).take == tuple(range(16))
    # Asked to group whatever it saves, it cuts the backlog in length order: of the cuts with
    # the fewest passes, the one whose attention pads least.
    grouped = next_batch(backlog, 100.0, Policy(16, 0.0, group_min_saving=0.0), PACKED)
    taken = sorted(lengths[i] for i in grouped.take)
    assert len(taken) == 16 and max(taken) - min(taken) <= 20


def test_a_packed_model_groups_long_inputs_where_their_attention_costs() -> None:
    # Near the model's limit attention's padding is no longer small: 480 tokens pad a short
    # input's attention to 480 x 480. A backlog of short and long inputs, alternating.
    lengths = [12 if i % 2 == 0 else 480 for i in range(32)]
    backlog = [Item(float(i), n) for i, n in enumerate(lengths)]
    decision = next_batch(backlog, 100.0, Policy(16, 0.0), PACKED)
    assert 0 in decision.take and {lengths[i] for i in decision.take} == {12}


def test_a_padded_backlog_groups_where_fifo_order_would_cost_over_a_fifth_more() -> None:
    lengths = [10 + (i * 7) % 40 for i in range(32)]
    backlog = [Item(float(i), n) for i, n in enumerate(lengths)]
    _, in_order = collector._in_order(backlog, list(range(32)), Policy(16, 0.0), MEASURED.forward_s)
    *_, grouped = collector._cheapest_run(sorted(lengths), 0, Policy(16, 0.0), MEASURED.forward_s)
    assert grouped < 0.8 * in_order
    assert next_batch(backlog, 100.0, Policy(16, 0.0), MEASURED).take != tuple(range(16))
    # The same backlog with a saving asked for that grouping cannot give: FIFO's batch.
    assert next_batch(backlog, 100.0, Policy(16, 0.0, group_min_saving=0.5), MEASURED).take == tuple(
        range(16)
    )


@settings(max_examples=300, deadline=None)
@given(
    lengths=st.lists(st.integers(7, 39), min_size=1, max_size=16),
    speed=st.floats(0.5, 2.0),
    rate=st.floats(0.0, 60.0),
)
def test_below_a_full_batch_the_default_forms_greedy_fifos_batch(
    lengths: list[int], speed: float, rate: float
) -> None:
    """What the batching benchmark's loads below saturation meet: no more jobs waiting than one
    batch holds, the benchmark's reviews (7-39 tokens), the packed pass's cost as calibrated
    here on a machine up to 2 x faster or slower, up to 60 arrivals a second. The default
    (length-aware, the token budget, the adaptive wait) runs at once exactly the jobs greedy
    FIFO (`16:0`) runs, so where no backlog builds the two can differ only by the machine."""
    from bench.simulate import PASS_COSTS

    fixed_ms, per_token_ms = PASS_COSTS["packed"]
    work = functools.partial(packed_work, dim=768, hidden=3072)
    load = Load(
        rate, ForwardTime(fixed_s=speed * fixed_ms / 1e3, per_token_s=speed * per_token_ms / 1e3, work=work)
    )
    waiting = [Item(i / 1000, n) for i, n in enumerate(lengths)]
    now = len(lengths) / 1000
    default = next_batch(waiting, now, Policy(16, 0.05, adaptive=True, max_batch_tokens=4096), load)
    fifo = next_batch(waiting, now, Policy(16, 0.0, length_aware=False), load)
    assert default.take == fifo.take == tuple(range(len(lengths)))


def test_similar_lengths_stay_in_one_pass() -> None:
    waiting = [Item(float(i), n) for i, n in enumerate([20, 24, 21, 26, 22, 25])]
    decision = next_batch(waiting, now=10.0, policy=Policy(16, 0.0), load=MEASURED)
    assert decision.take == (0, 1, 2, 3, 4, 5) and decision.close_reason == DRAINED


def test_a_free_model_never_splits_one_pass_into_two() -> None:
    waiting = [Item(float(i), n) for i, n in enumerate([5, 200, 7, 150, 9])]
    decision = next_batch(waiting, now=10.0, policy=Policy(16, 0.0), load=linear(0.0, 0.0))
    assert decision.take == (0, 1, 2, 3, 4)  # a pass's own overhead is all a split would add


def test_a_backlog_is_cut_into_full_passes_of_similar_length() -> None:
    lengths = [10 + (i * 7) % 40 for i in range(64)]
    waiting = [Item(float(i), n) for i, n in enumerate(lengths)]
    decision = next_batch(waiting, now=100.0, policy=Policy(16, 0.0), load=MEASURED)
    taken = sorted(lengths[i] for i in decision.take)
    assert 0 in decision.take and len(taken) >= 8
    assert max(taken) - min(taken) <= 20  # neighbours in length, not the whole spread


def test_a_wider_pool_gives_a_backlog_tighter_batches_from_the_most_urgent_only() -> None:
    lengths = [8 + (i * 13) % 40 for i in range(128)]
    waiting = [Item(float(i), n) for i, n in enumerate(lengths)]

    def batch(pool: int) -> list[int]:
        decision = next_batch(waiting, now=200.0, policy=Policy(16, 0.0, pool=pool), load=MEASURED)
        assert 0 in decision.take and len(decision.take) >= 8  # the oldest seeds the batch
        return list(decision.take)

    narrow, wide = batch(64), batch(128)
    assert max(narrow) < 64  # only the 64 most urgent are candidates
    assert max(wide) >= 64

    def spread(taken: list[int]) -> int:
        return max(lengths[i] for i in taken) - min(lengths[i] for i in taken)

    assert spread(wide) < spread(narrow)  # more neighbours in length to choose from: less padding


def test_the_cost_split_keeps_the_budget_and_the_seed() -> None:
    waiting = [Item(0.0, 300)] + [Item(1.0 + i, 10) for i in range(20)]
    decision = next_batch(waiting, now=30.0, policy=Policy(4, 0.0, max_batch_tokens=256), load=MEASURED)
    assert decision.take == (0,)  # the oldest rides, alone: with any other it breaks the budget
    short = next_batch(waiting[1:], now=30.0, policy=Policy(16, 0.0, max_batch_tokens=100), load=MEASURED)
    assert len(short.take) == 10  # 10 x 10 = 100 padded tokens, the budget


def plain_cheapest_run(lengths: list[int], at: int, policy: Policy, load: Load) -> tuple[int, int, float]:
    """The same dynamic program with one forecast call per run, as written before the
    vectorised one: the reference it must agree with exactly."""
    n = len(lengths)
    cost, start = [0.0] + [math.inf] * n, [0] * (n + 1)
    for end in range(1, n + 1):
        longest = lengths[end - 1]
        for size in range(1, min(policy.max_batch_size, end) + 1):
            if not collector._fits(size, longest, policy):
                break
            real = sum(lengths[end - size : end])
            total = cost[end - size] + load.forward_s(size, longest, real) + policy.pass_overhead_s
            if total < cost[end]:
                cost[end], start[end] = total, end - size
    end = n
    while start[end] > at:
        end = start[end]
    return start[end], end, cost[n]


@settings(max_examples=300, deadline=None)
@given(
    lengths=st.lists(st.integers(1, 512), min_size=1, max_size=160).map(sorted),
    at=st.integers(0, 159),
    size=st.integers(1, 32),
    budget=st.sampled_from([0, 64, 512, 4096]),
    fixed_ms=st.floats(0.0, 50.0),
    per_token_us=st.floats(0.0, 500.0),
    packed=st.booleans(),
)
def test_the_vectorised_cut_is_the_plain_dynamic_programs(
    lengths: list[int], at: int, size: int, budget: int, fixed_ms: float, per_token_us: float, packed: bool
) -> None:
    work = functools.partial(packed_work, dim=768, hidden=3072) if packed else padded_work  # DistilBERT's
    load = Load(0.0, ForwardTime(fixed_s=fixed_ms / 1e3, per_token_s=per_token_us / 1e6, work=work))
    policy = Policy(size, 0.0, max_batch_tokens=budget)
    at = min(at, len(lengths) - 1)
    first, end, total = collector._cheapest_run(lengths, at, policy, load.forward_s)
    plain_first, plain_end, plain_total = plain_cheapest_run(lengths, at, policy, load)
    assert (first, end) == (plain_first, plain_end)
    assert total == pytest.approx(plain_total, rel=1e-9)


@settings(max_examples=300, deadline=None)
@given(
    lengths=st.lists(st.integers(1, 512), min_size=1, max_size=160),
    size=st.integers(1, 32),
    budget=st.sampled_from([0, 64, 512, 4096]),
)
def test_the_pool_in_urgency_order_is_priced_as_fifo_would_run_it(
    lengths: list[int], size: int, budget: int
) -> None:
    policy = Policy(size, 0.0, max_batch_tokens=budget)
    waiting = [Item(float(i), n) for i, n in enumerate(lengths)]
    left, expected = list(waiting), 0.0
    while left:  # the batches FIFO forms one after another, as the batcher would run them
        take = next_batch(left, 0.0, Policy(size, 0.0, max_batch_tokens=budget, length_aware=False)).take
        shape = [left[i].tokens for i in take]
        expected += MEASURED.forward_s(len(take), max(shape), sum(shape)) + policy.pass_overhead_s
        left = [w for i, w in enumerate(left) if i not in take]
    first, priced = collector._in_order(waiting, list(range(len(waiting))), policy, MEASURED.forward_s)
    assert priced == pytest.approx(expected, rel=1e-9)
    assert first == collector._fill_in_order(waiting, list(range(len(waiting))), policy)


# --- priorities and aging ---------------------------------------------------------------------------


def test_higher_priority_goes_first() -> None:
    waiting = [Item(0.0, priority=0), Item(0.01, priority=5), Item(0.02, priority=0)]
    decision = next_batch(waiting, now=0.03, policy=Policy(1, 0.0))
    assert decision.take == (1,)


def test_aging_lets_low_priority_overtake_after_waiting() -> None:
    old_low = Item(0.0, priority=0)
    new_high = Item(0.95, priority=5)
    policy = Policy(1, 0.0, aging_s=0.1)
    assert next_batch([old_low, new_high], now=0.96, policy=policy).take == (0,)  # aged 9.6 > 5.0
    early = [Item(0.0, priority=0), Item(0.1, priority=5)]
    assert next_batch(early, now=0.2, policy=policy).take == (1,)  # aged 2 < 5 + 1


def test_without_aging_priority_is_strict() -> None:
    waiting = [Item(0.0, priority=0), Item(100.0, priority=1)]
    assert next_batch(waiting, now=1000.0, policy=Policy(1, 0.0, aging_s=0)).take == (1,)


# --- deadlines --------------------------------------------------------------------------------------


def test_deadlines_already_past_are_dropped_never_batched() -> None:
    waiting = [Item(0.0, deadline=0.5), Item(0.1), Item(0.2, deadline=0.9)]
    decision = next_batch(waiting, now=1.0, policy=Policy(16, 0.0))
    assert decision.expired == (0, 2)
    assert decision.take == (1,)


def test_only_expired_jobs_means_nothing_to_run() -> None:
    decision = next_batch([Item(0.0, deadline=0.5)], now=1.0, policy=Policy(16, 0.05))
    assert decision.expired == (0,) and decision.take == () and decision.wait_s is None


def test_earliest_deadline_first_among_equal_priority() -> None:
    waiting = [Item(0.0, deadline=9.0), Item(0.1, deadline=3.0), Item(0.2)]
    decision = next_batch(waiting, now=0.3, policy=Policy(1, 0.0, aging_s=0))
    assert decision.take == (1,)


def test_a_window_closes_early_when_waiting_would_miss_a_deadline() -> None:
    waiting = [Item(0.0, deadline=0.06)]
    policy = Policy(16, 0.05)
    decision = next_batch(waiting, now=0.045, policy=policy, load=linear(fixed_s=0.02, per_token_s=0))
    assert decision.take == (0,)
    assert decision.close_reason == DEADLINE


def test_a_window_waits_no_longer_than_a_deadline_allows() -> None:
    waiting = [Item(0.0, deadline=0.04)]
    decision = next_batch(waiting, now=0.0, policy=Policy(16, 0.05), load=linear(fixed_s=0.02, per_token_s=0))
    assert decision.take == ()
    assert decision.wait_s == pytest.approx(0.02)  # start by 0.04 - 0.02


# --- adaptive wait ----------------------------------------------------------------------------------


def adaptive(rate: float, fixed_s: float = 0.02, per_job_s: float = 0.01) -> Load:
    return Load(arrival_rate=rate, forward_s=lambda size, longest, real: fixed_s + per_job_s * size)


def test_adaptive_is_greedy_at_light_load() -> None:
    # 5 jobs/s against a 30 ms single pass: it keeps up alone, so waiting buys nothing.
    decision = next_batch(items(0.0), now=0.0, policy=Policy(16, 0.05, adaptive=True), load=adaptive(5))
    assert decision.take == (0,) and decision.close_reason == DRAINED


def test_adaptive_is_greedy_before_it_has_measured_anything() -> None:
    decision = next_batch(items(0.0), now=0.0, policy=Policy(16, 0.05, adaptive=True), load=None)
    assert decision.take == (0,)


def test_adaptive_waits_when_a_pass_costs_about_the_same_whatever_its_size() -> None:
    # A GPU-like pass: 8 ms + 0.5 ms per job, 400 jobs/s. Running one now and the next alone
    # finishes the pair, summed, at 2 x 8.5 + 8.5 = 25.5 ms; waiting 2.5 ms for it and running
    # both: 2 x (2.5 + 9) = 23 ms. Waiting for two more saves nothing (43.5 either way).
    gpu = adaptive(400, fixed_s=0.008, per_job_s=0.0005)
    decision = next_batch(items(0.0), now=0.0, policy=Policy(16, 0.05, adaptive=True), load=gpu)
    assert decision.take == ()
    assert decision.wait_s == pytest.approx(1 / 400)


def test_adaptive_is_greedy_where_a_job_costs_nearly_a_whole_pass() -> None:
    # A CPU measured for this project: a pass is 16 ms + about 14 ms per job. Waiting never pays.
    cpu = adaptive(40, fixed_s=0.016, per_job_s=0.014)
    for rate in (10, 40, 80, 500):
        load = adaptive(rate, fixed_s=0.016, per_job_s=0.014)
        decision = next_batch(items(0.0), now=0.0, policy=Policy(16, 0.05, adaptive=True), load=load)
        assert decision.take == (0,) and decision.close_reason == DRAINED
    pair = next_batch(items(0.0, 0.0), now=0.0, policy=Policy(16, 0.05, adaptive=True), load=cpu)
    assert pair.take == (0, 1)


def test_adaptive_never_waits_past_its_cap() -> None:
    gpu = adaptive(400, fixed_s=0.008, per_job_s=0.0005)
    decision = next_batch(items(0.0), now=0.05, policy=Policy(16, 0.05, adaptive=True), load=gpu)
    assert decision.take == (0,) and decision.close_reason == WAIT


def test_adaptive_runs_a_batch_that_is_already_worth_its_pass() -> None:
    # 9 jobs: 20 ms fixed against 90 ms of per-job cost; another job is not worth waiting for.
    policy = Policy(16, 0.2, adaptive=True)
    decision = next_batch(items(*[0.0] * 9), now=0.0, policy=policy, load=adaptive(80))
    assert len(decision.take) == 9 and decision.close_reason == DRAINED
