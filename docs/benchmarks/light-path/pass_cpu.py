"""A lone pass in the pipeline runs 1-3 ms over the same pass timed beside an idle stack. Is that
the other processes' CPU during the pass (on 2 vCPUs, whatever runs then takes a core from one of
the pass's two threads)? Run in a checkout with `pass_cpu.patch` applied (experiment only): the
batcher then reads, before and after each pass, its own CPU, its event loop thread's, and each
other process's (the ingress, the stream service, RabbitMQ, Redis and this process, the client),
from their CPU clocks. One default fp32 stack, one job every 1/RATE s, ROUNDS rounds of 200; each
round's reference is the bare spaced pass timed in this process before and after it, with the
same clocks read around each reference pass. Prints one line per round, then every lone pass
pooled: its time over its round's reference by how much CPU the other processes took during it.
With the patch as it stands the batcher also times the pass inside the lane's thread, so the
loop's hand-offs to the thread and back are read apart from it. With `ab`, the patched batcher
writes no RUNNING record for every second lone pass (RUNNING_AFTER_AB), and the lone passes and
their jobs' end to end are read per arm. The patched batcher also records each pass's input length
(tokens), each of its own threads' time on a CPU and waiting for one (schedstat) and context
switches, and the machine's interrupts and CPU ticks (/proc/interrupts, /proc/stat) over the
pass; and with PIN_TEAM=1 in the environment it pins the wide pass's two threads to one CPU each.
This script records when each pass's own job was accepted (the ingress's stamp) and answered
(at the client), and when the other jobs near it were accepted; the summary splits the passes by
that: begun before their own Submit was answered, against begun after it with no other job
accepted from QUIET_LEAD_MS before them to their end (runs recorded before this script kept those
times are split by the ingress's CPU during the pass), and among the latter asks what the
ingress's CPU in a pass marks, by the same split and per millisecond of pass; last, each round's
lone jobs' end to end over its reference. With PROBE=1 in the environment it also runs
probe.py beside the stack (a fixed piece of work every 10 ms, timed by its CPU clock) and asks
whether the probe's work took longer in the passes that ran long (machine_or_team).
Writes each lone pass (and each reference pass) to OUT as JSON; `pass_cpu.py read OUT` prints
the summary of a run again (OUT may be gzipped: `pass-cpu-2120.json.gz` is the 21:20 run's).

    git worktree add /tmp/pcpu HEAD && cd /tmp/pcpu && git apply docs/benchmarks/light-path/pass_cpu.patch
    [PIN_TEAM=1] [PROBE=1] PYTHONPATH=src:services:. $VENV/bin/python docs/benchmarks/light-path/pass_cpu.py \
        RATE ROUNDS OUT [ab]

($VENV: the main checkout's .venv.)
"""

from __future__ import annotations

import asyncio
import bisect
import gzip
import itertools
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import probe

from batchline import codec
from bench import batching, stack, workload

OTHERS = ("ingress", "stream", "rabbitmq", "redis", "client")
BUSY_MS = 0.15  # older runs: a pass with more of the ingress's CPU in it than this was busy
# A quiet pass had no other job accepted from this long before it began to its end (a Submit's
# work goes on for a few milliseconds after the ingress accepts it: storing, publishing, the
# confirm, the answer).
QUIET_LEAD_MS = 20.0


def clocks(pids: dict[str, list[int]]) -> dict[str, float]:
    """CPU seconds so far of each named group of processes (their CPU clocks: CPUCLOCK_SCHED)."""
    return {name: sum(time.clock_gettime((~pid << 3) | 2) for pid in group) for name, group in pids.items()}


def reference(
    model: Any, encoded: list[Any], gap_s: float, pids: dict[str, list[int]]
) -> list[dict[str, Any]]:
    """bench.batching.timed_single_passes' spaced passes, each with every process's CPU during it."""
    passes = []
    for _ in range(3):
        for e in batching.typical_sentences(encoded):
            batching.timed_pass(model.predict, e)  # back to back, as the benchmark's reference
        for e in batching.typical_sentences(encoded):
            time.sleep(gap_s)
            before, began_at = clocks(pids), time.time()
            ms = batching.timed_pass(model.predict, e)
            after = clocks(pids)
            passes.append(
                {"ms": ms, "began_at": began_at, "cpu_ms": {k: (after[k] - before[k]) * 1000 for k in after}}
            )
    return passes


