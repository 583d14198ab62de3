"""The load generator's lean HTTP/1.1 client: every way a response body can end, responses that
arrive in pieces, connections reused only when clean, and failures that close them."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest

from bench.load.http1 import Pool, ProtocolError, parse_response

OK = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}"
CHUNKED = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3;x=y\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"


def test_a_body_ends_at_its_content_length_and_what_follows_is_left() -> None:
    buffer = bytearray(OK + b"HTTP/1.1")
    response, used = parse_response(buffer) or pytest.fail("complete")
    assert (response.status, response.body, response.keep_alive) == (200, b"{}", True)
    assert response.headers["content-type"] == "application/json" and buffer[used:] == b"HTTP/1.1"


def test_a_chunked_body_is_joined_and_its_trailers_skipped() -> None:
    assert (parse_response(bytearray(CHUNKED)) or pytest.fail("complete"))[0].body == b"abcde"
    trailed = CHUNKED.replace(b"0\r\n\r\n", b"0\r\ngrpc-status: 0\r\n\r\n") + b"next"
    response, used = parse_response(bytearray(trailed)) or pytest.fail("complete")
    assert response.body == b"abcde" and trailed[used:] == b"next"


@pytest.mark.parametrize("whole", [OK, CHUNKED])
def test_a_response_cut_anywhere_is_not_complete_until_its_last_byte(whole: bytes) -> None:
    for cut in range(len(whole)):
        assert parse_response(bytearray(whole[:cut])) is None, cut


def test_a_body_without_a_length_runs_to_the_close() -> None:
    buffer = bytearray(b"HTTP/1.0 200 OK\r\n\r\nall of it")
    assert parse_response(buffer) is None
    response, _ = parse_response(buffer, eof=True) or pytest.fail("complete")
    assert (response.body, response.keep_alive) == (b"all of it", False)


def test_interim_responses_are_skipped_and_close_is_honoured() -> None:
    closing = OK.replace(b"OK\r\n", b"OK\r\nConnection: close\r\n")
    buffer = bytearray(b"HTTP/1.1 100 Continue\r\n\r\n" + closing)
    response, _ = parse_response(buffer) or pytest.fail("complete")
    assert (response.status, response.keep_alive) == (200, False)
    no_body = parse_response(bytearray(b"HTTP/1.1 204 No Content\r\n\r\n")) or pytest.fail("complete")
    assert no_body[0].body == b""


@pytest.mark.parametrize(
    "garbage",
    [b"SSH-2.0-OpenSSH\r\n\r\n", b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n",
     b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n",
     b"HTTP/1.1 200 OK\r\ncontent-length: -1\r\n\r\n"],
)  # fmt: skip
def test_what_is_not_http_is_a_protocol_error(garbage: bytes) -> None:
    with pytest.raises(ProtocolError):
        parse_response(bytearray(garbage))


# --- against a real socket ----------------------------------------------------------------------


@contextlib.asynccontextmanager
async def serve(answers: list[list[bytes]]) -> AsyncIterator[tuple[str, list[bytes], list[int]]]:
    """A server that answers the n-th request it reads, on whichever connection, with answers[n]
    written piece by piece (an empty piece: close the connection there). Yields its URL, the
    request heads it read, and how many connections it accepted."""
    heads: list[bytes] = []
    accepted = [0]
    handlers: list[asyncio.Task[None]] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted[0] += 1
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError), contextlib.closing(writer):
            while len(heads) < len(answers):
                head = await reader.readuntil(b"\r\n\r\n")
                pieces = answers[len(heads)]
                heads.append(head)
                length = [ln for ln in head.split(b"\r\n") if ln.lower().startswith(b"content-length:")]
                if length:
                    await reader.readexactly(int(length[0].split(b":")[1]))
                for piece in pieces:
                    if not piece:
                        return
                    writer.write(piece)
                    await writer.drain()
                    await asyncio.sleep(0.001)

    def start(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        handlers.append(asyncio.create_task(handle(reader, writer)))

    server = await asyncio.start_server(start, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}", heads, accepted
    finally:
        server.close()
        for handler in handlers:
            handler.cancel()
        await asyncio.gather(*handlers, return_exceptions=True)
        await server.wait_closed()


async def test_keep_alive_reuses_one_connection_for_replies_in_pieces() -> None:
    pieces = [OK[:10], OK[10:40], OK[40:]]
    async with serve([pieces, [CHUNKED[:20], CHUNKED[20:]], [OK]]) as (url, heads, accepted):
        pool = Pool(url, {"content-type": "application/json", "X-Key": "k"})
        replies = [await pool.request("POST", "/v1/infer", b'{"text": "hi"}') for _ in range(3)]
        assert [r.body for r in replies] == [b"{}", b"abcde", b"{}"] and accepted == [1]
        assert heads[0].startswith(b"POST /v1/infer HTTP/1.1\r\nhost: 127.0.0.1:")
        assert b"x-key: k\r\n" in heads[0] and b"content-length: 14\r\n" in heads[0]
        await pool.close()


async def test_a_connection_closed_mid_reply_fails_that_call_and_the_next_opens_anew() -> None:
    async with serve([[OK[:30], b""], [OK]]) as (url, _, accepted):
        pool = Pool(url, {})
        with pytest.raises(ConnectionError, match="closed the connection"):
            await pool.request("GET", "/v1/stats")
        assert (await pool.request("GET", "/v1/stats")).body == b"{}" and accepted == [2]
        await pool.close()


async def test_a_call_cancelled_by_its_deadline_closes_its_connection() -> None:
    async with serve([[OK[:30]], [OK]]) as (url, _, accepted):  # the first reply never ends
        pool = Pool(url, {})
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.2):
                await pool.request("GET", "/v1/stats")
        assert (await pool.request("GET", "/v1/stats")).status == 200 and accepted == [2]
        await pool.close()


async def test_a_refused_connection_and_a_tls_url_are_connection_and_value_errors() -> None:
    async with serve([]) as (url, _, _):
        port = int(url.rsplit(":", 1)[1])
    with pytest.raises(ConnectionError):  # the server above has stopped
        await Pool(f"http://127.0.0.1:{port}", {}).request("GET", "/")
    with pytest.raises(ValueError, match="no TLS"):
        Pool("https://127.0.0.1:8443", {})
