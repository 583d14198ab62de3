"""The load harness's own logic: ghz's flags and config, schedules, templates, and the report
(computed as ghz computes it, shaped as ghz writes it)."""

from __future__ import annotations

import contextlib
import json
import re
import struct
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bench.load import report, schedule
from bench.load.calldata import CallData, CallInfo
from bench.load.options import OptionError, Options, parse, parse_duration
from bench.load.protocols import GO_NAMES, HttpRule, _http_error, grpc_web_frames, load_method
from bench.load.report import Record
from tests.conftest import ROOT

SAMPLE = json.loads((ROOT / "tests/data/ghz-report-sample.json").read_text())
PROTOSET = str(ROOT / "envoy/batchline.pb")
SUBMIT = "batchline.v1.InferenceService.Submit"
INFO = CallInfo(SUBMIT, "batchline.v1.SubmitRequest", "batchline.v1.SubmitResponse")


def options(**values: Any) -> Options:
    return Options(host="127.0.0.1:50051", call=SUBMIT, data={"text": "hi"}, **values)


# --- options -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("10s", 10.0), ("1m30s", 90.0), ("250ms", 0.25), ("1.5h", 5400.0), ("0", 0.0), ("500us", 0.0005)],
)
def test_go_durations(text: str, seconds: float) -> None:
    assert parse_duration(text, "-z") == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["10", "ten seconds", "5s3", "s", "-1s"])
def test_bad_durations_name_the_flag(text: str) -> None:
    with pytest.raises(OptionError, match=r"^-z: .* is not a duration"):
        parse_duration(text, "-z")


def test_ghz_defaults() -> None:
    o = parse(["--call", SUBMIT, "-d", '{"text": "hi"}', "127.0.0.1:50051"])
    assert (o.total, o.concurrency, o.connections, o.rps, o.timeout, o.connect_timeout) == (
        200,
        50,
        1,
        0,
        20,
        10,
    )
    assert (o.format, o.load_schedule, o.duration_stop, o.protocol) == ("summary", "const", "close", "grpc")
    assert not o.open_loop


def test_short_flags_mean_what_they_mean_in_ghz() -> None:
    flags = "--call x.S.M -c 7 -n 99 -z 3s -x 9s -t 1s -O json -o out.json --rps 40".split()
    more = ["-m", '{"k": "v"}', "--skipFirst", "3", "--count-errors", "--connections", "2", "h:1"]
    o = parse([*flags, "-d", '{"a": 1}', *more])
    assert (o.concurrency, o.total, o.duration, o.max_duration, o.timeout) == (7, 99, 3.0, 9.0, 1.0)
    assert (o.format, o.output, o.rps, o.metadata, o.skip_first, o.count_errors, o.connections) == (
        "json", "out.json", 40, {"k": "v"}, 3, True, 2,
    )  # fmt: skip
    assert o.open_loop


def test_e2e_is_a_flag_so_the_host_after_it_stays_the_host() -> None:
    watch = parse(["--call", SUBMIT, "-d", "{}", "--e2e", "127.0.0.1:8080"])
    assert (watch.e2e, watch.host) == ("watch", "127.0.0.1:8080")
    assert parse(["--call", SUBMIT, "-d", "{}", "--e2e-poll", "h:1"]).e2e == "poll"


def test_flags_override_the_config_which_overrides_the_defaults(tmp_path: Path) -> None:
    (tmp_path / "data.json").write_text('[{"text": "a"}, {"text": "b"}]')
    config = tmp_path / "ghz.json"
    config.write_text(
        json.dumps(
            {
                "host": "127.0.0.1:9",
                "call": SUBMIT,
                "total": 10,
                "concurrency": 3,
                "duration": "2s",
                "data-file": "data.json",
                "load-schedule": "step",
                "load-start": 5,
                "load-step": 5,
                "load-step-duration": "1s",
                "count-errors": True,
            }
        )
    )
    o = parse(["--config", str(config), "-c", "9"])
    assert (o.host, o.total, o.concurrency, o.duration) == ("127.0.0.1:9", 10, 9, 2.0)
    assert o.data == [{"text": "a"}, {"text": "b"}]
    assert (o.load_schedule, o.load_start, o.load_step, o.load_step_duration, o.count_errors) == (
        "step", 5, 5, 1.0, True,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"cacert": "x.pem"}, "'cacert' is a ghz key this harness does not support"),
        ({"totl": 5}, "unknown key 'totl'"),
        ({"total": "five"}, "total: 'five' is not a whole number"),
        ({"duration": "soon"}, "duration: 'soon' is not a duration"),
    ],
)
def test_config_mistakes_are_named(tmp_path: Path, config: dict[str, Any], message: str) -> None:
    path = tmp_path / "ghz.json"
    path.write_text(json.dumps(config))
    with pytest.raises(OptionError, match=re.escape(message)):
        parse(["--config", str(path)])


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["-d", "{nope"], "-d/--data: not JSON"),
        (["-d", "[]"], "a JSON object, or a non-empty array"),
        (["-d", "[1]"], "every item of the array must be a JSON object"),
        (["-d", "{}", "-O", "html"], "'html' is not one of summary, json, pretty, csv"),
        (
            ["-d", "{}", "--load-schedule", "step", "--load-start", "5", "--load-step", "5"],
            "--load-step-duration",
        ),
        (["-d", "{}", "--load-schedule", "line", "--load-start", "5"], "--load-step: a line schedule"),
        (["-d", "{}", "--protocol", "rest"], "rest needs the schema"),
        (["-d", "{}", "-c", "0"], "--concurrency: must be at least 1"),
        (["-d", "{}", "-m", '{"k": 1}'], "-m/--metadata: a JSON object of string values"),
    ],
)
def test_settings_that_cannot_run_are_refused(argv: list[str], message: str) -> None:
    with pytest.raises(OptionError, match=re.escape(message)):
        parse(["--call", SUBMIT, *argv, "h:1"])


