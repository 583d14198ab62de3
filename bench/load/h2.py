"""A lean HTTP/2 client for the load generator's gRPC calls: unary, and server-streaming.

The generator shares the machine with the system it measures, so every microsecond it spends on
a call is taken from the server. grpc.aio's client cost the generator 184-336 µs of CPU per
unary call where this one cost 67-105, and its client side woke late every second or so
(docs/benchmarks/h2-client-ab.md, grpc-floor.md). This is what ghz's Go client or h2load do instead: HTTP/2
connections held open, every call a stream on one of them, request frames written as bytes,
frames parsed as they arrive.

Enough of HTTP/2 (RFC 9113) for a client whose calls send one message: the preface and
settings, flow control both ways, the peer's frame-size and concurrent-stream limits, header
blocks split over CONTINUATION, padding, PING, RST_STREAM and GOAWAY; a streamed response's
body goes to its reader as it arrives. Header blocks are decoded by `hpack`.
The client asks for an HPACK dynamic table of size 0, so once the server has taken that up a
header block means the same every time, and the handful of different blocks a gRPC server
sends are decoded once each. Plaintext (h2c with prior knowledge) only, like the rest of the
harness; no server push, no compression.
"""

from __future__ import annotations

import asyncio
import collections
import math
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import cast
from urllib.parse import urlsplit

import hpack

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS, PUSH_PROMISE, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = (
    range(10)
)
END_STREAM = ACK = 0x1
END_HEADERS = 0x4
PADDED = 0x8
PRIORITY_FLAG = 0x20
SETTINGS_HEADER_TABLE_SIZE, SETTINGS_ENABLE_PUSH, SETTINGS_MAX_CONCURRENT_STREAMS = 1, 2, 3
SETTINGS_INITIAL_WINDOW_SIZE, SETTINGS_MAX_FRAME_SIZE = 4, 5
DEFAULT_WINDOW = 65_535
DEFAULT_FRAME = 16_384  # the largest frame either side may send until told otherwise
MAX_WINDOW = 2**31 - 1
LAST_STREAM_ID = 2**31 - 1
CANCEL = 0x8
REFUSED_STREAM = 0x7
# The gRPC status a call ends with when its stream is reset (gRPC's HTTP/2 mapping): REFUSED_STREAM
# is UNAVAILABLE, CANCEL is CANCELLED, ENHANCE_YOUR_CALM is RESOURCE_EXHAUSTED, INADEQUATE_SECURITY
# is PERMISSION_DENIED, anything else INTERNAL.
RESET_TO_CODE = {REFUSED_STREAM: 14, CANCEL: 1, 0xB: 8, 0xC: 7}
HEADER = struct.Struct(">IBI")  # 24-bit length and 8-bit type in one word, flags, stream id
CACHED_BLOCKS = 256
# How often a call refused before the server took it is sent: gRPC's server can refuse a stream
# for a moment after its limit frees one, before it has counted the freed stream out.
REFUSED_ATTEMPTS = 5


class ProtocolError(ConnectionError):
    """The server broke HTTP/2; the connection is closed and every call on it fails."""


class StreamReset(ConnectionError):
    """The server reset the call's stream (RST_STREAM), or went away before taking it (GOAWAY)."""

    def __init__(self, error_code: int, why: str) -> None:
        super().__init__(why)
        self.error_code = error_code

    @property
    def grpc_code(self) -> int:
        return RESET_TO_CODE.get(self.error_code, 13)


@dataclass(frozen=True)
class Response:
    headers: Mapping[str, str]  # shared between responses: read only
    body: bytes
    trailers: Mapping[str, str]


def frame(kind: int, flags: int, stream_id: int, payload: bytes = b"") -> bytes:
    return HEADER.pack(len(payload) << 8 | kind, flags, stream_id) + payload


def _integer(value: int, prefix_bits: int, first: int) -> bytes:
    """An HPACK integer with an N-bit prefix; `first` holds the bits above the prefix."""
    limit = (1 << prefix_bits) - 1
    if value < limit:
        return bytes([first | value])
    out = bytearray([first | limit])
    value -= limit
    while value >= 128:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _string(text: str) -> bytes:
    raw = text.encode("latin-1")
    return _integer(len(raw), 7, 0) + raw


