"""What the adaptive batch wait needs to know, measured as the batcher runs: how fast jobs
arrive, and how long a forward pass takes for a given shape."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

import numpy as np

from batcher.model import padded_work


class ArrivalRate:
    """Arrivals per second over the last `window_s` seconds."""

    def __init__(self, window_s: float = 2.0) -> None:
        self._window_s = window_s
        self._arrivals: deque[float] = deque()

    def add(self, now: float, count: int = 1) -> None:
        self._arrivals.extend([now] * count)
        self._trim(now)

    def rate(self, now: float) -> float:
        self._trim(now)
        return len(self._arrivals) / self._window_s

    def held_up(self, now: float, pass_s: float, starts: int = 32) -> float | None:
        """The wait a pass of `pass_s` starting at an arrival gives the arrivals during it, as
        the window's arrivals would have had it: for each of the last `starts` arrivals whose
        next `pass_s` is over, the time each arrival within it waits for the pass to end, summed;
        the mean over those. None before any such arrival. Arrivals at random at rate r give
        r x pass_s² / 2 (what `runs_wide` assumes unmeasured); arrivals spaced further apart than
        `pass_s`, as a steady client sends them, 0: at 16 jobs/s, 62.5 ms apart, with one job's
        pass near 25 ms on both threads and 44 on one, the random-arrival guess had sent up to
        162 of 185 lone jobs to one thread (docs/benchmarks/width-learning-ab.md)."""
        self._trim(now)
        times = list(self._arrivals)  # indexed below: a deque's middle is slow to reach
        ends = [i for i, t in enumerate(times) if t + pass_s <= now][-starts:]
        if not ends:
            return None
        total = 0.0
        for i in ends:
            end, j = times[i] + pass_s, i + 1
            while j < len(times) and times[j] < end:
                total += end - times[j]
                j += 1
        return total / len(ends)

    def _trim(self, now: float) -> None:
        while self._arrivals and self._arrivals[0] < now - self._window_s:
            self._arrivals.popleft()


MIN_SECONDS = 1e-4  # a pass timed faster than this (a free simulated model) weighs as this

Work = Callable[[int, int, int], float]  # (size, longest, real tokens) -> tokens computed


class ForwardTime:
    """seconds = fixed + per_token x work, fitted to the most recent passes and the warm-up's;
    `work` is what the model says a shape computes (size x longest when it pads, about the real
    tokens when it packs). The warm-up's passes span the shapes (1 to max batch, short to long)
    and stay in the fit, so a long run of one shape cannot make the fixed cost unknowable.

    The fit weighs relative error (least squares over each pass's error against its own time),
    so a single job's 30 ms pass counts as much as a full batch's 300: fitted on absolute error,
    the few big passes set the line and a one-job forecast swung between 25 and 56 ms from one
    warm-up to the next on the same machine, enough to flip the choices made from it."""

    def __init__(
        self, keep: int = 256, fixed_s: float = 0.01, per_token_s: float = 0.0, work: Work = padded_work
    ) -> None:
        self._anchors = np.empty((0, 2))  # (work, seconds) of the warm-up's passes
        self._recent = np.empty((keep, 2))  # the same of the latest `keep` passes, a ring
        self._added = 0  # passes added to the ring so far
        self._work = work
        self.fixed_s, self.per_token_s = fixed_s, per_token_s

    def add(self, size: int, longest: int, real: int, seconds: float, anchor: bool = False) -> None:
        """One more measured pass, and the line fitted again. Over arrays: with a full ring and
        the warm-up's passes a loop over the samples took 0.2-0.37 ms of the event loop after each
        lane's pass, before its results were stored; this takes 23-43 µs
        (docs/benchmarks/event-loop-cpu/forward-fit-ab.txt)."""
        sample = (self._work(size, longest, real), seconds)
        if anchor:
            self._anchors = np.vstack([self._anchors, sample])
        else:
            self._recent[self._added % len(self._recent)] = sample
            self._added += 1
        self._fit()

    def __call__(self, size: int, longest: int, real: int) -> float:
        return self.fixed_s + self.per_token_s * self._work(size, longest, real)

    def _fit(self) -> None:
        samples = np.concatenate([self._anchors, self._recent[: min(self._added, len(self._recent))]])
        if len(samples) < 2:
            return
        x, y = samples[:, 0], samples[:, 1]
        weights = 1 / np.maximum(y, MIN_SECONDS) ** 2
        total = weights.sum()
        mean_x, mean_y = weights @ x / total, weights @ y / total
        if x.min() == x.max():  # one shape only: all of it is per-token cost
            self.fixed_s, self.per_token_s = 0.0, float(mean_y / mean_x) if mean_x else 0.0
            return
        spread = weights @ (x - mean_x) ** 2
        self.per_token_s = max(0.0, float(weights @ ((x - mean_x) * (y - mean_y)) / spread))
        self.fixed_s = max(0.0, float(mean_y - self.per_token_s * mean_x))
