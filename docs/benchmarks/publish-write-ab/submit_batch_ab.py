"""SubmitBatch of 64 from 8 callers, closed loop, 10 s, against a fresh local stack with no
batcher: jobs/s and CPU per job by process. Run from a checkout of the commit to measure:

    PYTHONPATH=src:services:. .venv/bin/python docs/benchmarks/publish-write-ab/submit_batch_ab.py
"""

import json
import os
import subprocess
import sys

sys.path.insert(0, os.getcwd())
from bench import stack, suite

with stack.start("local", suite.HOLD_ALL, batchers=0, envoy=False) as targets:
    processes = {name: targets.pids[name] for name in ("ingress", "rabbitmq", "redis")}
    before = {name: stack.cpu_seconds(pids) for name, pids in processes.items()}
    command = [sys.executable, "-m", "bench", "--insecure", "--protoset", "envoy/batchline.pb"]
    command += ["--call", suite.SUBMIT_BATCH, "-d", json.dumps(suite.BATCH_DATA), "-c", "8", "-z", "10s"]
    answer = subprocess.run([*command, targets.ingress, "-O", "json"], capture_output=True, text=True)
    report = json.loads(answer.stdout)
    jobs = report["count"] * 64
    cpu = {n: round((stack.cpu_seconds(p) - before[n]) * 1e6 / jobs, 1) for n, p in processes.items()}
    rate = round(jobs / (report["total"] / 1e9))
    print(json.dumps({"ok": report["statusCodeDistribution"], "jobs_per_s": rate, "cpu_us_per_job": cpu}))