def _literal(name: int | str, value: str) -> bytes:
    """A header field as a literal not added to the table: by static-table name index or by name."""
    if isinstance(name, int):
        return _integer(name, 4, 0) + _string(value)
    return b"\x00" + _string(name) + _string(value)


def grpc_timeout(seconds: float) -> str:
    """The grpc-timeout header: at most 8 digits and a unit, rounded up."""
    millis = math.ceil(seconds * 1000)
    return f"{millis}m" if millis < 100_000_000 else f"{math.ceil(seconds)}S"


def request_block(authority: str, path: str, metadata: Mapping[str, str], timeout: float | None) -> bytes:
    """The HPACK header block of a gRPC request, with no dynamic-table state: the same bytes
    serve every call to `path`."""
    block = b"\x83\x86" + _literal(4, path) + _literal(1, authority)  # :method POST, :scheme http
    block += _literal(31, "application/grpc") + _literal("te", "trailers")
    block += _literal(58, "batchline-bench")  # user-agent
    if timeout:
        block += _literal("grpc-timeout", grpc_timeout(timeout))
    for name, value in metadata.items():
        block += _literal(name.lower(), value)
    return block


OnData = Callable[[bytes], None]


class _Stream:
    __slots__ = ("body", "headers", "id", "on_data", "pending", "reply", "trailers", "window")

    def __init__(
        self,
        stream_id: int,
        reply: asyncio.Future[Response],
        window: int,
        data: bytes,
        on_data: OnData | None,
    ) -> None:
        self.id = stream_id
        self.on_data = on_data  # takes the body as it arrives (a streamed response), if given
        self.reply = reply
        self.window = window  # how much more the server takes on this stream
        self.pending = data  # request bytes not yet sent (flow control)
        self.headers: Mapping[str, str] | None = None
        self.body = bytearray()
        self.trailers: Mapping[str, str] = {}


