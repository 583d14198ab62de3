"""Calls grouped by load: a lone call goes out on the event loop's next turn, as a group of one,
waiting for no other; calls that arrive while a group is in flight wait for it and then go out
together, as one call of the function underneath.

So the groups grow with the load and with the function's round trip, and an idle service adds no
wait. The ingress stores and publishes single Submits this way (group commit), and the stream
service reads the current state of newly watched jobs this way (one Redis command for all).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

Item = TypeVar("Item")
Answer = TypeVar("Answer")
Send = Callable[[list[Item]], Awaitable[Sequence[Answer]]]


class Grouped(Generic[Item, Answer]):
    """`await grouped(item)` -> the answer `send` gave for that item.

    `send(items)` returns one answer per item, in order; an exception it raises is every caller's
    of that group. Each group goes out from a task of its own, so a caller that goes away (its
    call cancelled) does not stop the others' group."""

    def __init__(self, send: Send[Item, Answer], max_group: int = 256) -> None:
        self._send = send
        self._max_group = max_group
        self._waiting: list[tuple[Item, asyncio.Future[Answer]]] = []
        self._flusher: asyncio.Task[None] | None = None

    async def __call__(self, item: Item) -> Answer:
        answer: asyncio.Future[Answer] = asyncio.get_running_loop().create_future()
        self._waiting.append((item, answer))
        if self._flusher is None:
            self._flusher = asyncio.create_task(self._flush())
        return await answer

    async def _flush(self) -> None:
        try:
            while self._waiting:
                group, self._waiting = self._waiting[: self._max_group], self._waiting[self._max_group :]
                await self._answer(group)
        except asyncio.CancelledError:  # the service is stopping: nobody waits forever
            for _, answer in self._waiting:
                answer.cancel()
            self._waiting.clear()
            raise
        finally:
            self._flusher = None

    async def _answer(self, group: list[tuple[Item, asyncio.Future[Answer]]]) -> None:
        try:
            results = await self._send([item for item, _ in group])
            if len(results) != len(group):
                raise RuntimeError(f"{len(results)} answers for a group of {len(group)}")
        except asyncio.CancelledError:
            for _, answer in group:
                answer.cancel()
            raise
        except Exception as exc:  # Unavailable, or a bug: every caller of the group hears it
            for _, answer in group:
                with contextlib.suppress(asyncio.InvalidStateError):  # its caller went away
                    answer.set_exception(exc)
            return
        for (_, answer), result in zip(group, results, strict=True):
            with contextlib.suppress(asyncio.InvalidStateError):
                answer.set_result(result)
