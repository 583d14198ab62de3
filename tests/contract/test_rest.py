"""REST/JSON through Envoy's transcoder: paths from the google.api.http options in proto/."""

from __future__ import annotations

import asyncio
import json
import threading
import uuid
from typing import Any

from batchline.v1 import job_pb2
from tests.contract.conftest import StartEdge
from tests.helpers import RecordingModel, free_port

BAD_REQUEST = "type.googleapis.com/google.rpc.BadRequest"
RETRY_INFO = "type.googleapis.com/google.rpc.RetryInfo"


def violations(body: dict[str, Any]) -> list[str]:
    return [
        v["field"]
        for detail in body.get("details", [])
        if detail["@type"] == BAD_REQUEST
        for v in detail["field_violations"]
    ]


async def test_submit_then_get_returns_the_finished_job(start_edge: StartEdge) -> None:
    front = await start_edge()
    reply = await front.http.post("/v1/infer", json={"text": "I loved it"})
    assert reply.status_code == 200 and reply.headers["content-type"] == "application/json"
    body = reply.json()
    assert body["status"] == "JOB_STATUS_QUEUED" and body["deduplicated"] is False
    job_id = body["job_id"]
    assert body["status_url"] == f"/v1/jobs/{job_id}"

    await front.pipeline.wait_status(job_id, job_pb2.JOB_STATUS_DONE)
    job = (await front.http.get(body["status_url"])).json()["job"]
    assert job["status"] == "JOB_STATUS_DONE" and job["result"]["label"] in {"POSITIVE", "NEGATIVE"}
    assert job["trace"]["batch_size"] >= 1 and job["priority"] == 0  # zero values are printed


async def test_bad_input_is_400_with_a_status_naming_the_field(start_edge: StartEdge) -> None:
    front = await start_edge()
    for body in ({}, {"text": ""}, {"text": "   "}, {"text": "x" * 2001}):
        reply = await front.http.post("/v1/infer", json=body)
        assert reply.status_code == 400, body
        status = reply.json()
        assert status["code"] == 3 and violations(status) == ["text"], status
    assert "2000" in (await front.http.post("/v1/infer", json={"text": "x" * 2001})).json()["message"]

    reply = await front.http.post(
        "/v1/infer", content=b'{"text": ', headers={"content-type": "application/json"}
    )
    assert reply.status_code == 400 and reply.json()["code"] == 3  # Envoy's own error, same shape
    huge = await front.http.post("/v1/infer", json={"text": "x" * 5_000_000})
    assert huge.status_code == 413 and huge.json()["code"] == 3  # refused at the edge, not a 429
    batch = await front.http.post("/v1/infer:batch", json={"texts": ["fine", ""]})
    assert batch.status_code == 400 and violations(batch.json()) == ["texts[1]"]
    stats = (await front.http.get("/v1/stats")).json()
    assert stats["queue_depth"] == "0" and stats["jobs"] == "0"  # nothing was accepted


async def test_unknown_job_and_unknown_path_are_404(start_edge: StartEdge) -> None:
    front = await start_edge()
    for path in (f"/v1/jobs/{uuid.uuid4()}", f"/v1/jobs/{uuid.uuid4()}:watch", "/v1/nothing-here"):
        reply = await front.http.get(path)
        assert reply.status_code == 404, path
        assert reply.json()["code"] == 5


async def test_full_queue_is_429_with_retry_info_and_retry_after(start_edge: StartEdge) -> None:
    front = await start_edge(batcher=False, broker={"max_length": 1})
    replies = [await front.http.post("/v1/infer", json={"text": f"job {i}"}) for i in range(4)]
    refused = [r for r in replies if r.status_code == 429]
    assert refused, [r.status_code for r in replies]
    status = refused[0].json()
    assert status["code"] == 8
    [retry] = [d for d in status["details"] if d["@type"] == RETRY_INFO]
    assert retry["retry_delay"].endswith("s")
    assert int(refused[0].headers["retry-after"]) >= 1


