"""Small entry points at the system's edges: error metadata, health probe, weight fetching."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from batcher import fetch
from batchline import healthcheck
from batchline.errors import QueueFull, to_rpc_status


@pytest.mark.parametrize(("delay_s", "header"), [(0.2, "1"), (1.0, "1"), (2.5, "3")])
def test_queue_full_sends_retry_after_in_whole_seconds_rounded_up(delay_s: float, header: str) -> None:
    status = to_rpc_status(QueueFull("full", retry_after_s=delay_s))
    metadata = dict(status.trailing_metadata)
    assert metadata["retry-after"] == header
    assert "grpc-status-details-bin" in metadata  # the RetryInfo detail travels too


def test_healthcheck_fails_when_nothing_serves(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert healthcheck.main([f"127.0.0.1:{port}"]) == 1
    assert "NOT SERVING" in capsys.readouterr().out
    assert healthcheck.main([]) == 2


def test_fetch_fails_clearly_without_the_hub(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert fetch.main(["--model-id", "no-such/model", "--to", str(tmp_path / "m")]) == 1
    assert "could not download no-such/model" in capsys.readouterr().err
