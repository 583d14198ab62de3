"""`make bench`: Batchline's load targets, measured with batchline-bench, written as a report.

Each measurement starts a fresh local stack (ingress, stream, batchers on the local RabbitMQ
and Redis, Envoy in front; a queue and key prefix of its own), warms it, runs the harness,
and tears it down. The simulated model costs nothing, so what is measured is the system.

    python -m bench.suite            # quick: every scenario once, short runs (~2 min)
    python -m bench.suite --full     # the documented numbers: 30 s runs, medians of 3 (10-18 min)

Writes docs/benchmarks/<name>.md, <name>.json (every report, per-request details left out)
and <name>-latency.png, <name>-protocols.png.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from bench import floor, machine, stack, strict_json
from bench.load import runner
from bench.load.options import Options

ROOT = Path(__file__).resolve().parent.parent
PROTOSET = ROOT / "envoy" / "batchline.pb"
SUBMIT = "batchline.v1.InferenceService.Submit"
SUBMIT_BATCH = "batchline.v1.InferenceService.SubmitBatch"
TEXTS = [
    "I loved this film, the acting was superb and the story kept me hooked until the very end",
    "terrible service, we waited an hour and the food was cold",
    "not bad at all",
    "The hotel was clean, the staff friendly, and breakfast was better than expected.",
    "worst purchase I have made this year; it broke after two days and support never answered",
    "great value",
]
SUBMIT_DATA = [{"text": f"{text} (review {{{{.RequestNumber}}}})"} for text in TEXTS]
BATCH_DATA = {"texts": [f"{TEXTS[i % len(TEXTS)]} #{i}" for i in range(64)]}
ZERO_COST = {"MODEL_BACKEND": "simulated", "SIM_FIXED_MS": "0", "SIM_PER_TOKEN_MS": "0"}
# With no batcher consuming, the ingress runs hold every job they accept.
HOLD_ALL = {**ZERO_COST, "QUEUE_MAX_LENGTH": "1000000", "MAX_INFLIGHT": "8192"}
# The ingress target runs the ingress as deployed by default, one process; the generator's
# calls go over 8 connections. Beside it the same load goes to one ingress process per core
# (INGRESS_PROCESSES, the kernel handing the connections out among them) and to the floor (one
# bare gRPC process).
INGRESS_PROCESSES = os.cpu_count() or 1
INGRESS_CONNECTIONS = 8
GENERATOR = "load generator"  # its row in each run's CPU accounting


@dataclass(frozen=True)
class Profile:
    name: str
    duration_s: float  # each target run
    saturation_s: float  # each closed-loop protocol run
    repeats: int
    sweep: tuple[int, ...]  # offered Submit rates for the latency curve
    sweep_s: float


# The pipeline target is >= 1,000 jobs/s done. It is offered 10% more, so that meeting it takes
# that capacity: done/s counts from the first submit to the last DONE seen, so at exactly
# 1,000/s offered it reads a little under (the last job's own latency is in the denominator),
# and above the pipeline's capacity it reads the capacity.
PIPELINE_TARGET_RPS = 1000
PIPELINE_OFFERED_RPS = 1100
INGRESS_RPS = 2000

QUICK = Profile("load-quick", 5, 4, 1, (500, 1000, 1500, 2000), 3)
FULL = Profile("load", 30, 10, 3, (250, 500, 1000, 1500, 2000, 2500), 10)
PROTOCOLS = [("grpc", "direct"), ("grpc", "envoy"), ("rest", "envoy"), ("grpc-web", "envoy")]


def say(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def command_line(options: Options, target: str) -> str:
    """The batchline-bench command that repeats a run against a running `target` (a placeholder:
    `<ingress>`, `<envoy>`, ...)."""
    parts = ["batchline-bench --insecure --protoset envoy/batchline.pb", f"--call {options.call}"]
    parts.append("-d '<texts>'" if options.data is not SUBMIT_DATA else "-d '<6 texts, numbered>'")
    if options.open_loop:
        parts.append(f"--rps {options.rps}")
    parts.append(f"-c {options.concurrency}")
    parts.append(f"-z {options.duration:g}s")
    if options.connections != 1:
        parts.append(f"--connections {options.connections}")
    if options.duration_stop != "close":
        parts.append(f"--duration-stop {options.duration_stop}")
    if options.protocol != "grpc":
        parts.append(f"--protocol {options.protocol}")
    if options.e2e:
        parts.append(("--e2e" if options.e2e == "watch" else "--e2e-poll") + " --stream-host <stream>")
    parts.append(target)
    return " ".join(parts)


def measure(options: Options, env: dict[str, str], batchers: int = 0, via: str = "direct") -> dict[str, Any]:
    """One harness run on a fresh stack; the ghz report without per-request details."""
    with stack.start("local", env, batchers=batchers) as targets:
        host = targets.ingress if via == "direct" else targets.edge
        run = replace(options, host=host, stream_host=targets.stream if via == "direct" else "")
        processes = env.get("INGRESS_PROCESSES")
        ingress = f"<ingress, INGRESS_PROCESSES={processes}>" if processes else "<ingress>"
        return run_counted(run, targets.pids, ingress if via == "direct" else "<envoy>")


def measure_floor(options: Options) -> dict[str, Any]:
    """The same run against a Submit that does no work (bench.floor): what gRPC and the load
    generator alone cost at that load on this machine, the floor under the ingress's numbers."""
    with floor.serving() as (host, pid):
        return run_counted(
            replace(options, host=host, name="floor"), {"server": [pid]}, "<python -m bench.floor>"
        )


