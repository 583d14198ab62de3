"""batchline-bench against the real thing: ingress, stream and a batcher on the local RabbitMQ
and Redis (a queue and key prefix of their own), Envoy in front; the harness as a user runs it.
Small, bounded loads to 127.0.0.1 only."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
import pytest

from batchline import codec
from batchline.v1 import inference_pb2
from bench import stack
from tests.conftest import ROOT
from tests.helpers import free_port

PROTOSET = str(ROOT / "envoy/batchline.pb")
SUBMIT = "batchline.v1.InferenceService.Submit"
SAMPLE = json.loads((ROOT / "tests/data/ghz-report-sample.json").read_text())


@pytest.fixture(scope="module")
def targets() -> Iterator[stack.Targets]:
    env = {"MODEL_BACKEND": "simulated", "SIM_FIXED_MS": "2", "SIM_PER_TOKEN_MS": "0.05"}
    with stack.start("local", env, batchers=1) as started:
        yield started


def bench(*args: str, timeout: float = 90) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bench", "--insecure", "--no-progress", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        check=False,
    )


def report_of(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert done.returncode == 0, done.stderr
    parsed: dict[str, Any] = json.loads(done.stdout)
    return parsed


@pytest.mark.timeout(180)
@pytest.mark.parametrize(
    ("protocol", "via"), [("grpc", "ingress"), ("grpc", "edge"), ("rest", "edge"), ("grpc-web", "edge")]
)
def test_open_loop_end_to_end_over_each_protocol(targets: stack.Targets, protocol: str, via: str) -> None:
    host = targets.ingress if via == "ingress" else targets.edge
    extra = ["--stream-host", targets.stream] if via == "ingress" else []
    data = (
        '[{"text": "I loved it, review {{.RequestNumber}}"}, {"text": "terrible, review {{.RequestNumber}}"}]'
    )
    done = bench(
        "--protoset", PROTOSET, "--call", SUBMIT, "-d", data, "--rps", "50", "-n", "60", "--e2e",
        "--protocol", protocol, *extra, "-O", "json", host,
    )  # fmt: skip
    report = report_of(done)
    assert report["count"] == 60 and report["statusCodeDistribution"] == {"OK": 60}
    assert report["endReason"] == "normal" and len(report["details"]) == 60
    assert [d["percentage"] for d in report["latencyDistribution"]] == [10, 25, 50, 75, 90, 95, 99]
    assert len(report["histogram"]) == 11 and set(report) - {"batchline"} == set(SAMPLE) - {"name", "tags"}
    e2e = report["batchline"]["e2e"]
    assert (e2e["accepted"], e2e["done"], e2e["unfinished"]) == (60, 60, 0)  # none lost
    assert e2e["latencyMs"]["p50"] >= report["batchline"]["acceptMs"]["p50"]  # DONE comes after accept
    assert e2e["batchSize"]["mean"] >= 1 and e2e["inferenceMs"]["p50"] > 0
    assert report["batchline"]["sendLagMs"]["p99"] < 1000  # the schedule was roughly kept


@pytest.mark.timeout(120)
def test_reflection_closed_loop_and_the_summary(targets: stack.Targets) -> None:
    """No --proto or --protoset: the schema comes from server reflection, as with ghz."""
    call = "batchline.v1.InferenceService/Submit"
    done = bench("--call", call, "-d", '{"text": "fine"}', "-n", "40", "-c", "5", targets.ingress)
    assert done.returncode == 0, done.stderr
    assert "Summary:" in done.stdout and "Count:\t40" in done.stdout
    assert "[OK]\t40 responses" in done.stdout and "Latency distribution:" in done.stdout


@pytest.mark.timeout(120)
def test_bad_requests_are_counted_with_their_status_through_envoy(
    targets: stack.Targets, tmp_path: Path
) -> None:
    config = tmp_path / "ghz.json"
    config.write_text(json.dumps({"call": SUBMIT, "protoset": PROTOSET, "total": 12, "concurrency": 3,
                                  "data": {"text": "   "}, "host": targets.edge}))  # fmt: skip
    report = report_of(bench("--config", str(config), "--protocol", "rest", "-O", "json"))
    assert report["statusCodeDistribution"] == {"InvalidArgument": 12}
    [error] = report["errorDistribution"]
    assert error.startswith("rpc error: code = InvalidArgument desc = text:")
    assert report["latencyDistribution"] is None  # ghz leaves errors out of the latencies...
    counted = report_of(
        bench("--config", str(config), "--protocol", "grpc-web", "--count-errors", "-O", "json")
    )
    assert counted["statusCodeDistribution"] == {"InvalidArgument": 12}
    assert counted["latencyDistribution"] is not None  # ...unless --count-errors
    direct = report_of(bench("--config", str(config), "-O", "json", targets.ingress))
    assert direct["statusCodeDistribution"] == {"InvalidArgument": 12}
    assert list(direct["errorDistribution"]) == [error]  # grpc-message decoded as Envoy decodes it


@pytest.mark.timeout(60)
def test_setup_mistakes_exit_2_with_the_reason(targets: stack.Targets) -> None:
    done = bench("--protoset", PROTOSET, "--call", SUBMIT, "-d", '{"txt": "x"}', targets.ingress)
    assert done.returncode == 2 and 'has no field named "txt"' in done.stderr
    done = bench("--protoset", PROTOSET, "--call", SUBMIT, "-d", "{}", "--e2e", "-O", "xml", targets.ingress)
    assert done.returncode == 2 and "'xml' is not one of" in done.stderr


def slow_submit(request: bytes, context: grpc.ServicerContext) -> bytes:
    time.sleep(0.1)
    return inference_pb2.SubmitResponse(job_id="x").SerializeToString()


@pytest.mark.timeout(60)
def test_open_loop_latency_counts_from_the_due_time(tmp_path: Path) -> None:
    """Invariant 10: due one per 50 ms, but `-c 1` lets one call (100 ms) run at a time, so
    each request waits behind the ones before it. Measured from its send, every call would
    read 100 ms (coordinated omission); measured from its due time, the wait shows."""
    port = free_port()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    handler = grpc.method_handlers_generic_handler(
        "batchline.v1.InferenceService", {"Submit": grpc.unary_unary_rpc_method_handler(slow_submit)}
    )
    server.add_generic_rpc_handlers((handler,))
    server.add_insecure_port(f"127.0.0.1:{port}")
    server.start()
    try:
        args = ["--protoset", PROTOSET, "--call", SUBMIT, "-d", '{"text": "x"}', "--rps", "20", "-n", "20"]
        report = report_of(bench(*args, "-c", "1", "-O", "json", f"127.0.0.1:{port}"))
    finally:
        server.stop(None)
    latencies = sorted(d["latency"] / 1e9 for d in report["details"])
    # The last is due at 19 x 0.05 s and answered at about 20 x 0.1 s: about 1.05 s late.
    assert latencies[0] < 0.3
    assert latencies[-1] > 0.8
    assert report["batchline"]["sendLagMs"]["p99"] > 500  # the wait was the client's, and it says so


def test_a_service_that_exits_at_start_up_fails_the_stack_at_once() -> None:
    """A batcher gets minutes to warm its model, so one that dies must not be waited for."""
    env = {"MODEL_BACKEND": "simulated", "PRECISION": "fp64"}  # the batcher refuses the setting
    failed = pytest.raises(RuntimeError, match=r"the batcher exited with \d+ before SERVING")
    with failed, stack.start("local", env, batchers=1, envoy=False):
        pass


@pytest.mark.timeout(90)
def test_the_floor_answers_submit_as_the_ingress_does_and_is_measured_as_the_ingress_is() -> None:
    """bench.floor: a Submit with no work behind it, shaped as the ingress's answer; the suite's
    floor run measures it with the ingress target's options and counts its CPU."""
    from bench import floor, suite

    with floor.serving() as (host, pid):
        with grpc.insecure_channel(host) as channel:
            submit = channel.unary_unary(
                "/batchline.v1.InferenceService/Submit",
                request_serializer=inference_pb2.SubmitRequest.SerializeToString,
                response_deserializer=inference_pb2.SubmitResponse.FromString,
            )
            answer = submit(inference_pb2.SubmitRequest(text="I loved it"), timeout=5)
            get = channel.unary_unary("/batchline.v1.InferenceService/GetJob", None, None)
            with pytest.raises(grpc.RpcError) as refused:
                get(b"", timeout=5)
        assert refused.value.code() == grpc.StatusCode.UNIMPLEMENTED  # the floor serves Submit only
    assert answer.status == codec.QUEUED
    assert answer.watch_url == f"/v1/jobs/{answer.job_id}:watch" and len(answer.job_id) == 36
    with pytest.raises(ProcessLookupError):  # the context stopped its process
        os.kill(pid, 0)

    report = suite.measure_floor(suite.submit("ingress-direct", rps=200, duration=1.0, progress=False))
    assert report["name"] == "floor" and report["count"] == 200
    assert report["statusCodeDistribution"] == {"OK": 200}
    assert report["batchline"]["cpuS"]["server"] > 0
    assert report["batchline"]["command"].endswith("<python -m bench.floor>")


