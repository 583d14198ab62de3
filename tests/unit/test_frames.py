"""The publish frames encoded directly are pamqp's, byte for byte."""

from __future__ import annotations

import pytest
from pamqp import commands, frame
from pamqp.body import ContentBody
from pamqp.header import ContentHeader

from batchline import frames


def pamqp_publish(
    channel: int, routing_key: str, body: bytes, max_content: int, **properties: object
) -> bytes:
    parts = [
        frame.marshal(commands.Basic.Publish(routing_key=routing_key, mandatory=True), channel),
        frame.marshal(
            ContentHeader(properties=commands.Basic.Properties(**properties), body_size=len(body)),  # type: ignore[arg-type]
            channel,
        ),
    ]
    parts += [
        frame.marshal(ContentBody(body[at : at + max_content]), channel)
        for at in range(0, len(body), max_content)
    ]
    return b"".join(parts)


@pytest.mark.parametrize(
    ("body", "max_content", "headers"),
    [
        (b"\x0a\x24a task", 131064, None),
        (b"x" * 25, 10, None),  # split into frames of 10, 10 and 5 bytes
        (
            b"\x00\xffbinary",
            131064,
            {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
        ),
    ],
)
def test_a_publish_encodes_as_pamqp_does(
    body: bytes, max_content: int, headers: dict[str, str] | None
) -> None:
    properties = {
        "delivery_mode": 2,
        "message_id": "3f1c0a8e-2b7d-4e55-9a61-0d9c2f1e7b42",
        "content_type": "application/x-protobuf",
        "message_type": "batchline.v1.InferenceTask",
    }
    method = frames.publish_method(7, "inference.requests", mandatory=True)
    ours = frames.publish(method, 7, body, max_content=max_content, headers=headers, **properties)  # type: ignore[arg-type]
    assert ours == pamqp_publish(7, "inference.requests", body, max_content, headers=headers, **properties)


def test_a_short_string_past_255_bytes_is_refused() -> None:
    with pytest.raises(ValueError, match="at most 255 bytes"):
        frames.short_string("é" * 128)  # 256 bytes in UTF-8