# --- schedules ---------------------------------------------------------------------------------


def test_const_schedule_spaces_requests_evenly() -> None:
    assert schedule.offsets(options(rps=4, total=6)) == [0, 0.25, 0.5, 0.75, 1.0, 1.25]
    due = schedule.offsets(options(rps=100, duration=2.0))  # -z ignores -n
    assert len(due) == 200 and due[-1] < 2.0


def test_step_schedule_climbs_each_step_and_stops_at_load_end() -> None:
    o = options(load_schedule="step", load_start=10, load_step=10, load_step_duration=1.0, load_end=30)
    assert [schedule.rate_at(o, t) for t in (0, 0.99, 1.0, 2.5, 9.0)] == [10, 10, 20, 30, 30]
    due = schedule.offsets(Options(**{**o.__dict__, "duration": 3.0}))
    assert len(due) == pytest.approx(10 + 20 + 30, abs=1)


def test_line_schedule_rises_by_its_slope_until_load_max_duration() -> None:
    o = options(load_schedule="line", load_start=10, load_step=5, load_max_duration=4.0)
    assert [schedule.rate_at(o, t) for t in (0, 1, 2, 4, 10)] == [10, 15, 20, 30, 30]


def test_a_falling_schedule_stops_at_load_end() -> None:
    o = options(load_schedule="line", load_start=100, load_step=-10, load_end=40)
    assert [schedule.rate_at(o, t) for t in (0, 3, 6, 20)] == [100, 70, 40, 40]


# --- call data ---------------------------------------------------------------------------------


def test_templates_render_per_request_and_stay_valid_json() -> None:
    data = CallData({"text": 'say "{{.RequestNumber}}" {{randomString 6}} {{.MethodName}}'}, INFO)
    first, second = data.message(7, "w1"), data.message(8, "w1")
    assert re.fullmatch(r'say "7" [A-Za-z0-9]{6} Submit', first["text"])
    assert second["text"].startswith('say "8" ')
    numbers = {int(CallData({"text": "{{randomInt 3 5}}"}, INFO).message(i)["text"]) for i in range(200)}
    assert numbers == {3, 4}  # Go's [min, max)


def test_an_array_is_used_round_robin() -> None:
    data = CallData([{"text": "a"}, {"text": "b"}, {"text": "c"}], INFO)
    assert [data.message(i)["text"] for i in range(5)] == ["a", "b", "c", "a", "b"]
    assert not data.templated


def test_unknown_template_actions_are_refused_before_the_run() -> None:
    with pytest.raises(OptionError, match=r"{{.Bogus}} is not supported"):
        CallData({"text": "{{.Bogus}}"}, INFO)


# --- the report, computed as ghz computes it ---------------------------------------------------


def test_percentiles_use_ghz_ranks() -> None:
    ordered = [i / 1000 for i in range(1, 11)]  # 1..10 ms
    got = {d["percentage"]: d["latency"] / 1e6 for d in report.latency_distribution(ordered)}
    assert got == pytest.approx({10: 1, 25: 3, 50: 5, 75: 8, 90: 9, 95: 10, 99: 10})


def test_histogram_has_eleven_buckets_marked_in_seconds() -> None:
    ordered = [i / 1000 for i in range(1, 11)]
    buckets = report.histogram(ordered)
    assert len(buckets) == 11
    assert buckets[0]["mark"] == pytest.approx(0.001) and buckets[-1]["mark"] == pytest.approx(0.010)
    assert [b["count"] for b in buckets] == [1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1]
    assert sum(b["frequency"] for b in buckets) == pytest.approx(1.0)


