"""Hostile input through the public API, property-based: native gRPC and REST through a real
Envoy, raw bytes and malformed frames too. Every bad request gets a clear 4xx or
INVALID_ARGUMENT that names the field, never a 5xx or a crash, and no job is stored for it.

The properties run in a thread with blocking clients while the pipeline serves on the
test's event loop (see conftest)."""

from __future__ import annotations

import asyncio
import json
import struct
from typing import Any

import grpc
import httpx
import pytest
from google.rpc import error_details_pb2
from grpc_status import rpc_status
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from batchline.v1 import inference_pb2, inference_pb2_grpc
from bench.load.protocols import grpc_web_frames
from ingress.validation import text_violation
from tests.contract.conftest import StartEdge
from tests.integration.test_pipeline import job_keys

pytestmark = pytest.mark.timeout(300)
EXAMPLES = settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck), database=None)
MAX_CHARS = 2000

texts = st.one_of(
    st.text(max_size=300),  # any Unicode, control characters included
    st.text(alphabet=st.characters(codec="utf-8"), min_size=1990, max_size=2010),
    st.builds(
        lambda n, c, pad: pad + c * n + pad,
        st.sampled_from([0, 1, 1999, 2000, 2001]),
        st.sampled_from(["a", "é", "😀", "\x00", "\u200b", "\t"]),
        st.sampled_from(["", " ", "\n\t "]),
    ),
)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)


def violations(status: dict[str, Any]) -> list[str]:
    return [v["field"] for d in status.get("details", []) for v in d.get("field_violations", [])]


def refusal(call: Any, request: Any) -> grpc.RpcError | None:
    """The error a blocking gRPC call ended with, None when it succeeded."""
    try:
        call(request, timeout=10)
    except grpc.RpcError as error:
        return error
    return None


def grpc_fields(error: grpc.RpcError) -> list[str]:
    status = rpc_status.from_call(error)  # type: ignore[arg-type]
    assert status is not None, "a rejection carries a google.rpc.Status"
    bad = error_details_pb2.BadRequest()
    assert status.details[0].Unpack(bad)
    return [v.field for v in bad.field_violations]


async def test_any_text_is_accepted_or_refused_naming_the_field(start_edge: StartEdge) -> None:
    front = await start_edge(batcher=False)
    accepted = 0

    def properties() -> None:
        nonlocal accepted
        with (
            grpc.insecure_channel(front.target) as channel,
            httpx.Client(base_url=front.url, timeout=20) as http,
        ):
            stub = inference_pb2_grpc.InferenceServiceStub(channel)

            @EXAMPLES
            @given(texts)
            def submit(text: str) -> None:
                nonlocal accepted
                valid = text_violation(text, "text", MAX_CHARS) is None
                error = refusal(stub.Submit, inference_pb2.SubmitRequest(text=text))
                if valid:
                    assert error is None, error.details()
                    accepted += 1
                else:
                    assert error is not None and error.code() == grpc.StatusCode.INVALID_ARGUMENT, text
                    assert grpc_fields(error) == ["text"]
                reply = http.post("/v1/infer", json={"text": text})
                if valid:
                    assert reply.status_code == 200, reply.text
                    accepted += 1
                else:
                    assert reply.status_code == 400 and violations(reply.json()) == ["text"], reply.text

            submit()

    await asyncio.to_thread(properties)
    assert await job_keys(front.pipeline) == accepted  # nothing stored for a refusal


async def test_any_batch_is_all_or_nothing(start_edge: StartEdge) -> None:
    front = await start_edge(batcher=False)
    accepted = 0

    def properties() -> None:
        nonlocal accepted
        with httpx.Client(base_url=front.url, timeout=20) as http:

            @EXAMPLES
            @given(st.lists(st.sampled_from(["fine", "", "  ", "x" * 2001, "ok\x00", "good"]), max_size=260))
            def batch(items: list[str]) -> None:
                nonlocal accepted
                reply = http.post("/v1/infer:batch", json={"texts": items})
                bad = [i for i, t in enumerate(items) if text_violation(t, "t", MAX_CHARS)]
                if items and len(items) <= 256 and not bad:
                    assert reply.status_code == 200, reply.text
                    accepted += len(items)
                    return
                assert reply.status_code == 400, reply.text
                fields = violations(reply.json())
                if not items or len(items) > 256:
                    assert fields == ["texts"]
                else:
                    assert fields == [f"texts[{i}]" for i in bad]

            batch()

    await asyncio.to_thread(properties)
    assert await job_keys(front.pipeline) == accepted