class Connection(asyncio.Protocol):
    """One HTTP/2 connection; calls are streams on it, as many at once as the server allows."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.streams: dict[int, _Stream] = {}
        self.next_id = 1
        self.closed = False
        self.going_away = False
        self.ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()  # server's SETTINGS
        self.peer_streams: float = math.inf  # the server's SETTINGS_MAX_CONCURRENT_STREAMS
        self.peer_window = DEFAULT_WINDOW  # its SETTINGS_INITIAL_WINDOW_SIZE
        self.peer_frame = DEFAULT_FRAME
        self.send_window = DEFAULT_WINDOW  # the connection's, for our DATA
        self.received = 0  # DATA bytes taken since the connection's window was last topped up
        self.blocked: collections.deque[_Stream] = collections.deque()  # waiting for window
        self.slots: collections.deque[asyncio.Future[None]] = collections.deque()  # for a stream
        self.decoder = hpack.Decoder()
        self.blocks: dict[bytes, Mapping[str, str]] = {}
        self.fragment: tuple[int, int, bytearray] | None = None  # a header block awaiting CONTINUATION

    # --- calls ------------------------------------------------------------------------------------

    @property
    def usable(self) -> bool:
        return not self.closed and not self.going_away and self.next_id <= LAST_STREAM_ID

    async def request(self, block: bytes, data: bytes, on_data: OnData | None = None) -> Response:
        """Send a request (its header block, its body) on a new stream and read the response.
        With `on_data`, the body goes to it piece by piece as it arrives (the response's body is
        then empty); an exception it raises ends the call. A call cancelled (its deadline, or
        its caller has read enough) resets its stream."""
        while len(self.streams) >= self.peer_streams and self.usable:
            slot = asyncio.get_running_loop().create_future()
            self.slots.append(slot)
            await slot
        if not self.usable:
            raise ConnectionError("the connection is closed or going away")
        assert self.transport is not None
        reply = asyncio.get_running_loop().create_future()
        stream = _Stream(self.next_id, reply, self.peer_window, data, on_data)
        self.next_id += 2
        self.streams[stream.id] = stream
        self.transport.write(self._header_frames(stream.id, block) + self._data_frames(stream))
        try:
            return await stream.reply
        except asyncio.CancelledError:
            self._reset(stream)
            raise

    def _reset(self, stream: _Stream) -> None:
        """End a stream from our side (RST_STREAM CANCEL)."""
        if self.streams.pop(stream.id, None) is not None and not self.closed:
            assert self.transport is not None
            self.transport.write(frame(RST_STREAM, 0, stream.id, struct.pack(">I", CANCEL)))
            self._release()

    def _header_frames(self, stream_id: int, block: bytes) -> bytes:
        size = self.peer_frame
        if len(block) <= size:
            return frame(HEADERS, END_HEADERS, stream_id, block)
        pieces = [block[at : at + size] for at in range(0, len(block), size)]
        out = frame(HEADERS, 0, stream_id, pieces[0])
        for index, piece in enumerate(pieces[1:], 2):
            out += frame(CONTINUATION, END_HEADERS if index == len(pieces) else 0, stream_id, piece)
        return out

    def _data_frames(self, stream: _Stream) -> bytes:
        """As much of the stream's body as flow control lets go now, the last frame ending the
        stream; the rest waits in `blocked` for a WINDOW_UPDATE."""
        out = b""
        while True:
            size = min(len(stream.pending), self.send_window, stream.window, self.peer_frame)
            if size <= 0 and stream.pending:
                self.blocked.append(stream)
                return out
            last = size == len(stream.pending)
            out += frame(DATA, END_STREAM if last else 0, stream.id, stream.pending[:size])
            stream.pending = stream.pending[size:]
            self.send_window -= size
            stream.window -= size
            if last:
                return out

    def _unblock(self) -> None:
        assert self.transport is not None
        waiting, self.blocked = self.blocked, collections.deque()
        out = b"".join(self._data_frames(s) for s in waiting if s.id in self.streams)
        if out:
            self.transport.write(out)

    def _release(self) -> None:
        """A stream ended: one call waiting for a stream may go. A connection going away closes
        with its last stream."""
        while self.slots:
            slot = self.slots.popleft()
            if not slot.done():
                slot.set_result(None)
                break
        if self.going_away and not self.streams:
            self.close()

    def _finish(self, stream: _Stream) -> None:
        if self.streams.pop(stream.id, None) is None:
            return
        if not stream.reply.done():
            stream.reply.set_result(Response(stream.headers or {}, bytes(stream.body), stream.trailers))
        self._release()

    def _fail(self, stream: _Stream, exc: Exception) -> None:
        if self.streams.pop(stream.id, None) is not None and not stream.reply.done():
            stream.reply.set_exception(exc)
        self._release()

    # --- the connection -----------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not asyncio's class
        settings = struct.pack(
            ">HIHIHI",
            SETTINGS_HEADER_TABLE_SIZE, 0,  # no HPACK dynamic table: header blocks can be cached
            SETTINGS_ENABLE_PUSH, 0,
            SETTINGS_INITIAL_WINDOW_SIZE, MAX_WINDOW,  # a reply never waits for our window
        )  # fmt: skip
        topup = struct.pack(">I", MAX_WINDOW - DEFAULT_WINDOW)
        self.transport.write(PREFACE + frame(SETTINGS, 0, 0, settings) + frame(WINDOW_UPDATE, 0, 0, topup))

    def data_received(self, data: bytes) -> None:
        buffer = self.buffer
        buffer += data
        at = 0
        try:
            while len(buffer) - at >= 9:
                word, flags, stream_id = HEADER.unpack_from(buffer, at)
                length = word >> 8
                if length > DEFAULT_FRAME:  # we never allow larger frames
                    raise ProtocolError(f"a frame of {length} bytes, over the {DEFAULT_FRAME} allowed")
                if len(buffer) - at - 9 < length:
                    break
                payload = bytes(buffer[at + 9 : at + 9 + length])
                at += 9 + length
                self._frame(word & 0xFF, flags, stream_id & LAST_STREAM_ID, payload)
        except (ProtocolError, hpack.HPACKError, struct.error) as exc:
            self.abort(exc if isinstance(exc, ProtocolError) else ProtocolError(f"bad frame: {exc}"))
            return
        del buffer[:at]

    def _frame(self, kind: int, flags: int, stream_id: int, payload: bytes) -> None:
        if self.fragment is not None and kind != CONTINUATION:
            raise ProtocolError("a header block was interrupted by another frame")
        if kind == DATA:
            self._data(flags, stream_id, payload)
        elif kind == HEADERS:
            block = _unpad(flags, payload)
            if flags & PRIORITY_FLAG:
                block = block[5:]
            if flags & END_HEADERS:
                self._headers(stream_id, flags, block)
            else:
                self.fragment = (stream_id, flags, bytearray(block))
        elif kind == CONTINUATION:
            if self.fragment is None or self.fragment[0] != stream_id:
                raise ProtocolError("CONTINUATION without a header block to continue")
            self.fragment[2].extend(payload)
            if flags & END_HEADERS:
                held, self.fragment = self.fragment, None
                self._headers(stream_id, held[1], bytes(held[2]))
        elif kind == RST_STREAM:
            stream = self.streams.get(stream_id)
            if stream is not None:
                code = struct.unpack(">I", payload)[0]
                self._fail(stream, StreamReset(code, f"the server reset the stream (HTTP/2 error {code})"))
        elif kind == SETTINGS:
            if not flags & ACK:
                self._settings(payload)
        elif kind == PING:
            if not flags & ACK:
                assert self.transport is not None
                self.transport.write(frame(PING, ACK, 0, payload))
        elif kind == GOAWAY:
            last_id, code = struct.unpack(">II", payload[:8])
            self._go_away(last_id & LAST_STREAM_ID, code)
        elif kind == WINDOW_UPDATE:
            increment = struct.unpack(">I", payload)[0] & MAX_WINDOW
            if stream_id == 0:
                self.send_window += increment
            elif (stream := self.streams.get(stream_id)) is not None:
                stream.window += increment
            self._unblock()
        elif kind == PUSH_PROMISE:
            raise ProtocolError("PUSH_PROMISE although push is disabled")
        # PRIORITY and unknown frame types are ignored, as the RFC asks

    def _data(self, flags: int, stream_id: int, payload: bytes) -> None:
        self.received += len(payload)  # padding counts against the window too
        if self.received > MAX_WINDOW // 2:
            assert self.transport is not None
            self.transport.write(frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", self.received)))
            self.received = 0
        stream = self.streams.get(stream_id)
        if stream is None:  # a stream we reset; its data still counted above
            return
        body = _unpad(flags, payload)
        if stream.on_data is None:
            stream.body += body
        else:
            try:
                stream.on_data(body)
            except Exception as exc:  # the reader's own failure ends this call, not the connection
                if not stream.reply.done():
                    stream.reply.set_exception(exc)
                self._reset(stream)
                return
        if flags & END_STREAM:
            self._finish(stream)

    def _headers(self, stream_id: int, flags: int, block: bytes) -> None:
        fields = self._decode(block)  # decoded even for a stream we reset: the table must follow
        stream = self.streams.get(stream_id)
        if stream is None:
            return
        if stream.headers is None:
            stream.headers = fields
        else:
            stream.trailers = fields
        if flags & END_STREAM:
            self._finish(stream)

    def _decode(self, block: bytes) -> Mapping[str, str]:
        if self.decoder.header_table.maxsize != 0:  # the server has not yet given up its table
            return dict(cast(list[tuple[str, str]], self.decoder.decode(block)))
        fields = self.blocks.get(block)
        if fields is None:  # with no table, the same bytes always decode the same
            fields = dict(cast(list[tuple[str, str]], self.decoder.decode(block)))
            if len(self.blocks) < CACHED_BLOCKS:
                self.blocks[block] = fields
        return fields

    def _settings(self, payload: bytes) -> None:
        if len(payload) % 6:
            raise ProtocolError("a SETTINGS frame whose length is not a multiple of 6")
        for at in range(0, len(payload), 6):
            key, value = struct.unpack(">HI", payload[at : at + 6])
            if key == SETTINGS_INITIAL_WINDOW_SIZE:
                for stream in self.streams.values():
                    stream.window += value - self.peer_window
                self.peer_window = value
            elif key == SETTINGS_MAX_FRAME_SIZE:
                self.peer_frame = value
            elif key == SETTINGS_MAX_CONCURRENT_STREAMS:
                self.peer_streams = value
        assert self.transport is not None
        self.transport.write(frame(SETTINGS, ACK, 0))
        if not self.ready.done():
            self.ready.set_result(None)
        self._unblock()
        free = self.peer_streams - len(self.streams)  # the limit may have risen
        while self.slots and free > 0:
            self._release()
            free -= 1

    def _go_away(self, last_id: int, code: int) -> None:
        """No new streams; those the server never took fail as refused, the rest run to their end."""
        self.going_away = True
        for stream in [s for s in self.streams.values() if s.id > last_id]:
            self._fail(stream, StreamReset(REFUSED_STREAM, f"the server went away (HTTP/2 error {code})"))
        for slot in self.slots:
            if not slot.done():
                slot.set_result(None)  # they find the connection unusable and fail
        self._release()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        why = ConnectionError(
            f"the connection was lost: {exc}" if exc else "the server closed the connection"
        )
        self._fail_all(why)

    def _fail_all(self, exc: Exception) -> None:
        if not self.ready.done():
            self.ready.set_exception(exc)
        for stream in list(self.streams.values()):
            self._fail(stream, exc)
        for slot in self.slots:
            if not slot.done():
                slot.set_result(None)

    def abort(self, exc: Exception) -> None:
        self.closed = True
        self._fail_all(exc)
        if self.transport is not None:
            self.transport.abort()

    def retire(self) -> None:
        """Take no new streams; close once those open have ended."""
        self.going_away = True
        self._release()

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()


def _unpad(flags: int, payload: bytes) -> bytes:
    if not flags & PADDED:
        return payload
    if not payload or payload[0] >= len(payload):
        raise ProtocolError("padding longer than its frame")
    return payload[1 : len(payload) - payload[0]]


class Pool:
    """`size` connections to one server, calls spread over them in turn. A connection lost or
    going away is replaced by the next call that finds it so."""

    def __init__(self, target: str, size: int, connect_timeout: float | None = None) -> None:
        parts = urlsplit(target if "://" in target else f"http://{target}")
        if parts.scheme != "http" or not parts.hostname or not parts.port:
            raise ValueError(f"{target!r}: give host:port (this client speaks no TLS)")
        self.authority = parts.netloc
        self.host, self.port = parts.hostname, parts.port
        self._connect_timeout = connect_timeout
        self._slots: list[asyncio.Task[Connection] | None] = [None] * max(1, size)
        self._next = 0

    @property
    def connections(self) -> list[Connection]:
        """The connections open now."""
        return [c for s in self._slots if s is not None and s.done() and (c := _opened(s)) is not None]

    async def connect(self) -> None:
        """Every connection open and the server's settings in."""
        for index in range(len(self._slots)):
            self._slots[index] = asyncio.create_task(self._open())
        await asyncio.gather(*(cast(asyncio.Task[Connection], slot) for slot in self._slots))

    async def request(self, block: bytes, data: bytes, on_data: OnData | None = None) -> Response:
        """One call (`on_data`: as in Connection.request). A stream the server refused
        (REFUSED_STREAM, or past a GOAWAY's last stream) never reached its application, so it
        is sent again, as gRPC clients do."""
        attempt = 1
        while True:
            connection = await self._connection()
            try:
                return await connection.request(block, data, on_data)
            except StreamReset as exc:
                if exc.error_code != REFUSED_STREAM or attempt == REFUSED_ATTEMPTS:
                    raise
            attempt += 1

    async def _connection(self) -> Connection:
        index = self._next
        self._next = (index + 1) % len(self._slots)
        slot = self._slots[index]
        if slot is None or (slot.done() and _opened(slot) is None):
            if slot is not None and (old := _opened(slot, usable=False)) is not None:
                old.retire()
            slot = self._slots[index] = asyncio.create_task(self._open())
        return await asyncio.shield(slot)  # one call's deadline must not cancel the others' connect

    async def _open(self) -> Connection:
        loop = asyncio.get_running_loop()
        where = f"{self.host}:{self.port}"
        connection: Connection | None = None
        try:
            async with asyncio.timeout(self._connect_timeout):
                _, connection = await loop.create_connection(Connection, self.host, self.port)
                await connection.ready
        except TimeoutError as exc:
            if connection is not None:  # connected, but the server never sent its settings
                connection.close()
            raise ConnectionError(f"cannot connect to {where} in {self._connect_timeout} s") from exc
        return connection

    async def close(self) -> None:
        for slot in self._slots:
            if slot is not None and not slot.done():
                slot.cancel()
            elif slot is not None and (connection := _opened(slot, usable=False)) is not None:
                connection.close()
        await asyncio.gather(*(s for s in self._slots if s is not None), return_exceptions=True)


def _opened(slot: asyncio.Task[Connection], usable: bool = True) -> Connection | None:
    """The connection a finished connect gave, if it did (and is still usable, if asked)."""
    if slot.cancelled() or slot.exception() is not None:
        return None
    connection = slot.result()
    return connection if connection.usable or not usable else None