def run_counted(options: Options, pids: dict[str, list[int]], target: str) -> dict[str, Any]:
    """Warm `options.host` for 1 s, then run `options`, counting each process's CPU (seconds, in
    the report's `batchline.cpuS`, the generator's under "load generator")."""
    warm = submit("warm", host=options.host, rps=200, duration=1.0, progress=False)
    runner.run(runner.make_plan(warm.validate(), PROTOSET.read_bytes()))
    cpu_before = {name: stack.cpu_seconds(ids) for name, ids in pids.items()}
    result = runner.run(runner.make_plan(options.validate(), PROTOSET.read_bytes()))
    cpu = {name: stack.cpu_seconds(ids) - cpu_before[name] for name, ids in pids.items()}
    cpu[GENERATOR] = result["batchline"]["generatorCpuS"]
    result.pop("details", None)
    result["batchline"]["command"] = command_line(options, target)
    result["batchline"]["cpuS"] = {name: round(seconds, 3) for name, seconds in cpu.items()}
    return result


def submit(name: str, host: str = "-", **flags: Any) -> Options:
    return Options(
        call=SUBMIT, protoset=str(PROTOSET), insecure=True, data=SUBMIT_DATA, duration_stop="wait", name=name,
        host=host, **flags,
    )  # fmt: skip


def pipeline(name: str, rps: int, duration: float, **flags: Any) -> Options:
    """The pipeline scenario's Submit: open loop at `rps`, each job watched to DONE over WatchJob."""
    return submit(name, rps=rps, duration=duration, concurrency=1000, e2e="watch", **flags)


def percentile(report: dict[str, Any], p: int) -> float:
    for entry in report["latencyDistribution"] or []:
        if entry["percentage"] == p:
            return float(entry["latency"]) / 1e6
    return float("nan")


def accepted(report: dict[str, Any]) -> float:
    return float(report["statusCodeDistribution"].get("OK", 0)) / max(1, int(report["count"]))