async def test_batch_cancel_and_stats(start_edge: StartEdge) -> None:
    front = await start_edge(batcher=False)
    reply = await front.http.post("/v1/infer:batch", json={"texts": ["one", "two", "three"]})
    assert reply.status_code == 200
    ids = [job["job_id"] for job in reply.json()["jobs"]]
    assert len(set(ids)) == 3

    cancelled = await front.http.post(f"/v1/jobs/{ids[0]}:cancel", json={})
    assert cancelled.status_code == 200 and cancelled.json()["job"]["status"] == "JOB_STATUS_CANCELLED"
    stats = (await front.http.get("/v1/stats")).json()
    assert int(stats["queue_depth"]) == 3 and stats["finished"]["JOB_STATUS_CANCELLED"] == "1"


async def test_watch_streams_each_state_as_it_happens(start_edge: StartEdge) -> None:
    model = RecordingModel()
    model.gate = threading.Event()
    front = await start_edge(model=model)
    job_id = (await front.http.post("/v1/infer", json={"text": "hold on"})).json()["job_id"]

    seen: list[dict[str, Any]] = []
    async with front.http.stream("GET", f"/v1/jobs/{job_id}:watch") as reply:
        assert reply.status_code == 200
        lines = reply.aiter_lines()
        # The first states arrive while the model is still held: nothing is buffered to the end.
        while not seen or seen[-1]["status"] != "JOB_STATUS_RUNNING":
            seen.append(await _next_job(lines))
        model.gate.set()
        async for line in lines:
            event = json.loads(line)
            if "job" in event:
                seen.append(event["job"])
    statuses = [job["status"] for job in seen]
    assert statuses[-2:] == ["JOB_STATUS_RUNNING", "JOB_STATUS_DONE"], statuses
    assert seen[-1]["result"]["label"]  # the stream ended after the terminal state
    sequences = [job["sequence"] for job in seen]
    assert sequences == sorted(set(sequences)) and sequences[-2:] == [2, 3], sequences

    # Resuming after the RUNNING state gets the DONE state alone; after DONE, nothing.
    for after, expected in ((2, ["JOB_STATUS_DONE"]), (3, [])):
        reply = await front.http.get(f"/v1/jobs/{job_id}:watch", params={"after_sequence": after})
        jobs = [json.loads(line)["job"] for line in reply.text.splitlines() if '"job"' in line]
        assert [job["status"] for job in jobs] == expected
    bad = await front.http.get(f"/v1/jobs/{job_id}:watch", params={"after_sequence": 4})
    assert bad.status_code == 400 and "after_sequence" in bad.text


async def _next_job(lines: Any) -> dict[str, Any]:
    while True:
        line = await asyncio.wait_for(anext(lines), 10)
        event = json.loads(line)
        if "job" in event:  # heartbeats arrive as {"heartbeat": {...}}
            return dict(event["job"])


async def test_health_and_readiness(start_edge: StartEdge) -> None:
    front = await start_edge()
    assert (await front.http.get("/healthz")).status_code == 200
    assert (await front.http.get("/readyz")).status_code == 200


async def test_not_ready_while_an_upstream_is_down(start_edge: StartEdge) -> None:
    front = await start_edge(stream_port=free_port())  # nothing listens there
    assert (await front.http.get("/healthz")).status_code == 200
    assert (await front.http.get("/readyz")).status_code == 503
    reply = await front.http.get(f"/v1/jobs/{uuid.uuid4()}:watch")
    assert reply.status_code == 503 and reply.json()["code"] == 14


async def test_cors_preflight_from_the_ui_origin(start_edge: StartEdge) -> None:
    front = await start_edge()
    paths = ["/v1/infer", f"/v1/jobs/{uuid.uuid4()}:watch", "/batchline.v1.InferenceService/Submit"]
    for path in paths:
        reply = await front.http.options(path, headers=_preflight("http://localhost:3000"))
        assert reply.status_code == 200, path
        assert reply.headers["access-control-allow-origin"] == "http://localhost:3000"
        allowed = reply.headers["access-control-allow-headers"]
        assert "x-grpc-web" in allowed and "content-type" in allowed
    stranger = await front.http.options("/v1/infer", headers=_preflight("http://evil.example"))
    assert "access-control-allow-origin" not in stranger.headers

    simple = await front.http.get("/v1/stats", headers={"origin": "http://localhost:3000"})
    assert "grpc-status" in simple.headers["access-control-expose-headers"]


def _preflight(origin: str) -> dict[str, str]:
    return {
        "origin": origin,
        "access-control-request-method": "POST",
        "access-control-request-headers": "content-type,x-grpc-web,x-user-agent",
    }
