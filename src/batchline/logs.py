"""Logging: one line per event, JSON in production (`LOG_FORMAT=json`), readable in a terminal."""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from typing import Any

# Attributes of every LogRecord; anything else passed in `extra=` is an event field.
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime", "taskName"}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        event: dict[str, Any] = {
            "ts": round(record.created, 3),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        event.update({k: v for k, v in vars(record).items() if k not in _STANDARD})
        if record.exc_info:
            event["exc"] = self.formatException(record.exc_info)
        return json.dumps(event, default=str)


class ConsoleFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        stamp = time.strftime("%H:%M:%S", time.localtime(record.created))
        extra = " ".join(f"{k}={v}" for k, v in vars(record).items() if k not in _STANDARD)
        line = f"{stamp} {record.levelname[0]} {record.name}: {record.getMessage()}"
        if extra:
            line += f"  [{extra}]"
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


# Libraries whose debug lines would flood the log, and would print message bodies (texts).
LIBRARIES = ("aio_pika", "aiormq", "grpc")


def quiet_libraries() -> None:
    """Warnings and worse only from LIBRARIES, whatever LOG_LEVEL says: aiormq's debug lines
    print every AMQP frame, and a frame holds a submitted text."""
    for name in LIBRARIES:
        logging.getLogger(name).setLevel(logging.WARNING)


def configure(service: str, level: str | None = None, fmt: str | None = None) -> None:
    """Set up the root logger once, from LOG_LEVEL and LOG_FORMAT (json|console)."""
    fmt = fmt or os.environ.get("LOG_FORMAT") or ("console" if sys.stderr.isatty() else "json")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else ConsoleFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel((level or os.environ.get("LOG_LEVEL") or "INFO").upper())
    quiet_libraries()
    logging.getLogger(service).debug("logging configured (%s)", fmt)
