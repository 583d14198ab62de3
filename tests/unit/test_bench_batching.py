"""The batching benchmark's own logic: its sentences and its report (not its numbers)."""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc
import pytest

from batchline.v1 import inference_pb2, inference_pb2_grpc
from bench import batching, workload


def test_sentences_are_review_like_and_reproducible() -> None:
    texts = workload.sentences(500, seed=3)
    assert texts == workload.sentences(500, seed=3)
    words = [len(t.split()) for t in texts]
    assert min(words) >= 3 and max(words) <= 36  # 5-30 words, +-20%
    assert 12 <= sum(words) / len(words) <= 23


def test_the_benchmark_tokenizer_knows_every_word_and_a_broken_one_is_rebuilt(tmp_path: Path) -> None:
    """A review tokenizes as with a real vocabulary: one token per word or mark, no [UNK]
    (built with `vocab_file=`, the tokenizer held only the special tokens: every word [UNK])."""
    from tokenizers import Tokenizer

    workload.build_tokenizer(tmp_path)
    tokenizer = Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    assert tokenizer.get_vocab_size() == 30522
    review = "the food was good, really!"
    encoded = tokenizer.encode(review)
    assert encoded.tokens == ["[CLS]", "the", "food", "was", "good", ",", "really", "!", "[SEP]"]
    for text in workload.sentences(50, seed=4):
        assert tokenizer.token_to_id("[UNK]") not in tokenizer.encode(text).ids

    broken = Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    specials = {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3}
    broken.model = type(broken.model)(vocab=specials, unk_token="[UNK]")
    broken.save(str(tmp_path / "tokenizer.json"))
    assert not workload._knows_every_word(tmp_path)  # build_model rebuilds such a directory


def run(config: str, load: float, p99: float) -> dict[str, Any]:
    return {
        "config": config,
        "load": load,
        "offered_rps": load * 60,
        "completed_rps": load * 60,
        "e2e_p50_ms": p99 / 2,
        "e2e_p90_ms": p99 * 0.8,
        "e2e_p99_ms": p99,
        "compute_per_job_ms": 10.0,
        "outside_model_p50_ms": 4.0,
        "mean_batch_size": 4.0,
        "padding_efficiency": 0.9,
    }


