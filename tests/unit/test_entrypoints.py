"""Small entry points at the system's edges: error metadata, health probe, weight fetching, UI server."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import threading
import urllib.request
import warnings
from pathlib import Path

import pytest

from batcher import fetch
from batchline import healthcheck, lifecycle, webui
from batchline.errors import QueueFull, to_rpc_status
from batchline.settings import SettingsError


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


def test_webui_serves_the_app_and_tells_it_where_envoy_is(tmp_path: Path) -> None:
    (tmp_path / "index.html").write_text("<!doctype html><title>chat</title>")
    server = webui.serve(0, "http://127.0.0.1:18080", tmp_path)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        with urllib.request.urlopen(f"{base}/config.json", timeout=5) as reply:
            assert reply.headers["cache-control"] == "no-store"
            assert json.loads(reply.read()) == {"api": "http://127.0.0.1:18080"}
        with urllib.request.urlopen(f"{base}/", timeout=5) as reply:
            assert b"<title>chat</title>" in reply.read()
    finally:
        server.shutdown()
        server.server_close()


def test_webui_refuses_to_start_without_a_build(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="build the UI first"):
        webui.serve(0, "http://127.0.0.1:8080", tmp_path)


def test_a_ready_service_keeps_its_startup_heap_out_of_full_collections() -> None:
    """What startup allocated is frozen, so a full collection walks only what requests allocate
    (the ingress's full-collection pauses at 1,000 Submit/s went from 17 ms to under 1 ms)."""
    script = (
        "import gc, ingress.servicer, stream.servicer\n"
        "from batchline.lifecycle import freeze_startup_heap\n"
        "before = len(gc.get_objects(2))\n"
        "freeze_startup_heap()\n"
        "print(before, len(gc.get_objects(2)), gc.get_freeze_count())\n"
    )
    reply = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    before, after, frozen = map(int, reply.stdout.split())
    assert before > 10_000  # the imported stack, tracked and walked by every full collection
    assert after < 100
    assert frozen >= before


@pytest.mark.parametrize(
    ("name", "loop_type"), [(None, "uvloop.Loop"), ("uvloop", "uvloop.Loop"), ("asyncio", "asyncio")]
)
def test_services_run_on_the_loop_that_event_loop_names(
    monkeypatch: pytest.MonkeyPatch, name: str | None, loop_type: str
) -> None:
    if name is None:
        monkeypatch.delenv("EVENT_LOOP", raising=False)
    else:
        monkeypatch.setenv("EVENT_LOOP", name)
    seen: list[str] = []

    async def main() -> None:
        loop = type(asyncio.get_running_loop())
        seen.append(f"{loop.__module__}.{loop.__qualname__}")

    lifecycle.run_service(main())
    [running] = seen
    assert running.startswith(loop_type)


def test_an_unknown_event_loop_is_refused_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVENT_LOOP", "trio")
    started: list[bool] = []

    async def main() -> None:
        started.append(True)

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the refused coroutine is closed, not left unawaited
        with pytest.raises(SettingsError, match=r"EVENT_LOOP='trio': choose uvloop or asyncio"):
            lifecycle.run_service(main())
    assert not started


def test_a_dependency_not_ready_at_startup_is_info_and_one_lost_while_serving_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    fails = [True, False, True, True]  # starting, ready, lost, still lost; then stop
    states: list[bool] = []
    stop = asyncio.Event()

    async def check() -> None:
        if len(fails) == 1:
            stop.set()
        if fails.pop(0):
            raise ConnectionError("redis down")

    class Server:
        async def set_serving(self, serving: bool) -> None:
            states.append(serving)

    caplog.set_level("INFO", logger=lifecycle.log.name)
    asyncio.run(lifecycle.watch_dependencies(Server(), [check], stop, every_s=0.001))  # type: ignore[arg-type]
    assert states == [False, True, False]
    told = [(r.levelname, r.getMessage()) for r in caplog.records if "redis down" in r.getMessage()]
    assert told == [
        ("INFO", "waiting for a dependency: redis down"),
        ("WARNING", "dependency check failed: redis down"),
    ]
