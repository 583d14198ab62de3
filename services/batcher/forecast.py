"""What the adaptive batch wait needs to know, measured as the batcher runs: how fast jobs
arrive, and how long a forward pass takes for a given shape."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

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
        self._anchors: list[tuple[float, float]] = []
        self._samples: deque[tuple[float, float]] = deque(maxlen=keep)
        self._work = work
        self.fixed_s, self.per_token_s = fixed_s, per_token_s

    def add(self, size: int, longest: int, real: int, seconds: float, anchor: bool = False) -> None:
        (self._anchors.append if anchor else self._samples.append)((self._work(size, longest, real), seconds))
        self._fit()

    def __call__(self, size: int, longest: int, real: int) -> float:
        return self.fixed_s + self.per_token_s * self._work(size, longest, real)

    def _fit(self) -> None:
        samples = [*self._anchors, *self._samples]
        if len(samples) < 2:
            return
        weights = [1 / max(y, MIN_SECONDS) ** 2 for _, y in samples]
        total = sum(weights)
        mean_x = sum(w * x for w, (x, _) in zip(weights, samples, strict=True)) / total
        mean_y = sum(w * y for w, (_, y) in zip(weights, samples, strict=True)) / total
        spread = sum(w * (x - mean_x) ** 2 for w, (x, _) in zip(weights, samples, strict=True))
        if spread <= 0:  # one shape only: all of it is per-token cost
            self.fixed_s, self.per_token_s = 0.0, mean_y / mean_x if mean_x else 0.0
            return
        slope = (
            sum(w * (x - mean_x) * (y - mean_y) for w, (x, y) in zip(weights, samples, strict=True)) / spread
        )
        self.per_token_s = max(0.0, slope)
        self.fixed_s = max(0.0, mean_y - self.per_token_s * mean_x)
