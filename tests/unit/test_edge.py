"""envoy/envoy.yaml: valid for the real Envoy, one config for every topology."""

from __future__ import annotations

import copy
import subprocess
from pathlib import Path
from typing import Any

import yaml

from batchline import edge
from tests.conftest import ROOT

TOPOLOGY = edge.Topology(
    port=18080, admin_port=0, ingress=("127.0.0.1", 1), stream=("127.0.0.1", 2), ui_port=13000
)


def committed() -> dict[str, Any]:
    return dict(yaml.safe_load(edge.CONFIG.read_text()))


def http_filters(config: dict[str, Any]) -> list[dict[str, Any]]:
    [listener] = config["static_resources"]["listeners"]
    return list(listener["filter_chains"][0]["filters"][0]["typed_config"]["http_filters"])


def validate(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [edge.envoy_binary(), "--mode", "validate", "-c", str(path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_committed_config_validates_as_compose_runs_it() -> None:
    result = validate(Path("envoy/envoy.yaml"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "OK" in result.stdout


def test_rendered_config_validates(tmp_path: Path) -> None:
    path = edge.write_config(TOPOLOGY, tmp_path / "envoy.yaml")
    result = validate(path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_rendering_changes_addresses_and_the_descriptor_path_only() -> None:
    rendered = edge.render(TOPOLOGY)
    expected = copy.deepcopy(committed())
    expected["admin"]["address"]["socket_address"]["port_value"] = 0
    [listener] = expected["static_resources"]["listeners"]
    listener["address"]["socket_address"] = {"address": "127.0.0.1", "port_value": 18080}
    for cluster, port in zip(expected["static_resources"]["clusters"], (1, 2), strict=True):
        endpoint = cluster["load_assignment"]["endpoints"][0]["lb_endpoints"][0]["endpoint"]
        endpoint["address"]["socket_address"] = {"address": "127.0.0.1", "port_value": port}
    transcoder = next(f for f in http_filters(expected) if f["name"] == edge.TRANSCODER)
    transcoder["typed_config"]["proto_descriptor"] = str(edge.DESCRIPTOR)
    [host] = listener["filter_chains"][0]["filters"][0]["typed_config"]["route_config"]["virtual_hosts"]
    host["typed_per_filter_config"][edge.CORS]["allow_origin_string_match"] = [
        {"exact": "http://localhost:13000"},
        {"exact": "http://127.0.0.1:13000"},
    ]
    assert rendered == expected


def test_default_ui_origin_is_the_committed_one() -> None:
    [host] = committed()["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0][
        "typed_config"
    ]["route_config"]["virtual_hosts"]
    cors = host["typed_per_filter_config"][edge.CORS]
    assert cors["allow_origin_string_match"] == edge.ui_origins(edge.Topology().ui_port)


def test_filters_run_in_the_documented_order() -> None:
    names = [f["name"] for f in http_filters(committed())]
    assert names == [
        "healthz",
        "readyz",
        "envoy.filters.http.cors",
        edge.RATE_LIMIT,
        "envoy.filters.http.buffer",
        "envoy.filters.http.grpc_web",
        edge.TRANSCODER,
        "envoy.filters.http.router",
    ]


def test_key_rate_and_tls_change_only_their_own_settings(tmp_path: Path) -> None:
    tls = edge.Tls("/certs/tls.crt", "/certs/tls.key")
    topology = edge.Topology(**{**vars(TOPOLOGY), "key_rate": edge.KeyRate(per_s=3, burst=7), "tls": tls})
    rendered = edge.render(topology)
    [listener] = rendered["static_resources"]["listeners"]
    chain = listener["filter_chains"][0]
    context = chain.pop("transport_socket")["typed_config"]["common_tls_context"]
    assert context["alpn_protocols"] == ["h2", "http/1.1"]  # gRPC needs h2 by ALPN
    assert context["tls_certificates"] == [
        {"certificate_chain": {"filename": tls.cert}, "private_key": {"filename": tls.key}}
    ]
    [host] = chain["filters"][0]["typed_config"]["route_config"]["virtual_hosts"]
    [per_key] = host["typed_per_filter_config"][edge.RATE_LIMIT]["descriptors"]
    assert per_key == {
        "entries": [{"key": "api_key"}],
        "token_bucket": {"max_tokens": 7, "tokens_per_fill": 3, "fill_interval": "1s"},
    }
    per_key["token_bucket"] = committed_bucket()
    assert rendered == edge.render(TOPOLOGY)  # nothing else moved


def committed_bucket() -> dict[str, Any]:
    [host] = committed()["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0][
        "typed_config"
    ]["route_config"]["virtual_hosts"]
    [per_key] = host["typed_per_filter_config"][edge.RATE_LIMIT]["descriptors"]
    return dict(per_key["token_bucket"])


def test_rate_limit_keys_on_the_authorization_header_one_bucket_per_value() -> None:
    [host] = committed()["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0][
        "typed_config"
    ]["route_config"]["virtual_hosts"]
    config = host["typed_per_filter_config"][edge.RATE_LIMIT]
    [action] = config["rate_limits"][0]["actions"]
    assert action["request_headers"]["header_name"] == "authorization"
    assert config["descriptors"][0]["entries"] == [{"key": "api_key"}]  # no value: per distinct key
    assert config["rate_limited_as_resource_exhausted"] is True  # gRPC clients read 429 as code 8
    assert committed_bucket()["tokens_per_fill"] < config["token_bucket"]["tokens_per_fill"]


def test_transcoder_prints_proto_names_and_zero_values_and_streams_ndjson() -> None:
    transcoder = next(f for f in http_filters(committed()) if f["name"] == edge.TRANSCODER)
    config = transcoder["typed_config"]
    assert config["convert_grpc_status"] is True
    assert config["print_options"] == {
        "preserve_proto_field_names": True,
        "always_print_primitive_fields": True,
        "stream_newline_delimited": True,
    }
    assert config["request_validation_options"]["reject_unknown_method"] is True
    assert config["proto_descriptor"] == "envoy/batchline.pb"  # relative: compose's working dir


def test_admin_is_bound_to_loopback_only() -> None:
    assert committed()["admin"]["address"]["socket_address"]["address"] == "127.0.0.1"