def run_all(profile: Profile) -> dict[str, Any]:
    results: dict[str, Any] = {
        "ingress": [], "ingress_processes": [], "floor": [], "batch": [], "pipeline": [], "protocols": [],
        "sweep": [],
    }  # fmt: skip
    steps = profile.repeats * (4 + 1 + len(PROTOCOLS)) + 2 * len(profile.sweep)
    step = 0

    def next_step(what: str) -> None:
        nonlocal step
        step += 1
        say(f"[{step}/{steps}] {what}")

    for repeat in range(profile.repeats):
        tag = f"run {repeat + 1}/{profile.repeats}"
        next_step(
            f"ingress: Submit at {INGRESS_RPS}/s open loop for {profile.duration_s:g}s, "
            f"native gRPC direct, one process ({tag})"
        )
        options = submit(
            "ingress-direct",
            rps=INGRESS_RPS,
            duration=profile.duration_s,
            concurrency=1000,
            connections=INGRESS_CONNECTIONS,
        )
        results["ingress"].append(measure(options, HOLD_ALL))
        next_step(f"ingress: the same load on {INGRESS_PROCESSES} processes ({tag})")
        several = {**HOLD_ALL, "INGRESS_PROCESSES": str(INGRESS_PROCESSES)}
        results["ingress_processes"].append(measure(replace(options, name="ingress-processes"), several))
        next_step(f"the floor: the same load against a Submit that does no work ({tag})")
        results["floor"].append(measure_floor(options))

        next_step(f"ingress: SubmitBatch of 64, 8 callers for {profile.duration_s:g}s ({tag})")
        options = replace(
            submit("batch-direct", duration=profile.duration_s, concurrency=8),
            call=SUBMIT_BATCH,
            data=BATCH_DATA,
        )
        results["batch"].append(measure(options, HOLD_ALL))

        next_step(
            f"pipeline: Submit at {PIPELINE_OFFERED_RPS}/s, each job watched to DONE, 2 batchers ({tag})"
        )
        options = pipeline("pipeline-direct", PIPELINE_OFFERED_RPS, profile.duration_s)
        results["pipeline"].append(measure(options, ZERO_COST, batchers=2))

        for protocol, via in PROTOCOLS:  # side by side, interleaved within each repeat
            next_step(f"saturation: {protocol} {via}, 50 callers for {profile.saturation_s:g}s ({tag})")
            options = submit(f"saturation-{protocol}-{via}", concurrency=50, duration=profile.saturation_s)
            results["protocols"].append(measure(replace(options, protocol=protocol), HOLD_ALL, via=via))

    for rate in profile.sweep:
        for protocol, via in (("grpc", "direct"), ("rest", "envoy")):
            next_step(f"latency curve: {protocol} {via} at {rate}/s for {profile.sweep_s:g}s")
            options = submit(f"sweep-{protocol}-{via}", rps=rate, duration=profile.sweep_s, concurrency=1000)
            results["sweep"].append(measure(replace(options, protocol=protocol), HOLD_ALL, via=via))
    return results


# --- the report --------------------------------------------------------------------------------


def median(values: list[float]) -> float:
    return float(statistics.median(values)) if values else float("nan")


def jobs_of(report: dict[str, Any]) -> float:
    """Jobs a run accepted (64 per SubmitBatch call)."""
    calls = report["statusCodeDistribution"].get("OK", 0)
    return float(calls * 64 if report["options"]["call"] == SUBMIT_BATCH else calls)


def cpu_per_job(reports: list[dict[str, Any]]) -> dict[str, float]:
    """CPU milliseconds each component spent per accepted job, median over the runs."""
    names = reports[0]["batchline"]["cpuS"] if reports else {}
    return {
        name: median([1000 * r["batchline"]["cpuS"][name] / max(1.0, jobs_of(r)) for r in reports])
        for name in names
    }


