"""The README quick start, executed: `make run`, then the demo command it shows."""

from __future__ import annotations

import re
import shlex
import signal
import socket
import subprocess

from tests.conftest import ROOT
from tests.e2e.conftest import Service


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def readme_commands() -> list[str]:
    blocks = re.findall(r"```bash\n(.*?)```", (ROOT / "README.md").read_text(), flags=re.S)
    return [line.split("#")[0].strip() for block in blocks for line in block.splitlines() if line.strip()]


def test_readme_quick_start_runs(services: list[Service], clean_env: None) -> None:
    commands = readme_commands()
    assert "make run" in commands and "make test" in commands
    [demo] = [c for c in commands if c.startswith(".venv/bin/batchline") and " submit " in c]
    port = free_port()
    run = Service("make run", {"PORT": str(port), "MODEL_BACKEND": "auto"}, argv=["make", "-s", "run"])
    services.append(run)
    run.wait_line("Batchline is ready")
    argv = [a.replace("50051", str(port)) for a in shlex.split(demo)]
    result = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "POSITIVE" in result.stdout and "NEGATIVE" in result.stdout
    assert "batch_size=" in result.stdout and "queue_wait=" in result.stdout
    run.kill(signal.SIGINT)  # Ctrl-C: the pipeline drains and says so
    run.process.wait(20)
    run.wait_line("embedded pipeline stopped", timeout_s=5)
