"""The queue's drain rate, measured, and what follows from it: a queued job's ETA, how long a
client refused at a full queue should wait, and how long the backlog takes to clear."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from batchline import lifecycle
from batchline.errors import Unavailable
from batchline.store import JobStore

# The rate is measured over this long: steady under bursty batches, quick to follow a change
# (a batcher added or lost).
WINDOW_S = 30.0
# A refused client is told to wait this long before a rate is measured.
UNMEASURED_RETRY_S = 1.0
# Bounds of a computed retry delay: not so short that retries hammer a full queue, not so long
# that a client gives up on a queue that is draining.
MIN_RETRY_S, MAX_RETRY_S = 0.5, 60.0


@dataclass
class Backlog:
    """Samples how many jobs have left the queue (a store counter shared by every ingress)."""

    store: JobStore
    window_s: float = WINDOW_S
    clock: Callable[[], float] = time.monotonic
    _samples: deque[tuple[float, int]] = field(default_factory=deque)

    async def sample(self) -> None:
        left = await self.store.left_queue()
        now = self.clock()
        self._samples.append((now, left))
        while now - self._samples[0][0] > self.window_s:
            self._samples.popleft()

    def rate(self) -> float | None:
        """Jobs leaving the queue per second over the window; None until two samples 1 s apart."""
        if len(self._samples) < 2:
            return None
        (t0, n0), (t1, n1) = self._samples[0], self._samples[-1]
        if t1 - t0 < 1.0:
            return None
        return max(0.0, (n1 - n0) / (t1 - t0))

    def eta_s(self, position: int) -> float | None:
        """About how long until the job at `position` starts; None while the rate is unknown or 0."""
        rate = self.rate()
        return position / rate if rate else None

    def drain_s(self, depth: int) -> float | None:
        """About how long the queue takes to empty at the measured rate, with no new arrivals."""
        rate = self.rate()
        return depth / rate if rate else None

    async def oldest_age_s(self) -> float:
        """How long the oldest job still QUEUED has waited; 0 when none waits."""
        accepted = await self.store.oldest_queued_s()
        return 0.0 if accepted is None else max(0.0, time.time() - accepted)

    def retry_after_s(self, room: int) -> float:
        """How long a client refused at a full queue should wait: the time the queue takes to
        make `room` places at the measured rate, within [MIN_RETRY_S, MAX_RETRY_S]."""
        rate = self.rate()
        if rate is None:
            return UNMEASURED_RETRY_S
        if rate == 0:
            return MAX_RETRY_S  # nothing drains (no batcher): retrying soon cannot succeed
        return min(MAX_RETRY_S, max(MIN_RETRY_S, room / rate))

    async def run(self, stop: asyncio.Event, every_s: float = 1.0) -> None:
        """Sample until `stop`."""
        while not stop.is_set():
            with contextlib.suppress(Unavailable):
                await self.sample()
            await lifecycle.pause(stop, every_s)
