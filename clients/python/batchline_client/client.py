"""The Python client: typed, sync (`Client`) and async (`AsyncClient`), over the generated stubs.

    from batchline_client import Client
    with Client("127.0.0.1:8080") as client:          # Envoy, or the embedded server
        job = client.infer("I loved it")               # submit, then watch to the end
        print(job.result.label, job.trace.batch_size)

One target serves both services by default (Envoy routes them); pass `stream_target` to talk
to ingress and stream directly. `api_key` (default: the BATCHLINE_API_KEY environment variable)
is sent as `authorization: Bearer <key>` on every call; `tls=True` uses TLS with the system's
root certificates, `ca_file=` with your own (a self-signed certificate, say).

A full queue (RESOURCE_EXHAUSTED) is retried after the delay the server gives, within
`retry_budget_s`; every call carries a deadline; failures raise `RpcError` with the gRPC code,
the message and the decoded `google.rpc` details.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from typing import Any, TypeVar, cast

import grpc
from google.protobuf.duration_pb2 import Duration
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from batchline import codec
from batchline.v1 import inference_pb2, inference_pb2_grpc, job_pb2, stream_pb2, stream_pb2_grpc

T = TypeVar("T")
DEFAULT_RETRY_DELAY_S = 0.5  # when a RESOURCE_EXHAUSTED carries no RetryInfo


class RpcError(Exception):
    """A call the server refused or could not answer, with what it said."""

    def __init__(self, code: grpc.StatusCode, message: str, details: Sequence[Any] = ()) -> None:
        super().__init__(f"{code.name}: {message}")
        self.code, self.message, self.details = code, message, list(details)

    @property
    def violations(self) -> list[tuple[str, str]]:
        """(field, why) for each bad field of an INVALID_ARGUMENT."""
        return [
            (v.field, v.description)
            for d in self.details
            if isinstance(d, error_details_pb2.BadRequest)
            for v in d.field_violations
        ]

    @property
    def retry_delay_s(self) -> float | None:
        """The server's advice on when to retry (RetryInfo), if it gave one."""
        for d in self.details:
            if isinstance(d, error_details_pb2.RetryInfo):
                return float(d.retry_delay.ToNanoseconds()) / 1e9
        return None

    @classmethod
    def from_grpc(cls, error: grpc.RpcError) -> RpcError:
        details: list[Any] = []
        call = cast(grpc.Call, error)  # grpc raises errors that are also the failed call
        status = rpc_status.from_call(call)
        for packed in status.details if status else ():
            for kind in (error_details_pb2.BadRequest, error_details_pb2.RetryInfo):
                if packed.Is(kind.DESCRIPTOR):
                    detail = kind()
                    packed.Unpack(detail)
                    details.append(detail)
        return cls(call.code(), call.details() or "", details)


def _options(priority: int, job_timeout_s: float | None) -> job_pb2.SubmitOptions:
    options = job_pb2.SubmitOptions(priority=priority)
    if job_timeout_s is not None:
        timeout = Duration()
        timeout.FromNanoseconds(int(job_timeout_s * 1e9))
        options.timeout.CopyFrom(timeout)
    return options


def _request(text: str, priority: int, job_timeout_s: float | None, key: str) -> inference_pb2.SubmitRequest:
    return inference_pb2.SubmitRequest(
        text=text, idempotency_key=key, options=_options(priority, job_timeout_s)
    )


def _retry_delay(error: RpcError, deadline: float) -> float | None:
    """How long to wait before retrying, or None when the error is final or the budget spent."""
    if error.code != grpc.StatusCode.RESOURCE_EXHAUSTED:
        return None
    delay = error.retry_delay_s or DEFAULT_RETRY_DELAY_S
    return delay if time.monotonic() + delay <= deadline else None


# A watch that broke for one of these is re-opened: the stream replica went away (UNAVAILABLE) or
# this client fell behind its buffer (RESOURCE_EXHAUSTED).
RESUMABLE = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.RESOURCE_EXHAUSTED})
RESUME_DELAY_S = 0.2


def _resume_delay(error: RpcError, deadline: float) -> float | None:
    """How long to wait before re-opening a broken watch, or None when it should not be."""
    if error.code not in RESUMABLE:
        return None
    delay = error.retry_delay_s or RESUME_DELAY_S
    return delay if time.monotonic() + delay <= deadline else None


def _targets(target: str, stream_target: str | None) -> list[str]:
    """One channel for both services, or ingress first and stream second."""
    return [target] if not stream_target or stream_target == target else [target, stream_target]


