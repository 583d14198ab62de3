"""Batch formation: a pure function over the waiting jobs and a clock.

It never touches a queue, a socket or the time itself, so every rule is unit-tested on its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from batchline.v1 import job_pb2


class Waiting(Protocol):
    """What the policy needs to know about one waiting job."""

    @property
    def arrived_at(self) -> float:
        """Monotonic seconds when the batcher received it."""


@dataclass(frozen=True)
class Policy:
    max_batch_size: int = 16
    max_wait_s: float = 0.0  # 0 = greedy


@dataclass(frozen=True)
class Decision:
    """Either run `take` (indices into the waiting list) now, or wait `wait_s` and ask again."""

    take: tuple[int, ...] = ()
    close_reason: int = job_pb2.BATCH_CLOSE_REASON_UNSPECIFIED
    wait_s: float | None = None  # None: nothing is waiting; wait for an arrival


def next_batch(waiting: Sequence[Waiting], now: float, policy: Policy) -> Decision:
    """Oldest first: a full batch at once; otherwise run what is there once the oldest job
    has waited `max_wait_s` (at once in greedy mode)."""
    if not waiting:
        return Decision()
    if len(waiting) >= policy.max_batch_size:
        return Decision(tuple(range(policy.max_batch_size)), job_pb2.BATCH_CLOSE_REASON_SIZE)
    everything = tuple(range(len(waiting)))
    if policy.max_wait_s <= 0:
        return Decision(everything, job_pb2.BATCH_CLOSE_REASON_DRAINED)
    waited = now - min(w.arrived_at for w in waiting)
    if waited >= policy.max_wait_s:
        return Decision(everything, job_pb2.BATCH_CLOSE_REASON_WAIT)
    return Decision(wait_s=policy.max_wait_s - waited)