def pass_start(lone: dict[str, Any]) -> float:
    """When a pass began on the wall clock, the clock of the services' stamps: the patch's
    `began_at`; runs before it recorded only `at`, after the pass and the reads of its records."""
    return float(lone["began_at"] if "began_at" in lone else lone["at"] - lone["ms"] / 1000)


def own_submit(
    lone: dict[str, Any], accepted: dict[str, float], answered: dict[str, float]
) -> dict[str, float]:
    """When the pass's own job was accepted by the ingress and answered at the client, in ms from
    the pass's start: a pass can begin before its own Submit's tail (the confirm, the answer, the
    client reading it) is done."""
    start = pass_start(lone)
    job = lone["job"]
    if job not in accepted or job not in answered:
        return {}
    return {"accepted_ms": (accepted[job] - start) * 1000, "answered_ms": (answered[job] - start) * 1000}


def arrivals(lone: dict[str, Any], accepted: dict[str, float]) -> list[float]:
    """When the other jobs near a pass were accepted, in ms from the pass's start."""
    start = pass_start(lone)
    offsets = ((t - start) * 1000 for job, t in accepted.items() if job != lone["job"])
    return sorted(o for o in offsets if -2 * QUIET_LEAD_MS <= o <= lone["ms"] + QUIET_LEAD_MS)


Test = Callable[[dict[str, Any]], bool]


def busy_and_quiet(wide: list[dict[str, Any]]) -> tuple[Test, Test, str, str]:
    """How to tell a pass that shares the machine with a Submit from one that does not: by its
    own job's answer and the other jobs' arrivals where the run recorded them, else by the
    ingress's CPU during the pass (which in a slow spell, the ingress's work spread thin, marks
    most passes busy, and in the usual spell marked 22-36% of the passes with no Submit near
    them: ingress_or_pass). The tests for busy and for quiet, and the names of the two kinds."""
    if "arrived_ms" in wide[0]:  # a pass whose job has no answer on record is neither
        return (
            lambda p: p.get("answered_ms", 0.0) > 0,
            lambda p: (
                p.get("answered_ms", 1.0) <= 0
                and not any(-QUIET_LEAD_MS <= o <= p["ms"] for o in p["arrived_ms"])
            ),
            "their own Submit answered after they began",
            f"it answered before, and no other accepted from {QUIET_LEAD_MS:.0f} ms before them to their end",
        )
    return (
        lambda p: p["cpu_ms"]["ingress"] > BUSY_MS,
        lambda p: p["cpu_ms"]["ingress"] <= BUSY_MS and p["cpu_ms"]["rabbitmq"] <= BUSY_MS / 5,
        "the ingress busy in them",
        "the ingress and RabbitMQ quiet",
    )


def others(record: dict[str, Any]) -> float:
    return float(sum(v for k, v in record["cpu_ms"].items() if k in OTHERS))


