"""Model lanes: up to `count` forward passes at once in one batcher, each in its own thread.

On a CPU, passes side by side on a share of the cores each do more work per second than one
pass on all of them (a batch of 16 parallelises imperfectly: docs/benchmarks/lanes-ab.md), but a
lone job finishes sooner on every core. So a pass is *wide* (all the threads, every lane) when
it would run alone and what it saves its jobs outweighs what the jobs arriving meanwhile lose
waiting for it; otherwise *narrow* (its lane's share of the threads), leaving the other lanes
free for the next batch. A wide pass needs every lane free and holds them all, so the threads
computing never outnumber the cores.

A wide pass always runs in the first lane's thread. PyTorch's OpenMP runtime (libgomp) keeps a
team of threads for each thread that ran a multi-threaded pass, and once it has more threads
than CPUs its workers stop spinning between a pass's many parallel regions and sleep: on 2
vCPUs a lone pass on both threads ran 1.5-1.6 x slower, in every thread, after a second thread
had run the model on two threads (docs/benchmarks/omp-teams.md). With one lane per core (the
auto count on 2 cores) only that lane's thread ever runs on more than one.

A model whose passes do not run on CPU threads (CUDA, the simulated model) gets one lane.
"""

from __future__ import annotations

import asyncio
import math
import statistics
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Lane:
    """Where one pass runs: a lane's thread, with this many PyTorch threads."""

    index: int
    threads: int
    wide: bool  # holds every lane


def runs_wide(
    size: int, narrow_s: float, wide_s: float, arrival_rate: float, held_up_s: float | None = None
) -> bool:
    """Whether a pass that would run alone should take every lane: its `size` jobs each finish
    `narrow_s - wide_s` sooner, while the jobs arriving during it wait for it instead of
    starting in a free lane: `held_up_s` in all, as the recent arrivals measured it
    (`ArrivalRate.held_up`), or, unmeasured, what arrivals at random at `arrival_rate` would
    wait (`arrival_rate` x `wide_s` of them, half the pass each on average)."""
    if held_up_s is None:
        held_up_s = arrival_rate * wide_s * wide_s / 2
    return size * (narrow_s - wide_s) > held_up_s


class WidthRatios:
    """How much longer a small pass runs on one lane's share of the threads than on all of them,
    per probed shape (size, tokens): the narrow time over the wide, each the median of passes
    timed in pairs (`Lanes.paired`). What a lone pass saves by running wide is the difference,
    and at one job it is too small for two fitted lines to tell: on 2 vCPUs in fp32 the fits
    over every warm-up shape put one 22-token job at 62 ms on one core and 57 on two, where
    passes timed in pairs took 66 and 50-52, so at 7 jobs/s every lone pass ran on one core, 17 ms
    slower than it could have."""

    def __init__(self) -> None:
        self._ratios: dict[tuple[int, int], float] = {}

    def add(self, size: int, tokens: int, narrow_s: list[float], wide_s: list[float]) -> None:
        self._ratios[(size, tokens)] = statistics.median(narrow_s) / statistics.median(wide_s)

    def __call__(self, size: int, longest: int) -> float | None:
        """The ratio at the probed shape nearest this one (size first, on a log scale; then
        length), or None for a size beyond the probed ones."""
        if not self._ratios or size > max(s for s, _ in self._ratios):
            return None
        nearest = min(self._ratios, key=lambda k: (abs(math.log(size / k[0])), abs(k[1] - longest)))
        return self._ratios[nearest]

    def __repr__(self) -> str:
        return ", ".join(
            f"{size}x{tokens}: {ratio:.2f}" for (size, tokens), ratio in sorted(self._ratios.items())
        )


