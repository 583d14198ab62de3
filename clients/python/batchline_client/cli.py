"""`batchline`: submit texts, follow jobs, read statistics from the terminal.

    batchline submit "I loved it" "terrible service" --watch
    batchline get JOB_ID | batchline watch JOB_ID | batchline cancel JOB_ID | batchline stats

Exit codes: 0 success; 1 a watched job ended FAILED or CANCELLED; 2 bad usage or input;
3 the server could not be reached or refused the call.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from typing import Any

import grpc
from google.protobuf import json_format
from google.protobuf.message import Message

from batchline import codec
from batchline.v1 import job_pb2
from batchline_client.client import AsyncClient, RpcError

EXIT_OK, EXIT_JOB_FAILED, EXIT_USAGE, EXIT_RPC = 0, 1, 2, 3


def as_json(message: Message) -> dict[str, Any]:
    return json_format.MessageToDict(message, preserving_proto_field_name=True)


def describe(text: str, job: job_pb2.Job, accept_ms: float | None, total_ms: float | None) -> str:
    head = f"{text!r}" if text else job.job_id
    accepted = f"accepted in {accept_ms:.1f} ms -> " if accept_ms is not None else ""
    if job.status != codec.DONE:
        why = f": {job.error.message}" if job.error.message else ""
        return f"{head}\n  {accepted}{codec.status_name(job.status)}{why}"
    t = job.trace
    total = f"total {total_ms:.1f} ms, " if total_ms is not None else ""
    return (
        f"{head}\n  {accepted}{job.result.label} ({job.result.score:.4f}) by {job.model}\n"
        f"  {total}batch_size={t.batch_size}, queue_wait={t.queue_wait_ms:.1f} ms, "
        f"inference={t.inference_ms:.1f} ms"
    )


async def submit(client: AsyncClient, args: argparse.Namespace) -> int:
    async def one(text: str) -> tuple[int, dict[str, Any] | str]:
        started = time.perf_counter()
        answer = await client.submit(text)
        accept_ms = (time.perf_counter() - started) * 1000
        if not args.watch:
            return EXIT_OK, as_json(
                answer
            ) if args.json else f"{answer.job_id}  {codec.status_name(answer.status)}"
        job = await last_state(client, answer.job_id)
        total_ms = (time.perf_counter() - started) * 1000
        code = EXIT_OK if job.status == codec.DONE else EXIT_JOB_FAILED
        if args.json:
            return code, {"accept_ms": accept_ms, "total_ms": total_ms, "job": as_json(job)}
        return code, describe(text, job, accept_ms, total_ms)

    results = await asyncio.gather(*(one(t) for t in args.texts))
    emit([r for _, r in results], args.json)
    return max(code for code, _ in results)


async def last_state(client: AsyncClient, job_id: str) -> job_pb2.Job:
    """Follow a job to its end; the last record."""
    last = None
    async for state in client.watch(job_id):
        last = state
    assert last is not None
    return last


async def get(client: AsyncClient, args: argparse.Namespace) -> int:
    job = await client.get(args.job_id)
    emit([as_json(job) if args.json else describe("", job, None, None)], args.json)
    return EXIT_OK


async def watch(client: AsyncClient, args: argparse.Namespace) -> int:
    last = None
    async for state in client.watch(args.job_id):
        last = state
        emit([as_json(last) if args.json else f"{codec.status_name(last.status)}"], args.json)
    assert last is not None
    if not args.json:
        print(describe("", last, None, None))
    return EXIT_OK if last.status == codec.DONE else EXIT_JOB_FAILED


async def cancel(client: AsyncClient, args: argparse.Namespace) -> int:
    job = await client.cancel(args.job_id)
    emit([as_json(job) if args.json else f"{job.job_id}  {codec.status_name(job.status)}"], args.json)
    return EXIT_OK


async def stats(client: AsyncClient, args: argparse.Namespace) -> int:
    s = await client.stats()
    if args.json:
        emit([as_json(s)], True)
        return EXIT_OK
    sizes = ", ".join(f"{k}:{v}" for k, v in sorted(s.batch_size_histogram.items()))
    mean = s.jobs / s.batches if s.batches else 0.0
    print(f"jobs {s.jobs} in {s.batches} batches (mean {mean:.1f})")
    print(f"padding efficiency {s.padding_efficiency:.2f}, queue {s.queue_depth}")
    print(f"dead letters {s.dead_letter_depth}")
    print(f"batch sizes {sizes or '-'}")
    for w in s.workers:
        per_batch = w.inference_ms / max(w.batches, 1)
        print(f"  {w.worker}: {w.batches} batches, {w.jobs} jobs, {per_batch:.1f} ms/batch")
    return EXIT_OK


def emit(items: list[Any], as_json_lines: bool) -> None:
    for item in items:
        print(json.dumps(item) if as_json_lines else item)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="batchline", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--target", default="127.0.0.1:8080", help="Envoy, or the ingress or embedded server")
    p.add_argument("--stream-target", default="", help="stream address (default: --target)")
    p.add_argument("--json", action="store_true", help="one JSON object per line")
    p.add_argument(
        "--api-key",
        default=None,
        help="sent as `authorization: Bearer <key>` (default: $BATCHLINE_API_KEY; never printed)",
    )
    p.add_argument("--tls", action="store_true", help="TLS with the system's root certificates")
    p.add_argument("--ca-file", default=None, help="TLS, trusting this CA certificate (PEM)")
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("submit", help="submit texts")
    s.add_argument("texts", nargs="+")
    s.add_argument("--watch", action="store_true", help="follow each job to its result")
    for name in ("get", "watch", "cancel"):
        sub.add_parser(name, help=f"{name} a job").add_argument("job_id")
    sub.add_parser("stats", help="pipeline statistics")
    return p


async def run(args: argparse.Namespace) -> int:
    client = AsyncClient(
        args.target,
        stream_target=args.stream_target or None,
        timeout_s=30,
        api_key=args.api_key,
        tls=args.tls,
        ca_file=args.ca_file,
    )
    commands = {"submit": submit, "get": get, "watch": watch, "cancel": cancel, "stats": stats}
    try:
        return await commands[args.command](client, args)
    except RpcError as exc:
        print(f"batchline: {exc}", file=sys.stderr)
        return EXIT_USAGE if exc.code == grpc.StatusCode.INVALID_ARGUMENT else EXIT_RPC
    finally:
        await client.close()


def main() -> None:
    sys.exit(asyncio.run(run(parser().parse_args())))


if __name__ == "__main__":
    main()
