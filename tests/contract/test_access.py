"""API keys, job ownership, per-key rate limits and TLS, through a real Envoy.

The keys are made here, their digests configured, and every path tried: REST, native gRPC
through Envoy and straight to the services, grpc-web. Another key's job must read exactly like
a job that does not exist.
"""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
import uuid
from pathlib import Path

import grpc
import httpx
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from batchline import access, codec, edge, logs
from batchline.logs import JsonFormatter
from batchline.v1 import inference_pb2, stream_pb2
from batchline_client import AsyncClient, RpcError
from tests.contract.conftest import Edge, StartEdge

ALICE, BOB = access.new_key(), access.new_key()
KEYS = access.KeyRing.parse([access.entry("alice", ALICE), access.entry("bob", BOB)], "test")
SECRET_TEXT = "a sentence only alice ever sends, marker 7f3e"


def bearer(key: str) -> dict[str, str]:
    return {"authorization": f"Bearer {key}"}


def grpc_key(key: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {key}"),)


async def rest_done(front: Edge, job_id: str, key: str) -> dict[str, object]:
    """Poll GET /v1/jobs/{id} as `key` until the job is DONE."""
    for _ in range(200):
        reply = await front.http.get(f"/v1/jobs/{job_id}", headers=bearer(key))
        assert reply.status_code == 200, reply.text
        job: dict[str, object] = reply.json()["job"]
        if job["status"] == "JOB_STATUS_DONE":
            return job
        await asyncio.sleep(0.05)
    raise AssertionError(f"{job_id} never DONE")


async def test_every_api_call_needs_a_valid_key(start_edge: StartEdge) -> None:
    front = await start_edge(keys=KEYS)
    body = {"text": "I loved it"}
    for headers, why in [
        ({}, "needs an API key"),
        ({"authorization": "Bearer bl_not-a-key"}, "not valid"),
        ({"authorization": f"Basic {ALICE}"}, "Bearer <key>"),
        ({"authorization": "Bearer"}, "Bearer <key>"),
    ]:
        reply = await front.http.post("/v1/infer", json=body, headers=headers)
        assert reply.status_code == 401, reply.text
        assert reply.json()["code"] == grpc.StatusCode.UNAUTHENTICATED.value[0]
        assert why in reply.json()["message"]
    for path in ("/v1/stats", f"/v1/jobs/{uuid.uuid4()}"):
        assert (await front.http.get(path)).status_code == 401

    # Native gRPC, through Envoy and straight to each service: the same rule.
    for stub in (front.inference, front.pipeline.inference):
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await stub.Submit(inference_pb2.SubmitRequest(text="I loved it"))
        assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await stub.GetStats(inference_pb2.GetStatsRequest(), metadata=grpc_key("bl_wrong"))
        assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
    for stream in (front.stream, front.pipeline.stream):
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            async for _ in stream.WatchJob(stream_pb2.WatchJobRequest(job_id=str(uuid.uuid4()))):
                pass
        assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
    [line] = await front.grpc_web("submit-error", "I loved it")  # the browser client, no key
    assert line["code"] == grpc.StatusCode.UNAUTHENTICATED.value[0]

    # Probes need no key: gRPC health through Envoy, and Envoy's own /readyz.
    health = health_pb2_grpc.HealthStub(front.channel)
    assert (
        await health.Check(health_pb2.HealthCheckRequest())
    ).status == health_pb2.HealthCheckResponse.SERVING
    assert (await front.http.get("/readyz")).status_code == 200

    accepted = await front.http.post("/v1/infer", json=body, headers=bearer(ALICE))
    assert accepted.status_code == 200, accepted.text
    stats = await front.inference.GetStats(inference_pb2.GetStatsRequest(), metadata=grpc_key(BOB))
    assert stats.queue_depth >= 0


async def test_a_job_is_visible_only_to_the_key_that_made_it(
    start_edge: StartEdge, caplog: pytest.LogCaptureFixture
) -> None:
    # The strictest case: LOG_LEVEL=DEBUG, with what logs.configure does to libraries' loggers.
    for name in logs.LIBRARIES:
        caplog.set_level(logging.WARNING, logger=name)  # what quiet_libraries() does; undone after
    caplog.set_level(logging.DEBUG)  # last: it sets the capturing handler's level too
    front = await start_edge(keys=KEYS)
    accepted = await front.http.post("/v1/infer", json={"text": SECRET_TEXT}, headers=bearer(ALICE))
    job_id = accepted.json()["job_id"]
    job = await rest_done(front, job_id, ALICE)
    assert job["owner"] == "alice"

    # Bob's view of alice's job and of a job that never existed: the same answer, word for word.
    unknown = str(uuid.uuid4())
    for method, path in [("GET", "/v1/jobs/{}"), ("POST", "/v1/jobs/{}:cancel")]:
        theirs = await front.http.request(method, path.format(job_id), headers=bearer(BOB))
        missing = await front.http.request(method, path.format(unknown), headers=bearer(BOB))
        assert theirs.status_code == missing.status_code == 404
        assert theirs.json()["message"].replace(job_id, "ID") == missing.json()["message"].replace(
            unknown, "ID"
        )
    with pytest.raises(grpc.aio.AioRpcError) as hidden:
        async for _ in front.stream.WatchJob(
            stream_pb2.WatchJobRequest(job_id=job_id), metadata=grpc_key(BOB)
        ):
            pass
    assert hidden.value.code() == grpc.StatusCode.NOT_FOUND
    with pytest.raises(grpc.aio.AioRpcError) as hidden:
        await front.inference.CancelJob(inference_pb2.CancelJobRequest(job_id=job_id), metadata=grpc_key(BOB))
    assert hidden.value.code() == grpc.StatusCode.NOT_FOUND
    stored = await front.pipeline.store.get(job_id)
    assert stored is not None and stored.status == codec.DONE  # bob's cancel changed nothing

    # Alice watches her own job to its end, over gRPC through Envoy.
    states = [
        e.job
        async for e in front.stream.WatchJob(
            stream_pb2.WatchJobRequest(job_id=job_id), metadata=grpc_key(ALICE)
        )
        if e.HasField("job")
    ]
    assert states[-1].status == codec.DONE and states[-1].owner == "alice"

    # One idempotency key, two owners: two jobs; neither learns of the other's.
    request = {"text": "same key, two owners", "idempotency_key": "order-42"}
    first = (await front.http.post("/v1/infer", json=request, headers=bearer(ALICE))).json()
    other = (await front.http.post("/v1/infer", json=request, headers=bearer(BOB))).json()
    again = (await front.http.post("/v1/infer", json=request, headers=bearer(ALICE))).json()
    assert first["job_id"] != other["job_id"] and not other["deduplicated"]
    assert again["job_id"] == first["job_id"] and again["deduplicated"]

    # Nothing logged, at any level, holds a key or a submitted text; refusals are logged.
    await front.http.post("/v1/infer", json={"text": SECRET_TEXT}, headers=bearer("bl_a-guess"))
    formatter = JsonFormatter()
    logged = "\n".join(formatter.format(record) for record in caplog.records)
    assert "job accepted" in logged and "refused a call" in logged
    for secret in (ALICE, BOB, "bl_a-guess", SECRET_TEXT, "marker 7f3e"):
        assert secret not in logged


async def test_each_key_has_its_own_rate_limit_at_the_edge(start_edge: StartEdge) -> None:
    front = await start_edge(keys=KEYS, key_rate=edge.KeyRate(per_s=1, burst=5))
    codes = [
        (await front.http.post("/v1/infer", json={"text": f"burst {n}"}, headers=bearer(ALICE))).status_code
        for n in range(10)
    ]
    assert codes.count(200) in (5, 6) and codes.count(429) == 10 - codes.count(200), codes  # one refill
    limited = await front.http.post("/v1/infer", json={"text": "one more"}, headers=bearer(ALICE))
    assert limited.status_code == 429
    assert limited.json()["code"] == grpc.StatusCode.RESOURCE_EXHAUSTED.value[0]
    assert limited.headers["retry-after"] == "1" and limited.headers["x-ratelimit-limit"]
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await front.inference.Submit(inference_pb2.SubmitRequest(text="grpc"), metadata=grpc_key(ALICE))
    assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED

    # Bob's bucket is his own.
    reply = await front.http.post("/v1/infer", json={"text": "bob is fine"}, headers=bearer(BOB))
    assert reply.status_code == 200, reply.text


@pytest.fixture
def certificate(tmp_path: Path) -> edge.Tls:
    """A self-signed certificate for localhost and 127.0.0.1, made now."""
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
            "-nodes", "-days", "1", "-subj", "/CN=localhost", "-keyout", str(key), "-out", str(cert),
            "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return edge.Tls(str(cert), str(key))


async def test_tls_on_the_edge_serves_rest_and_grpc(start_edge: StartEdge, certificate: edge.Tls) -> None:
    front = await start_edge(tls=certificate)
    assert front.url.startswith("https://")
    accepted = await front.http.post("/v1/infer", json={"text": "I loved it"})
    assert accepted.status_code == 200, accepted.text
    states = [
        e.job
        async for e in front.stream.WatchJob(stream_pb2.WatchJobRequest(job_id=accepted.json()["job_id"]))
        if e.HasField("job")
    ]
    assert states[-1].status == codec.DONE

    # Plain HTTP to the TLS port gets nothing; a client that does not trust the certificate refuses it.
    with pytest.raises(httpx.HTTPError):
        async with httpx.AsyncClient() as plain:
            await plain.get(front.url.replace("https://", "http://") + "/healthz", timeout=5)
    with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
        async with httpx.AsyncClient() as untrusting:
            await untrusting.get(front.url + "/healthz", timeout=5)


def test_the_compose_tls_config_validates(certificate: edge.Tls, tmp_path: Path) -> None:
    """`python -m batchline.edge tls` renders the compose config that Envoy accepts."""
    rendered = subprocess.run(
        [sys.executable, "-m", "batchline.edge", "tls", certificate.cert, certificate.key],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    config = tmp_path / "envoy.tls.yaml"
    config.write_text(rendered.replace("envoy/batchline.pb", str(edge.DESCRIPTOR)))
    check = subprocess.run(
        [edge.envoy_binary(), "--mode", "validate", "-c", str(config)], capture_output=True, text=True
    )
    assert check.returncode == 0, check.stderr + check.stdout
    assert certificate.cert in rendered and certificate.key in rendered


async def test_the_python_client_brings_its_key_over_tls(
    start_edge: StartEdge, certificate: edge.Tls, monkeypatch: pytest.MonkeyPatch
) -> None:
    front = await start_edge(keys=KEYS, tls=certificate)
    async with AsyncClient(front.target, api_key=ALICE, ca_file=certificate.cert) as client:
        job = await client.infer("I loved it")
        assert job.status == codec.DONE and job.owner == "alice"
    monkeypatch.setenv("BATCHLINE_API_KEY", BOB)  # the default when no api_key is given
    async with AsyncClient(front.target, ca_file=certificate.cert) as client:
        with pytest.raises(RpcError) as hidden:
            await client.get(job.job_id)
        assert hidden.value.code == grpc.StatusCode.NOT_FOUND
    async with AsyncClient(front.target, api_key="", ca_file=certificate.cert) as client:
        with pytest.raises(RpcError) as refused:
            await client.stats()
        assert refused.value.code == grpc.StatusCode.UNAUTHENTICATED
