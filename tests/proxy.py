"""A small TCP proxy that a test can cut and restore, to put a network fault between a service
(a real subprocess) and RabbitMQ or Redis.

    with TcpProxy(("127.0.0.1", 6379)) as proxy:     # services use 127.0.0.1:<proxy.port>
        proxy.cut()       # every open connection is reset; new ones are refused until...
        proxy.restore()   # ...connections are accepted and forwarded again

It runs on its own thread with its own event loop, so it works whatever the test itself does.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import Callable
from types import TracebackType


class TcpProxy:
    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._writers: set[asyncio.StreamWriter] = set()
        self._open = True
        self._flowing = asyncio.Event()  # cleared: the client's bytes are no longer read
        self.accepted = 0  # connections forwarded so far
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", 0))
        self.port: int = listener.getsockname()[1]
        self._listener = listener

    def __enter__(self) -> TcpProxy:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._serve(), self._loop).result(5)
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        async def shutdown() -> None:
            self._server.close()
            self._reset_all()
            pending = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(shutdown(), self._loop).result(5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        self._loop.close()

    def cut(self) -> None:
        """Reset every open connection and refuse new ones."""
        self._open = False
        self._call(self._reset_all)

    def restore(self) -> None:
        self._open = True

    def stall(self) -> None:
        """Stop reading what the clients send, the connections left open: their writes back up."""
        self._call(self._flowing.clear)

    def flow(self) -> None:
        self._call(self._flowing.set)

    def _call(self, function: Callable[[], None]) -> None:
        async def run() -> None:
            function()

        asyncio.run_coroutine_threadsafe(run(), self._loop).result(5)

    def _reset_all(self) -> None:
        for writer in list(self._writers):
            sock = writer.get_extra_info("socket")
            if sock is not None:  # RST rather than FIN: the peer sees the connection die
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
            writer.transport.abort()
        self._writers.clear()

    async def _serve(self) -> None:
        self._flowing.set()
        self._server = await asyncio.start_server(self._handle, sock=self._listener)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if not self._open:
            writer.transport.abort()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        except OSError:
            writer.transport.abort()
            return
        self.accepted += 1
        self._writers.update((writer, up_writer))

        async def pump(source: asyncio.StreamReader, sink: asyncio.StreamWriter, client: bool) -> None:
            try:
                while True:
                    if client:
                        await self._flowing.wait()  # stall() holds what the client sends
                    chunk = await source.read(65536)
                    if not chunk:
                        break
                    sink.write(chunk)
                    await sink.drain()
            except (OSError, asyncio.IncompleteReadError):
                pass
            finally:
                sink.transport.abort() if not self._open else sink.close()

        await asyncio.gather(pump(reader, up_writer, client=True), pump(up_reader, writer, client=False))
        self._writers.difference_update((writer, up_writer))