def test_report_writes_the_table_the_plot_and_the_headline_numbers(tmp_path: Path) -> None:
    bare = {
        "throughput_per_s": 60.0,
        "single_pass_ms": 30.0,
        "single_pass_spaced_ms": 34.0,
        "light_load_gap_ms": 167.0,
        "fifo_padding_efficiency": 0.6,
    }
    raw = {
        "when": "now",
        "machine": "test",
        "duration_s": 15.0,
        "repeats": 1,
        "bare": {"fp32": bare, "bf16": {**bare, "throughput_per_s": 120.0}},
        "capacity": {"completed_rps": 50.0, "offered_rps": 72.0},
        "runs": [
            run(c, load, p99)
            for c, p99 in [
                ("1:0", 400),
                ("16:50", 120),
                ("16:0", 100),
                ("default", 105),
                ("default 1 lane", 60),
                ("default, again", 84),  # the control: not a fixed config to beat
            ]
            for load in (0.1, 0.9)
        ],
        "saturation": [
            # A backlog, not a rate: its load is infinite, as bench.batching records it.
            {"precision": "fp32", "completed_rps": 57.0, "padding_efficiency": 0.88, "load": math.inf},
            # Each run against the bare model measured just before it: ratios 0.9, 0.95, 1.0.
            *(
                {
                    "precision": "bf16",
                    "completed_rps": done,
                    "padding_efficiency": 0.88,
                    "bare_throughput_per_s": beside,
                }
                for done, beside in [(90.0, 100.0), (95.0, 100.0), (150.0, 150.0)]
            ),
            {
                "precision": "fp32",
                "config": "default 1 lane",
                "completed_rps": 66.0,
                "padding_efficiency": 0.9,
                "bare_throughput_per_s": 60.0,
            },
        ],
    }
    summary = batching.report(raw, tmp_path, "python -m bench.batching")
    assert summary["stack_capacity_per_s"] == 50.0
    assert summary["p99_near_40_rps_offered"] == 0.9 * 60  # the cell offered nearest 40/s
    assert summary["saturation_ratio"] == 57.0 / 60.0  # no bare beside it: the one at the start
    assert summary["saturation_ratio_bf16"] == 0.95  # not 95 / 120, nor the median jobs/s / bare
    assert summary["bare_bf16_beside_saturation_per_s"] == 100.0
    # The default on one lane is the default policy too, not a fixed config to beat.
    assert summary["default_vs_best_p99_ratio"] == 105 / 100
    assert summary["default_vs_itself_p99_ratio"] == 105 / 84  # the larger over the smaller
    assert summary["control_vs_best_p99_ratio"] == 84 / 100  # the copy, judged as the default is
    assert summary["saturation_ratio_one_lane"] == 66.0 / 60.0
    assert summary["saturation_fp32_jobs_per_s"] == 57.0  # its runs kept apart from one lane's
    assert summary["light_load_p50_one_lane_ms"] == 60 / 2
    assert summary["light_load_overhead_ms"] == 105 / 2 - 30.0
    assert summary["light_load_overhead_vs_spaced_ms"] == 105 / 2 - 34.0
    written = json.loads((tmp_path / "batching.json").read_text(), parse_constant=refuse)
    json.loads((tmp_path / "batching-raw.json").read_text(), parse_constant=refuse)
    assert written["saturation_one_lane_bf16_jobs_per_s"] is None  # not measured: null, not NaN
    for key in (
        "saturation_ratio",
        "padding_efficiency",
        "light_load_overhead_ms",
        "default_vs_best_p99_ratio",
    ):
        assert key in written
    table = (tmp_path / "batching.md").read_text()
    assert "| 90% | default |" in table and "python -m bench.batching" in table
    assert "the stack's capacity, 50.0 jobs/s" in table
    assert "34.0 ms after" in table and "167 ms idle" in table
    assert "| 90% | 16:0 | 1.05 | 0.84 | 1.25 |" in table  # the best fixed config, beside the control
    assert (tmp_path / "batching.png").stat().st_size > 10_000


def test_a_run_of_fewer_configs_says_what_it_did_not_measure(tmp_path: Path) -> None:
    """`--configs` without the one-lane default: its rows read "-" and its sentence says so, not "nan"."""
    bare = {"throughput_per_s": 60.0, "single_pass_ms": 30.0, "single_pass_spaced_ms": 34.0}
    raw = {
        "when": "now",
        "machine": "test",
        "duration_s": 15.0,
        "repeats": 1,
        "bare": {"fp32": {**bare, "light_load_gap_ms": 167.0, "fifo_padding_efficiency": 0.6}},
        "runs": [run(c, load, 100) for c in ("16:0", "default", "default, again") for load in (0.6, 0.9)],
        "saturation": [
            {"precision": "fp32", "completed_rps": 57.0, "padding_efficiency": 0.6, "load": math.inf}
        ],
        "bf16_skipped": "--no-bf16",
    }
    batching.report(raw, tmp_path, "python -m bench.batching --configs 16:0 default 'default, again'")
    table = (tmp_path / "batching.md").read_text()
    assert "nan" not in table
    assert "| end to end at saturation, the default with one model lane, jobs/s | - | - |" in table
    assert "`default 1 lane` not measured in this run." in table