def main() -> None:
    rate = float(sys.argv[1]) if len(sys.argv) > 1 else 10.0
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 6
    out = Path(sys.argv[3]) if len(sys.argv) > 3 else Path("pass-cpu.json")
    ab = {"RUNNING_AFTER_AB": "1"} if len(sys.argv) > 4 and sys.argv[4] == "ab" else {}
    log = Path(tempfile.mkdtemp()) / "passes.jsonl"
    path = workload.build_model()
    bare, encoded = workload.warm_model(path, "fp32", 2)
    env, batchers = batching.stack_env("default", path, "fp32")
    median = statistics.median
    kept: list[dict[str, Any]] = []
    prober = start_probe(log.parent / "probe.json") if os.environ.get("PROBE") == "1" else None
    with stack.start(
        "local", {**env, "PASS_CPU_LOG": str(log), **ab}, batchers=batchers, envoy=False
    ) as targets:
        pids = {k: v for k, v in targets.pids.items() if k in OTHERS} | {"client": [os.getpid()]}
        Path(str(log) + ".pids").write_text(json.dumps(pids))
        batching.warm(targets.ingress)
        for round_ in range(rounds):
            before = reference(bare, encoded, 1 / rate, pids)
            seen = len(log.read_text().splitlines())
            texts = workload.sentences(200, seed=7 + round_)
            baseline = asyncio.run(batching.finished_count(targets.ingress))
            answered: dict[str, float] = {}
            ids, _, _ = asyncio.run(batching.open_loop(targets.ingress, texts, rate, answered=answered))
            jobs = asyncio.run(batching.collect(targets.ingress, ids, baseline))
            e2e = {j.job_id: batching.e2e_ms(j) for j in jobs}
            accepted = {j.job_id: codec.seconds(j.trace.accepted_at) for j in jobs}
            after = reference(bare, encoded, 1 / rate, pids)
            ref_ms = median([p["ms"] for p in before + after])
            lone = [json.loads(line) for line in log.read_text().splitlines()[seen:]]
            lone = [
                p
                | {
                    "round": round_,
                    "over_ms": p["ms"] - ref_ms,
                    "e2e_over_ms": e2e.get(p["job"], 0.0) - ref_ms,
                    "arrived_ms": arrivals(p, accepted),
                    **own_submit(p, accepted, answered),
                }
                for p in lone
                if p["size"] == 1
            ]
            kept += lone
            for p in before + after:
                kept.append(p | {"round": round_, "reference": True, "over_ms": p["ms"] - ref_ms})
            per = {k: median([p["cpu_ms"].get(k, 0.0) for p in lone]) for k in (*OTHERS, "batcher loop")}
            print(
                f"{time.strftime('%H:%M:%S')} round {round_ + 1} at {rate:g}/s: reference {ref_ms:.2f} ms "
                f"(others' CPU in it, median {median([others(p) for p in before + after]):.2f} ms); "
                f"{len(lone)} lone passes ({sum(p['wide'] for p in lone)} wide), median "
                f"{median([p['ms'] for p in lone]):.2f} ms ({median([p['over_ms'] for p in lone]):+.2f}); "
                f"others' CPU in them, median {median([others(p) for p in lone]):.2f} ms: "
                + ", ".join(f"{k} {v:.2f}" for k, v in per.items()),
                flush=True,
            )
    if prober is not None:
        file_probes(kept, stop_probe(prober, log.parent / "probe.json"))
    out.write_text(json.dumps(kept))
    summarize(kept)


def start_probe(out: Path) -> subprocess.Popen[bytes]:
    """probe.py beside the stack, in a process of its own."""
    return subprocess.Popen([sys.executable, str(Path(__file__).with_name("probe.py")), str(out)])


def stop_probe(process: subprocess.Popen[bytes], out: Path) -> list[probe.Round]:
    process.send_signal(signal.SIGTERM)
    process.wait(timeout=30)
    return list(json.loads(out.read_text()))


def file_probes(kept: list[dict[str, Any]], rounds: list[probe.Round]) -> None:
    """File each of the probe's rounds (as probe.py wrote it) under the pass it began in ("probe"),
    or under the last pass that began before it ("probe_after"); the rounds before the first pass
    are left out."""
    spans = sorted(((pass_start(p), pass_start(p) + p["ms"] / 1000, p) for p in kept), key=lambda s: s[0])
    starts = [start for start, _, _ in spans]
    for r in rounds:
        i = bisect.bisect_right(starts, r[0]) - 1
        if i >= 0:
            spans[i][2].setdefault("probe" if r[0] <= spans[i][1] else "probe_after", []).append(r)


def thirds(
    passes: list[dict[str, Any]], key: Callable[[dict[str, Any]], float]
) -> list[list[dict[str, Any]]]:
    """The passes in thirds by `key`, lowest first (the last third takes the remainder)."""
    ranked, third = sorted(passes, key=key), len(passes) // 3
    return [ranked[:third], ranked[third : 2 * third], ranked[2 * third :]]