async def test_arbitrary_json_and_raw_bytes_never_get_a_5xx(start_edge: StartEdge) -> None:
    front = await start_edge(batcher=False)
    seen: set[int] = set()

    def properties() -> None:
        with httpx.Client(base_url=front.url, timeout=20) as http:

            @EXAMPLES
            @given(json_values)
            def any_json(body: Any) -> None:
                reply = http.post(
                    "/v1/infer", content=json.dumps(body), headers={"content-type": "application/json"}
                )
                seen.add(reply.status_code)
                assert reply.status_code in (200, 400), f"{body!r} -> {reply.status_code} {reply.text}"
                if reply.status_code == 400:
                    assert reply.json()["code"] == 3  # a JSON google.rpc.Status, INVALID_ARGUMENT

            @EXAMPLES
            @given(st.binary(max_size=200))
            def raw(body: bytes) -> None:
                reply = http.post("/v1/infer", content=body, headers={"content-type": "application/json"})
                seen.add(reply.status_code)
                assert reply.status_code in (200, 400), f"{body!r} -> {reply.status_code} {reply.text}"

            any_json()
            raw()
            for body in (
                '{"text": 5}',
                '{"text": ["a"]}',
                '{"text": {"nested": "object"}}',
                '{"text": "ok", "options": {"priority": "high"}}',
                '{"text": "ok", "options": {"timeout": "forever"}}',
                '{"text": "\\ud800"}',  # a lone surrogate
                "[" * 5000 + "]" * 5000,  # deep nesting
                '{"text": "ok"' + ', "a": {' * 3000 + "}" * 3000 + "}",
            ):
                reply = http.post("/v1/infer", content=body, headers={"content-type": "application/json"})
                assert reply.status_code == 400, f"{body[:60]!r} -> {reply.status_code} {reply.text}"
            invalid_utf8 = http.post(
                "/v1/infer", content=b'{"text": "\xff\xfe"}', headers={"content-type": "application/json"}
            )
            assert invalid_utf8.status_code == 400, invalid_utf8.text

    await asyncio.to_thread(properties)
    assert seen <= {200, 400}


async def test_malformed_protobuf_and_grpc_web_frames_are_invalid_argument(start_edge: StartEdge) -> None:
    front = await start_edge(batcher=False)

    def properties() -> None:
        with (
            grpc.insecure_channel(front.target) as channel,
            httpx.Client(base_url=front.url, timeout=20) as http,
        ):
            raw_submit = channel.unary_unary("/batchline.v1.InferenceService/Submit", None, None)  # raw bytes

            @EXAMPLES
            @given(st.binary(min_size=1, max_size=200))
            def protobuf(payload: bytes) -> None:
                try:
                    inference_pb2.SubmitRequest.FromString(payload)
                    decodes = True
                except Exception:
                    decodes = False
                error = refusal(raw_submit, payload)
                if error is None:
                    assert decodes, payload
                    return
                assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, error.details()
                if not decodes:
                    assert grpc_fields(error) == ["request"]

            @EXAMPLES
            @given(st.binary(max_size=64))
            def grpc_web(payload: bytes) -> None:
                # A well-formed frame around arbitrary bytes; an empty body is tried below.
                body = b"\x00" + struct.pack(">I", len(payload)) + payload
                reply = http.post(
                    "/batchline.v1.InferenceService/Submit",
                    content=body,
                    headers={"content-type": "application/grpc-web+proto", "x-grpc-web": "1"},
                )
                assert reply.status_code < 500, reply.status_code
                status = reply.headers.get("grpc-status") or grpc_web_frames(reply.content)[1].get(
                    "grpc-status"
                )
                assert status in ("0", "3"), (payload, status, reply.content[:100])

            protobuf()
            grpc_web()
            for path in ("/batchline.v1.InferenceService/Submit", "/batchline.v1.JobStreamService/WatchJob"):
                empty = http.post(
                    path, content=b"", headers={"content-type": "application/grpc-web+proto"}, timeout=5
                )
                assert empty.headers.get("grpc-status") == "3", (path, empty.status_code, empty.headers)

    await asyncio.to_thread(properties)