def test_the_report_says_what_the_loads_are_fractions_of() -> None:
    # The stack's capacity, 48 jobs/s offered 72 (1.2 x a bare rate of 60/s), 80/s beside saturation.
    capacity = {"completed_rps": 48.0, "offered_rps": 72.0}
    said = " ".join(batching.what_the_loads_are(capacity, 60.0, 80.0, [0.1, 0.9]))
    assert "the stack's capacity, 48.0 jobs/s" in said and "arrived at 72/s" in said
    assert "60.0 sequences/s, they were 8%, 72%;" in said and "80.0/s, they were 6%, 54%." in said
    said = " ".join(batching.what_the_loads_are(capacity, 60.0, math.nan, [0.1]))
    assert said.endswith("they were 8%. ")  # no bare rate beside saturation: the rest still said
    # Runs that did not time the stack: fractions of the bare rate at the start, 60/s then.
    said = " ".join(batching.what_the_loads_are(None, 60.0, 80.0, [0.1, 0.9]))
    assert "bare fp32 rate timed at the start, 60.0 sequences/s;" in said and "they were 8%, 68%." in said
    assert batching.what_the_loads_are(None, 60.0, math.nan, [0.1]) == []  # nothing to add


def test_the_stacks_capacity_counts_what_finished_while_jobs_arrived() -> None:
    # Arrivals over 0-10 s; after the 2 s settle, 8 s in which 40 finished; 30 more in the drain.
    accepted = [i / 10 for i in range(101)]
    finished = [1.0] * 5 + [2.0 + i * 0.2 for i in range(40)] + [10.5] * 30
    assert batching.completed_while_arriving(accepted, finished, settle_s=2.0) == 40 / 8
    with pytest.raises(ValueError, match="leave nothing"):
        batching.completed_while_arriving([0.0, 1.0], [1.0], settle_s=2.0)


def test_a_stack_that_keeps_up_is_offered_more_until_it_cannot(monkeypatch: pytest.MonkeyPatch) -> None:
    """Offered less than it can do, a stack reads the offered rate: not its capacity."""
    offered: list[float] = []

    def completed_under(_model: Path, rate: float) -> dict[str, float]:
        offered.append(rate)
        return {"completed_rps": min(rate, 150.0), "offered_rps": rate}  # a stack that does 150/s

    monkeypatch.setattr(batching, "completed_under", completed_under)
    reading = batching.capacity_reading(Path("model"), bare_per_s=100.0)
    assert offered == [120.0, 240.0] and reading["completed_rps"] == 150.0
    assert reading["bare_fp32_per_s"] == 100.0
    offered.clear()  # one that keeps up with anything is offered at most 4.8 x the bare rate
    assert batching.capacity_reading(Path("model"), bare_per_s=10.0)["completed_rps"] == 48.0
    assert offered == [12.0, 24.0, 48.0]


def test_the_stacks_capacity_is_its_highest_reading(monkeypatch: pytest.MonkeyPatch) -> None:
    """A reading can fall far short (a machine booted minutes before: 37.4 jobs/s, then 68.1):
    the capacity is the highest of CAPACITY_READINGS, each on a fresh stack, and keeps them all."""
    done = iter([37.4, 68.1])

    def completed_under(_model: Path, rate: float) -> dict[str, float]:
        return {"completed_rps": next(done), "offered_rps": rate}

    monkeypatch.setattr(batching, "completed_under", completed_under)
    monkeypatch.setattr(batching, "CAPACITY_READINGS", 2)
    capacity = batching.stack_capacity(Path("model"), bare_per_s=80.0)
    assert capacity["completed_rps"] == 68.1 and capacity["readings_rps"] == [37.4, 68.1]
    said = " ".join(batching.what_the_loads_are(capacity, 80.0, math.nan, [0.1]))
    assert "the stack's capacity, 68.1 jobs/s" in said
    assert "(the highest of 2 readings, each on a fresh stack: 37.4, 68.1)." in said