def records() -> list[Record]:
    ok = [Record(1_796_000_000 + i / 100, (4 + i) * 1_000_000, "OK", "") for i in range(8)]
    full = Record(
        1_796_000_000.5, 2_000_000, "ResourceExhausted", "rpc error: code = ResourceExhausted desc = full"
    )
    return [*ok, full, full]


def shape(value: Any) -> Any:
    """A JSON value's structure: dict keys and the types of leaves (int and float kept apart)."""
    if isinstance(value, dict):
        return {k: shape(v) for k, v in value.items()}
    if isinstance(value, list):
        return [shape(value[0])] if value else []
    return type(value).__name__


def test_the_report_has_ghz_schema_exactly() -> None:
    o = options(name="Submit sample", tags={"env": "sample"}, rps=100, metadata={"x": "y"})
    built = report.build(records(), o, total_s=0.1, end_reason="normal", date=1_796_000_000)
    extension = built.pop("batchline")
    sample = dict(SAMPLE)
    assert list(built) == list(sample)  # same keys, in ghz's order
    ours, theirs = shape(built), shape(sample)
    assert set(ours.pop("options")) <= set(theirs.pop("options"))  # a subset of ghz's option keys
    ours["errorDistribution"] = ours["statusCodeDistribution"] = theirs["errorDistribution"] = theirs[
        "statusCodeDistribution"
    ] = {}  # maps keyed by error text and status name
    assert ours == theirs
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(Z|[+-]\d\d:\d\d)", built["date"])
    assert re.fullmatch(
        r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)", built["details"][0]["timestamp"]
    )
    assert extension["protocol"] == "grpc" and extension["openLoop"] is True


def test_counts_distributions_and_errors_follow_ghz() -> None:
    built = report.build(records(), options(), total_s=2.0, end_reason="normal")
    assert built["count"] == 10 and built["rps"] == pytest.approx(5.0)
    assert built["statusCodeDistribution"] == {"OK": 8, "ResourceExhausted": 2}
    assert built["errorDistribution"] == {"rpc error: code = ResourceExhausted desc = full": 2}
    assert built["average"] == int((sum(range(4, 12)) + 4) * 1e6 / 10)  # every request counts
    assert (built["fastest"], built["slowest"]) == (4_000_000, 11_000_000)  # only OK ones
    counted = report.build(records(), options(count_errors=True), total_s=2.0, end_reason="normal")
    assert counted["fastest"] == 2_000_000  # --count-errors lets errors into the latencies
    skipped = report.build(records(), options(skip_first=3), total_s=2.0, end_reason="normal")
    assert skipped["count"] == 7 and len(skipped["details"]) == 7


def test_an_empty_run_reports_nulls_as_ghz_does() -> None:
    built = report.build([], options(), total_s=1.0, end_reason="cancel")
    assert built["count"] == 0 and built["latencyDistribution"] is None and built["details"] is None
    assert "Status code distribution:" in report.summary(built)


def test_e2e_section_counts_every_accepted_job() -> None:
    done = Record(1.0, 5_000_000, "OK", "", 0, 40_000_000, "DONE", 3.0, 1.5, 8)
    lost = Record(1.1, 5_000_000, "OK", "", follow_error="TimeoutError: watch")
    late = lost._replace(late_status="DONE")  # not seen within -t, found DONE at the later look
    runs = [done, done, lost, late]
    built = report.build(runs, options(e2e="watch", rps=10), total_s=1.0, end_reason="normal")
    e2e = built["batchline"]["e2e"]
    assert (e2e["accepted"], e2e["done"], e2e["unfinished"]) == (4, 2, 2)
    assert (e2e["finishedLate"], e2e["neverFinished"]) == (1, 1)
    assert e2e["followErrors"] == {"TimeoutError: watch": 2}
    assert built["statusCodeDistribution"] == {"OK": 4}  # the calls themselves succeeded
    assert e2e["latencyMs"]["p50"] == pytest.approx(40.0) and e2e["batchSize"]["mean"] == 8
    text = report.summary(built)
    assert "End to end (watch): 2 DONE of 4 accepted" in text
    assert "2 not seen to their end within -t (1 finished later, 1 never)" in text


def test_summary_and_csv_views() -> None:
    built = report.build(records(), options(name="run"), total_s=2.0, end_reason="normal")
    text = report.summary(built)
    for expected in (
        "Summary:",
        "Name:\t\trun",
        "Count:\t10",
        "Requests/sec:\t5.00",
        "Response time histogram:",
    ):
        assert expected in text
    assert "  50 % in 7.00 ms" in text and "[OK]\t8 responses" in text
    assert "[2]\trpc error: code = ResourceExhausted desc = full" in text
    rows = report.csv(built).splitlines()
    assert rows[0] == "duration (ms),status,error" and len(rows) == 11 and rows[1] == "4.00,OK,"


