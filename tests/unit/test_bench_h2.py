"""The load generator's lean HTTP/2 client: against a real grpc.aio server (concurrent streams,
flow control, deadlines, the server's stream limit, a server going away), and against a
scripted server for the frames a gRPC server rarely sends (CONTINUATION, padding, PING, resets,
GOAWAY, bytes that are not HTTP/2)."""

from __future__ import annotations

import asyncio
import contextlib
import struct
from collections.abc import AsyncIterator, Awaitable, Callable

import grpc
import hpack
import pytest

from batchline.v1 import inference_pb2
from bench.load import h2
from bench.load.protocols import Outcome, grpc_outcome

PATH = "/test.Echo/Call"
Handler = Callable[[bytes, grpc.aio.ServicerContext[bytes, bytes]], Awaitable[bytes]]


def framed(payload: bytes) -> bytes:
    return b"\x00" + struct.pack(">I", len(payload)) + payload


def message(reply: h2.Response) -> bytes:
    assert reply.trailers.get("grpc-status") == "0", (reply.headers, reply.trailers)
    return reply.body[5:]


def decoded(block: bytes) -> list[tuple[str, str]]:
    return [(str(name), str(value)) for name, value in hpack.Decoder().decode(block)]


def test_the_request_block_decodes_to_a_grpc_request() -> None:
    path = "/pkg." + "S" * 150 + "/Method"  # a length over 127: a multi-byte HPACK integer
    block = h2.request_block("127.0.0.1:1", path, {"X-Key": "k"}, 20.0)
    assert decoded(block) == [
        (":method", "POST"), (":scheme", "http"), (":path", path), (":authority", "127.0.0.1:1"),
        ("content-type", "application/grpc"), ("te", "trailers"), ("user-agent", "batchline-bench"),
        ("grpc-timeout", "20000m"), ("x-key", "k"),
    ]  # fmt: skip
    assert ("grpc-timeout", "1m") in decoded(h2.request_block("h:1", "/a/b", {}, 0.0001))
    assert h2.grpc_timeout(200_000) == "200000S" and h2.grpc_timeout(99_999.9) == "99999900m"
    assert "grpc-timeout" not in dict(decoded(h2.request_block("h:1", "/a/b", {}, None)))


def test_grpc_outcomes_follow_grpc_go() -> None:
    ok = h2.Response({":status": "200"}, framed(b"\x0a\x01x"), {"grpc-status": "0"})
    assert grpc_outcome(ok, inference_pb2.SubmitResponse) == Outcome(
        0, "", inference_pb2.SubmitResponse(job_id="x")
    )
    refused = h2.Response(
        {":status": "200", "grpc-status": "3", "grpc-message": "text: 100%25 blank"}, b"", {}
    )
    assert grpc_outcome(refused, inference_pb2.SubmitResponse) == Outcome(3, "text: 100% blank")
    proxy = h2.Response({":status": "503"}, b"upstream connect error", {})
    assert grpc_outcome(proxy, inference_pb2.SubmitResponse).code == 14
    silent = h2.Response({":status": "200"}, b"", {})  # no status at all: UNKNOWN, as grpc-go reads it
    assert grpc_outcome(silent, inference_pb2.SubmitResponse).code == 2
    cut = h2.Response({":status": "200"}, framed(b"\x0a\x01x")[:4], {"grpc-status": "0"})
    assert grpc_outcome(cut, inference_pb2.SubmitResponse).code == 13


# --- against grpc.aio ---------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def grpc_server(
    handler: Handler, *options: tuple[str, int]
) -> AsyncIterator[tuple[h2.Pool, grpc.aio.Server]]:
    """A grpc.aio server of one method, test.Echo/Call, and a pool of one connection to it."""
    server = grpc.aio.server(options=list(options))
    method = grpc.unary_unary_rpc_method_handler(handler)  # bytes in, bytes out
    server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler("test.Echo", {"Call": method})])
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    pool = h2.Pool(f"127.0.0.1:{port}", 1)
    try:
        await pool.connect()
        yield pool, server
    finally:
        await server.stop(None)


async def test_many_calls_at_once_share_one_connection_and_carry_metadata() -> None:
    seen: list[str] = []

    async def echo(request: bytes, context: grpc.aio.ServicerContext[bytes, bytes]) -> bytes:
        seen.append(dict(context.invocation_metadata() or ())["x-key"])
        return request[::-1]

    async with grpc_server(echo) as (pool, _):
        block = h2.request_block(pool.authority, PATH, {"X-Key": "k"}, 5.0)
        replies = await asyncio.gather(*(pool.request(block, framed(b"%d!" % i)) for i in range(300)))
        assert [message(r) for r in replies] == [(b"%d!" % i)[::-1] for i in range(300)] and seen == [
            "k"
        ] * 300
        [connection] = pool.connections
        assert connection.next_id == 601 and not connection.streams
        # the server took up the empty HPACK table asked for: its few header blocks decoded once each
        assert connection.decoder.header_table.maxsize == 0 and 1 <= len(connection.blocks) <= 3


