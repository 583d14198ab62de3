"""Overload and soak, measured on a fresh local stack with batchline-bench driving the load.

    python -m bench.reliability overload            # 5x capacity for 60 s, then recovery
    python -m bench.reliability soak                # 50% capacity for 10 min
    python -m bench.reliability overload --seconds 10 --out /tmp/x   # the short versions

The batcher runs the simulated model with a real cost, so capacity is small and known: it is
measured first (a burst of jobs, drained), and the load is set from it. While the load runs,
every service's resident memory, the queue depth and the job keys in Redis are sampled each
second. Writes docs/benchmarks/<overload|soak>.{md,json}.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import redis
from prometheus_client.parser import text_string_to_metric_families

from batchline.v1 import inference_pb2, inference_pb2_grpc
from bench import stack, strict_json
from bench.load import runner
from bench.suite import PROTOSET, ROOT, say, submit

COST = {"MODEL_BACKEND": "simulated", "SIM_FIXED_MS": "20", "SIM_PER_TOKEN_MS": "0.5"}
QUEUE_BOUND = 2000
TASK_SCRAPES = 5  # a sample's asyncio task counts: the most of this many scrapes across its second
# The overload run's model is twice as slow per token, so 5x the pipeline's capacity (about 300
# calls/s) stays inside what one ingress process answers on a 2-core machine it shares with the
# load generator, RabbitMQ, Redis and the other services (about 650 calls/s, measured): the run
# overloads the pipeline, not the ingress's gRPC server. Past that rate gRPC's core sheds calls
# itself (CANCELLED) before the service sees them; more ingress replicas are the answer there.
OVERLOAD_COST = {**COST, "SIM_PER_TOKEN_MS": "1.0"}


def rss_mb(pids: list[int]) -> float:
    """Resident memory of the processes, MiB (Linux /proc)."""
    total = 0.0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) / 1024
        except OSError:
            continue
    return total


def stats(target: str) -> inference_pb2.GetStatsResponse:
    with grpc.insecure_channel(target) as channel:
        reply: inference_pb2.GetStatsResponse = inference_pb2_grpc.InferenceServiceStub(channel).GetStats(
            inference_pb2.GetStatsRequest(), timeout=10
        )
        return reply


@dataclass
class Sampler:
    """Each second: RSS per service, queue depth, job keys in Redis; with the services' /metrics
    (stack.start(metrics=True)), their open asyncio tasks (the most of TASK_SCRAPES across the
    second) and the stream's open watchers."""

    targets: stack.Targets
    key_pattern: str
    samples: list[dict[str, Any]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._redis = redis.Redis.from_url(os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"))

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        started = time.monotonic()
        while not self._stop.is_set():
            sample: dict[str, Any] = {"t": round(time.monotonic() - started, 1)}
            for name in ("ingress", "stream", "batcher", "envoy"):
                sample[f"rss_{name}_mb"] = round(rss_mb(self.targets.pids.get(name, [])), 1)
            # Tasks first: the GetStats call below would be one of the ingress's while it ran.
            # A second's count is the most of TASK_SCRAPES across it: a Submit is in flight for
            # a few ms, and one scrape a second at 68/s missed every one of them for 20 s.
            for tick in range(TASK_SCRAPES):
                for name, ports in self.targets.metrics.items():
                    tasks = sum(scrape(port, "batchline_event_loop_tasks") for port in ports)
                    sample[f"tasks_{name}"] = max(sample.get(f"tasks_{name}", 0), tasks)
                if tick < TASK_SCRAPES - 1:
                    time.sleep(1.0 / TASK_SCRAPES)
            if (stream_ports := self.targets.metrics.get("stream")) is not None:
                sample["watchers"] = sum(scrape(port, "batchline_watchers") for port in stream_ports)
            try:
                sample["queue_depth"] = stats(self.targets.ingress).queue_depth
            except grpc.RpcError:
                sample["queue_depth"] = None
            sample["job_keys"] = sum(1 for _ in self._redis.scan_iter(match=self.key_pattern, count=1000))
            self.samples.append(sample)
            self._stop.wait(1.0 / TASK_SCRAPES)

    def peak(self, key: str) -> float:
        return max((s[key] for s in self.samples if s.get(key) is not None), default=0.0)


def scrape(port: int, metric: str) -> float:
    """One gauge from a service's /metrics."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as reply:
        text = reply.read().decode()
    for family in text_string_to_metric_families(text):
        if family.name == metric:
            return float(sum(sample.value for sample in family.samples))
    raise KeyError(f"{metric} is not exported on :{port}")


def capacity(target: str, jobs: int = 600) -> float:
    """Jobs per second the batchers drain: a burst submitted at once, timed from the first
    submit (batchers start while the rest is still arriving) until all are computed."""
    before = stats(target).jobs
    started = time.monotonic()
    with grpc.insecure_channel(target) as channel:
        stub = inference_pb2_grpc.InferenceServiceStub(channel)
        for start in range(0, jobs, 200):
            texts = [f"capacity probe {i}: a fine and ordinary review" for i in range(start, start + 200)]
            stub.SubmitBatch(inference_pb2.SubmitBatchRequest(texts=texts), timeout=30)
    while stats(target).jobs - before < jobs:
        time.sleep(0.1)
    return jobs / (time.monotonic() - started)


def load(
    host: str, rate: int, seconds: float, e2e: str = "", stream: str = "", name: str = ""
) -> dict[str, Any]:
    options = submit(
        name, host=host, rps=rate, duration=seconds, concurrency=5000, e2e=e2e, stream_host=stream
    )
    report = runner.run(runner.make_plan(options.validate(), PROTOSET.read_bytes()))
    report.pop("details", None)
    return report


def wait_drained(target: str, timeout_s: float) -> float:
    started = time.monotonic()
    while stats(target).queue_depth > 0 and time.monotonic() - started < timeout_s:
        time.sleep(0.2)
    return time.monotonic() - started


def overload(seconds: float, queue_bound: int = QUEUE_BOUND) -> dict[str, Any]:
    env = {**OVERLOAD_COST, "QUEUE_MAX_LENGTH": str(queue_bound), "JOB_TTL_S": "600"}
    with stack.start("local", env, batchers=1, envoy=False) as targets:
        pattern = targets.key_prefix + "job:*"
        probe = min(600, queue_bound - 100)  # a burst that fits the bound
        say(f"measuring capacity (a burst of {probe} jobs, drained)")
        jobs_per_s = capacity(targets.ingress, jobs=probe)
        offered = int(5 * jobs_per_s)
        say(f"capacity {jobs_per_s:.0f} jobs/s; offering {offered}/s (5x) for {seconds:g}s")
        done_before = stats(targets.ingress).finished.get("JOB_STATUS_DONE", 0)
        with Sampler(targets, pattern) as sampler:
            flood = load(targets.ingress, offered, seconds, name="overload")
            say("overload over; waiting for the queue to drain")
            drain_s = wait_drained(targets.ingress, 300)
            half = int(jobs_per_s / 2)
            say(f"after: {half}/s for 10 s, every job watched to DONE")
            after = load(targets.ingress, half, 10, e2e="watch", stream=targets.stream, name="recovered")
        final = stats(targets.ingress)
    accepted = flood["statusCodeDistribution"].get("OK", 0)
    done = final.finished.get("JOB_STATUS_DONE", 0) - done_before
    return {
        "capacity_jobs_per_s": jobs_per_s,
        "offered_per_s": offered,
        "seconds": seconds,
        "queue_bound": queue_bound,
        "sent": flood["count"],
        "accepted": accepted,
        "refused_resource_exhausted": flood["statusCodeDistribution"].get("ResourceExhausted", 0),
        "other_errors": {
            k: v for k, v in flood["statusCodeDistribution"].items() if k not in ("OK", "ResourceExhausted")
        },
        "accept_ms": flood["batchline"]["acceptMs"],
        "refuse_ms": flood["batchline"]["errorMs"],
        "send_lag_p99_ms": flood["batchline"]["sendLagMs"].get("p99"),
        "queue_depth_peak": sampler.peak("queue_depth"),
        "drain_s": drain_s,
        "after": after["batchline"]["e2e"],
        "accepted_total": accepted + after["batchline"]["e2e"]["accepted"],
        "done_total": done,
        "samples": sampler.samples,
        "flood": flood,
    }


def soak(seconds: float, ttl_s: int = 30) -> dict[str, Any]:
    env = {**COST, "QUEUE_MAX_LENGTH": str(QUEUE_BOUND), "JOB_TTL_S": str(ttl_s)}
    with stack.start("local", env, batchers=1, envoy=False, metrics=True) as targets:
        pattern = targets.key_prefix + "job:*"
        say("measuring capacity (a burst of 600 jobs, drained)")
        jobs_per_s = capacity(targets.ingress)
        rate = int(jobs_per_s / 2)
        say(f"capacity {jobs_per_s:.0f} jobs/s; soaking at {rate}/s for {seconds:g}s, every job watched")
        time.sleep(ttl_s + 1)  # the probe's keys expire: the key count starts from the soak
        with Sampler(targets, pattern) as sampler:
            time.sleep(1.5)  # idle samples first: the baseline of tasks and watchers
            report = load(targets.ingress, rate, seconds, e2e="watch", stream=targets.stream, name="soak")
            time.sleep(3)  # and idle again after: what the load left behind
    return {
        "capacity_jobs_per_s": jobs_per_s,
        "rate_per_s": rate,
        "seconds": seconds,
        "job_ttl_s": ttl_s,
        "e2e": report["batchline"]["e2e"],
        "status": report["statusCodeDistribution"],
        "samples": sampler.samples,
    }


def growth(samples: list[dict[str, Any]], key: str) -> float:
    """Last-third median over first-third median of a sampled quantity (1.0 = flat)."""
    values = [s[key] for s in samples if s.get(key) is not None]
    if len(values) < 6:
        return float("nan")
    third = len(values) // 3
    first, last = statistics.median(values[:third]), statistics.median(values[-third:])
    return last / first if first else float("nan")


def write(kind: str, result: dict[str, Any], out: Path, command: str) -> str:
    samples = result["samples"]
    rows = []
    for name in ("ingress", "stream", "batcher"):
        key = f"rss_{name}_mb"
        values = [s[key] for s in samples]
        if values and values[0]:
            rows.append(
                f"| {name} | {values[0]:.0f} | {max(values):.0f} | {values[-1]:.0f} "
                f"| {growth(samples, key):.2f} |"
            )
    memory = [
        "| service | RSS start MiB | peak | end | last third / first third |",
        "|---|---|---|---|---|",
        *rows,
    ]
    lines = [
        f"# {kind.title()}",
        "",
        f"`{command}` — {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}.",
        "",
    ]
    if kind == "overload":
        r = result
        after = r["after"]
        lines += [
            f"Capacity measured first: **{r['capacity_jobs_per_s']:.0f} jobs/s** "
            "(one batcher, simulated model at "
            f"{OVERLOAD_COST['SIM_FIXED_MS']} ms + {OVERLOAD_COST['SIM_PER_TOKEN_MS']} ms per token). Then "
            f"**{r['offered_per_s']}/s offered for {r['seconds']:g} s** (5x), open loop, native gRPC; "
            "queue bound "
            f"{r['queue_bound']}.",
            "",
            "| sent | accepted | refused RESOURCE_EXHAUSTED | other errors | accept p99 ms | refusal p50 ms "
            "| refusal p99 ms | queue depth peak | drained after s |",
            "|---|---|---|---|---|---|---|---|---|",
            f"| {r['sent']} | {r['accepted']} | {r['refused_resource_exhausted']} | {r['other_errors'] or 0} "
            f"| {r['accept_ms'].get('p99', 0):.1f} | {r['refuse_ms'].get('p50', 0):.1f} "
            f"| {r['refuse_ms'].get('p99', 0):.1f} | {r['queue_depth_peak']:.0f} | {r['drain_s']:.1f} |",
            "",
            "Latencies count from each request's due time.",
            "",
            f"After the flood, {int(r['capacity_jobs_per_s'] / 2)}/s for 10 s with every job watched: "
            f"{after['done']} DONE of {after['accepted']} accepted, end-to-end p50 "
            f"{after['latencyMs'].get('p50', 0):.0f} ms, p99 {after['latencyMs'].get('p99', 0):.0f} ms.",
            "",
            f"Jobs accepted in all: {r['accepted_total']}; DONE: {r['done_total']}; "
            f"**lost: {r['accepted_total'] - r['done_total']}**.",
            "",
        ]
    else:
        r = result
        e2e = r["e2e"]
        keys = [s["job_keys"] for s in samples]
        lines += [
            f"Capacity measured first: **{r['capacity_jobs_per_s']:.0f} jobs/s**; "
            f"then **{r['rate_per_s']}/s for "
            f"{r['seconds']:g} s** (50%), every job watched to its end; job records expire after "
            f"{r['job_ttl_s']} s.",
            "",
            f"{e2e['done']} DONE of {e2e['accepted']} accepted, {e2e['unfinished']} unfinished, "
            f"end-to-end p50 {e2e['latencyMs'].get('p50', 0):.0f} ms, "
            f"p99 {e2e['latencyMs'].get('p99', 0):.0f} ms. "
            f"Job keys in Redis: peak {max(keys, default=0)}, a plateau at about rate x TTL "
            f"= {r['rate_per_s'] * r['job_ttl_s']} "
            f"(last third / first third {growth(samples, 'job_keys'):.2f}).",
            "",
            "## Tasks and watchers",
            "",
            "Sampled from each service's /metrics: idle before the load, the peak under it, idle "
            "again 3 s after it ended. A leak shows as an end above the start.",
            "",
            "| gauge | idle before | peak | idle after |",
            "|---|---|---|---|",
            *(
                f"| {key.replace('tasks_', 'asyncio tasks, ')} | {samples[0][key]:.0f} | "
                f"{max(x[key] for x in samples):.0f} | {samples[-1][key]:.0f} |"
                for key in ("tasks_ingress", "tasks_stream", "tasks_batcher", "watchers")
                if key in samples[0]
            ),
            "",
        ]
    lines += ["## Memory", "", *memory, "", f"Samples each second: `{kind}.json`.", ""]
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{kind}.json").write_text(strict_json.dumps(result, indent=1, default=str))
    text = "\n".join(lines)
    (out / f"{kind}.md").write_text(text)
    return text


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("kind", choices=["overload", "soak"])
    parser.add_argument("--seconds", type=float, help="load duration (overload 60, soak 600)")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks")
    args = parser.parse_args(argv)
    seconds = args.seconds or (60.0 if args.kind == "overload" else 600.0)
    result = overload(seconds) if args.kind == "overload" else soak(seconds)
    command = "python -m bench.reliability " + " ".join(argv if argv is not None else sys.argv[1:])
    print(write(args.kind, result, args.out, command))


if __name__ == "__main__":
    main()
