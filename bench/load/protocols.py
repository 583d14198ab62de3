"""The method under load and the three ways to call it: native gRPC, REST/JSON and grpc-web.

The schema comes from `--protoset`, `--proto` (compiled here with grpc_tools) or, for gRPC
with neither, server reflection. REST calls follow the method's `google.api.http` rule, the
same mapping Envoy's transcoder serves. Every outcome is a gRPC status with ghz's Go-style
name, whatever the protocol, so reports compare.
"""

from __future__ import annotations

import asyncio
import json
import re
import struct
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple, Protocol
from urllib.parse import quote, unquote, urlencode

import aiohttp
import grpc
from google.api import annotations_pb2
from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory
from google.protobuf.message import Message

from batchline import codec
from batchline.v1 import inference_pb2, job_pb2, stream_pb2
from bench.load import h2, http1
from bench.load.calldata import CallInfo
from bench.load.options import OptionError, Options

# grpc-go's names for the status codes, as ghz writes them (code 1 is "Canceled", one l).
GO_NAMES = [
    "OK", "Canceled", "Unknown", "InvalidArgument", "DeadlineExceeded", "NotFound", "AlreadyExists",
    "PermissionDenied", "ResourceExhausted", "FailedPrecondition", "Aborted", "OutOfRange",
    "Unimplemented", "Internal", "Unavailable", "DataLoss", "Unauthenticated",
]  # fmt: skip
# How a gRPC client reads an HTTP status that carries no grpc-status (the gRPC HTTP mapping).
HTTP_TO_CODE = {400: 13, 401: 16, 403: 7, 404: 12, 429: 14, 502: 14, 503: 14, 504: 14}
TERMINAL = {job_pb2.JOB_STATUS_DONE, job_pb2.JOB_STATUS_FAILED, job_pb2.JOB_STATUS_CANCELLED}
# A watch ended by the server, not by us, is re-opened: an overloaded gRPC server cancels calls
# past grpc.server.max_pending_requests (CANCELLED), or is unavailable or out of resources.
REWATCH = frozenset({1, 8, 14})  # CANCELLED, RESOURCE_EXHAUSTED, UNAVAILABLE
REWATCH_DELAY_S = 0.2
# Batchline's own routes for following a job (--e2e), over each protocol.
WATCH_PATH = "/batchline.v1.JobStreamService/WatchJob"
GET_JOB_PATH = "/batchline.v1.InferenceService/GetJob"


def grpc_frame(message: bytes) -> bytes:
    """A message as gRPC and grpc-web carry it: uncompressed, its length before it."""
    return b"\x00" + struct.pack(">I", len(message)) + message


def go_name(code: int) -> str:
    return GO_NAMES[code] if 0 <= code < len(GO_NAMES) else "Unknown"


def error_text(code: int, message: str) -> str:
    """An error as grpc-go prints it, the key of ghz's errorDistribution."""
    return f"rpc error: code = {go_name(code)} desc = {message}"


@dataclass(frozen=True)
class Outcome:
    code: int  # gRPC status code, 0 = OK
    message: str = ""
    response: Message | None = None

    @property
    def status(self) -> str:
        return go_name(self.code)

    @property
    def error(self) -> str:
        return "" if self.code == 0 else error_text(self.code, self.message)


# --- the schema --------------------------------------------------------------------------------


def full_method_name(call: str) -> str:
    """`pkg.Service/Method` or `pkg.Service.Method` -> `pkg.Service.Method`."""
    name = call.lstrip("/").replace("/", ".")
    if name.count(".") < 1:
        raise OptionError(f"--call: {call!r} is not package.Service.Method")
    return name


def descriptor_set(options: Options) -> bytes:
    """The FileDescriptorSet that holds the method, from --protoset, --proto or reflection."""
    if options.protoset:
        try:
            return Path(options.protoset).read_bytes()
        except OSError as exc:
            raise OptionError(f"--protoset: cannot read {options.protoset}: {exc.strerror}") from exc
    if options.proto:
        return _compile(options.proto, options.import_paths)
    return _reflect(options.host, full_method_name(options.call), options.connect_timeout)