def test_light_load_is_read_against_the_passes_timed_around_each_cell() -> None:
    cells = [
        {
            **run("default", 0.1, 100),
            "e2e_p50_ms": p50,
            "bare_spaced_pass_before_ms": before,
            "bare_spaced_pass_around_ms": around,
        }
        for p50, before, around in [(40.0, 36.0, 35.0), (39.0, 27.0, 33.0), (38.0, 34.0, 36.0)]
    ]
    others = [
        {**run("16:0", 0.1, 100), "bare_spaced_pass_around_ms": 1.0},  # another config
        {**run("default", 0.3, 100), "bare_spaced_pass_around_ms": 1.0},  # not the light load
        run("default", 0.1, 100),  # an older run's cell: no pass timed with it
    ]
    assert batching.light_against_reference(cells + others, 0.1) == 5.0  # of +5, +6, +2
    assert batching.light_against_reference(cells + others, 0.1, "before") == 4.0  # of +4, +12, +4
    assert math.isnan(batching.light_against_reference(others[2:], 0.1))
    # An older run timed the pass before its cells only: read against that, not against nothing.
    older = [{key: value for key, value in c.items() if key != "bare_spaced_pass_around_ms"} for c in cells]
    assert math.isnan(batching.light_against_reference(older, 0.1))
    assert batching.light_against_reference(older, 0.1, "before") == 4.0


def test_the_light_loads_passes_are_counted_by_width() -> None:
    counted = [
        {**run("default", 0.1, 100), "wide_passes": wide, "lane_passes": lane}
        for wide, lane in [(190.0, 10.0), (200.0, 0.0)]
    ]
    others = [
        {**run("16:0", 0.1, 100), "wide_passes": 1.0, "lane_passes": 1.0},  # another config
        {**run("default", 0.3, 100), "wide_passes": 1.0, "lane_passes": 1.0},  # not the light load
        run("default", 0.1, 100),  # an older run's cell: not counted
    ]
    assert batching.light_widths(counted + others, 0.1) == (390.0, 10.0)
    assert all(math.isnan(n) for n in batching.light_widths(others, 0.1))


def test_the_policy_simulation_ranks_the_default_first_under_load() -> None:
    from bench.simulate import POLICIES, simulate

    def forward_s(size: int, longest: int, real: int) -> float:
        return 0.0163 + 0.00046 * size * longest

    default = simulate(POLICIES["default"], 50.0, forward_s, jobs=1500)
    fifo = simulate(POLICIES["16:0"], 50.0, forward_s, jobs=1500)
    window = simulate(POLICIES["16:50"], 50.0, forward_s, jobs=1500)
    assert default["p99_ms"] < fifo["p99_ms"] and default["p99_ms"] < window["p99_ms"]
    assert default["p50_ms"] >= 4.0 + 16.3  # never below one pass plus the time outside it
    light = simulate(POLICIES["default"], 5.0, forward_s, jobs=300)
    assert light["mean_batch"] < 1.2  # at light load every job runs at once, nearly alone


def test_with_the_packed_pass_the_simulated_default_keeps_fifos_tail_near_the_limit() -> None:
    from bench.simulate import PASS_COSTS, POLICIES, pass_time, simulate

    forward_s = pass_time("packed", *PASS_COSTS["packed"])
    default = simulate(POLICIES["default"], 100.0, forward_s, jobs=1500)
    fifo = simulate(POLICIES["16:0"], 100.0, forward_s, jobs=1500)
    grouping = simulate(POLICIES["group always"], 100.0, forward_s, jobs=1500)
    assert default == fifo  # grouping reviews saves under 2%: FIFO's batches, job for job
    assert grouping["p99_ms"] > fifo["p99_ms"] and grouping["padding"] > fifo["padding"]