async def test_a_request_larger_than_every_window_and_frame_arrives_whole() -> None:
    async def size(request: bytes, context: grpc.aio.ServicerContext[bytes, bytes]) -> bytes:
        return str(len(request)).encode() + request[-3:]

    async with grpc_server(size) as (pool, _):
        block = h2.request_block(pool.authority, PATH, {}, 10.0)
        big = bytes(range(256)) * 1200 + b"end"  # 307,203 bytes: over 65,535 and 16,384
        replies = await asyncio.gather(*(pool.request(block, framed(big)) for _ in range(4)))
        assert {message(r) for r in replies} == {b"307203end"}


async def test_the_deadline_goes_to_the_server_and_a_cancelled_call_leaves_the_connection_usable() -> None:
    async def slow(request: bytes, context: grpc.aio.ServicerContext[bytes, bytes]) -> bytes:
        if request == b"slow":
            await asyncio.sleep(2)
        return b"done"

    async with grpc_server(slow) as (pool, _):
        short = h2.request_block(pool.authority, PATH, {}, 0.2)
        expired = await pool.request(short, framed(b"slow"))  # the server's own deadline
        assert (expired.trailers or expired.headers).get("grpc-status") == "4"
        long = h2.request_block(pool.authority, PATH, {}, 10.0)
        with pytest.raises(TimeoutError):  # the caller's deadline: the stream is reset
            async with asyncio.timeout(0.2):
                await pool.request(long, framed(b"slow"))
        assert message(await pool.request(long, framed(b"fast"))) == b"done"


async def test_calls_over_the_servers_stream_limit_wait_for_a_stream() -> None:
    running = [0]
    most = [0]

    async def hold(request: bytes, context: grpc.aio.ServicerContext[bytes, bytes]) -> bytes:
        running[0] += 1
        most[0] = max(most[0], running[0])
        await asyncio.sleep(0.1)
        running[0] -= 1
        return request

    async with grpc_server(hold, ("grpc.max_concurrent_streams", 2)) as (pool, _):
        block = h2.request_block(pool.authority, PATH, {}, 10.0)
        replies = await asyncio.gather(*(pool.request(block, framed(b"x")) for _ in range(7)))
        assert [message(r) for r in replies] == [b"x"] * 7 and most == [2]


async def test_a_server_going_away_finishes_its_calls_and_then_refuses() -> None:
    async def slow(request: bytes, context: grpc.aio.ServicerContext[bytes, bytes]) -> bytes:
        await asyncio.sleep(0.3)
        return b"finished"

    async with grpc_server(slow) as (pool, server):
        block = h2.request_block(pool.authority, PATH, {}, 10.0)
        running = asyncio.create_task(pool.request(block, framed(b"x")))
        await asyncio.sleep(0.1)
        await server.stop(grace=2)  # GOAWAY; the call in flight runs to its end
        assert message(await running) == b"finished"
        with pytest.raises(ConnectionError):  # a new connection is refused
            await pool.request(block, framed(b"x"))


async def test_a_streamed_response_reaches_its_reader_as_it_arrives() -> None:
    async def events(request: bytes, context: grpc.aio.ServicerContext[bytes, bytes]) -> AsyncIterator[bytes]:
        yield b"first"
        await asyncio.sleep(0.3)
        yield b"second"

    server = grpc.aio.server()
    method = grpc.unary_stream_rpc_method_handler(events)
    server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler("test.Echo", {"Call": method})])
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    pool = h2.Pool(f"127.0.0.1:{port}", 1)
    try:
        block = h2.request_block(pool.authority, PATH, {}, 5.0)
        loop = asyncio.get_running_loop()
        arrived: list[tuple[float, bytes]] = []
        reply = await pool.request(block, framed(b"x"), lambda chunk: arrived.append((loop.time(), chunk)))
        ended = loop.time()
        assert b"".join(chunk for _, chunk in arrived) == framed(b"first") + framed(b"second")
        assert ended - arrived[0][0] >= 0.25 and reply.body == b"" and reply.trailers["grpc-status"] == "0"

        def refuse(chunk: bytes) -> None:
            raise ValueError("not what the reader expected")

        with pytest.raises(ValueError, match="not what the reader expected"):  # that call ends...
            await pool.request(block, framed(b"x"), refuse)
        assert (await pool.request(block, framed(b"x"))).trailers["grpc-status"] == "0"  # ...not the rest
    finally:
        await pool.close()
        await server.stop(None)


async def test_a_refused_connection_and_a_url_with_tls_are_connection_and_value_errors() -> None:
    async with grpc_server(lambda r, c: asyncio.sleep(0, r)) as (pool, _):
        host = pool.authority
    with pytest.raises(ConnectionError):
        await h2.Pool(host, 2, connect_timeout=2).connect()
    with pytest.raises(ValueError, match="no TLS"):
        h2.Pool("https://127.0.0.1:8443", 1)