def _compile(proto: str, import_paths: list[str]) -> bytes:
    import grpc_tools

    well_known = Path(grpc_tools.__file__).parent / "_proto"
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "set.pb"
        includes = [f"-I{p}" for p in [*import_paths, str(Path(proto).parent), str(well_known)]]
        done = subprocess.run(
            [sys.executable, "-m", "grpc_tools.protoc", *includes, "--include_imports",
             f"--descriptor_set_out={out}", proto],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        if done.returncode != 0:
            raise OptionError(f"--proto: {proto} does not compile: {done.stderr.strip()}")
        return out.read_bytes()


def _reflect(host: str, method: str, timeout: float) -> bytes:
    from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (
        ProtoReflectionDescriptorDatabase,
    )

    service = method.rpartition(".")[0]
    with grpc.insecure_channel(host) as channel:
        try:
            grpc.channel_ready_future(channel).result(timeout=timeout or None)
        except grpc.FutureTimeoutError as exc:
            raise OptionError(f"host: cannot connect to {host} for reflection") from exc
        database = ProtoReflectionDescriptorDatabase(channel)
        files: dict[str, descriptor_pb2.FileDescriptorProto] = {}
        try:
            pending = [database.FindFileContainingSymbol(service)]
        except KeyError as exc:
            raise OptionError(f"--call: {host} does not offer {service} by reflection") from exc
        while pending:
            file = pending.pop()
            if file.name in files:
                continue
            files[file.name] = file
            pending.extend(database.FindFileByName(dep) for dep in file.dependency if dep not in files)
    return descriptor_pb2.FileDescriptorSet(file=list(files.values())).SerializeToString()


@dataclass(frozen=True)
class HttpRule:
    """A method's `google.api.http` binding: verb, path template and body field."""

    verb: str
    template: str
    body: str

    def request(self, data: dict[str, Any]) -> tuple[str, str, bytes | None]:
        """Verb, path with query, and JSON body for a request given as proto JSON."""
        rest = dict(data)

        def fill(match: re.Match[str]) -> str:
            name = match.group(1).split("=")[0]
            value = rest.pop(name, rest.pop(_camel(name), ""))
            return quote(str(value), safe="")

        path = re.sub(r"{([^}]+)}", fill, self.template)
        if self.body == "*":
            return self.verb, path, json.dumps(rest).encode()
        body = json.dumps(rest.pop(self.body)).encode() if self.body else None
        query = urlencode({k: v for k, v in rest.items() if not isinstance(v, dict | list)})
        return self.verb, f"{path}?{query}" if query else path, body


def _camel(name: str) -> str:
    head, *tail = name.split("_")
    return head + "".join(part.title() for part in tail)


@dataclass(frozen=True)
class Method:
    info: CallInfo
    path: str  # /package.Service/Method
    input: type[Message]
    output: type[Message]
    http: HttpRule | None


def load_method(raw_set: bytes, call: str) -> Method:
    """Find the method in a serialized FileDescriptorSet."""
    files = list(descriptor_pb2.FileDescriptorSet.FromString(raw_set).file)
    pool = descriptor_pool.DescriptorPool()
    added: set[str] = set()
    while files:  # dependencies first, whatever order the set lists them in
        ready = [f for f in files if all(d in added for d in f.dependency)]
        if not ready:
            raise OptionError("--protoset: the descriptor set lacks imported files (use --include_imports)")
        for file in ready:
            pool.Add(file)
            added.add(file.name)
            files.remove(file)
    name = full_method_name(call)
    try:
        method = pool.FindMethodByName(name)
    except KeyError as exc:
        raise OptionError(f"--call: no method {name} in the schema") from exc
    options = method.GetOptions()
    http = None
    if options.HasExtension(annotations_pb2.http):
        rule = options.Extensions[annotations_pb2.http]
        verb = rule.WhichOneof("pattern")
        if verb and verb != "custom":
            http = HttpRule(verb.upper(), getattr(rule, verb), rule.body)
    return Method(
        info=CallInfo(
            name,
            method.input_type.full_name,
            method.output_type.full_name,
            method.client_streaming,
            method.server_streaming,
        ),
        path=f"/{method.containing_service.full_name}/{method.name}",
        input=message_factory.GetMessageClass(method.input_type),
        output=message_factory.GetMessageClass(method.output_type),
        http=http,
    )


# --- callers -----------------------------------------------------------------------------------


class Followed(NamedTuple):
    """The last state of a followed job seen (None if none), and how often its watch was re-opened."""

    job: job_pb2.Job | None
    rewatches: int = 0


class Caller(Protocol):
    async def call(self, data: dict[str, Any], payload: bytes) -> Outcome: ...
    async def follow(self, job_id: str, poll: bool) -> Followed: ...
    async def get_job(self, job_id: str) -> job_pb2.Job | None: ...
    async def close(self) -> None: ...


def make_caller(options: Options, method: Method, concurrency: int) -> Caller:
    if options.protocol == "grpc":
        return GrpcCaller(options, method)
    return HttpCaller(options, method, concurrency)


class GrpcCaller:
    """Native gRPC on `--connections` separate HTTP/2 connections, calls spread over them in turn.

    The calls under load and a followed job's WatchJob stream (--e2e) go over bench.load.h2,
    which costs the generator a fraction of what grpc.aio's client does per call
    (docs/benchmarks/h2-client-ab.md); GetJob (--e2e-poll, and the look after the run) goes
    over grpc.aio, on a channel opened only when first needed."""

    def __init__(self, options: Options, method: Method) -> None:
        try:
            self._pool = h2.Pool(options.host, options.connections, options.connect_timeout or None)
        except ValueError as exc:
            raise OptionError(f"host: {exc}") from exc
        self._block = h2.request_block(self._pool.authority, method.path, options.metadata, options.timeout)
        stream_host = options.stream_host or options.host
        try:  # connected on the first watch
            self._watches = h2.Pool(stream_host, options.connections, options.connect_timeout or None)
        except ValueError as exc:
            raise OptionError(f"--stream-host: {exc}") from exc
        self._watch_block = h2.request_block(
            self._watches.authority, WATCH_PATH, options.metadata, options.timeout
        )
        self._metadata = tuple(options.metadata.items())
        self._output = method.output
        self._timeout = options.timeout or None
        self._host = options.host
        self._get: grpc.aio.UnaryUnaryMultiCallable[inference_pb2.GetJobRequest, inference_pb2.GetJobResponse]
        self._get_channel: grpc.aio.Channel | None = None

    async def ready(self) -> None:
        """Every connection up (bounded by the caller's asyncio.timeout)."""
        await self._pool.connect()

    async def call(self, data: dict[str, Any], payload: bytes) -> Outcome:
        try:
            async with asyncio.timeout(self._timeout):
                reply = await self._pool.request(self._block, grpc_frame(payload))
        except TimeoutError:
            return Outcome(4, "Deadline Exceeded")  # as grpc-python words it
        except h2.StreamReset as exc:
            return Outcome(exc.grpc_code, str(exc))
        except OSError as exc:  # refused, reset, closed, not HTTP/2
            return Outcome(14, str(exc) or type(exc).__name__)
        return grpc_outcome(reply, self._output)

    async def get_job(self, job_id: str) -> job_pb2.Job | None:
        if self._get_channel is None:  # GetJob is rare: its channel opens on the first
            self._get_channel = grpc.aio.insecure_channel(self._host)
            self._get = self._get_channel.unary_unary(
                GET_JOB_PATH,
                request_serializer=inference_pb2.GetJobRequest.SerializeToString,
                response_deserializer=inference_pb2.GetJobResponse.FromString,
            )
        reply: inference_pb2.GetJobResponse = await self._get(
            inference_pb2.GetJobRequest(job_id=job_id), timeout=self._timeout, metadata=self._metadata
        )
        return reply.job

    async def follow(self, job_id: str, poll: bool) -> Followed:
        if poll:
            while True:
                job = await self.get_job(job_id)
                if job is not None and job.status in TERMINAL:
                    return Followed(job)
                await asyncio.sleep(0.005)
        last: job_pb2.Job | None = None
        rewatches = 0
        while True:  # a watch the server sheds is re-opened after the last state seen, as clients do
            seen = last.sequence if last else codec.ACCEPTED_SEQUENCE  # the Submit said QUEUED
            request = stream_pb2.WatchJobRequest(job_id=job_id, after_sequence=seen).SerializeToString()
            watch = _Watch()
            call = asyncio.ensure_future(
                self._watches.request(self._watch_block, grpc_frame(request), watch.feed)
            )
            try:
                either: set[asyncio.Future[Any]] = {call, watch.ended}
                await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
            finally:
                call.cancel()  # a terminal state seen (or our deadline): the stream is reset
            last = watch.last or last
            if watch.ended.done():
                if call.done() and not call.cancelled():
                    call.exception()  # read: the job's end was seen, however the stream ended
                return Followed(watch.ended.result(), rewatches)
            try:
                reply = call.result()
                code, message = status_of(reply.headers, reply.trailers)
            except h2.StreamReset as exc:
                code, message = exc.grpc_code, str(exc)
            except OSError as exc:
                code, message = 14, str(exc)
            if code == 0:  # the server ended the watch before the job ended
                return Followed(last, rewatches)
            if code not in REWATCH:
                raise WatchError(error_text(code, message))
            rewatches += 1
            await asyncio.sleep(REWATCH_DELAY_S)

    async def close(self) -> None:
        await self._pool.close()
        await self._watches.close()
        if self._get_channel is not None:
            await self._get_channel.close(None)


class WatchError(Exception):
    """A WatchJob stream ended with a status that re-opening it would not change."""


class _Watch:
    """One WatchJob stream's events, parsed as its DATA arrives: the last job state, and `ended`
    once a terminal one comes."""

    def __init__(self) -> None:
        self.buffer = bytearray()
        self.last: job_pb2.Job | None = None
        self.ended: asyncio.Future[job_pb2.Job] = asyncio.get_running_loop().create_future()

    def feed(self, chunk: bytes) -> None:
        self.buffer += chunk
        while len(self.buffer) >= 5:
            end = 5 + int.from_bytes(self.buffer[1:5], "big")
            if len(self.buffer) < end:
                return
            event = stream_pb2.WatchJobResponse.FromString(bytes(self.buffer[5:end]))
            del self.buffer[:end]
            if event.HasField("job"):
                self.last = event.job
                if event.job.status in TERMINAL and not self.ended.done():
                    self.ended.set_result(event.job)


def status_of(headers: Mapping[str, str], trailers: Mapping[str, str]) -> tuple[int, str]:
    """A gRPC or grpc-web call's status as grpc-go reads it: grpc-status from the trailers (or
    from the headers of a trailers-only response) with its percent-encoded message; with none,
    the HTTP status mapped (gRPC's HTTP mapping), UNKNOWN when it says 200."""
    status = trailers.get("grpc-status", headers.get("grpc-status"))
    if status is None:
        http = headers.get(":status", "200")
        code = HTTP_TO_CODE.get(int(http), 2) if http.isdigit() else 2
        return code, f"no grpc-status in the response (HTTP status {http})"
    if not status.isdigit():
        return 13, f"a grpc-status that is not a number: {status[:40]!r}"
    return int(status), unquote(trailers.get("grpc-message", headers.get("grpc-message", "")))


def grpc_outcome(reply: h2.Response, output: type[Message]) -> Outcome:
    """A unary gRPC response: its status, and its one message when OK."""
    code, message = status_of(reply.headers, reply.trailers)
    if code != 0:
        return Outcome(code, message)
    body = reply.body
    if len(body) < 5 or body[0] != 0 or len(body) != 5 + struct.unpack(">I", body[1:5])[0]:
        return Outcome(13, "the response is not one uncompressed gRPC message")
    return Outcome(0, "", output.FromString(body[5:]))


class HttpCaller:
    """REST/JSON or grpc-web through Envoy, over HTTP/1.1 keep-alive connections.

    The calls under load (and GetJob) go over bench.load.http1, which costs the generator about
    half of what aiohttp does per call (docs/benchmarks/http1-client-ab.md); a followed
    job's stream (--e2e) goes over aiohttp. A REST reply is checked to be JSON and decoded into
    the method's message only when --e2e needs its job id: json_format takes about 20 µs."""

    def __init__(self, options: Options, method: Method, concurrency: int) -> None:
        if options.protocol == "rest" and method.http is None:
            raise OptionError(f"--protocol rest: {method.info.full_name} has no google.api.http rule")
        base = options.host if "://" in options.host else f"http://{options.host}"
        self._web = options.protocol == "grpc-web"
        self._headers = dict(options.metadata)
        if self._web:
            self._headers |= {"content-type": "application/grpc-web+proto", "x-grpc-web": "1"}
        else:
            self._headers["content-type"] = "application/json"
        try:
            self._pool = http1.Pool(base, self._headers, options.connect_timeout or None)
        except ValueError as exc:
            raise OptionError(f"host: {exc}") from exc
        connector = aiohttp.TCPConnector(limit=concurrency + 8, force_close=False)
        timeout = aiohttp.ClientTimeout(total=options.timeout or None, connect=options.connect_timeout)
        self._session = aiohttp.ClientSession(base, connector=connector, timeout=timeout)
        self._method = method
        self._timeout = options.timeout or None
        self._decode = bool(options.e2e)

    async def call(self, data: dict[str, Any], payload: bytes) -> Outcome:
        try:
            async with asyncio.timeout(self._timeout):
                if self._web:
                    return await self._grpc_web(self._method.path, payload, self._method.output)
                assert self._method.http is not None
                verb, path, body = self._method.http.request(data)
                reply = await self._pool.request(verb, path, body)
        except TimeoutError:
            return Outcome(4, "Deadline Exceeded")  # as grpc-python words it
        except OSError as exc:  # refused, reset, closed early, not HTTP
            return Outcome(14, str(exc) or type(exc).__name__)
        if reply.status != 200:
            return _http_error(reply.status, reply.body)
        try:
            parsed = json.loads(reply.body)
        except ValueError:
            return Outcome(13, f"the reply is not JSON: {reply.body[:200].decode(errors='replace')}")
        return Outcome(0, "", json_format.ParseDict(parsed, self._method.output()) if self._decode else None)

    async def _grpc_web(self, path: str, payload: bytes, output: type[Message]) -> Outcome:
        reply = await self._pool.request("POST", path, grpc_frame(payload))
        if reply.status != 200:
            return _http_error(reply.status, reply.body)
        messages, trailers = grpc_web_frames(reply.body)
        code, message = status_of(reply.headers, trailers)
        if code != 0:
            return Outcome(code, message)
        return Outcome(0, "", output.FromString(messages[0]) if messages else output())

    async def follow(self, job_id: str, poll: bool) -> Followed:
        return Followed(await self._follow(job_id, poll))

    async def _follow(self, job_id: str, poll: bool) -> job_pb2.Job | None:
        if poll:
            while True:
                job = await self.get_job(job_id)
                if job is None or job.status in TERMINAL:
                    return job
                await asyncio.sleep(0.005)
        if self._web:
            request = stream_pb2.WatchJobRequest(job_id=job_id).SerializeToString()
            async with self._session.post(
                WATCH_PATH, data=grpc_frame(request), headers=self._headers
            ) as reply:
                while True:
                    head = await reply.content.readexactly(5)
                    chunk = await reply.content.readexactly(struct.unpack(">I", head[1:])[0])
                    if head[0] & 0x80:
                        return None
                    event = stream_pb2.WatchJobResponse.FromString(chunk)
                    if event.HasField("job") and event.job.status in TERMINAL:
                        return event.job
        async with self._session.get(f"/v1/jobs/{job_id}:watch") as reply:
            async for line in reply.content:
                if line.strip():
                    event = json_format.Parse(line, stream_pb2.WatchJobResponse(), ignore_unknown_fields=True)
                    if event.HasField("job") and event.job.status in TERMINAL:
                        return event.job
        return None

    async def get_job(self, job_id: str) -> job_pb2.Job | None:
        if self._web:
            payload = inference_pb2.GetJobRequest(job_id=job_id).SerializeToString()
            outcome = await self._grpc_web(GET_JOB_PATH, payload, inference_pb2.GetJobResponse)
            found = outcome.response
            return found.job if isinstance(found, inference_pb2.GetJobResponse) else None
        reply = await self._pool.request("GET", f"/v1/jobs/{quote(job_id, safe='')}")
        if reply.status != 200:
            return None
        return json_format.Parse(reply.body, inference_pb2.GetJobResponse()).job

    async def close(self) -> None:
        await self._pool.close()
        await self._session.close()


def grpc_web_frames(body: bytes) -> tuple[list[bytes], dict[str, str]]:
    """grpc-web frames: the data messages and the trailers."""
    messages: list[bytes] = []
    trailers: dict[str, str] = {}
    at = 0
    while at + 5 <= len(body):
        flag, size = body[at], struct.unpack(">I", body[at + 1 : at + 5])[0]
        chunk = body[at + 5 : at + 5 + size]
        at += 5 + size
        if flag & 0x80:
            for line in chunk.decode(errors="replace").split("\r\n"):
                key, _, value = line.partition(":")
                if key:
                    trailers[key.strip().lower()] = value.strip()
        else:
            messages.append(chunk)
    return messages, trailers


def _http_error(status: int, body: bytes) -> Outcome:
    """Envoy's JSON google.rpc.Status when it sent one, the gRPC HTTP mapping when not."""
    try:
        parsed = json.loads(body)
        return Outcome(int(parsed["code"]), str(parsed.get("message", "")))
    except (ValueError, KeyError, TypeError):
        return Outcome(HTTP_TO_CODE.get(status, 2), f"HTTP {status}: {body[:200].decode(errors='replace')}")
