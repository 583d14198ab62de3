"""Batch formation: a pure function over the waiting jobs, a clock and a load forecast.

It never touches a queue, a socket or the time itself, so every rule is unit-tested on its own.

The rules, in order:
1. A job whose deadline has passed is dropped (the batcher fails it, never computes it).
2. Order by urgency: priority, raised by one level per `aging_s` waited so nothing starves;
   then earliest deadline; then arrival. The most urgent job seeds the next batch.
3. Fill the batch from the `pool` most urgent jobs. Length-aware: of the runs of jobs next to
   the seed in token length, the one that wastes the fewest padded tokens, so a batch pads
   little; the run shrinks until size x longest fits the token budget. With a measured
   forward-time model, the pool sorted by length is cut into the runs that cost the least
   forward time in all (a pass's fixed cost against the padding it saves), and the seed's run is
   the batch: mixed lengths split only when the padded tokens saved outweigh one more pass.
   Grouping reorders, and a job left for a later pass waits that pass longer: so the pool is
   grouped only when its cut saves at least `group_min_saving` of the forward time of FIFO's
   batches of the same jobs; otherwise the batch is FIFO's. A model that packs its batch
   (pays for real tokens, hardly for padding) saves about nothing by grouping reviews, so it
   keeps their order; grouping pays again where padding costs (a padded pass, long inputs).
   FIFO: in urgency order, skipping what would break the budget. The seed always runs, even
   alone, even over budget.
4. Close when full (SIZE) or when the budget or the padding cost stops it growing (TOKENS).
   Otherwise: greedy runs at once (DRAINED); a fixed window runs once the oldest has waited
   `max_wait_s` (WAIT); the adaptive mode waits only when the forward-time model and the
   measured arrival rate say that waiting for more jobs finishes the jobs sooner, summed, than
   running now and running the newcomers next; never longer than `max_wait_s`. Any mode
   closes early when waiting longer would miss the nearest deadline (DEADLINE).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from batchline.v1 import job_pb2

SIZE = job_pb2.BATCH_CLOSE_REASON_SIZE
TOKENS = job_pb2.BATCH_CLOSE_REASON_TOKENS
WAIT = job_pb2.BATCH_CLOSE_REASON_WAIT
DRAINED = job_pb2.BATCH_CLOSE_REASON_DRAINED
DEADLINE = job_pb2.BATCH_CLOSE_REASON_DEADLINE


class Waiting(Protocol):
    """What the policy needs to know about one waiting job."""

    @property
    def arrived_at(self) -> float:
        """Monotonic seconds when the batcher received it."""

    @property
    def tokens(self) -> int:
        """Its length in tokens, special tokens included, after truncation."""

    @property
    def priority(self) -> int:
        """Higher runs first."""

    @property
    def deadline(self) -> float | None:
        """Monotonic seconds by which it must have started, or None."""


@dataclass(frozen=True)
class Policy:
    max_batch_size: int = 16
    max_wait_s: float = 0.0  # fixed window; 0 = greedy. With `adaptive`, the longest wait.
    adaptive: bool = False  # MAX_WAIT_MS=auto
    max_batch_tokens: int = 0  # budget for size x longest; 0 = no budget
    length_aware: bool = True
    pool: int = 128  # how many of the most urgent jobs a batch may be chosen from (the batcher: PREFETCH)
    aging_s: float = 0.1  # one priority level gained per this long waited
    # What one more pass costs beyond the model's own time (the batcher's round trips and
    # bookkeeping), when deciding whether to split jobs of mixed lengths into two passes.
    pass_overhead_s: float = 0.002
    # Group by length only when that saves at least this share of the forward time of FIFO's
    # batches of the same jobs (0 = whenever it saves anything).
    group_min_saving: float = 0.02


@dataclass(frozen=True)
class Load:
    """What the batcher has measured: arrivals per second and the forward-pass time model."""

    arrival_rate: float
    # (batch size, longest, real tokens) -> seconds; elementwise, so numpy arrays of shapes
    # give an array of times (the policy prices every candidate run in one call).
    forward_s: Callable[[Any, Any, Any], Any]


@dataclass(frozen=True)
class Decision:
    """Run `take` (indices into the waiting list) now, or wait `wait_s` and ask again.
    `expired` are past their deadline whatever else is decided."""

    take: tuple[int, ...] = ()
    close_reason: int = job_pb2.BATCH_CLOSE_REASON_UNSPECIFIED
    wait_s: float | None = None  # None: nothing to wait for but an arrival
    expired: tuple[int, ...] = ()


def next_batch(waiting: Sequence[Waiting], now: float, policy: Policy, load: Load | None = None) -> Decision:
    expired = tuple(i for i, w in enumerate(waiting) if w.deadline is not None and w.deadline <= now)
    dropped = set(expired)
    live = [i for i in range(len(waiting)) if i not in dropped]
    if not live:
        return Decision(expired=expired)

    def urgency(i: int) -> tuple[float, float, float]:
        w = waiting[i]
        aged = w.priority + (now - w.arrived_at) / policy.aging_s if policy.aging_s > 0 else w.priority
        return (-aged, w.deadline if w.deadline is not None else math.inf, w.arrived_at)

    ranked = sorted(live, key=urgency)
    pool = ranked[: max(policy.pool, policy.max_batch_size)]
    take, budget_hit = _fill(waiting, pool, policy, load.forward_s if load else None)

    def run(reason: int) -> Decision:
        return Decision(tuple(sorted(take)), reason, expired=expired)

    if len(take) >= policy.max_batch_size:
        return run(SIZE)
    if budget_hit:
        return run(TOKENS)
    longest = max(waiting[i].tokens for i in take)
    real = sum(waiting[i].tokens for i in take)
    forward_s = load.forward_s(len(take), longest, real) if load else 0.0
    deadlines = [d for i in take if (d := waiting[i].deadline) is not None]
    # Latest moment to start and still meet the nearest deadline (with the pass itself).
    start_by = min(deadlines) - forward_s if deadlines else math.inf
    if start_by <= now:
        return run(DEADLINE)
    if policy.max_wait_s <= 0:
        return run(DRAINED)

    oldest = min(waiting[i].arrived_at for i in live)
    window_left = policy.max_wait_s - (now - oldest)
    if policy.adaptive:
        wait = _worth_waiting(len(take), longest, real, policy, load)
        if wait is None:
            return run(DRAINED)
        window_left = min(window_left, wait)
    if window_left <= 0:
        return run(WAIT)
    return Decision(wait_s=min(window_left, start_by - now), expired=expired)


def _fill(
    waiting: Sequence[Waiting],
    pool: list[int],
    policy: Policy,
    forward_s: Callable[[Any, Any, Any], Any] | None = None,
) -> tuple[list[int], bool]:
    """The seed and the jobs to run with it; whether the budget (or the padding cost) stopped
    the batch growing."""
    seed = pool[0]
    # A lone job (light load) has nothing to group, and no arrays to set up: its decision took
    # 0.03-0.06 ms that way against 0.13-0.17 (docs/benchmarks/event-loop-cpu/next-batch-lone-ab.txt).
    if not policy.length_aware or len(pool) == 1:
        return _fill_in_order(waiting, pool, policy)
    by_length = sorted(pool, key=lambda i: waiting[i].tokens)  # stable: urgency breaks ties
    at = by_length.index(seed)
    lengths = [waiting[i].tokens for i in by_length]
    full = min(policy.max_batch_size, len(pool))
    if forward_s is not None:
        first, end, grouped_s = _cheapest_run(lengths, at, policy, forward_s)
        fifo, fifo_s = _in_order(waiting, pool, policy, forward_s)
        if grouped_s > (1 - policy.group_min_saving) * fifo_s:
            return fifo
        return by_length[first:end], end - first < full
    # Without a forward-time model: the run of neighbours around the seed that wastes the
    # fewest padded tokens (size x longest - real), as large as the budget allows.
    for size in range(full, 0, -1):
        best: tuple[int, int] | None = None  # (waste, first index)
        for first in range(max(0, at - size + 1), min(at, len(pool) - size) + 1):
            longest = lengths[first + size - 1]
            if not _fits(size, longest, policy):
                continue
            waste = size * longest - sum(lengths[first : first + size])
            if best is None or waste < best[0]:
                best = (waste, first)
        if best is not None:
            return by_length[best[1] : best[1] + size], size < full
    return [seed], False  # unreachable: a batch of one always fits


def _fits(size: int, longest: int, policy: Policy) -> bool:
    return size == 1 or not policy.max_batch_tokens or size * longest <= policy.max_batch_tokens


def _cheapest_run(
    lengths: list[int], at: int, policy: Policy, forward_s: Callable[[Any, Any, Any], Any]
) -> tuple[int, int, float]:
    """Cut `lengths` (sorted) into runs of at most max_batch_size that fit the budget, so that
    their passes cost the least time in all (dynamic programming over where each run ends);
    return the run holding index `at` as (first, end), and the cut's time in all.

    Every run's pass time comes from one call of `forward_s` over arrays (every end against
    every size), not from a call per run: with 128 jobs waiting, a batch decision cost 0.92-0.94
    ms of the event loop's time that way, while a model lane waited for its next batch, and
    0.35-0.36 ms this way (docs/benchmarks/event-loop-cpu/next-batch-ab.txt)."""
    n, most = len(lengths), policy.max_batch_size
    if n == 1:  # nothing to cut (`_fill` runs a lone job before it gets here)
        return 0, 1, float(forward_s(1, lengths[0], lengths[0])) + policy.pass_overhead_s
    sorted_lengths = np.asarray(lengths, dtype=np.int64)
    total_to = np.concatenate(([0], np.cumsum(sorted_lengths)))  # real tokens in lengths[:i]
    ends = np.arange(1, n + 1)[:, None]  # a run ends (exclusive) at each of these...
    sizes = np.arange(1, most + 1)[None, :]  # ...and holds this many
    longest = sorted_lengths[ends - 1]
    real = total_to[ends] - total_to[np.maximum(ends - sizes, 0)]
    runs = sizes <= ends
    if policy.max_batch_tokens:  # _fits, over the arrays: over the budget, no run but a run of one
        runs &= (sizes == 1) | (sizes * longest <= policy.max_batch_tokens)
    # passes[end - 1][size - 1]: the pass time of the run of `size` ending at `end`
    passes = np.where(runs, np.broadcast_to(forward_s(sizes, longest, real), runs.shape), math.inf).tolist()
    cost = [0.0] + [math.inf] * n  # cost[end]: cheapest passes over lengths[:end]
    start = [0] * (n + 1)  # where the last run of that cheapest cut starts
    for end in range(1, n + 1):
        row, best, first = passes[end - 1], math.inf, 0
        for size in range(1, min(most, end) + 1):
            total = cost[end - size] + row[size - 1] + policy.pass_overhead_s
            if total < best:
                best, first = total, end - size
        cost[end], start[end] = best, first
    end = n
    while start[end] > at:
        end = start[end]
    return start[end], end, cost[n]


def _in_order(
    waiting: Sequence[Waiting], pool: list[int], policy: Policy, forward_s: Callable[[Any, Any, Any], Any]
) -> tuple[tuple[list[int], bool], float]:
    """FIFO's next batch from the pool (`_fill_in_order`), and the forward time of all the
    batches FIFO would run from it one after another, each with its pass overhead as in
    `_cheapest_run`, priced in one call. It adds 27-33 us to a decision with 32 waiting and
    54-71 us with 128 (docs/benchmarks/event-loop-cpu/group-saving-ab.txt)."""
    first = _fill_in_order(waiting, pool, policy)
    shapes: list[tuple[int, int, int]] = []  # (size, longest, real) of each batch
    (batch, passed_over), left = first, pool
    while batch:
        tokens = [waiting[i].tokens for i in batch]
        shapes.append((len(batch), max(tokens), sum(tokens)))
        if passed_over:  # the budget passed over some: the batch is not the front of what is left
            taken = set(batch)
            left = [i for i in left if i not in taken]
        else:
            left = left[len(batch) :]
        batch, passed_over = _fill_in_order(waiting, left, policy) if left else ([], False)
    sizes, longest, real = np.asarray(shapes, dtype=np.int64).T
    return first, float(np.sum(forward_s(sizes, longest, real))) + len(shapes) * policy.pass_overhead_s


def _fill_in_order(waiting: Sequence[Waiting], pool: list[int], policy: Policy) -> tuple[list[int], bool]:
    """FIFO (by urgency): take jobs in order, skipping any that would break the budget."""
    take, longest, budget_hit = [pool[0]], waiting[pool[0]].tokens, False
    for i in pool[1:]:
        if len(take) >= policy.max_batch_size:
            break
        grown = max(longest, waiting[i].tokens)
        if not _fits(len(take) + 1, grown, policy):
            budget_hit = True
            continue
        take.append(i)
        longest = grown
    return take, budget_hit


def _worth_waiting(size: int, longest: int, real: int, policy: Policy, load: Load | None) -> float | None:
    """How long to wait for a fuller batch, or None to run now.

    Running the `size` jobs now and the `k` that arrive meanwhile in the next pass finishes
    them, summed, at (size + k) T(size) + k T(k); waiting the k / rate seconds those k take to
    arrive and running all together, at (size + k) (k / rate + T(size + k)), each newcomer
    counted as long as the longest now. Wait for the k with the largest saving, if any saves:
    only when a pass's fixed cost is large against its cost per job and arrivals are quick. On
    the CPUs measured for this project, where a job costs over half a pass's fixed part, it
    never saved and the batcher stayed greedy; it waits where passes cost about the same
    whatever their size (as on a GPU).
    """
    if load is None or load.arrival_rate <= 0:
        return None
    rate, forward = load.arrival_rate, load.forward_s
    now_cost = forward(size, longest, real)
    best: tuple[float, int] | None = None  # (saving, k)
    for k in range(1, policy.max_batch_size - size + 1):
        run_now = (size + k) * now_cost + k * forward(k, longest, k * longest)
        wait = (size + k) * (k / rate + forward(size + k, longest, real + k * longest))
        if run_now - wait > 0 and (best is None or run_now - wait > best[0]):
            best = (run_now - wait, k)
    return best[1] / rate if best is not None else None
