"""Model lanes: when a pass runs alone on every thread, when passes run side by side on a share
each, and that a wide pass never shares the cores; the rule on its own, then the batch loop on
the in-memory queue and store with a model whose pass is faster on more threads."""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections.abc import Sequence

import pytest

from batcher.lanes import Lanes, LoneWidths, WidthRatios, lane_count, runs_wide
from batcher.model import BatchOutput, Encoded
from batcher.settings import BatcherSettings
from batcher.worker import Batcher
from batchline import codec
from batchline.memory import MemoryBroker, MemoryJobStore
from batchline.settings import SettingsError
from tests.helpers import RecordingModel, submit, wait_for

# --- the rule ----------------------------------------------------------------------------------


def test_a_lone_pass_at_light_load_runs_wide() -> None:
    # 35 ms on both cores against 42 on one; 8 jobs/s arrive: 7 ms saved, ~5 ms made to wait.
    assert runs_wide(1, narrow_s=0.042, wide_s=0.035, arrival_rate=8.0)


def test_under_load_a_pass_leaves_the_other_lane_free() -> None:
    assert not runs_wide(1, narrow_s=0.042, wide_s=0.035, arrival_rate=27.0)


def test_a_bigger_batch_saves_more_by_running_wide() -> None:
    assert not runs_wide(1, narrow_s=0.060, wide_s=0.045, arrival_rate=30.0)
    assert runs_wide(4, narrow_s=0.060, wide_s=0.045, arrival_rate=30.0)


def test_no_gain_no_wide_pass() -> None:
    assert not runs_wide(16, narrow_s=0.030, wide_s=0.030, arrival_rate=0.0)


def test_width_ratios_come_from_the_probed_shape_nearest_the_pass() -> None:
    ratios = WidthRatios()
    # Medians: one slow wide pass among three does not move the ratio.
    ratios.add(1, 18, narrow_s=[0.066, 0.070, 0.064], wide_s=[0.050, 0.052, 0.090])
    ratios.add(4, 18, narrow_s=[0.130], wide_s=[0.100])
    ratios.add(1, 40, narrow_s=[0.090], wide_s=[0.060])
    assert ratios(1, 20) == pytest.approx(0.066 / 0.052)
    assert ratios(1, 37) == pytest.approx(1.5)
    assert ratios(3, 18) == pytest.approx(1.3)  # 3 jobs: nearer 4 than 1
    assert ratios(8, 18) is None  # beyond the probed sizes: the fitted times decide
    assert WidthRatios()(1, 18) is None


def test_after_a_streak_on_one_width_the_next_lone_pass_runs_on_the_other() -> None:
    widths = LoneWidths(explore_every=3, explore_early=3)
    assert [widths.choose(False) for _ in range(8)] == [False, False, False, True, False, False, False, True]
    widths = LoneWidths(explore_every=3)
    assert [widths.choose(w) for w in (True, False, True, False)] == [True, False, True, False]  # no streak


def test_the_other_width_is_tried_sooner_until_the_two_have_been_compared() -> None:
    widths = LoneWidths(min_samples=2, explore_every=6, explore_early=2)
    chosen = []
    for _ in range(12):
        wide = widths.choose(True)
        chosen.append(wide)
        widths.add(wide, 0.030 if wide else 0.040, 0.025)
    # a try after two wide passes gives the two comparisons (the narrow pass against the wide
    # ones before it, the next wide pass against it); then a try after six wide in a row
    assert chosen == [True, True, False, True, True, True, True, True, True, False, True, True]


def test_lone_passes_scale_both_widths_by_the_latest_passes() -> None:
    widths = LoneWidths(min_samples=2)
    for seconds in (0.030, 0.033, 0.036):  # on a lane: 1.2-1.44 x what the warm-up said
        widths.add(False, seconds, 0.025)
    # uncompared, both widths take the machine's scale now: the warm-up's ratio decides
    assert widths.scale(False) == widths.scale(True) == pytest.approx(1.32)
    widths.add(True, 0.020, 0.025)  # wide at 0.8 just after narrow at 1.32: one comparison
    assert widths.narrow_over_wide() == 1.0
    widths.add(True, 0.021, 0.025)  # no new comparison: the pass before it was wide too
    widths.add(False, 0.033, 0.025)  # narrow at 1.32 after wide at 0.8 and 0.84 (median 0.82)
    assert widths.narrow_over_wide() == pytest.approx((1.32 / 0.8 + 1.32 / 0.82) / 2)
    # the last three passes, each carried to the width asked for
    ratio = widths.narrow_over_wide()
    assert widths.scale(True) == pytest.approx(1.32 / ratio)  # the median of 0.8, 0.84 and 1.32 / 1.63
    assert widths.scale(False) == pytest.approx(1.32)  # of 0.8 x 1.63, 0.84 x 1.63 and 1.32


