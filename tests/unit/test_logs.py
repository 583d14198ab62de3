"""Logging: one JSON line per event, and no library allowed to print message bodies."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import pytest

from batchline import logs


@pytest.fixture
def restored_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    levels = {name: logging.getLogger(name).level for name in logs.LIBRARIES}
    yield
    root.handlers[:], root.level = handlers, level
    for name, saved in levels.items():
        logging.getLogger(name).setLevel(saved)


def test_debug_level_leaves_libraries_at_warning(restored_logging: None) -> None:
    """aiormq logs whole AMQP frames at DEBUG, and a frame holds a submitted text."""
    logs.configure("test", level="DEBUG", fmt="json")
    assert logging.getLogger().level == logging.DEBUG
    for name in logs.LIBRARIES:
        assert not logging.getLogger(f"{name}.connection").isEnabledFor(logging.INFO)


def test_json_lines_carry_the_event_fields(restored_logging: None) -> None:
    record = logging.LogRecord("ingress", logging.INFO, __file__, 1, "job %s", ("accepted",), None)
    record.job_id = "42"
    event = json.loads(logs.JsonFormatter().format(record))
    assert event["msg"] == "job accepted" and event["job_id"] == "42" and event["level"] == "info"
