"""The chat UI in a real browser: `make run`'s topology (embedded pipeline, real Envoy, the UI
server) with a slowed simulated model, driven by clients/web/e2e/chat.e2e.ts in chromium."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from batchline import access
from tests.conftest import ROOT
from tests.e2e.conftest import Service
from tests.helpers import free_port

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
ARTIFACTS = ROOT / "test-artifacts" / "browser"


def run_stack(services: list[Service], workdir: Path, **env: str) -> int:
    """`make run`'s topology on free ports; the UI's port once it is ready."""
    web = free_port()
    workdir.mkdir()
    stack = Service(
        "devstack run",
        {
            "PORT": str(free_port()),
            "ENVOY_PORT": str(free_port()),
            "ENVOY_ADMIN_PORT": "0",
            "WEB_PORT": str(web),
            "DEVSTACK_DIR": str(workdir),
            "METRICS_PORT": "0",
            # Slow enough that ten lines keep the last ones queued for a second or two.
            "MODEL_BACKEND": "simulated",
            "SIM_FIXED_MS": "400",
            "SIM_PER_TOKEN_MS": "0",
            "MAX_BATCH_SIZE": "2",
            **env,
        },
        argv=[str(ROOT / ".venv/bin/python"), str(ROOT / "scripts/devstack.py"), "run"],
    )
    services.append(stack)
    stack.wait_line("Batchline is ready", timeout_s=120)
    return web


def test_chat_ui_in_chromium(services: list[Service], clean_env: None, tmp_path: Path) -> None:
    assert Path(CHROMIUM).exists(), f"{CHROMIUM} is missing: apt-get install -y chromium (.ci/run does)"
    assert (ROOT / "clients/web/dist/index.html").exists(), "build the UI first: make web"
    web = run_stack(services, tmp_path / "open")
    key = access.new_key()
    keyed = run_stack(services, tmp_path / "keyed", API_KEYS=access.entry("browser", key))

    shutil.rmtree(ARTIFACTS, ignore_errors=True)
    result = subprocess.run(
        ["node", "--import", "tsx", "--test", "--test-reporter=spec", "clients/web/e2e/chat.e2e.ts"],
        cwd=ROOT,
        env={
            **os.environ,
            "UI_URL": f"http://localhost:{web}",
            "KEYED_UI_URL": f"http://localhost:{keyed}",
            "API_KEY": key,
            "DEAD_API": f"http://127.0.0.1:{free_port()}",
            "ARTIFACTS": str(ARTIFACTS),
            "CHROMIUM": CHROMIUM,
        },
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-3000:]
    counts = dict(re.findall(r"\u2139 (tests|pass|fail) (\d+)", result.stdout))  # node's "i" lines
    assert counts == {"tests": "9", "pass": "9", "fail": "0"}, result.stdout[-3000:]
    for shot in (
        "chat-desktop.png",
        "chat-batch.png",
        "chat-phone.png",
        "input-too-long.png",
        "stack-down.png",
        "api-key.png",
    ):
        assert (ARTIFACTS / shot).stat().st_size > 10_000, shot