def test_the_simulated_policy_plans_with_its_own_line_while_passes_cost_what_they_cost() -> None:
    from bench.simulate import PASS_COSTS, POLICIES, pass_time, simulate

    counted = pass_time("packed", *PASS_COSTS["packed"])  # padding nearly free: grouping saves < 2%

    def padding_costly(size: Any, longest: Any, real: Any) -> Any:  # every padded place a token; arrays too
        return counted(size, longest, size * longest)

    def burst(planned_s: Callable[[int, int, int], float] | None = None) -> dict[str, float]:
        return simulate(POLICIES["default"], 100000.0, padding_costly, jobs=600, planned_s=planned_s)

    fifo = simulate(POLICIES["16:0"], 100000.0, padding_costly, jobs=600)
    assert burst(planned_s=counted)["padding"] == fifo["padding"]  # planned as counted: FIFO's batches
    grouped = burst()
    assert grouped["padding"] > fifo["padding"] + 0.1  # planned as it costs: grouped by length
    assert grouped["p99_ms"] < fifo["p99_ms"]  # and the passes it saves show in the drain


def test_two_simulated_lanes_run_a_lone_job_on_both_threads_and_hold_a_rate_one_lane_cannot() -> None:
    from bench.simulate import PASS_COSTS, POLICIES, pass_time, simulate

    forward_s = pass_time("packed", *PASS_COSTS["packed"])
    lone_ms = forward_s(1, 20, 20) * 1000 + 4.0  # a review-length job on both threads, and the rest
    light = simulate(POLICIES["default"], 2.0, forward_s, jobs=200, lanes=2)
    assert light["mean_batch"] == 1.0
    assert light["p50_ms"] < 1.15 * lone_ms  # wide: on one lane's thread it takes 1.6 x as long
    one = simulate(POLICIES["16:0"], 125.0, forward_s, jobs=1500, lanes=1)
    two = simulate(POLICIES["16:0"], 125.0, forward_s, jobs=1500, lanes=2)
    assert two["p99_ms"] < one["p99_ms"] / 2  # past one pass at a time's limit, not past two lanes'


def test_evenly_spaced_arrivals_further_apart_than_a_pass_never_wait_for_one() -> None:
    from bench.simulate import PASS_COSTS, POLICIES, pass_time, simulate

    forward_s = pass_time("packed", *PASS_COSTS["packed"])
    longest_ms = 1.1 * forward_s(1, 35, 35) * 1000 + 4.0  # the longest review on both threads, slow
    even = simulate(POLICIES["16:0"], 20.0, forward_s, jobs=300, lanes=2, even=True)
    assert even["mean_batch"] == 1.0 and even["p99_ms"] < longest_ms  # 50 ms apart: none waits
    random = simulate(POLICIES["16:0"], 20.0, forward_s, jobs=300, lanes=2)
    assert random["p99_ms"] > longest_ms  # Poisson arrivals at the same rate do meet


def test_the_policy_simulation_writes_its_page_for_each_pass(tmp_path: Path) -> None:
    from bench import simulate

    out = tmp_path / "policy-simulation.md"
    simulate.main(["--rates", "20", "60", "--seeds", "1", "--jobs", "300", "--out", str(out)])
    page = out.read_text()
    sections = [  # the batcher's default pass first, and first its two lanes on 2 cores
        f"## FORWARD={forward}, {lanes}: "
        for forward in ("packed", "padded")
        for lanes in ("2 lanes", "1 lane")
    ]
    assert [page.index(section) for section in sections] == sorted(
        page.index(section) for section in sections
    )
    assert page.count("| 60 | default |") == 4 and page.count("over greedy FIFO's (`16:0`): ") == 4
    with pytest.raises(SystemExit):  # one pair of costs cannot be both passes'
        simulate.main(["--fixed-ms", "10", "--out", str(out)])


def test_configs_take_turns_and_no_config_always_runs_last() -> None:
    configs = list(batching.CONFIGS)
    orders = [batching.turns(configs, repeat) for repeat in range(3)]
    assert all(sorted(order) == sorted(configs) for order in orders)  # every config, once each
    for config in configs:
        assert len({order.index(config) for order in orders}) == 3  # a different turn each repeat


