"""Services as real subprocesses, clients over the network."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pytest

from batchline.settings import BrokerSettings, StoreSettings

T = TypeVar("T")


class Service:
    """A `python -m <module>` subprocess whose JSON log lines are collected as they come."""

    def __init__(self, module: str, env: dict[str, str], argv: list[str] | None = None) -> None:
        self.module = module
        full_env = {**os.environ, "LOG_FORMAT": "json", "PYTHONUNBUFFERED": "1", **env}
        self.process = subprocess.Popen(
            argv or [sys.executable, "-m", module],
            env=full_env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))

    def events(self) -> Iterator[dict[str, Any]]:
        for line in list(self.lines):
            if line.startswith("{"):
                try:
                    yield json.loads(line)
                except json.JSONDecodeError:
                    continue

    def wait_log(self, needle: str, timeout_s: float = 60) -> dict[str, Any]:
        """The first JSON log event whose message contains `needle`."""
        return self._wait(
            lambda: next((e for e in self.events() if needle in e.get("msg", "")), None),
            f"log {needle!r}",
            timeout_s,
        )

    def wait_line(self, needle: str, timeout_s: float = 120) -> str:
        """The first output line (JSON or not) that contains `needle`."""
        return self._wait(
            lambda: next((line for line in list(self.lines) if needle in line), None),
            f"print {needle!r}",
            timeout_s,
        )

    def _wait(self, find: Callable[[], T | None], what: str, timeout_s: float) -> T:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            found = find()
            if found is not None:
                return found
            if self.process.poll() is not None:
                break
            time.sleep(0.05)
        raise AssertionError(f"{self.module} did not {what}; output:\n" + "\n".join(self.lines[-40:]))

    def port(self) -> int:
        return int(self.wait_log("listening")["port"])

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, sig)

    def stop(self, timeout_s: float = 20) -> int:
        """SIGTERM, wait, SIGKILL if it did not drain in time; the exit code."""
        if self.process.poll() is None:
            self.kill(signal.SIGTERM)
            try:
                self.process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.kill()
                self.process.wait(5)
        return self.process.returncode


@pytest.fixture
def service_env(broker_settings: BrokerSettings, store_settings: StoreSettings) -> dict[str, str]:
    return {
        "AMQP_URL": broker_settings.amqp_url,
        "REDIS_URL": store_settings.redis_url,
        "QUEUE_NAME": broker_settings.queue,
        "KEY_PREFIX": store_settings.key_prefix,
        "INGRESS_PORT": "0",
        "STREAM_PORT": "0",
        "HOST": "127.0.0.1",
        "MODEL_BACKEND": "simulated",
        "METRICS_PORT": "0",
    }


@pytest.fixture
def services() -> Iterator[list[Service]]:
    started: list[Service] = []
    yield started
    for service in started:
        service.stop()