def length_bins(passes: list[dict[str, Any]]) -> dict[int, list[dict[str, Any]]]:
    """The passes by their input's length in 5-token bins, shortest first: {the bin's low end: passes}."""
    bins: dict[int, list[dict[str, Any]]] = {}
    for p in sorted(passes, key=lambda p: int(p["tokens"])):
        bins.setdefault(p["tokens"] // 5 * 5, []).append(p)
    return bins


def summarize(kept: list[dict[str, Any]]) -> None:
    median = statistics.median
    wide = sorted((p for p in kept if not p.get("reference") and p["wide"]), key=others)
    print(f"{len(wide)} wide lone passes, by the other processes' CPU during them (terciles):")
    for name, part in zip(("low", "middle", "high"), thirds(wide, others), strict=True):
        print(
            f"  {name:>6}: others' CPU {others(part[0]):.2f}-{others(part[-1]):.2f} ms (median "
            f"{median([others(p) for p in part]):.2f}); pass over its round's reference, median "
            f"{median([p['over_ms'] for p in part]):+.2f} ms; the batcher's loop "
            f"{median([p['cpu_ms']['batcher loop'] for p in part]):.2f} ms"
        )
    if wide and "stat cpu0" in set().union(*(p.get("machine", {}) for p in wide)):
        stolen(wide)
    for arm, name in ((False, "RUNNING written beside the pass"), (True, "no RUNNING")):
        part = [p for p in kept if not p.get("reference") and p.get("after") is arm]
        if part:
            rounds_over = [
                median([p["e2e_over_ms"] for p in part if p["round"] == r])
                for r in sorted({p["round"] for p in part})
            ]

            def m(key: str, part: list[dict[str, Any]] = part) -> float:
                return float(median([p["cpu_ms"][key] for p in part]))

            over = median([p["over_ms"] for p in part])
            print(
                f"{name}: {len(part)} lone passes, over the reference median {over:+.2f} ms; others' CPU in "
                f"them {median([others(p) for p in part]):.2f} ms (stream {m('stream'):.2f}, redis "
                f"{m('redis'):.2f}), the batcher's loop {m('batcher loop'):.2f}; e2e p50 over the reference "
                f"per round " + ", ".join(f"{v:+.2f}" for v in rounds_over)
            )
    if wide and "thread_ms" in wide[0]:  # the patch's hand-offs, timed

        def mid(key: str) -> float:
            return float(median([p[key] for p in wide]))

        in_thread_over = median([p["thread_ms"] - p["ms"] + p["over_ms"] for p in wide])  # - the reference
        print(
            f"wide lone passes, medians: in the lane's thread {mid('thread_ms'):.2f} ms, over its round's "
            f"reference {in_thread_over:+.2f}; the loop to the thread {mid('to_thread_ms'):.2f} ms, the "
            f"thread back to the loop {mid('to_loop_ms'):.2f} ms; their jobs end to end over the "
            f"reference {mid('e2e_over_ms'):+.2f} ms"
        )
        # A pass that shares the machine with a Submit against one that does not.
        is_busy_pass, is_quiet_pass, busy_name, quiet_name = busy_and_quiet(wide)
        busy = [p for p in wide if is_busy_pass(p)]
        quiet = [p for p in wide if is_quiet_pass(p)]
        for name, part in ((busy_name, busy), (quiet_name, quiet)):
            if not part:
                print(f"  none with {name}")
                continue
            over = median([p["over_ms"] for p in part])
            in_thread = median([p["thread_ms"] - p["ms"] + p["over_ms"] for p in part])
            e2e = median([p["e2e_over_ms"] for p in part])
            print(
                f"  {len(part)} with {name}: over the reference {over:+.2f} ms, "
                f"in the thread {in_thread:+.2f}; others' CPU in them "
                f"{median([others(p) for p in part]):.2f} ms, the batcher's loop "
                f"{median([p['cpu_ms']['batcher loop'] for p in part]):.2f}; their "
                f"jobs end to end over the reference {e2e:+.2f}"
                + (
                    f"; their own Submit accepted {median([p['accepted_ms'] for p in part]):+.2f} ms and "
                    f"answered {median([p['answered_ms'] for p in part]):+.2f} ms from the pass's start"
                    if part and all("answered_ms" in p for p in part)
                    else ""
                )
            )
        # Is the busy passes' excess theirs, or a slow spell's? A spell of seconds would slow the
        # passes beside them (one arrival apart) too, and bunch the busy passes together.
        if busy:  # a run may have none
            in_order = sorted(wide, key=lambda p: p["at"])
            is_busy = [is_busy_pass(p) for p in in_order]
            beside = [
                p["over_ms"]
                for i, p in enumerate(in_order)
                if not is_busy[i] and any(is_busy[j] for j in (i - 1, i + 1) if 0 <= j < len(in_order))
            ]
            after_busy = [b for a, b in itertools.pairwise(is_busy) if a]
            print(
                f"  {len(beside)} not busy, next to a busy one: over the reference {median(beside):+.2f} ms; "
                f"busy: {sum(is_busy) / len(is_busy):.3f} of the passes, "
                f"{sum(after_busy) / max(1, len(after_busy)):.3f} of those after a busy one"
            )
        if "tokens" in wide[0] and busy and quiet:
            same_length(busy, quiet)
        if "answered_ms" in wide[0] and len(quiet) >= 30:
            ingress_or_pass(quiet)
    if any("probe" in p for p in kept):
        machine_or_team(kept)
    lone = [p for p in kept if not p.get("reference")]
    per_round = [
        median([p["e2e_over_ms"] for p in lone if p["round"] == r])
        for r in sorted({p["round"] for p in lone})
    ]
    print(
        "lone jobs' end to end over the reference, p50 per round: "
        + ", ".join(f"{v:+.2f}" for v in per_round)
        + f" ms (median {median(per_round):+.2f})"
    )
    refs = [p for p in kept if p.get("reference")]
    idle = median([others(p) - p["cpu_ms"]["client"] for p in refs])  # the client ran these passes
    print(f"reference passes: the other services' CPU in them, median {idle:.2f} ms")


def stat_ticks(p: dict[str, Any]) -> list[int]:
    """A pass's /proc/stat ticks (10 ms), both CPUs summed: user, nice, system, idle, iowait, irq,
    softirq, steal."""
    rows = [v for k, v in p["machine"].items() if k.startswith("stat ")]
    return [sum(r[i] for r in rows) for i in range(8)]


def stolen(wide: list[dict[str, Any]]) -> None:
    """The host's share: /proc/stat's steal, the time the hypervisor ran something else while
    this VM's CPUs had work. Over all the passes, then the passes during which it took a tick (10
    ms) or more against those in which it took none, at one input length (5-token bins, medians)."""
    median = statistics.median

    total = [sum(stat_ticks(p)[i] for p in wide) for i in range(8)]
    hit = [p for p in wide if stat_ticks(p)[7] > 0]
    spared = [p for p in wide if stat_ticks(p)[7] == 0]
    print(
        f"  the host took {total[7] / max(1, sum(total)):.3f} of the CPUs' ticks over these passes; "
        f"{len(hit)} passes lost a tick or more to it, over the reference "
        f"{median([p['over_ms'] for p in hit]) if hit else float('nan'):+.2f} ms, {len(spared)} none, "
        f"{median([p['over_ms'] for p in spared]) if spared else float('nan'):+.2f} ms"
    )
    if "tokens" not in wide[0] or not hit:
        return
    longer, weights = [], []  # per bin: the mean pass with steal over the mean without; how many with
    spared_bins = length_bins(spared)
    for low, hit_bin in length_bins(hit).items():
        h = [p["ms"] for p in hit_bin]
        s = [p["ms"] for p in spared_bins.get(low, [])]
        if len(h) >= 5 and len(s) >= 5:
            over = median(h) - median(s)
            print(f"    {low}-{low + 4} tokens: {len(h)} with steal, {len(s)} without, {over:+.2f} ms")
            longer.append(statistics.mean(h) - statistics.mean(s))
            weights.append(len(h))
    if weights:
        weighed = sum(w * x for w, x in zip(weights, longer, strict=True)) / sum(weights)
        taken = 10 * statistics.mean(stat_ticks(p)[7] for p in hit)
        print(
            f"    the host took {taken:.1f} ms from those passes on "
            f"average; they ran {weighed:+.1f} ms longer than the spared ones (those bins, means weighed "
            "to the passes with steal)"
        )


def team_threads(passes: list[dict[str, Any]]) -> list[str]:
    """The wide pass's OpenMP team: the batcher's two threads longest on a CPU over these passes."""
    team_run: dict[str, float] = {}
    for p in passes:
        for name, (run, *_) in p["threads"].items():
            team_run[name] = team_run.get(name, 0.0) + run
    return sorted(team_run, key=team_run.__getitem__)[-2:]


def ingress_rate(p: dict[str, Any]) -> float:
    """The ingress's CPU per millisecond of a pass, in microseconds."""
    return 1000.0 * float(p["cpu_ms"]["ingress"]) / float(p["ms"])


def ingress_or_pass(quiet: list[dict[str, Any]]) -> None:
    """What does the ingress's CPU during a pass mark? The ingress works a little all the time
    (its event loop's timers, its checks, gRPC's threads), so a pass that runs longer for any
    reason holds more of that work; its CPU per millisecond of pass does not grow so. Among the
    passes clear of every Submit: split by the ingress's CPU over BUSY_MS (how the runs before
    own_submit() was recorded told a busy pass), how bunched those passes are, and the two kinds
    at one length; the thirds by the pass's excess, with their inputs' length, the ingress's CPU
    in them and per millisecond of pass, and the team's two threads' wait for a CPU and the CPUs'
    idle time (means: /proc/stat counts in ticks of 10 ms); the thirds by that rate; and per
    5-token bin (30 passes or more), the third with the highest rate against the lowest, and the
    longest third's wait for a CPU against the shortest's (medians but where said)."""
    median = statistics.median

    def over(part: list[dict[str, Any]]) -> float:
        return float(median([p["over_ms"] for p in part]))

    over_threshold = [p for p in quiet if p["cpu_ms"]["ingress"] > BUSY_MS]
    under = [p for p in quiet if p["cpu_ms"]["ingress"] <= BUSY_MS]
    nan = float("nan")
    print(
        f"  the passes clear of every Submit, by the ingress's CPU in them: {len(over_threshold)} over "
        f"{BUSY_MS} ms, over the reference {over(over_threshold) if over_threshold else nan:+.2f} ms; "
        f"{len(under)} under it, {over(under) if under else nan:+.2f} ms"
    )
    flags = [p["cpu_ms"]["ingress"] > BUSY_MS for p in sorted(quiet, key=lambda p: p["at"])]
    after = [b for a, b in itertools.pairwise(flags) if a]
    print(
        f"    over it: {sum(flags) / len(flags):.3f} of these passes, "
        f"{sum(after) / max(1, len(after)):.3f} of those right after one over it; split so, at one "
        "length (as same_length() splits busy from quiet):"
    )
    if over_threshold and under:
        same_length(over_threshold, under)
    team = team_threads(quiet)

    def waited(p: dict[str, Any]) -> float:  # the team's two threads waiting for a CPU, ms
        return sum(float(p["threads"].get(name, [0, 0])[1]) for name in team) / 1e6

    by_excess = thirds(quiet, lambda p: float(p["over_ms"]))
    print(
        "    thirds by the pass over the reference: "
        + "; ".join(
            f"{over(t):+.2f} ms ({median([p['tokens'] for p in t]):.0f} tokens), the ingress's CPU "
            f"{median([p['cpu_ms']['ingress'] for p in t]):.3f} ms "
            f"({median([ingress_rate(p) for p in t]):.2f} us per ms of pass), the team waiting for a CPU "
            f"{statistics.mean(waited(p) for p in t):.2f} ms and "
            f"the CPUs idle {statistics.mean(10.0 * stat_ticks(p)[3] for p in t):.2f} (means)"
            for t in by_excess
        )
    )
    by_rate = thirds(quiet, ingress_rate)
    print(
        "    thirds by the ingress's CPU per ms of pass: "
        + "; ".join(
            f"{median([ingress_rate(p) for p in t]):.2f} us/ms, over the reference {over(t):+.2f} ms"
            for t in by_rate
        )
    )
    for low, part in length_bins(quiet).items():
        if len(part) >= 30:
            lowest, _, highest = thirds(part, ingress_rate)
            short, _, long = thirds(part, lambda p: float(p["over_ms"]))
            print(
                f"    {low}-{low + 4} tokens, {len(part)} passes: the highest rate's third "
                f"{over(highest):+.2f} ms over the reference, the lowest's {over(lowest):+.2f}; the longest "
                f"third's team waited {statistics.mean(waited(p) for p in long):.2f} ms for a CPU, the "
                f"shortest's {statistics.mean(waited(p) for p in short):.2f}"
            )


SLOW = 1.25  # a round whose loop took this many times its 25th percentile's CPU time ran slow


def machine_or_team(kept: list[dict[str, Any]]) -> None:
    """Is the machine slow for every process when a lone pass runs long? probe.py's fixed work,
    by its CPU clock, only in the rounds it ran unpreempted (probe.unpreempted). Its
    loop's CPU time (a few dozen us of the interpreter, no memory to speak of) and how often a
    round ran slow (its loop over SLOW x the 25th percentile of all its rounds): outside every pass, in the
    reference passes (the bare model, the stack idle) and in the wide lone passes; whether a slow
    round follows a slow one (spells); then, at one input length (5-token bins of 30 passes or
    more), the longest third of the lone passes against the shortest, and the third with the
    ingress's highest CPU per ms of pass against the lowest: each third's pass over the reference,
    the probe's loop and sum CPU (medians of the rounds) and its share of slow rounds; last, over
    all the lone passes, each against its length's median, how the pass's excess goes with its
    share of slow rounds."""
    median = statistics.median

    clean = probe.unpreempted
    everything = sorted(
        (r for p in kept for key in ("probe", "probe_after") for r in clean(p.get(key, []))),
        key=lambda r: r[0],
    )
    loops = sorted(r[1] for r in everything)
    slow_us = SLOW * loops[len(loops) // 4]
    refs = [p for p in kept if p.get("reference") and "probe" in p]
    wide = [p for p in kept if not p.get("reference") and p["wide"] and "probe" in p]

    def reading(rounds: list[list[float]]) -> str:
        if not rounds:
            return "no rounds"
        slow = sum(r[1] > slow_us for r in rounds) / len(rounds)
        return (
            f"loop CPU {median(r[1] for r in rounds):.1f} us, sum CPU {median(r[3] for r in rounds):.1f} us, "
            f"{slow:.2f} of {len(rounds)} rounds slow"
        )

    print(
        f"  the probe, unpreempted rounds (a slow one's loop over {slow_us:.1f} us): outside every pass "
        + reading([r for p in kept for r in clean(p.get("probe_after", []))])
        + "; in the reference passes "
        + reading([r for p in refs for r in clean(p["probe"])])
        + "; in the wide lone passes "
        + reading([r for p in wide for r in clean(p["probe"])])
    )
    after_slow, after_quick = probe.spells(everything, slow_us)
    print(f"    a slow round right after a slow one {after_slow:.2f}, after a quick one {after_quick:.2f}")

    def slow_share(part: list[dict[str, Any]]) -> float:
        rounds = [r for p in part for r in clean(p["probe"])]
        return sum(r[1] > slow_us for r in rounds) / max(1, len(rounds))

    for split, key in (
        ("the longest third against the shortest", lambda p: float(p["over_ms"])),
        ("the ingress's highest CPU per ms of pass against its lowest", ingress_rate),
    ):
        print(
            f"    at one length, {split}: the pass over the reference; "
            "the probe's loop CPU, sum CPU, share of slow rounds"
        )
        for low, part in length_bins(wide).items():
            if len(part) < 30:
                continue
            bottom, _, top = thirds(part, key)
            print(
                f"      {low}-{low + 4} tokens, {len(part)} passes: "
                + " against ".join(
                    f"{median([p['over_ms'] for p in t]):+.2f} ms; "
                    + reading([r for p in t for r in clean(p["probe"])])
                    for t in (top, bottom)
                )
            )
    spread: list[tuple[float, float]] = []  # the pass over its bin's median; its share of slow rounds
    for part in length_bins(wide).values():
        scored = [p for p in part if clean(p["probe"])]
        if len(scored) >= 10:
            mid = median(float(p["ms"]) for p in scored)
            spread += [(float(p["ms"]) - mid, slow_share([p])) for p in scored]
    if len(spread) >= 30:
        excess, share = zip(*spread, strict=True)
        print(
            f"    {len(spread)} wide lone passes, each against its length's median: its excess goes with its "
            f"share of slow rounds by r = {statistics.correlation(excess, share):.2f}"
        )


def same_length(busy: list[dict[str, Any]], quiet: list[dict[str, Any]]) -> None:
    """Busy against quiet passes of inputs of one length. A longer input's pass runs longer, so a
    Submit lands in it more often: the busy passes' inputs are the longer ones. Per 5-token bin
    with 5 passes or more of each: the busy passes' median over the quiet ones'; then, pooled over
    those bins, where each kind's pass spent its time (means, ms): the batcher's CPU and the
    others', the two CPUs idle, in the kernel, and taken by the host from the VM (steal) (/proc/stat,
    in ticks of 10 ms: a mean over hundreds of passes),
    the model's two busiest threads (the wide pass's team) on a CPU and waiting for one, and the
    interrupts the CPUs took (a count), where the run recorded them."""
    median, mean = statistics.median, statistics.mean
    print(
        f"  inputs: busy passes' median {median([p['tokens'] for p in busy]):.0f} tokens, quiet ones' "
        f"{median([p['tokens'] for p in quiet]):.0f}; at one length, busy over quiet (median of each):"
    )
    matched: list[tuple[list[dict[str, Any]], list[dict[str, Any]]]] = []  # (busy, quiet) per bin
    quiet_bins = length_bins(quiet)
    for low, b in length_bins(busy).items():
        q = quiet_bins.get(low, [])
        if len(b) >= 5 and len(q) >= 5:
            matched.append((b, q))
            over = median([p["ms"] for p in b]) - median([p["ms"] for p in q])
            print(f"    {low}-{low + 4} tokens: {len(b)} busy, {len(q)} quiet, {over:+.2f} ms")
    if not matched or "threads" not in busy[0]:
        return
    team = team_threads(busy + quiet)

    def thread(name: str, field: int) -> Callable[[dict[str, Any]], float]:
        return lambda p: float(p["threads"].get(name, [0, 0])[field]) / 1e6

    def ticks(field: int) -> Callable[[dict[str, Any]], float]:  # ms
        return lambda p: 10.0 * stat_ticks(p)[field]

    def interrupts(kind: str) -> Callable[[dict[str, Any]], float]:  # a count, over both CPUs
        return lambda p: float(sum(p["machine"].get(f"interrupts {kind}", [0])))

    reads: dict[str, Callable[[dict[str, Any]], float]] = {
        "the pass": lambda p: float(p["ms"]),
        "the batcher's CPU": lambda p: float(p["cpu_ms"]["batcher"]),
        "the others'": others,
    }
    recorded = set().union(*(p.get("machine", {}) for p in busy))
    if "stat cpu0" in recorded:  # user, nice, system, idle, iowait, irq, softirq, steal
        reads["the CPUs idle"] = ticks(3)
        reads["in the kernel"] = ticks(2)
        reads["taken by the host (steal)"] = ticks(7)
    for i, name in enumerate(team):
        reads[f"the team's thread {i + 1} on a CPU"] = thread(name, 0)
        reads[f"the team's thread {i + 1} waiting for one"] = thread(name, 1)
    for kind, label in (("LOC", "timer"), ("RES", "rescheduling"), ("CAL", "function call")):
        if f"interrupts {kind}" in recorded:
            reads[f"{label} interrupts (a count)"] = interrupts(kind)
    weights = [len(b) for b, _ in matched]  # the quiet passes weighed to the busy ones' lengths

    def weighed(read: Callable[[dict[str, Any]], float], side: int) -> float:
        means = [mean([read(p) for p in pair[side]]) for pair in matched]
        return sum(w * m for w, m in zip(weights, means, strict=True)) / sum(weights)

    print(
        "    those bins, means weighed to the busy passes' lengths (ms), busy against quiet: "
        + "; ".join(f"{k} {weighed(read, 0):.2f} against {weighed(read, 1):.2f}" for k, read in reads.items())
    )


if __name__ == "__main__":
    if sys.argv[1:2] == ["read"]:  # pass_cpu.py read OUT: the summary of a run's passes again
        raw = Path(sys.argv[2]).read_bytes()
        summarize(json.loads(gzip.decompress(raw) if sys.argv[2].endswith(".gz") else raw))
    else:
        main()
