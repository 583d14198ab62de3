"""What the fault tests share: a service's URL through a proxy, and plain gRPC calls in a row."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

import grpc

from batchline.v1 import inference_pb2, inference_pb2_grpc
from tests.proxy import TcpProxy


def through(url: str, proxy: TcpProxy) -> str:
    """The same URL with its host and port replaced by the proxy's."""
    parts = urlsplit(url)
    credentials = parts.netloc.rpartition("@")[0]
    netloc = f"{credentials}@127.0.0.1:{proxy.port}" if credentials else f"127.0.0.1:{proxy.port}"
    return urlunsplit(parts._replace(netloc=netloc))


def submit_all(target: str, texts: list[str]) -> list[str]:
    with grpc.insecure_channel(target) as channel:
        inference = inference_pb2_grpc.InferenceServiceStub(channel)
        return [inference.Submit(inference_pb2.SubmitRequest(text=t), timeout=10).job_id for t in texts]


def statuses(target: str, ids: list[str]) -> list[int]:
    with grpc.insecure_channel(target) as channel:
        inference = inference_pb2_grpc.InferenceServiceStub(channel)
        return [inference.GetJob(inference_pb2.GetJobRequest(job_id=i), timeout=5).job.status for i in ids]