@pytest.mark.timeout(180)
def test_a_job_not_seen_done_within_the_timeout_is_looked_up_again_late_or_never() -> None:
    """-t 2 s against one 3 s pass at a time: the first job ends at ~3 s, after its watch gave up
    but within the look after the run (2 s more); the second at ~6 s, after both. One finished
    late, one never (as far as the run could tell): only the second counts against the system."""
    env = {
        "MODEL_BACKEND": "simulated",
        "SIM_FIXED_MS": "3000",
        "SIM_PER_TOKEN_MS": "0",
        "MAX_BATCH_SIZE": "1",
        "MAX_WAIT_MS": "0",
    }
    with stack.start("local", env, batchers=1, envoy=False) as slow:
        args = ["--protoset", PROTOSET, "--call", SUBMIT, "-d", '{"text": "x"}', "-n", "2", "-c", "2"]
        args += ["--e2e", "--stream-host", slow.stream, "-t", "2s", "-O", "json", slow.ingress]
        report = report_of(bench(*args))
    e2e = report["batchline"]["e2e"]
    assert (e2e["accepted"], e2e["done"], e2e["unfinished"]) == (2, 0, 2)
    assert (e2e["finishedLate"], e2e["neverFinished"]) == (1, 1)
    assert e2e["followErrors"] == {"TimeoutError: ": 2}
