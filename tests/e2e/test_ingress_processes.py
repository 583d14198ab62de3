"""INGRESS_PROCESSES: several ingress processes on one port, as real subprocesses against the
real RabbitMQ and Redis. The calls spread by connection; the first process drains the others
with itself, and one that dies takes the ingress down whole."""

from __future__ import annotations

import os
import re
import signal
import socket
import time
import urllib.request
from pathlib import Path

import grpc

from batchline.lifecycle import wait_until_serving
from batchline.v1 import inference_pb2, inference_pb2_grpc
from bench.stack import children
from ingress.processes import helper_env
from tests.e2e.conftest import Service

CONNECTIONS = 16  # all on one of two processes by chance: 2 in 2^16


def two_free_ports() -> int:
    """A port p with p + 1 free too (the first process's metrics, and the second's)."""
    for _ in range(50):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = int(probe.getsockname()[1])
        try:
            with socket.socket() as next_one:
                next_one.bind(("127.0.0.1", port + 1))
        except OSError:
            continue
        return port
    raise RuntimeError("no two free ports in a row")


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"


def wait_gone(pids: list[int], timeout_s: float = 20) -> None:
    deadline = time.monotonic() + timeout_s
    while any(alive(p) for p in pids):
        assert time.monotonic() < deadline, f"still running: {[p for p in pids if alive(p)]}"
        time.sleep(0.1)


def accepted(metrics_port: int) -> float:
    page = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5).read().decode()
    found = re.findall(r'^batchline_submits_total\{outcome="accepted",rpc="Submit"\} (\S+)$', page, re.M)
    return float(found[0]) if found else 0.0


def start(services: list[Service], env: dict[str, str], processes: int) -> tuple[Service, str, list[int]]:
    ingress = Service("ingress", {**env, "INGRESS_PROCESSES": str(processes)})
    services.append(ingress)
    target = f"127.0.0.1:{ingress.port()}"
    ingress.wait_log("ingress processes started")
    helpers = children(ingress.process.pid)
    assert len(helpers) == processes - 1
    deadline = time.monotonic() + 60
    while sum("ingress listening" in e.get("msg", "") for e in ingress.events()) < processes:
        assert time.monotonic() < deadline and ingress.process.poll() is None, "\n".join(ingress.lines[-20:])
        time.sleep(0.1)
    wait_until_serving(target)
    return ingress, target, helpers


def test_extra_processes_listen_beside_the_first_with_their_own_metrics() -> None:
    env = helper_env({"A": "1", "INGRESS_PORT": "0", "METRICS_PORT": "9101"}, 50061, 2, 9101)
    assert env == {
        "A": "1",
        "INGRESS_PORT": "50061",
        "INGRESS_PROCESSES": "1",
        "INGRESS_REUSE_PORT": "1",
        "METRICS_PORT": "9103",
        "INGRESS_PARENT_PID": str(os.getpid()),
    }
    assert helper_env({"METRICS_PORT": "0"}, 50061, 1, 0)["METRICS_PORT"] == "0"


def test_two_processes_share_the_port_each_serves_calls_and_sigterm_drains_both(
    services: list[Service], service_env: dict[str, str]
) -> None:
    metrics_port = two_free_ports()
    ingress, target, helpers = start(services, {**service_env, "METRICS_PORT": str(metrics_port)}, 2)
    channels = [  # each its own connection: the kernel gives each to one of the processes
        grpc.insecure_channel(target, options=[("grpc.use_local_subchannel_pool", 1)])
        for _ in range(CONNECTIONS)
    ]
    try:
        for channel in channels:
            answer = inference_pb2_grpc.InferenceServiceStub(channel).Submit(
                inference_pb2.SubmitRequest(text="the staff were kind"), timeout=10
            )
            assert answer.job_id
    finally:
        for channel in channels:
            channel.close()
    each = [accepted(metrics_port), accepted(metrics_port + 1)]
    assert sum(each) == CONNECTIONS and all(n > 0 for n in each), each

    assert ingress.stop() == 0
    wait_gone(helpers)
    assert sum("ingress stopped" in e.get("msg", "") for e in ingress.events()) == 2


def test_a_process_that_dies_stops_the_ingress_whole(
    services: list[Service], service_env: dict[str, str]
) -> None:
    ingress, _, [helper] = start(services, service_env, 2)
    os.kill(helper, signal.SIGKILL)
    assert ingress.process.wait(30) != 0
    assert ingress.wait_log("stopping the ingress")["level"] == "error"


def test_the_others_stop_when_the_first_is_killed(
    services: list[Service], service_env: dict[str, str]
) -> None:
    ingress, _, helpers = start(services, service_env, 3)
    os.kill(ingress.process.pid, signal.SIGKILL)  # the first process only, not its process group
    wait_gone(helpers)
