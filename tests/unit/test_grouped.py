"""`Grouped`, the primitive under the ingress's group commit and the stream's grouped reads (each
tested with its own user): what neither user exercises."""

from __future__ import annotations

import asyncio

import pytest

from batchline.grouped import Grouped


async def test_a_send_that_answers_the_wrong_count_fails_every_caller_of_its_group() -> None:
    async def send(items: list[int]) -> list[int]:
        return items[:-1]  # a bug: one answer short

    grouped: Grouped[int, int] = Grouped(send)
    calls = [asyncio.create_task(grouped(i)) for i in range(3)]
    answers = await asyncio.wait_for(asyncio.gather(*calls, return_exceptions=True), 5)
    assert all(isinstance(a, RuntimeError) and "2 answers for a group of 3" in str(a) for a in answers)


async def test_callers_still_waiting_when_the_service_stops_are_cancelled_not_left_hanging() -> None:
    gate = asyncio.Event()

    async def send(items: list[int]) -> list[int]:
        await gate.wait()
        return items

    grouped: Grouped[int, int] = Grouped(send)
    in_flight = asyncio.create_task(grouped(0))
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    waiting = asyncio.create_task(grouped(1))
    await asyncio.sleep(0)
    flusher = grouped._flusher
    assert flusher is not None
    flusher.cancel()  # what stopping the service's loop does to it
    for call in (in_flight, waiting):
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(call, 5)
