"""Request bodies: ghz's call-data templates applied to the JSON before each request.

Supported, with ghz's meaning: `{{.RequestNumber}}`, `{{.WorkerID}}`, `{{.FullyQualifiedName}}`,
`{{.MethodName}}`, `{{.ServiceName}}`, `{{.InputName}}`, `{{.OutputName}}`,
`{{.IsClientStreaming}}`, `{{.IsServerStreaming}}`, `{{.Timestamp}}`, `{{.TimestampUnix}}`,
`{{.TimestampUnixMilli}}`, `{{.TimestampUnixNano}}`, `{{.UUID}}`, and the functions
`{{newUUID}}`, `{{randomString N}}`, `{{randomInt MIN MAX}}`. An array of messages is used
round-robin, one per request. Anything else in `{{ }}` is refused before the run starts.
"""

from __future__ import annotations

import json
import random
import re
import string
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from bench.load.options import OptionError

_ACTION = re.compile(r"{{\s*(.*?)\s*}}")


@dataclass(frozen=True)
class CallInfo:
    """What a template may ask about the method being called."""

    full_name: str  # package.Service.Method
    input_name: str
    output_name: str
    client_streaming: bool = False
    server_streaming: bool = False


def _fields(info: CallInfo, number: int, worker: str) -> dict[str, Callable[[], str]]:
    service, _, method = info.full_name.rpartition(".")
    return {
        ".RequestNumber": lambda: str(number),
        ".WorkerID": lambda: worker,
        ".FullyQualifiedName": lambda: info.full_name,
        ".MethodName": lambda: method,
        ".ServiceName": lambda: service,
        ".InputName": lambda: info.input_name,
        ".OutputName": lambda: info.output_name,
        ".IsClientStreaming": lambda: str(info.client_streaming).lower(),
        ".IsServerStreaming": lambda: str(info.server_streaming).lower(),
        ".Timestamp": lambda: datetime.now(UTC).isoformat(),
        ".TimestampUnix": lambda: str(int(time.time())),
        ".TimestampUnixMilli": lambda: str(time.time_ns() // 1_000_000),
        ".TimestampUnixNano": lambda: str(time.time_ns()),
        ".UUID": lambda: str(uuid.uuid4()),
        "newUUID": lambda: str(uuid.uuid4()),
    }


def _function(action: str) -> str | None:
    words = action.split()
    if words[0] == "randomString" and len(words) == 2 and words[1].isdigit():
        return "".join(random.choices(string.ascii_letters + string.digits, k=int(words[1])))
    if words[0] == "randomInt" and len(words) == 3 and all(w.lstrip("-").isdigit() for w in words[1:]):
        return str(random.randint(int(words[1]), int(words[2]) - 1))  # Go's [min, max)
    return None


class CallData:
    """Renders request `number`'s message as a dict (templates applied, arrays round-robin)."""

    def __init__(self, data: dict[str, Any] | list[dict[str, Any]], info: CallInfo) -> None:
        items = data if isinstance(data, list) else [data]
        self.info = info
        self._texts = [json.dumps(item) for item in items]
        self._items = items
        self.templated = any("{{" in text for text in self._texts)
        for text in self._texts:  # refuse what cannot render before a single request is sent
            for action in _ACTION.findall(text):
                if action not in _fields(info, 0, "0") and _function(action) is None:
                    raise OptionError(f"-d/--data: template action {{{{{action}}}}} is not supported")

    def __len__(self) -> int:
        return len(self._items)

    def message(self, number: int, worker: str = "0") -> dict[str, Any]:
        index = number % len(self._items)
        if not self.templated:
            return self._items[index]
        values = _fields(self.info, number, worker)

        def render(match: re.Match[str]) -> str:
            action = match.group(1)
            text = values[action]() if action in values else _function(action)
            assert text is not None  # checked in __init__
            return json.dumps(text)[1:-1]  # escaped for its place inside a JSON string

        result: dict[str, Any] = json.loads(_ACTION.sub(render, self._texts[index]))
        return result
