"""A lean HTTP/1.1 client for the load generator's unary REST and grpc-web calls.

The generator shares the machine with the system it measures, so every microsecond it spends
on a request is taken from the server. A request through aiohttp's ClientSession cost the
generator 100-170 µs more CPU than it costs through this client, about twice as much
(docs/benchmarks/http1-client-ab.md). In the Xeon run of docs/benchmarks/load-2000.md, half
of what a REST Submit through Envoy cost all processes beyond a gRPC one through Envoy was the
generator's. This is what wrk or hey do: keep-alive connections, one request in flight on
each, requests written as bytes, responses parsed as they arrive. Bodies end by
Content-Length, chunked encoding, or the connection closing. Plaintext only, like the rest of
the harness.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import cast
from urllib.parse import urlsplit


class ProtocolError(ConnectionError):
    """The server sent something that is not an HTTP/1.1 response."""


@dataclass(frozen=True)
class Response:
    status: int
    headers: dict[str, str]  # names in lower case
    body: bytes
    keep_alive: bool


def parse_response(buffer: bytearray, eof: bool = False) -> tuple[Response, int] | None:
    """The first complete response in `buffer` and how many bytes it took, or None if more
    must arrive. `eof`: the connection has closed, which ends a body that has no length.
    Interim responses (1xx) before it are removed from `buffer`."""
    while True:
        end = buffer.find(b"\r\n\r\n")
        if end < 0:
            return None
        lines = bytes(buffer[:end]).decode("latin-1").split("\r\n")
        version, _, rest = lines[0].partition(" ")
        if not version.startswith("HTTP/1.") or not rest[:3].isdigit():
            raise ProtocolError(f"not an HTTP/1.1 status line: {lines[0][:80]!r}")
        status = int(rest[:3])
        if 100 <= status < 200:  # an interim response (100 Continue): the real one follows
            del buffer[: end + 4]
            continue
        break
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, colon, value = line.partition(":")
        if not colon:
            raise ProtocolError(f"not a header line: {line[:80]!r}")
        headers[name.strip().lower()] = value.strip()
    start = end + 4
    keep_alive = version == "HTTP/1.1" and headers.get("connection", "").lower() != "close"
    if status in (204, 304):
        return Response(status, headers, b"", keep_alive), start
    if "chunked" in headers.get("transfer-encoding", "").lower():
        chunked = _chunked(buffer, start)
        if chunked is None:
            return None
        return Response(status, headers, chunked[0], keep_alive), chunked[1]
    if "content-length" in headers:
        if not headers["content-length"].isdigit():
            raise ProtocolError(f"bad content-length: {headers['content-length'][:40]!r}")
        length = int(headers["content-length"])
        if len(buffer) < start + length:
            return None
        return Response(status, headers, bytes(buffer[start : start + length]), keep_alive), start + length
    if not eof:  # the body runs until the server closes the connection
        return None
    return Response(status, headers, bytes(buffer[start:]), False), len(buffer)


def _chunked(buffer: bytearray, at: int) -> tuple[bytes, int] | None:
    """A chunked body from `at`: its bytes and where it ends (trailers, if any, are skipped)."""
    body = bytearray()
    while True:
        line_end = buffer.find(b"\r\n", at)
        if line_end < 0:
            return None
        try:
            size = int(bytes(buffer[at:line_end]).split(b";")[0], 16)
        except ValueError as exc:
            raise ProtocolError(f"bad chunk size: {bytes(buffer[at:line_end])[:40]!r}") from exc
        at = line_end + 2
        if size == 0:
            if buffer[at : at + 2] == b"\r\n":
                return bytes(body), at + 2
            trailers_end = buffer.find(b"\r\n\r\n", at)
            return None if trailers_end < 0 else (bytes(body), trailers_end + 4)
        if len(buffer) < at + size + 2:
            return None
        body += buffer[at : at + size]
        at += size + 2


class _Connection(asyncio.Protocol):
    """One keep-alive connection; one request at a time."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.reply: asyncio.Future[Response] | None = None
        self.closed = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not asyncio's class

    def exchange(self, request: bytes) -> asyncio.Future[Response]:
        assert self.transport is not None and not self.buffer  # the pool reuses only clean ones
        self.reply = asyncio.get_running_loop().create_future()
        self.transport.write(request)
        return self.reply

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        self._deliver(eof=False)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.buffer:
            self._deliver(eof=True)
        if self.reply is not None and not self.reply.done():
            self.reply.set_exception(ConnectionError("the server closed the connection before its response"))

    def _deliver(self, eof: bool) -> None:
        if self.reply is None or self.reply.done():
            self.close()  # bytes nobody asked for: the connection cannot be trusted
            return
        try:
            parsed = parse_response(self.buffer, eof)
        except ProtocolError as exc:
            self.reply.set_exception(exc)
            self.close()
            return
        if parsed is not None:
            response, used = parsed
            del self.buffer[:used]
            self.reply.set_result(response)

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()


class Pool:
    """Keep-alive connections to one server, opened as needed; the caller bounds concurrency.

    `headers` go on every request (Host and Content-Length are added here)."""

    def __init__(self, url: str, headers: dict[str, str], connect_timeout: float | None = None) -> None:
        parts = urlsplit(url if "://" in url else f"http://{url}")
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(f"{url!r}: give http://host:port (this client speaks no TLS)")
        self.host, self.port = parts.hostname, parts.port or 80
        fixed = {"host": parts.netloc, **{k.lower(): v for k, v in headers.items()}}
        self._headers = "".join(f"{name}: {value}\r\n" for name, value in fixed.items())
        self._connect_timeout = connect_timeout
        self._idle: list[_Connection] = []
        self._open: set[_Connection] = set()

    async def request(
        self, method: str, path: str, body: bytes | None = None, headers: dict[str, str] | None = None
    ) -> Response:
        """Send one request and read its whole response. A connection whose exchange failed
        or was cancelled (a timeout) is closed, never reused."""
        extra = "".join(f"{name}: {value}\r\n" for name, value in (headers or {}).items())
        length = f"content-length: {len(body)}\r\n" if body is not None else ""
        head = f"{method} {path} HTTP/1.1\r\n{self._headers}{extra}{length}\r\n".encode("latin-1")
        connection = await self._connection()
        try:
            response = await connection.exchange(head + body if body else head)
        except BaseException:
            self._discard(connection)
            raise
        if response.keep_alive and not connection.closed and not connection.buffer:
            self._idle.append(connection)
        else:
            self._discard(connection)
        return response

    async def _connection(self) -> _Connection:
        while self._idle:
            connection = self._idle.pop()
            if not connection.closed:  # the server may close an idle one
                return connection
            self._open.discard(connection)
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(self._connect_timeout):
                _, connection = await loop.create_connection(_Connection, self.host, self.port)
        except TimeoutError as exc:  # a connection error, not the call's own deadline
            where = f"{self.host}:{self.port}"
            raise ConnectionError(f"cannot connect to {where} in {self._connect_timeout} s") from exc
        self._open.add(connection)
        return connection

    def _discard(self, connection: _Connection) -> None:
        connection.close()
        self._open.discard(connection)

    async def close(self) -> None:
        for connection in list(self._open):
            self._discard(connection)
        self._idle.clear()