def _credentials(tls: bool, ca_file: str | None) -> grpc.ChannelCredentials | None:
    """TLS credentials when asked for (a CA file implies TLS); None for plaintext."""
    if ca_file:
        with open(ca_file, "rb") as pem:
            return grpc.ssl_channel_credentials(root_certificates=pem.read())
    return grpc.ssl_channel_credentials() if tls else None


def _metadata(api_key: str | None) -> tuple[tuple[str, str], ...]:
    key = os.environ.get("BATCHLINE_API_KEY", "") if api_key is None else api_key
    return (("authorization", f"Bearer {key}"),) if key else ()


class Client:
    """Blocking client. Every method raises `RpcError` on failure."""

    def __init__(
        self,
        target: str = "127.0.0.1:8080",
        *,
        stream_target: str | None = None,
        timeout_s: float = 10.0,
        retry_budget_s: float = 10.0,
        api_key: str | None = None,
        tls: bool = False,
        ca_file: str | None = None,
    ) -> None:
        credentials = _credentials(tls, ca_file)
        self._channels = [
            grpc.secure_channel(t, credentials) if credentials else grpc.insecure_channel(t)
            for t in _targets(target, stream_target)
        ]
        self._metadata = _metadata(api_key)
        self._inference = inference_pb2_grpc.InferenceServiceStub(self._channels[0])
        self._stream = stream_pb2_grpc.JobStreamServiceStub(self._channels[-1])
        self.timeout_s, self.retry_budget_s = timeout_s, retry_budget_s

    def _call(self, call: Callable[[], T]) -> T:
        deadline = time.monotonic() + self.retry_budget_s
        while True:
            try:
                return call()
            except grpc.RpcError as exc:
                error = RpcError.from_grpc(exc)
                delay = _retry_delay(error, deadline)
                if delay is None:
                    raise error from None
                time.sleep(delay)

    def submit(
        self, text: str, *, priority: int = 0, job_timeout_s: float | None = None, idempotency_key: str = ""
    ) -> inference_pb2.SubmitResponse:
        request = _request(text, priority, job_timeout_s, idempotency_key)
        return self._call(
            lambda: self._inference.Submit(request, timeout=self.timeout_s, metadata=self._metadata)
        )

    def submit_batch(
        self, texts: Sequence[str], *, priority: int = 0, job_timeout_s: float | None = None
    ) -> list[inference_pb2.SubmitResponse]:
        request = inference_pb2.SubmitBatchRequest(
            texts=list(texts), options=_options(priority, job_timeout_s)
        )
        return list(
            self._call(
                lambda: self._inference.SubmitBatch(request, timeout=self.timeout_s, metadata=self._metadata)
            ).jobs
        )

    def get(self, job_id: str) -> job_pb2.Job:
        request = inference_pb2.GetJobRequest(job_id=job_id)
        return self._call(
            lambda: self._inference.GetJob(request, timeout=self.timeout_s, metadata=self._metadata)
        ).job

    def cancel(self, job_id: str) -> job_pb2.Job:
        request = inference_pb2.CancelJobRequest(job_id=job_id)
        return self._call(
            lambda: self._inference.CancelJob(request, timeout=self.timeout_s, metadata=self._metadata)
        ).job

    def stats(self) -> inference_pb2.GetStatsResponse:
        request = inference_pb2.GetStatsRequest()
        return self._call(
            lambda: self._inference.GetStats(request, timeout=self.timeout_s, metadata=self._metadata)
        )

    def watch(self, job_id: str, timeout_s: float = 300.0, after_sequence: int = 0) -> Iterator[job_pb2.Job]:
        """Each state of the job after `after_sequence`, the current one first, until it ends
        (heartbeats skipped). A stream that breaks is re-opened after the last state seen, within
        `retry_budget_s`: nothing is lost and nothing arrives twice."""
        deadline, seen = time.monotonic() + self.retry_budget_s, after_sequence
        while True:
            request = stream_pb2.WatchJobRequest(job_id=job_id, after_sequence=seen)
            try:
                for event in self._stream.WatchJob(request, timeout=timeout_s, metadata=self._metadata):
                    if event.HasField("job"):
                        seen = event.job.sequence
                        yield event.job
                return
            except grpc.RpcError as exc:
                error = RpcError.from_grpc(exc)
                delay = _resume_delay(error, deadline)
                if delay is None:
                    raise error from None
                time.sleep(delay)

    def infer(self, text: str, **submit_options: Any) -> job_pb2.Job:
        """Submit and wait for the job's end: its final record (DONE, FAILED or CANCELLED)."""
        job_id = self.submit(text, **submit_options).job_id
        last = None
        for state in self.watch(job_id, after_sequence=codec.ACCEPTED_SEQUENCE):
            last = state
        if last is None or not codec.is_terminal(last.status):
            raise RpcError(grpc.StatusCode.UNAVAILABLE, f"the watch of {job_id} ended before the job did")
        return last

    def close(self) -> None:
        for channel in self._channels:
            channel.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncClient:
    """The same calls for asyncio. Use `async with AsyncClient(...) as client`."""

    def __init__(
        self,
        target: str = "127.0.0.1:8080",
        *,
        stream_target: str | None = None,
        timeout_s: float = 10.0,
        retry_budget_s: float = 10.0,
        api_key: str | None = None,
        tls: bool = False,
        ca_file: str | None = None,
    ) -> None:
        credentials = _credentials(tls, ca_file)
        self._channels = [
            grpc.aio.secure_channel(t, credentials) if credentials else grpc.aio.insecure_channel(t)
            for t in _targets(target, stream_target)
        ]
        self._metadata = _metadata(api_key)
        self._inference = inference_pb2_grpc.InferenceServiceStub(self._channels[0])
        self._stream = stream_pb2_grpc.JobStreamServiceStub(self._channels[-1])
        self.timeout_s, self.retry_budget_s = timeout_s, retry_budget_s

    async def _call(self, call: Callable[[], Awaitable[T]]) -> T:
        deadline = time.monotonic() + self.retry_budget_s
        while True:
            try:
                return await call()
            except grpc.aio.AioRpcError as exc:
                error = RpcError.from_grpc(exc)
                delay = _retry_delay(error, deadline)
                if delay is None:
                    raise error from None
                await asyncio.sleep(delay)

    async def submit(
        self, text: str, *, priority: int = 0, job_timeout_s: float | None = None, idempotency_key: str = ""
    ) -> inference_pb2.SubmitResponse:
        request = _request(text, priority, job_timeout_s, idempotency_key)
        return await self._call(
            lambda: self._inference.Submit(request, timeout=self.timeout_s, metadata=self._metadata)
        )

    async def submit_batch(
        self, texts: Sequence[str], *, priority: int = 0, job_timeout_s: float | None = None
    ) -> list[inference_pb2.SubmitResponse]:
        request = inference_pb2.SubmitBatchRequest(
            texts=list(texts), options=_options(priority, job_timeout_s)
        )
        reply = await self._call(
            lambda: self._inference.SubmitBatch(request, timeout=self.timeout_s, metadata=self._metadata)
        )
        return list(reply.jobs)

    async def get(self, job_id: str) -> job_pb2.Job:
        request = inference_pb2.GetJobRequest(job_id=job_id)
        return (
            await self._call(
                lambda: self._inference.GetJob(request, timeout=self.timeout_s, metadata=self._metadata)
            )
        ).job

    async def cancel(self, job_id: str) -> job_pb2.Job:
        request = inference_pb2.CancelJobRequest(job_id=job_id)
        return (
            await self._call(
                lambda: self._inference.CancelJob(request, timeout=self.timeout_s, metadata=self._metadata)
            )
        ).job

    async def stats(self) -> inference_pb2.GetStatsResponse:
        request = inference_pb2.GetStatsRequest()
        return await self._call(
            lambda: self._inference.GetStats(request, timeout=self.timeout_s, metadata=self._metadata)
        )

    async def watch(
        self, job_id: str, timeout_s: float = 300.0, after_sequence: int = 0
    ) -> AsyncIterator[job_pb2.Job]:
        """Each state of the job after `after_sequence`, the current one first, until it ends
        (heartbeats skipped). A stream that breaks is re-opened after the last state seen, within
        `retry_budget_s`: nothing is lost and nothing arrives twice."""
        deadline, seen = time.monotonic() + self.retry_budget_s, after_sequence
        while True:
            request = stream_pb2.WatchJobRequest(job_id=job_id, after_sequence=seen)
            try:
                async for event in self._stream.WatchJob(request, timeout=timeout_s, metadata=self._metadata):
                    if event.HasField("job"):
                        seen = event.job.sequence
                        yield event.job
                return
            except grpc.aio.AioRpcError as exc:
                error = RpcError.from_grpc(exc)
                delay = _resume_delay(error, deadline)
                if delay is None:
                    raise error from None
                await asyncio.sleep(delay)

    async def infer(self, text: str, **submit_options: Any) -> job_pb2.Job:
        """Submit and wait for the job's end: its final record (DONE, FAILED or CANCELLED)."""
        job_id = (await self.submit(text, **submit_options)).job_id
        last = None
        async for state in self.watch(job_id, after_sequence=codec.ACCEPTED_SEQUENCE):
            last = state
        if last is None or not codec.is_terminal(last.status):
            raise RpcError(grpc.StatusCode.UNAVAILABLE, f"the watch of {job_id} ended before the job did")
        return last

    async def close(self) -> None:
        for channel in self._channels:
            await channel.close(None)

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