def test_the_rate_table_gives_medians_and_every_rounds_p99() -> None:
    cells = {
        "a": [run("a", 0.5, p99) for p99 in (100, 300, 200)],
        "b": [run("b", 0.5, 50), run("b", 0.9, 80)],
    }
    rates = [0.5 * 60]  # run() offers load x 60 req/s
    lines = batching.rate_table(cells, rates, label="forward")
    assert lines[0].startswith("| req/s | forward | p50 ms |")
    assert lines[2] == "| 30 | a | 100 | 160 | **200** (100, 300, 200) | 10.0 | 4.0 |"
    assert lines[3] == "| 30 | b | 25 | 40 | **50** (50) | 10.0 | 4.0 |"  # only the cells at that rate
    assert len(lines) == 4


def test_a_run_that_dies_goes_on_with_resume_measuring_nothing_twice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    measured: list[str] = []
    failing = {"saturation": True}

    def cells(
        name: str, _m: Path, _p: str, capacity: float, loads: list[float], repeat: int, _d: float, _s: Any
    ) -> list[Any]:
        assert capacity == 80.0  # the loads are fractions of the stack's capacity, not the bare rate
        measured.append(f"cells {name} #{repeat + 1}")
        return [{"config": name, "load": load, "repeat": repeat} for load in loads]

    def saturation(name: str, _m: Path, precision: str, _j: int, _r: int, _t: int) -> list[dict[str, str]]:
        if failing["saturation"]:
            raise RuntimeError("the batcher did not become SERVING")
        measured.append(f"saturation {name} {precision}")
        return [{"config": name, "precision": precision}]

    reported: dict[str, Any] = {}
    monkeypatch.setattr(batching, "build_model", lambda: tmp_path)

    def bare(*_: Any, **__: Any) -> dict[str, float]:
        measured.append("bare")
        return {"throughput_per_s": 100.0}

    def capacity(_m: Path, bare_per_s: float) -> dict[str, float]:
        measured.append("capacity")
        return {"completed_rps": 0.8 * bare_per_s, "offered_rps": 1.2 * bare_per_s}

    monkeypatch.setattr(batching, "bare_model", bare)
    monkeypatch.setattr(batching, "stack_capacity", capacity)
    monkeypatch.setattr(batching, "measure_config", cells)
    monkeypatch.setattr(batching, "measure_saturation", saturation)
    monkeypatch.setattr(batching, "report", lambda raw, _out, _command: reported.update(raw) or {})
    argv = ["--loads", "0.5", "--rps", "--configs", "16:0", "default", "--repeats", "2", "--no-bf16"]
    argv += ["--out", str(tmp_path)]

    with pytest.raises(RuntimeError):
        batching.main(argv)
    partial = tmp_path / "batching-partial.json"
    assert json.loads(partial.read_text())["steps"] == [
        "cells 16:0 #1",
        "cells default #1",
        "cells default #2",
        "cells 16:0 #2",
    ]
    assert measured.count("bare") == measured.count("capacity") == 1

    with pytest.raises(SystemExit, match=r"--resume: .* was made with"):
        batching.main([*argv[:-2], "--repeats", "3", "--out", str(tmp_path), "--resume"])

    measured.clear()
    failing["saturation"] = False
    batching.main([*argv, "--resume"])
    assert measured == ["saturation default fp32"]  # no bare model, capacity or cell measured again
    assert reported["capacity"]["completed_rps"] == 80.0
    assert len(reported["runs"]) == 4
    assert reported["saturation"] == [{"config": "default", "precision": "fp32"}]
    assert not partial.exists()


def refuse(constant: str) -> None:
    raise AssertionError(f"{constant} is not JSON: jq, JavaScript and strict parsers refuse it")