def test_a_slow_moment_on_the_width_in_use_does_not_send_lone_jobs_to_the_other() -> None:
    """Lone jobs spaced wider than their pass (the rule's hold-up 0), a narrow pass 1.4 x a wide
    one throughout, as the warm-up said; five wide passes in a row run 1.6 x slower. Kept apart
    (a window of scales per width, the narrow one filled by a try every 32 passes), that moment
    sent 128 of the next 155 lone passes narrow (docs/benchmarks/width-compare-ab/slow_moment.py
    replays it on any version); compared at one moment, only the tries run narrow."""
    widths = LoneWidths()
    chosen = []
    for i in range(300):
        narrow_s, wide_s = 0.028 * widths.scale(False), 0.020 * widths.scale(True)
        wide = widths.choose(runs_wide(1, narrow_s, wide_s, arrival_rate=10, held_up_s=0.0))
        chosen.append(wide)
        slow = 1.6 if 140 <= i < 145 else 1.0
        widths.add(wide, slow * (0.020 if wide else 0.028), 0.020 if wide else 0.028)
    tries = [i for i, wide in enumerate(chosen) if not wide]
    assert all(b - a >= 5 for a, b in itertools.pairwise(tries))  # never two in a row
    assert len(tries) <= 2 + 300 // 32  # two early tries, then one per 32
    assert widths.narrow_over_wide() == pytest.approx(1.0)


async def test_paired_timing_takes_the_widths_in_turns_after_a_warming_round() -> None:
    threads = [0]
    ran: list[int] = []

    def use_threads(n: int) -> None:
        threads[0] = n

    def work() -> None:
        ran.append(threads[0])
        time.sleep(0.005 if threads[0] == 2 else 0.040)

    lanes = Lanes(2, 2, use_threads)
    narrow, wide = await lanes.paired(work, rounds=2)
    assert ran == [1, 2, 2, 1, 1, 2]  # warming: one, both; then both, one; one, both
    assert len(narrow) == len(wide) == 2 and min(narrow) > max(wide)
    assert lanes.idle
    lanes.shutdown()


@pytest.mark.parametrize(
    ("asked", "threads", "lanes"),
    [(0, 0, 1), (3, 0, 1), (0, 1, 1), (0, 2, 2), (0, 16, 2), (1, 2, 1), (3, 2, 2), (4, 8, 4)],
)
def test_lane_count(asked: int, threads: int, lanes: int) -> None:
    """Auto is two lanes on two threads or more; never more lanes than threads; a model that
    does not compute on CPU threads gets one."""
    assert lane_count(asked, threads) == lanes


def test_model_lanes_is_auto_or_a_count() -> None:
    assert BatcherSettings.from_env({}).model_lanes == 0
    assert BatcherSettings.from_env({"MODEL_LANES": "auto"}).model_lanes == 0
    assert BatcherSettings.from_env({"MODEL_LANES": "1"}).model_lanes == 1
    for bad in ("0", "two"):
        with pytest.raises(SettingsError, match="MODEL_LANES"):
            BatcherSettings.from_env({"MODEL_LANES": bad})


def test_a_wide_pass_takes_every_lane_and_a_narrow_one_its_share() -> None:
    lanes = Lanes(2, 4, lambda n: None)
    wide = lanes.take(wide=True)
    assert (wide.threads, wide.wide, lanes.free) == (4, True, 0)
    lanes.give_back(wide)
    first, second = lanes.take(wide=False), lanes.take(wide=False)
    assert (first.index, second.index, first.threads, second.threads, lanes.free) == (0, 1, 2, 2, 0)
    lanes.give_back(first)
    assert lanes.free == 1 and not lanes.idle
    with pytest.raises(AssertionError):
        lanes.take(wide=True)
    lanes.shutdown()


async def test_each_lane_thread_sets_its_own_thread_count_when_it_changes() -> None:
    calls: list[tuple[str, int]] = []
    lanes = Lanes(2, 2, lambda n: calls.append((threading.current_thread().name, n)))
    for wide in (True, True, False, True):
        lane = lanes.take(wide)
        await lanes.run(lane, lambda: None)
        lanes.give_back(lane)
    assert calls == [("model-0_0", 2), ("model-0_0", 1), ("model-0_0", 2)]
    lanes.shutdown()


async def test_only_the_first_lanes_thread_ever_runs_on_more_than_one_thread() -> None:
    """A second OpenMP team slows every pass (docs/benchmarks/omp-teams.md): the wide pass
    stays in lane 0's thread whichever lane ran last."""
    calls: list[tuple[str, int]] = []
    lanes = Lanes(2, 2, lambda n: calls.append((threading.current_thread().name, n)))
    first, second = lanes.take(wide=False), lanes.take(wide=False)
    await asyncio.gather(lanes.run(first, lambda: None), lanes.run(second, lambda: None))
    lanes.give_back(second)  # the second lane freed last
    lanes.give_back(first)
    wide = lanes.take(wide=True)
    await lanes.run(wide, lambda: None)
    lanes.give_back(wide)
    assert {name for name, n in calls if n > 1} == {"model-0_0"}
    assert ("model-1_0", 1) in calls
    lanes.shutdown()