def open_loop(reports: list[dict[str, Any]]) -> dict[str, float]:
    """Medians over open-loop Submit runs at the ingress target's rate."""
    return {
        "offered_rps": INGRESS_RPS,
        "achieved_rps": median([r["count"] / (r["total"] / 1e9) for r in reports]),
        "accepted": median([accepted(r) for r in reports]),
        "p50_ms": median([percentile(r, 50) for r in reports]),
        "p99_ms": median([percentile(r, 99) for r in reports]),
        "send_lag_p99_ms": median([r["batchline"]["sendLagMs"]["p99"] for r in reports]),
    }


def summarize(results: dict[str, Any]) -> dict[str, Any]:
    ingress = results["ingress"]
    batch = results["batch"]
    pipeline = [r["batchline"]["e2e"] for r in results["pipeline"]]
    by_protocol = _by_protocol(results["protocols"])
    floor_runs = results.get("floor", [])  # reports from before the floor was measured have none
    several = results.get("ingress_processes", [])
    return {
        "ingress": open_loop(ingress),
        **({"ingress_processes": open_loop(several)} if several else {}),
        **({"floor": open_loop(floor_runs)} if floor_runs else {}),
        "batch": {
            "calls_rps": median([r["rps"] for r in batch]),
            "jobs_rps": median([r["rps"] * 64 * accepted(r) for r in batch]),
            "accepted": median([accepted(r) for r in batch]),
            "p99_ms": median([percentile(r, 99) for r in batch]),
        },
        "pipeline": {
            "offered_rps": PIPELINE_OFFERED_RPS,
            "target_rps": PIPELINE_TARGET_RPS,
            "accepted": median([float(e["accepted"]) for e in pipeline]),
            "done": median([float(e["done"]) for e in pipeline]),
            # Not finished even at the later look (reports from before it: not seen within -t).
            "lost": max((e.get("neverFinished", e["unfinished"]) for e in pipeline), default=0),
            "late": max((e.get("finishedLate", 0) for e in pipeline), default=0),
            "done_rps": median([e["doneRps"] for e in pipeline]),
            "rewatches": median([float(e.get("rewatches", 0)) for e in pipeline]),
            "e2e_p50_ms": median([e["latencyMs"].get("p50", float("nan")) for e in pipeline]),
            "e2e_p99_ms": median([e["latencyMs"].get("p99", float("nan")) for e in pipeline]),
            "queue_wait_p50_ms": median([e["queueWaitMs"].get("p50", float("nan")) for e in pipeline]),
            "mean_batch": median([e["batchSize"].get("mean", float("nan")) for e in pipeline]),
        },
        "cpu_ms_per_job": {
            f"ingress {INGRESS_RPS}/s": cpu_per_job(ingress),
            **(
                {f"ingress {INGRESS_RPS}/s, {INGRESS_PROCESSES} processes": cpu_per_job(several)}
                if several
                else {}
            ),
            **({f"the floor {INGRESS_RPS}/s": cpu_per_job(floor_runs)} if floor_runs else {}),
            "SubmitBatch": cpu_per_job(batch),
            f"pipeline {PIPELINE_OFFERED_RPS}/s e2e": cpu_per_job(results["pipeline"]),
            **{f"saturation {name}": cpu_per_job(reports) for name, reports in by_protocol.items()},
        },
        "protocols": protocols(results["protocols"]),
    }