def test_a_cpu_without_native_bf16_gets_no_bf16_column_measured_as_fp32(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where PRECISION=bf16 runs fp32, bf16 is not measured, and the report says why."""
    measured: list[str] = []
    monkeypatch.setattr(batching, "native_bf16", lambda: False)
    monkeypatch.setattr(batching, "build_model", lambda: tmp_path)

    def bare(_m: Path, precision: str, *_: Any, **__: Any) -> dict[str, float]:
        measured.append(precision)
        return {"throughput_per_s": 1.0}

    def saturation(_n: str, _m: Path, precision: str, *_: Any) -> list[dict[str, str]]:
        measured.append(precision)
        return []

    monkeypatch.setattr(batching, "bare_model", bare)
    monkeypatch.setattr(batching, "stack_capacity", lambda *_: pytest.fail("--capacity bare times no stack"))
    monkeypatch.setattr(batching, "measure_config", lambda *_: [])
    monkeypatch.setattr(batching, "measure_saturation", saturation)
    reported: dict[str, Any] = {}
    monkeypatch.setattr(batching, "report", lambda raw, _out, _command: reported.update(raw) or {})

    batching.main(
        [
            "--loads",
            "0.5",
            "--rps",
            "--configs",
            "default",
            "--repeats",
            "1",
            "--capacity",
            "bare",
            "--out",
            str(tmp_path),
        ]
    )
    assert measured == ["fp32", "fp32"]  # the bare model and the saturation run, fp32 only
    assert "neither AVX512-BF16 nor AMX" in reported["bf16_skipped"]
    assert "capacity" not in reported  # the loads are fractions of the bare rate

    assert batching.shown(math.nan) == "-" and batching.shown(0.951, ".2f") == "0.95"


class _SlowSubmit(inference_pb2_grpc.InferenceServiceServicer):
    """Answers each Submit after 30 ms, with the text as its job id."""

    async def Submit(
        self, request: inference_pb2.SubmitRequest, context: grpc.aio.ServicerContext[object, object]
    ) -> inference_pb2.SubmitResponse:
        await asyncio.sleep(0.03)
        return inference_pb2.SubmitResponse(job_id=request.text)


async def test_the_open_loop_hands_back_each_submits_round_trip_as_the_client_saw_it() -> None:
    server = grpc.aio.server()
    inference_pb2_grpc.add_InferenceServiceServicer_to_server(_SlowSubmit(), server)  # type: ignore[abstract]
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        texts = [f"review {i}" for i in range(10)]
        round_trips: list[float] = []
        ids, wall, _ = await batching.open_loop(f"127.0.0.1:{port}", texts, 100.0, round_trips)
        assert ids == texts, "the job ids come back in the order sent"
        assert len(round_trips) == 10
        assert all(30 <= ms < 1000 for ms in round_trips), round_trips
        assert wall >= 0.09 + 0.03, "ten sends 10 ms apart, the last answered 30 ms after it left"
        assert (await batching.open_loop(f"127.0.0.1:{port}", texts[:2], 100.0))[0] == texts[:2]
    finally:
        await server.stop(0)


def test_a_light_round_is_read_over_the_reference_pass_from_the_done_jobs_traces() -> None:
    from batchline import codec
    from batchline.v1 import job_pb2

    def job(
        status: job_pb2.JobStatus.ValueType, started_ms: float, compute_ms: float, finished_ms: float
    ) -> job_pb2.Job:
        trace = job_pb2.Trace(
            accepted_at=codec.ts_from_seconds(100.0),
            started_at=codec.ts_from_seconds(100.0 + started_ms / 1000),
            finished_at=codec.ts_from_seconds(100.0 + finished_ms / 1000),
            inference_ms=compute_ms,
        )
        return job_pb2.Job(status=status, trace=trace)

    jobs = [job(codec.DONE, 3, 26, 30), job(codec.DONE, 2, 27, 32), job(codec.DONE, 4, 28, 34)]
    jobs.append(job(codec.FAILED, 500, 900, 1000))  # not read: only finished jobs say what a pass costs
    assert batching.over_reference(jobs, 25.0) == (
        "reference 25.00 ms; e2e p50 over it +7.00, the trace's pass over it +2.00, accepted->started 3.00; "
        "done 3/4"
    )
