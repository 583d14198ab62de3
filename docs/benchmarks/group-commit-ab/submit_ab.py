"""Single Submits, open loop at a fixed rate for 10 s, against a fresh local stack with no
batcher: achieved rate, accept latency, and CPU per job by process (the load generator
included). Run from a checkout of the commit to measure:

    PYTHONPATH=src:services:. .venv/bin/python docs/benchmarks/group-commit-ab/submit_ab.py RATE
"""

import json
import os
import re
import resource
import subprocess
import sys
import urllib.request

sys.path.insert(0, os.getcwd())
from bench import stack, suite

rate = int(sys.argv[1])


def mean_group(targets: stack.Targets) -> float | None:
    """Submits per group commit, from the ingress's /metrics (None before group commit existed)."""
    [port] = targets.metrics["ingress"]
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics").read().decode()
    found = dict(re.findall(r"^batchline_submit_group_jobs_(sum|count) (\S+)$", text, re.M))
    return round(float(found["sum"]) / float(found["count"]), 2) if found else None


with stack.start("local", suite.HOLD_ALL, batchers=0, envoy=False, metrics=True) as targets:
    processes = {name: targets.pids[name] for name in ("ingress", "rabbitmq", "redis")}
    before = {name: stack.cpu_seconds(pids) for name, pids in processes.items()}
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    command = [sys.executable, "-m", "bench", "--insecure", "--protoset", "envoy/batchline.pb"]
    command += ["--call", suite.SUBMIT, "-d", json.dumps(suite.SUBMIT_DATA), "--rps", str(rate), "-z", "10s"]
    answer = subprocess.run([*command, targets.ingress, "-O", "json"], capture_output=True, text=True)
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    report = json.loads(answer.stdout)
    jobs = report["statusCodeDistribution"].get("OK", 0)
    cpu = {n: (stack.cpu_seconds(p) - before[n]) for n, p in processes.items()}
    cpu["generator"] = used.ru_utime + used.ru_stime - children.ru_utime - children.ru_stime
    latency = {d["percentage"]: round(d["latency"] / 1e6, 1) for d in report["latencyDistribution"]}
    print(
        json.dumps(
            {
                "offered": rate,
                "ok": jobs,
                "ok_per_s": round(jobs / (report["total"] / 1e9)),
                "p50_ms": latency[50],
                "p99_ms": latency[99],
                "jobs_per_group": mean_group(targets),
                "cpu_us_per_job": {n: round(s * 1e6 / max(1, jobs)) for n, s in cpu.items()},
                "cpu_ms_per_job_all": round(sum(cpu.values()) * 1e3 / max(1, jobs), 3),
            }
        )
    )