class LoneWidths:
    """What lone passes in traffic say about the width rule's two times, and now and then a lone
    pass on the width the rule did not choose, so that both stay measured.

    The rule's times come from the warm-up once (the fitted wide time, and the ratio the small
    passes timed in pairs gave), and on a shared machine the probe can land on the wrong side:
    a fresh batcher whose probe saw no gain ran every lone pass of its life on one lane's share
    (docs/benchmarks/width-explore-ab.md). So each lone pass's time over what the warm-up
    expected of it on its width (its *scale*) says how the machine runs now: the last `recent`
    lone passes scale both widths' times. The rule's width gets nearly every pass, so after
    `explore_every` lone passes in a row on one width the next runs on the other
    (`explore_early` until `min_samples` comparisons), and a lone pass on one width just after
    passes on the other compares the two at one moment: its scale over theirs (median) is one
    sample of how much more a narrow pass takes than the warm-up's ratio said, and the median
    of the last `window` samples carries a scale from one width to the other. Kept apart, one
    window of scales per width, each width's samples came from different moments, the other
    width's from tries 32 passes apart: five slow wide passes in a row then sent 128 of the
    next 155 lone passes to one core (docs/benchmarks/width-compare-ab/slow_moment.py); in the
    last batching benchmark before this rule (14:35 on 2026-12-06) a light cell ran 99 of its
    200 lone passes on one core, and in the A/B a cell 194 of 236, each 1.1-1.35 x slower than
    on both (docs/benchmarks/width-compare-ab/). What is left leans to
    the width in use: a try is the first pass after a switch of width, which runs slower than
    the passes after it, either way; tries of two with the second compared did no better
    there."""

    def __init__(
        self,
        window: int = 8,
        min_samples: int = 3,
        explore_every: int = 32,
        explore_early: int = 4,
        recent: int = 3,
    ) -> None:
        self._recent: deque[tuple[bool, float]] = deque(maxlen=recent)  # (wide, scale), newest last
        self._narrow_over_wide: deque[float] = deque(maxlen=window)  # scales compared at one moment
        self._min_samples = min_samples
        self._explore_every = explore_every
        self._explore_early = explore_early
        self._last: bool | None = None  # the width of the last lone pass
        self._streak = 0  # lone passes in a row on it

    def narrow_over_wide(self) -> float:
        """A narrow lone pass's scale over a wide one's at the same moment: 1.0 (the warm-up's
        ratio holds) until `min_samples` comparisons."""
        if len(self._narrow_over_wide) < self._min_samples:
            return 1.0
        return statistics.median(self._narrow_over_wide)

    def scale(self, wide: bool) -> float:
        """How much longer than the warm-up said a lone pass on this width takes now: the
        median of the last lone passes' scales, each carried to this width (1.0 before any)."""
        if not self._recent:
            return 1.0
        ratio = self.narrow_over_wide()
        carried = (s if w == wide else s / ratio if wide else s * ratio for w, s in self._recent)
        return statistics.median(carried)

    def choose(self, wide: bool) -> bool:
        """The width for a lone pass the rule would run `wide`."""
        compared = len(self._narrow_over_wide) >= self._min_samples
        every = self._explore_every if compared else self._explore_early
        if self._last is not None and self._streak >= every:
            wide = not self._last
        self._streak = self._streak + 1 if wide == self._last else 1
        self._last = wide
        return wide

    def add(self, wide: bool, seconds: float, expected_s: float) -> None:
        """A lone pass took `seconds` where the warm-up's times said `expected_s`."""
        scale = seconds / max(expected_s, 1e-6)
        other: list[float] = []  # the run of passes on the other width just before this one
        for w, s in reversed(self._recent):
            if w == wide:
                break
            other.append(s)
        if other:
            before = statistics.median(other)
            self._narrow_over_wide.append(before / scale if wide else scale / before)
        self._recent.append((wide, scale))


def lane_count(asked: int, threads: int) -> int:
    """MODEL_LANES: `asked` lanes (0: auto), for a model whose pass may use `threads` CPU threads
    (0: not CPU threads: one lane). Auto is two lanes when there are two threads or more: the
    count measured (on 2 cores); more lanes would also share one interpreter lock, untried."""
    if threads <= 0:
        return 1
    return min(asked, threads) if asked else min(2, threads)


class Lanes:
    def __init__(self, count: int, threads: int, use_threads: Callable[[int], None]) -> None:
        self.count = count
        self.wide_threads = max(1, threads)
        self.narrow_threads = max(1, threads // count)
        self._use_threads = use_threads
        self._executors = [
            ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"model-{i}") for i in range(count)
        ]
        self._set = [0] * count  # the thread count each lane's thread last set
        self._free = list(range(count))

    @property
    def free(self) -> int:
        return len(self._free)

    @property
    def idle(self) -> bool:
        return len(self._free) == self.count

    def take(self, wide: bool) -> Lane:
        """A free lane for one pass (`wide`: all of them; every lane must be free)."""
        if wide and self.count > 1:
            assert self.idle, "a wide pass needs every lane"
            self._free.clear()
            return Lane(0, self.wide_threads, True)
        return Lane(self._free.pop(0), self.narrow_threads if self.count > 1 else self.wide_threads, False)

    def give_back(self, lane: Lane) -> None:
        self._free = list(range(self.count)) if lane.wide else sorted([*self._free, lane.index])

    async def run(self, lane: Lane, fn: Callable[..., T], *args: object) -> T:
        """`fn(*args)` in the lane's thread, with the lane's thread count."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executors[lane.index], self._call, lane, fn, *args)

    async def paired(
        self, fn: Callable[..., object], *args: object, rounds: int
    ) -> tuple[list[float], list[float]]:
        """`fn(*args)` timed on one lane's share of the threads and on every thread, the two
        in turns (and in the other order each round, so a machine slowing down or speeding up
        weighs on both alike), after a first round that warms the shape; every lane must be
        free. Returns (narrow seconds, wide seconds), `rounds` of each."""
        times: dict[bool, list[float]] = {False: [], True: []}
        for round_ in range(rounds + 1):
            for wide in (True, False) if round_ % 2 else (False, True):
                lane = self.take(wide)
                try:
                    started = time.perf_counter()
                    await self.run(lane, fn, *args)
                    elapsed = time.perf_counter() - started
                finally:
                    self.give_back(lane)
                if round_:
                    times[wide].append(elapsed)
        return times[False], times[True]

    def _call(self, lane: Lane, fn: Callable[..., T], *args: object) -> T:
        if self._set[lane.index] != lane.threads:  # per thread: each lane sets its own
            self._use_threads(lane.threads)
            self._set[lane.index] = lane.threads
        return fn(*args)

    def shutdown(self) -> None:
        for executor in self._executors:
            executor.shutdown(wait=True)
