"""The README quick start, executed: `make run`, then every example it shows, then Ctrl-C."""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import urllib.request

from tests.conftest import ROOT
from tests.e2e.conftest import Service
from tests.helpers import free_port


def quick_start_blocks() -> list[str]:
    """The ```bash blocks of the Quick start section, in order."""
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```bash\n(.*?)```", section, flags=re.S)


def test_readme_quick_start_runs(services: list[Service], clean_env: None) -> None:
    setup, *examples = quick_start_blocks()
    commands = [line.split("#")[0].strip() for line in setup.splitlines()]
    assert commands == ["make run", "make test"]
    assert len(examples) == 3, "the gRPC, REST and grpc-web examples"

    port, envoy, web, metrics = free_port(), free_port(), free_port(), free_port()
    env = {
        "PORT": str(port),
        "ENVOY_PORT": str(envoy),
        "ENVOY_ADMIN_PORT": "0",
        "WEB_PORT": str(web),
        "METRICS_PORT": str(metrics),
        "MODEL_BACKEND": "auto",
    }
    run = Service("make run", env, argv=["make", "-s", "run"])
    services.append(run)
    run.wait_line("Batchline is ready", timeout_s=180)

    outputs = []
    for block in examples:
        script = block.replace("127.0.0.1:8080", f"127.0.0.1:{envoy}")
        result = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60
        )
        assert result.returncode == 0, f"{block}\n{result.stdout}\n{result.stderr}"
        outputs.append(result.stdout)
    grpc, rest, grpc_web = outputs
    assert "POSITIVE" in grpc and "NEGATIVE" in grpc
    assert "batch_size=" in grpc and "queue_wait=" in grpc
    assert rest.strip().splitlines()[-1].startswith('{"job":{') and '"JOB_STATUS_DONE"' in rest
    assert '"status":"DONE"' in grpc_web
    with urllib.request.urlopen(f"http://127.0.0.1:{metrics}/metrics", timeout=5) as reply:
        exposition = reply.read().decode()
    assert 'batchline_batches_total{close_reason="' in exposition  # the batches just run

    run.kill(signal.SIGINT)  # Ctrl-C: the pipeline drains, Envoy closes, and it says so
    run.process.wait(40)  # make itself then exits by SIGINT, as make does on Ctrl-C
    run.wait_line("stopped: embedded pipeline drained, Envoy and the UI closed", timeout_s=5)
    for taken in (port, envoy, web):
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # TIME_WAIT is fine, a listener is not
            s.bind(("127.0.0.1", taken))