# --- the batch loop --------------------------------------------------------------------------------


class TwoThreadModel(RecordingModel):
    """A pass of 20 ms on two threads and 30 on one (as a CPU model: a lone pass gains from
    both cores); remembers how many threads each pass ran on and how many ran at once."""

    threads = 2

    def __init__(self) -> None:
        super().__init__()
        self._local = threading.local()
        self._count = threading.Lock()
        self.entered: list[tuple[str, int]] = []  # (first text, threads), as each pass starts
        self.running = self.most_at_once = 0

    def use_threads(self, threads: int) -> None:
        self._local.threads = threads

    def release(self) -> None:
        """Let the passes held at the gate run."""
        assert self.gate is not None
        self.gate.set()

    def _seconds(self) -> float:
        return 0.020 if getattr(self._local, "threads", 2) == 2 else 0.030

    def predict(self, batch: Sequence[Encoded]) -> BatchOutput:
        with self._count:
            self.entered.append((batch[0].text, self._local.threads))
            self.running += 1
            self.most_at_once = max(self.most_at_once, self.running)
        try:
            self._fixed_s = self._seconds()
            return super().predict(batch)
        finally:
            with self._count:
                self.running -= 1

    def warm_up(self, max_batch_size: int) -> list[tuple[int, int, float]]:
        return [(n, 32, self._seconds()) for n in (1, max_batch_size)]


async def warmed(
    model: TwoThreadModel, max_batch_size: int = 16
) -> tuple[Batcher, MemoryJobStore, MemoryBroker]:
    """A batcher on the in-memory queue and store, warmed, its model's passes held at the gate."""
    settings = BatcherSettings(max_batch_size=max_batch_size, max_wait_ms=0, adaptive_wait=False, worker="w")
    store, broker = MemoryJobStore(job_ttl_s=60), MemoryBroker()
    batcher = Batcher(settings, store, broker, model)
    await batcher.warm_up()
    model.entered.clear()  # the warm-up's passes
    model.most_at_once = 0
    model.gate = threading.Event()
    return batcher, store, broker


async def two_passes_held(
    model: TwoThreadModel,
) -> tuple[Batcher, MemoryJobStore, MemoryBroker, list[str], asyncio.Event, asyncio.Task[None]]:
    """Three jobs queued for batches of one; running, with the first two passes at the gate."""
    batcher, store, broker = await warmed(model, max_batch_size=1)
    ids = [await submit(store, broker, text) for text in ("one", "two", "three")]
    stop = asyncio.Event()
    running = asyncio.create_task(batcher.run(stop))
    await wait_for(lambda: model.running == 2, 5, what="two passes at once")
    return batcher, store, broker, ids, stop, running


async def test_a_lone_job_runs_on_every_thread_and_holds_every_lane() -> None:
    model = TwoThreadModel()
    batcher, store, broker = await warmed(model)
    stop = asyncio.Event()
    running = asyncio.create_task(batcher.run(stop))
    first = await submit(store, broker, "alone")
    await wait_for(lambda: model.entered == [("alone", 2)], 5, what="a wide pass")
    second = await submit(store, broker, "arrives during it")
    await wait_for(lambda: len(batcher._waiting) == 1, 5, what="the second job waiting")
    await asyncio.sleep(0.05)
    assert len(model.entered) == 1  # no pass beside the wide one: both cores are in use
    model.release()
    await wait_for(lambda: batcher.counters.done == 2, 5, what="both jobs done")
    assert model.most_at_once == 1
    assert [(await store.get(i)).status for i in (first, second)] == [codec.DONE, codec.DONE]  # type: ignore[union-attr]
    stop.set()
    await asyncio.wait_for(running, 5)


class FitsBlindModel(TwoThreadModel):
    """Its warm-up reports the same time on one thread as on two, so the fitted times see no
    gain in a wide pass; its passes still run 20 ms on two threads and 30 on one."""

    def warm_up(self, max_batch_size: int) -> list[tuple[int, int, float]]:
        return [(n, 32, 0.025) for n in (1, max_batch_size)]