# --- against a scripted server ------------------------------------------------------------------


async def read_frame(reader: asyncio.StreamReader) -> tuple[int, int, int, bytes]:
    word, flags, stream_id = h2.HEADER.unpack(await reader.readexactly(9))
    return word & 0xFF, flags, stream_id, await reader.readexactly(word >> 8)


Script = Callable[[asyncio.StreamReader, asyncio.StreamWriter, int], Awaitable[None]]


@contextlib.asynccontextmanager
async def scripted(script: Script) -> AsyncIterator[str]:
    """A server that takes the preface, sends empty SETTINGS, waits for a whole request and then
    runs `script(reader, writer, stream_id)`."""
    tasks: list[asyncio.Task[None]] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError), contextlib.closing(writer):
            assert await reader.readexactly(len(h2.PREFACE)) == h2.PREFACE
            writer.write(h2.frame(h2.SETTINGS, 0, 0))
            while True:
                kind, flags, stream_id, _ = await read_frame(reader)
                if kind == h2.DATA and flags & h2.END_STREAM:
                    await script(reader, writer, stream_id)

    server = await asyncio.start_server(
        lambda r, w: tasks.append(asyncio.create_task(handle(r, w))), "127.0.0.1", 0
    )
    try:
        yield f"127.0.0.1:{server.sockets[0].getsockname()[1]}"
    finally:
        server.close()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def call(host: str) -> h2.Response:
    pool = h2.Pool(host, 1, connect_timeout=2)
    try:
        async with asyncio.timeout(5):
            await pool.connect()
            return await pool.request(h2.request_block(pool.authority, PATH, {}, 5.0), framed(b"x"))
    finally:
        await pool.close()


async def test_continuation_padding_and_ping_are_understood() -> None:
    encoder = hpack.Encoder()
    pinged: list[bytes] = []

    async def reply(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, stream_id: int) -> None:
        writer.write(h2.frame(h2.PING, 0, 0, b"12345678"))
        while not pinged:
            kind, flags, _, payload = await read_frame(reader)
            if kind == h2.PING and flags & h2.ACK:
                pinged.append(payload)
        block = encoder.encode([(":status", "200"), ("content-type", "application/grpc")])
        writer.write(h2.frame(h2.HEADERS, h2.PADDED, stream_id, b"\x02" + block[:2] + b"\x00\x00"))
        writer.write(h2.frame(h2.CONTINUATION, h2.END_HEADERS, stream_id, block[2:]))
        writer.write(h2.frame(h2.DATA, h2.PADDED, stream_id, b"\x03" + framed(b"hello") + b"\x00" * 3))
        trailers = encoder.encode([("grpc-status", "0")])
        writer.write(h2.frame(h2.HEADERS, h2.END_HEADERS | h2.END_STREAM, stream_id, trailers))

    async with scripted(reply) as host:
        assert message(await call(host)) == b"hello" and pinged == [b"12345678"]


@pytest.mark.parametrize(
    ("kind", "payload", "grpc_code"),
    [(h2.RST_STREAM, struct.pack(">I", h2.REFUSED_STREAM), 14), (h2.RST_STREAM, struct.pack(">I", 0xB), 8),
     (h2.RST_STREAM, struct.pack(">I", 0x2), 13), (h2.GOAWAY, struct.pack(">II", 0, 0), 14)],
)  # fmt: skip
async def test_resets_and_goaway_end_the_call_with_grpcs_status(
    kind: int, payload: bytes, grpc_code: int
) -> None:
    async def reset(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, stream_id: int) -> None:
        writer.write(h2.frame(kind, 0, 0 if kind == h2.GOAWAY else stream_id, payload))

    async with scripted(reset) as host:
        with pytest.raises(h2.StreamReset) as raised:
            await call(host)
        assert raised.value.grpc_code == grpc_code


async def test_a_server_that_is_not_http2_is_a_protocol_error() -> None:
    async def http1(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n")
        await writer.drain()
        await asyncio.sleep(1)
        writer.close()

    server = await asyncio.start_server(http1, "127.0.0.1", 0)
    async with server:
        with pytest.raises(h2.ProtocolError, match="over the 16384 allowed"):
            await h2.Pool(f"127.0.0.1:{server.sockets[0].getsockname()[1]}", 1, 2).connect()


async def test_a_server_that_never_sends_its_settings_is_left_at_the_connect_timeout() -> None:
    closed = asyncio.Event()

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(-1)  # to the end: the client closed its side
        closed.set()
        writer.close()

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    async with server:
        pool = h2.Pool(f"127.0.0.1:{server.sockets[0].getsockname()[1]}", 1, connect_timeout=0.3)
        with pytest.raises(ConnectionError, match=r"in 0\.3 s"):
            await pool.connect()
        await asyncio.wait_for(closed.wait(), 2)
