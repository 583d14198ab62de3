"""The benchmarks' JSON files, readable by every parser: Python writes NaN and Infinity, which
JSON has not (jq, JavaScript's JSON.parse and strict parsers refuse the file), so a number a
run did not measure (NaN) or an unbounded one (a saturation run's load) is written as null."""

from __future__ import annotations

import json
import math
from typing import Any


def finite(value: Any) -> Any:
    """`value` with None in place of every NaN and infinity, in dicts, lists and tuples."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: finite(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [finite(item) for item in value]
    return value


def dumps(value: Any, indent: int = 2, default: Any = None) -> str:
    """`value` as JSON with a final newline; raises on anything `finite` leaves non-finite."""
    return json.dumps(finite(value), indent=indent, allow_nan=False, default=default) + "\n"