def _by_protocol(reports: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """The saturation runs by protocol and path, each list in the order of the repeats."""
    by_protocol: dict[str, list[dict[str, Any]]] = {}
    for report in reports:
        by_protocol.setdefault(report["name"].removeprefix("saturation-"), []).append(report)
    return by_protocol


def protocols(reports: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each protocol's saturation runs summed up. Its share of native gRPC is taken side by
    side: each repeat's rate over native gRPC's in the same repeat, then the median, so a
    machine that slows between repeats does not move it."""
    by_protocol = _by_protocol(reports)
    native = by_protocol.get("grpc-direct", [])
    summary = {}
    for name, runs in by_protocol.items():
        ratios = [float(r["rps"]) / n["rps"] for r, n in zip(runs, native, strict=False) if n["rps"]]
        summary[name] = {
            "rps": median([r["rps"] for r in runs]),
            "vs_native": median(ratios),
            "vs_native_runs": ratios,
            "p50_ms": median([percentile(r, 50) for r in runs]),
            "p99_ms": median([percentile(r, 99) for r in runs]),
            "accepted": median([accepted(r) for r in runs]),
        }
    return summary


def conditions(summary: dict[str, Any]) -> dict[str, bool]:
    """Each condition of the targets, met or not, from the summary's medians: the ingress's is
    two, its latency (with every Submit accepted) and its rate. The ingress may send 1% under its
    schedule (a generator sharing two cores drifts); the pipeline must complete its target rate
    outright, having been offered more."""
    i, b, p = summary["ingress"], summary["batch"], summary["pipeline"]
    met = {
        "ingress latency": i["accepted"] == 1 and i["p99_ms"] <= 20,
        "ingress rate": i["achieved_rps"] >= 0.99 * i["offered_rps"],
        "batch": b["jobs_rps"] >= 10_000,
        "pipeline": p["done_rps"] >= p["target_rps"] and p["lost"] == 0,
    }
    for name in ("rest-envoy", "grpc-web-envoy"):
        if name in summary["protocols"]:
            met[name] = summary["protocols"][name]["vs_native"] >= 0.7
    return met


def verdicts(summary: dict[str, Any]) -> dict[str, bool]:
    """Each target of the issue, met or not (`conditions`, the ingress's two taken together)."""
    met = conditions(summary)
    return {"ingress": met.pop("ingress latency") and met.pop("ingress rate"), **met}


def _ratio(row: dict[str, Any]) -> str:
    """A protocol's rate against native gRPC's, with each repeat's when there were several."""
    runs = row.get("vs_native_runs", [])
    # One run has nothing to add, nor native gRPC's own row (100% in every repeat).
    each = f" ({', '.join(f'{r:.0%}' for r in runs)})" if len(runs) > 1 and set(runs) != {1.0} else ""
    return f"{row['vs_native']:.0%}{each}"


def _f(value: float, digits: int = 1) -> str:
    return "—" if value != value else f"{value:,.{digits}f}"


def markdown(profile: Profile, summary: dict[str, Any], results: dict[str, Any], meta: dict[str, Any]) -> str:
    i, b, p, protocols = summary["ingress"], summary["batch"], summary["pipeline"], summary["protocols"]

    ok = verdicts(summary)
    floor_run = summary.get("floor")  # none in reports from before the floor was measured
    floor_note = f" (the floor, no work: {_f(floor_run['p99_ms'])} ms)" if floor_run else ""
    several_run = summary.get("ingress_processes")
    processes = meta.get("ingress_processes", 1)
    several_note = f"; {processes} processes: p99 {_f(several_run['p99_ms'])} ms" if several_run else ""

    def verdict(met: bool) -> str:
        return "met" if met else "**missed**"

    lines = [
        f"# Load: ingress, pipeline and edge ({'quick' if profile.name.endswith('quick') else 'full'} run)",
        "",
        f"Measured with `batchline-bench` (ghz-compatible) by `{meta['command']}` on {meta['when']}: "
        f"{meta['machine']}; its CPUs shared by the load generator, the services, Envoy, RabbitMQ "
        "and Redis. "
        f"Medians of {profile.repeats} run(s); each run on a fresh stack after 1 s of warm-up; "
        "simulated zero-cost model. Open-loop runs count latency from each request's due time. "
        f"Raw reports (ghz JSON, per-request details left out): `{profile.name}.json`.",
        "",
        "## Targets",
        "",
        "| target | measured | |",
        "|---|---|---|",
        f"| ingress: 2,000 Submit/s for {profile.duration_s:g} s, 100% accepted, p99 ≤ 20 ms "
        f"(open loop, gRPC direct, one ingress process) | {_f(i['achieved_rps'], 0)}/s achieved, "
        f"{i['accepted']:.1%} accepted, p99 {_f(i['p99_ms'])} ms{several_note}{floor_note} "
        f"| {verdict(ok['ingress'])} |",
        f"| ingress: ≥ 10,000 jobs/s via SubmitBatch of 64 | {_f(b['jobs_rps'], 0)} jobs/s "
        f"({_f(b['calls_rps'], 0)} calls/s, {b['accepted']:.1%} accepted) | {verdict(ok['batch'])} |",
        f"| pipeline: ≥ {p['target_rps']:,} jobs/s submit → DONE seen by a watcher, none lost "
        f"| {_f(p['done_rps'], 0)} done/s of {p['offered_rps']:,} offered, {p['lost']} lost "
        f"| {verdict(ok['pipeline'])} |",
    ]
    for name in ("rest-envoy", "grpc-web-envoy"):
        if name in protocols:
            row = protocols[name]
            lines.append(
                f"| edge: {name.replace('-envoy', '')} through Envoy ≥ 70% of native gRPC Submit throughput "
                f"| {_ratio(row)} | {verdict(ok[name])} |"
            )
    lines += [
        "",
        "## Ingress: Submit at 2,000/s, open loop",
        "",
        "No batcher consumes, so the queue holds every job (bound raised to 1,000,000): the ingress alone,",
        f"one process as deployed by default, the generator's calls over {INGRESS_CONNECTIONS} connections.",
        f"Beside it, in each repeat, the same load against {processes} ingress processes on one port",
        f"(`INGRESS_PROCESSES={processes}`, one per core; the kernel hands the connections out among them),",
        "and against the floor: a Submit that does no work on one bare grpc.aio server process",
        "(`python -m bench.floor`), what gRPC and the load generator alone cost here. A floor p99 over",
        "20 ms means no single Python gRPC server process meets the target on this machine",
        "([`grpc-floor.md`](grpc-floor.md)).",
        "",
        "| server | achieved/s | accepted | p50 ms | p99 ms | send lag p99 ms |",
        "|---|---|---|---|---|---|",
    ]
    rows = (
        ("ingress, one process", i),
        (f"ingress, {processes} processes", several_run),
        ("the floor: no work", floor_run),
    )
    for name, row in rows:
        if row:
            lines.append(
                f"| {name} | {_f(row['achieved_rps'], 0)} | {row['accepted']:.2%} | {_f(row['p50_ms'])} "
                f"| {_f(row['p99_ms'])} | {_f(row['send_lag_p99_ms'])} |"
            )
    lines += [
        "",
        f"## Pipeline: Submit at {p['offered_rps']:,}/s, each job watched until DONE",
        "",
        "Two batchers, zero-cost simulated model; the watcher is WatchJob on the stream service. A watch",
        "the overloaded stream service sheds (gRPC core cancels calls past its pending-request limit)",
        "is re-opened after the last state seen, as the client does. A job whose end no watcher saw",
        "within `-t` is looked up again after the run for as long again: `finished after -t` counts",
        "those that had finished by then, `lost` those that had not (worst run of each). It is",
        "offered 10% more than the 1,000 jobs/s target: done/s (first submit to last DONE seen) then",
        "reads what the pipeline completes, up to the offered rate.",
        "",
        "| accepted | seen DONE | finished after -t | lost | re-opened watches | done/s | e2e p50 ms "
        "| e2e p99 ms | queue wait p50 ms | mean batch |",
        "|---|---|---|---|---|---|---|---|---|---|",
        f"| {p['accepted']:.0f} | {p['done']:.0f} | {p.get('late', 0)} | {p['lost']} "
        f"| {p.get('rewatches', 0):.0f} "
        f"| {_f(p['done_rps'], 0)} "
        f"| {_f(p['e2e_p50_ms'])} | {_f(p['e2e_p99_ms'])} | {_f(p['queue_wait_p50_ms'])} "
        f"| {_f(p['mean_batch'])} |",
        "",
        "## What the proxy costs: Submit at saturation, side by side",
        "",
        "50 callers back to back (ghz's closed loop) for each protocol in turn, within each repeat;",
        "\"vs native gRPC\" is the median of each repeat's ratio, every repeat's in brackets. The",
        "generator shares the cores, so what its client spends on a call is taken from the system:",
        "its gRPC client is a lean HTTP/2 one (`bench/load/h2.py`), its REST and grpc-web client a",
        "lean HTTP/1.1 one (`bench/load/http1.py`). The CPU columns split each Submit's cost",
        "between the system (services, Envoy, RabbitMQ, Redis) and the generator (medians over the",
        'repeats); "system CPU vs native" is native gRPC\'s system CPU per Submit over the',
        "protocol's: the protocols compared without either client's cost.",
        "",
        "| protocol | path | Submit/s | vs native gRPC | p50 ms | p99 ms | accepted | system CPU ms "
        "| generator CPU ms | system CPU vs native |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]

    def split_cpu(name: str) -> tuple[float, float]:
        """A protocol's CPU ms per Submit: the system's and the generator's."""
        spent = summary["cpu_ms_per_job"].get(f"saturation {name}", {})
        system = sum(ms for part, ms in spent.items() if part != GENERATOR) if spent else float("nan")
        return system, spent.get(GENERATOR, float("nan"))

    for name, row in protocols.items():
        protocol, _, via = name.rpartition("-")
        system, generator = split_cpu(name)
        share = split_cpu("grpc-direct")[0] / system
        lines.append(
            f"| {protocol} | {'direct' if via == 'direct' else 'through Envoy'} | {_f(row['rps'], 0)} "
            f"| {_ratio(row)} | {_f(row['p50_ms'])} | {_f(row['p99_ms'])} | {row['accepted']:.1%} "
            f"| {_f(system, 2)} | {_f(generator, 2)} | {'—' if share != share else f'{share:.0%}'} |"
        )
    lines += [
        "",
        f"![Submit throughput per protocol]({profile.name}-protocols.png)",
        "",
        "## Where the CPU goes",
        "",
        "CPU milliseconds each process spent per accepted job during the measured run (from /proc;",
        "the load generator's own processes included). The sum against the machine's "
        f"{meta['cpus']} cores bounds the rate.",
        "",
    ]
    cpu = summary["cpu_ms_per_job"]
    components = list(dict.fromkeys(name for row in cpu.values() for name in row))
    lines.append("| scenario | " + " | ".join(components) + " | total |")
    lines.append("|---|" + "---|" * (len(components) + 1))
    for scenario, row in cpu.items():
        cells = " | ".join(_f(row.get(c, float("nan")), 2) for c in components)
        lines.append(f"| {scenario} | {cells} | {_f(sum(row.values()), 2)} |")
    lines += [
        "",
        "## Latency against offered load",
        "",
        "| offered/s | protocol | achieved/s | p50 ms | p90 ms | p99 ms | send lag p99 ms |",
        "|---|---|---|---|---|---|---|",
    ]
    for report in results["sweep"]:
        lines.append(
            f"| {report['options']['rps']} | {report['name'].removeprefix('sweep-')} "
            f"| {_f(report['count'] / (report['total'] / 1e9), 0)} | {_f(percentile(report, 50))} "
            f"| {_f(percentile(report, 90))} | {_f(percentile(report, 99))} "
            f"| {_f(report['batchline']['sendLagMs']['p99'])} |"
        )
    lines += [
        "",
        f"![Submit latency against offered load]({profile.name}-latency.png)",
        "",
        "## Commands",
        "",
    ]
    seen = set()
    for group in ("ingress", "ingress_processes", "floor", "batch", "pipeline", "protocols", "sweep"):
        for report in results.get(group, []):
            command = report["batchline"]["command"]
            if command not in seen:
                seen.add(command)
                lines.append(f"- `{command}`")
    return "\n".join(lines) + "\n"


def plots(profile: Profile, summary: dict[str, Any], results: dict[str, Any], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(7, 4))
    names = list(summary["protocols"])
    values = [summary["protocols"][n]["rps"] for n in names]
    bars = axis.bar([n.replace("-", "\n", 1) for n in names], values, color="#4c78a8")
    for bar, name in zip(bars, names, strict=True):
        axis.annotate(
            f"{summary['protocols'][name]['vs_native']:.0%}",
            (bar.get_x() + bar.get_width() / 2, bar.get_height()),
            ha="center",
            va="bottom",
        )
    axis.set_ylabel("Submit/s at saturation (50 callers)")
    axis.set_title("Submit throughput per protocol (share of native gRPC)")
    figure.tight_layout()
    figure.savefig(out / f"{profile.name}-protocols.png", dpi=120)
    plt.close(figure)

    figure, axis = plt.subplots(figsize=(7, 4))
    for name, style in (("grpc-direct", "-"), ("rest-envoy", "--")):
        runs = [r for r in results["sweep"] if r["name"] == f"sweep-{name}"]
        rates = [r["options"]["rps"] for r in runs]
        for p, color in ((50, "#4c78a8"), (99, "#e45756")):
            axis.plot(
                rates, [percentile(r, p) for r in runs], style, color=color, marker="o", label=f"{name} p{p}"
            )
    axis.set_yscale("log")
    axis.set_xlabel("offered Submit/s (open loop)")
    axis.set_ylabel("latency from due time, ms")
    axis.set_title("Submit latency against offered load")
    axis.legend()
    figure.tight_layout()
    figure.savefig(out / f"{profile.name}-latency.png", dpi=120)
    plt.close(figure)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--full", action="store_true", help="30 s runs, medians of 3 (the documented numbers)"
    )
    parser.add_argument(
        "--out", type=Path, default=ROOT / "docs" / "benchmarks", help="where the report goes"
    )
    parser.add_argument(
        "--render",
        type=Path,
        metavar="JSON",
        help="rebuild a report (markdown, plots, summary) from its raw JSON instead of running",
    )
    args = parser.parse_args(argv)
    if args.render:
        render(args.render)
        return
    profile = FULL if args.full else QUICK
    started = time.time()
    results = run_all(profile)
    summary = summarize(results)
    meta = {
        "command": "python -m bench.suite" + (" --full" if args.full else ""),
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(started)),
        "cpus": os.cpu_count(),
        "ingress_processes": INGRESS_PROCESSES,
        "machine": machine.describe(),
        "python": platform.python_version(),
        "minutes": round((time.time() - started) / 60, 1),
    }
    write(args.out, profile, summary, results, meta)
    say(f"done in {meta['minutes']} min: {args.out / (profile.name + '.md')}")


def write(
    out: Path, profile: Profile, summary: dict[str, Any], results: dict[str, Any], meta: dict[str, Any]
) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{profile.name}.json").write_text(
        strict_json.dumps({"meta": meta, "summary": summary, "reports": results}, indent=1)
    )
    text = markdown(profile, summary, results, meta)
    (out / f"{profile.name}.md").write_text(text)
    plots(profile, summary, results, out)
    print(text)


def render(raw: Path) -> None:
    """A report again from its raw reports, summed up by this code: a run's numbers are kept,
    and a change to how they are summed up (the side-by-side ratio) reaches it."""
    data = json.loads(raw.read_text())
    profile = FULL if data["meta"]["command"].endswith("--full") else QUICK
    if raw.stem != profile.name:  # its markdown and plots are named after the profile
        raise SystemExit(f"--render takes a current report ({profile.name}.json), not {raw.name}")
    write(raw.parent, profile, summarize(data["reports"]), data["reports"], data["meta"])


if __name__ == "__main__":
    main()