# --- protocols ---------------------------------------------------------------------------------


def test_the_schema_gives_the_method_and_its_rest_route() -> None:
    method = load_method(Path(PROTOSET).read_bytes(), "batchline.v1.InferenceService/Submit")
    assert method.path == "/batchline.v1.InferenceService/Submit"
    assert method.http == HttpRule("POST", "/v1/infer", "*")
    get = load_method(Path(PROTOSET).read_bytes(), "batchline.v1.InferenceService.GetJob")
    assert get.http is not None and get.http.request({"job_id": "a b"}) == ("GET", "/v1/jobs/a%20b", None)
    with pytest.raises(OptionError, match=r"no method batchline\.v1\.InferenceService\.Nope"):
        load_method(Path(PROTOSET).read_bytes(), "batchline.v1.InferenceService.Nope")


def test_rest_bodies_and_queries() -> None:
    assert HttpRule("POST", "/v1/infer", "*").request({"text": "hi"}) == (
        "POST",
        "/v1/infer",
        b'{"text": "hi"}',
    )
    assert HttpRule("GET", "/v1/things/{thing_id}", "").request({"thingId": "7", "page": 2}) == (
        "GET", "/v1/things/7?page=2", None,
    )  # fmt: skip


def test_status_names_are_grpc_gos() -> None:
    assert GO_NAMES[1] == "Canceled" and GO_NAMES[8] == "ResourceExhausted" and len(GO_NAMES) == 17


def test_grpc_web_frames_and_http_errors() -> None:
    trailer = b"grpc-status:0\r\ngrpc-message:\r\n"
    body = b"\x00" + struct.pack(">I", 2) + b"hi" + b"\x80" + struct.pack(">I", len(trailer)) + trailer
    assert grpc_web_frames(body) == ([b"hi"], {"grpc-status": "0", "grpc-message": ""})
    assert _http_error(429, b'{"code": 8, "message": "queue full"}').status == "ResourceExhausted"
    unmapped = _http_error(502, b"<html>bad gateway</html>")
    assert unmapped.status == "Unavailable" and "HTTP 502" in unmapped.message


@contextlib.asynccontextmanager
async def watching(servicer: Any) -> AsyncIterator[Any]:
    """A GrpcCaller whose WatchJob calls go to `servicer` on a grpc.aio server."""
    import grpc

    from batchline.v1 import stream_pb2_grpc
    from bench.load.protocols import GrpcCaller

    method = load_method(Path(PROTOSET).read_bytes(), SUBMIT)  # noqa: ASYNC240 (before any task runs)
    server = grpc.aio.server()
    stream_pb2_grpc.add_JobStreamServiceServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    caller = GrpcCaller(Options(host=f"127.0.0.1:{port}", call=SUBMIT, data={}, timeout=5.0), method)
    try:
        yield caller
    finally:
        await caller.close()
        await server.stop(None)


async def test_a_watch_the_server_sheds_is_reopened_after_the_last_state_seen() -> None:
    import grpc

    from batchline.v1 import job_pb2, stream_pb2, stream_pb2_grpc

    requests: list[int] = []

    class Shedding(stream_pb2_grpc.JobStreamServiceServicer):
        async def WatchJob(self, request: Any, context: Any) -> Any:
            requests.append(request.after_sequence)
            if len(requests) == 1:  # one state, then shed, as gRPC core does past max_pending_requests
                yield stream_pb2.WatchJobResponse(
                    job=job_pb2.Job(job_id="j", status=job_pb2.JOB_STATUS_RUNNING, sequence=2)
                )
                await context.abort(grpc.StatusCode.CANCELLED, "shed")
            yield stream_pb2.WatchJobResponse(
                job=job_pb2.Job(job_id="j", status=job_pb2.JOB_STATUS_DONE, sequence=3)
            )

    async with watching(Shedding()) as caller:
        followed = await caller.follow("j", poll=False)
    assert followed.job is not None and followed.job.status == job_pb2.JOB_STATUS_DONE
    # The first watch skips QUEUED (the Submit said so); the second resumes after the state seen.
    assert followed.rewatches == 1 and requests == [1, 2]


async def test_a_watch_refused_for_good_is_an_error_with_its_status() -> None:
    import grpc

    from batchline.v1 import stream_pb2_grpc
    from bench.load.protocols import WatchError

    class Refusing(stream_pb2_grpc.JobStreamServiceServicer):
        async def WatchJob(self, request: Any, context: Any) -> Any:
            await context.abort(grpc.StatusCode.NOT_FOUND, f"job {request.job_id} does not exist")
            yield  # a server-streaming method

    async with watching(Refusing()) as caller:
        with pytest.raises(WatchError, match=r"^rpc error: code = NotFound desc = job j does not exist$"):
            await caller.follow("j", poll=False)