async def test_a_lone_pass_runs_wide_on_what_small_passes_timed_in_pairs_show() -> None:
    model = FitsBlindModel()
    batcher, store, broker = await warmed(model)
    [(size, tokens)] = {(1, e.tokens) for e in model.encode(["alone"])}
    assert batcher.warm_times[False](size, tokens, tokens) == batcher.warm_times[True](size, tokens, tokens)
    assert (batcher.width_ratios(1, tokens) or 0) > 1.2  # 30 ms against 20, timed in pairs
    stop = asyncio.Event()
    running = asyncio.create_task(batcher.run(stop))
    await submit(store, broker, "alone")
    await wait_for(lambda: model.entered == [("alone", 2)], 5, what="a wide pass")
    model.release()
    await wait_for(lambda: batcher.counters.done == 1, 5, what="the job done")
    stop.set()
    await asyncio.wait_for(running, 5)


class ProbeBlindModel(FitsBlindModel):
    """Until `blind` is cleared (the warm-up and the pairs it times) its passes take 30 ms on
    two threads and 25 on one, so the probe sees a loss in a wide pass; then 20 ms on two
    threads and 30 on one."""

    blind = True

    def _seconds(self) -> float:
        if self.blind:
            return 0.030 if getattr(self._local, "threads", 2) == 2 else 0.025
        return super()._seconds()


async def test_lone_jobs_turn_to_every_thread_when_traffic_shows_what_the_probe_missed() -> None:
    model = ProbeBlindModel()
    batcher, store, broker = await warmed(model)
    assert (batcher.width_ratios(1, model.encode(["steady"])[0].tokens) or 2) < 0.95
    batcher.lone_widths = LoneWidths(min_samples=2, explore_every=4)
    model.blind = False
    model.gate.set()  # type: ignore[union-attr]  # passes run at once
    stop = asyncio.Event()
    running = asyncio.create_task(batcher.run(stop))
    for _ in range(20):  # 60 ms apart: each pass is over before the next job comes
        await submit(store, broker, "steady")
        await asyncio.sleep(0.060)
    await wait_for(lambda: batcher.counters.done == 20, 5, what="every job done")
    threads = [threads for _, threads in model.entered]
    assert threads[:4] == [1, 1, 1, 1]  # the probe's word: no gain
    assert 2 in threads[4:6]  # after a streak, one on every thread
    assert threads[-8:].count(2) >= 6  # then every thread, but for a lane now and then
    assert batcher.lone_widths.scale(True) < batcher.lone_widths.scale(False)
    stop.set()
    await asyncio.wait_for(running, 5)


class SmallGainModel(TwoThreadModel):
    """A pass of 20 ms on two threads and 21 on one: running wide saves a lone job 1 ms, less
    than random arrivals at 8 jobs/s would wait for a 20 ms pass (1.6 ms)."""

    def _seconds(self) -> float:
        return 0.020 if getattr(self._local, "threads", 2) == 2 else 0.021


async def test_lone_jobs_a_steady_client_sends_run_wide_where_random_arrivals_would_not() -> None:
    model = SmallGainModel()
    batcher, store, broker = await warmed(model)
    model.gate.set()  # type: ignore[union-attr]  # passes run at once
    stop = asyncio.Event()
    running = asyncio.create_task(batcher.run(stop))
    for _ in range(16):  # 40 ms apart: each pass is over before the next job comes
        await submit(store, broker, "steady")
        await asyncio.sleep(0.040)
    await wait_for(lambda: batcher.counters.done == 16, 5, what="every job done")
    now = time.monotonic()
    assert not runs_wide(1, 0.021, 0.020, batcher.arrivals.rate(now))  # what random arrivals say
    assert batcher.arrivals.held_up(now, 0.020) == 0.0
    assert [threads for _, threads in model.entered][-4:] == [2, 2, 2, 2]
    stop.set()
    await asyncio.wait_for(running, 5)


async def test_jobs_waiting_together_run_side_by_side_on_a_thread_each() -> None:
    model = TwoThreadModel()
    batcher, store, _, ids, stop, running = await two_passes_held(model)
    assert sorted(model.entered) == [("one", 1), ("two", 1)]
    model.release()
    await wait_for(lambda: batcher.counters.done == 3, 5, what="every job done")
    assert model.most_at_once == 2
    assert {(await store.get(i)).status for i in ids} == {codec.DONE}  # type: ignore[union-attr]
    stop.set()
    await asyncio.wait_for(running, 5)


async def test_a_stop_finishes_both_lanes_passes() -> None:
    model = TwoThreadModel()
    _, store, broker, ids, stop, running = await two_passes_held(model)
    stop.set()
    await asyncio.sleep(0.05)
    assert not running.done()  # both passes still computing
    model.release()
    await asyncio.wait_for(running, 5)
    statuses = [(await store.get(i)).status for i in ids]  # type: ignore[union-attr]
    assert statuses[:2] == [codec.DONE, codec.DONE]
    assert statuses[2] == codec.QUEUED  # never started: handed back to the queue
    assert (await broker.depth())[0] == 1
