"""`make up` / `make down`: the distributed topology as processes, ready when it says so."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

from tests.conftest import ROOT
from tests.helpers import bindable, free_port


def devstack(command: str, env: dict[str, str], timeout_s: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "devstack.py"), command],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )


def test_up_serves_jobs_and_down_stops_everything(service_env: dict[str, str], tmp_path: Path) -> None:
    ports = [free_port() for _ in range(9)]
    while not all(bindable(ports[6] + step) for step in (0, 2)):  # batcher-2 takes ports[6] + 2
        ports[6] = free_port()
    env = {
        **os.environ,
        **service_env,
        "INGRESS_PORT": str(ports[0]),
        "STREAM_PORT": str(ports[1]),
        "BATCHER_HEALTH_PORT": str(ports[2]),
        "BATCHER_REPLICAS": "2",
        "ENVOY_PORT": str(ports[4]),
        "ENVOY_ADMIN_PORT": "0",
        "WEB_PORT": str(ports[5]),
        "BATCHER_METRICS_PORT": str(ports[6]),  # batcher-2 takes ports[6] + 2
        "INGRESS_METRICS_PORT": str(ports[7]),
        "STREAM_METRICS_PORT": str(ports[8]),
        "DEVSTACK_DIR": str(tmp_path),
    }
    env.pop("HOST", None)
    try:
        up = devstack("up", env, timeout_s=180)
        assert up.returncode == 0, up.stdout + up.stderr
        assert up.stdout.strip().endswith("ready")
        assert "batcher-2" in up.stdout and "envoy" in up.stdout and "web" in up.stdout
        again = devstack("up", env)
        assert again.returncode == 1 and "already up" in again.stderr
        demo = subprocess.run(
            [
                sys.executable,
                str(Path(sys.executable).parent / "batchline"),
                "--target",  # everything through Envoy, as a user would
                f"127.0.0.1:{ports[4]}",
                "submit",
                "--watch",
                "a lovely day",
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert demo.returncode == 0, demo.stderr
        assert "POSITIVE" in demo.stdout
        # Every process serves /metrics: ingress, stream, and each batcher (9104-style numbering).
        scraped = {
            name: urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
            for name, port in (
                ("ingress", ports[7]),
                ("stream", ports[8]),
                ("batcher-1", ports[6]),
                ("batcher-2", ports[6] + 2),
            )
        }
        assert 'batchline_submits_total{outcome="accepted",rpc="Submit"} 1.0' in scraped["ingress"]
        assert "batchline_events_total" in scraped["stream"]
        batches = [
            float(line.split()[-1])
            for name in ("batcher-1", "batcher-2")
            for line in scraped[name].splitlines()
            if line.startswith("batchline_batch_size_count ")
        ]
        assert sorted(batches) == [0.0, 1.0]  # one batch, on whichever batcher took the job
    finally:
        down = devstack("down", env, timeout_s=60)
    assert down.returncode == 0 and "stopped" in down.stdout
    assert not (tmp_path / "pids.json").exists()


def test_up_names_the_missing_dependency(tmp_path: Path) -> None:
    env = {**os.environ, "REDIS_URL": "redis://127.0.0.1:1/0", "DEVSTACK_DIR": str(tmp_path)}
    result = devstack("up", env)
    assert result.returncode == 1
    assert "REDIS_URL=redis://127.0.0.1:1/0 is not reachable" in result.stderr


def test_run_names_the_taken_port(tmp_path: Path, clean_env: None) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        taken = holder.getsockname()[1]
        env = {
            **os.environ,
            "ENVOY_PORT": str(taken),
            "PORT": str(free_port()),
            "DEVSTACK_DIR": str(tmp_path),
        }
        result = devstack("run", env)
    assert result.returncode == 1
    assert f"port {taken} (for envoy) is taken; set ENVOY_PORT" in result.stderr
