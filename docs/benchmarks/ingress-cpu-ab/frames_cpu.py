"""CPU per message of a publish's frames: pamqp's frame objects (as aiormq's ChannelFrame
marshals them) against batchline.frames, timeit's best of 5, the bytes checked equal.

    PYTHONPATH=src:services:. .venv/bin/python docs/benchmarks/ingress-cpu-ab/frames_cpu.py
"""

import timeit

import aiormq
from aiormq.abc import ChannelFrame
from pamqp.body import ContentBody
from pamqp.header import ContentHeader

from batchline import frames, names

BODY = b"\x0a\x24" + b"x" * 80
MESSAGE_ID = "3f1c0a8e-2b7d-4e55-9a61-0d9c2f1e7b42"
METHOD = frames.publish_method(1, "inference.requests", mandatory=True)


def pamqp() -> bytes:
    properties = aiormq.spec.Basic.Properties(
        delivery_mode=2,
        message_id=MESSAGE_ID,
        content_type=names.TASK_CONTENT_TYPE,
        message_type=names.TASK_TYPE,
    )
    parts = [
        aiormq.spec.Basic.Publish(routing_key="inference.requests", mandatory=True),
        ContentHeader(properties=properties, body_size=len(BODY)),
        ContentBody(BODY),
    ]
    return ChannelFrame.marshall(channel_number=1, frames=parts).payload


def direct() -> bytes:
    return frames.publish(
        METHOD,
        1,
        BODY,
        max_content=131064,
        message_id=MESSAGE_ID,
        content_type=names.TASK_CONTENT_TYPE,
        message_type=names.TASK_TYPE,
        delivery_mode=2,
    )


assert pamqp() == direct()
for encode in (pamqp, direct, pamqp, direct):
    best = min(timeit.repeat(encode, number=20_000, repeat=5)) / 20_000
    print(f"{encode.__name__:7s} {best * 1e6:.2f} us per message")
