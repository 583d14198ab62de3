"""docker-compose.yml and the Dockerfiles: valid, loopback-only, and mirrored by `make up`.

No Docker engine runs here, so the files are checked the way they can be: the compose file
against the Compose Specification schema, the Dockerfiles with hadolint, and both against the
process topology that `make up` runs.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from batchline import names
from tests.conftest import ROOT

BIN = Path(sys.executable).parent
COMPOSE = ROOT / "docker-compose.yml"
INFRASTRUCTURE = {"rabbitmq", "redis"}


def compose() -> dict[str, Any]:
    return dict(yaml.safe_load(COMPOSE.read_text()))


def always_on() -> dict[str, Any]:
    """The services `docker compose up` starts: those outside opt-in profiles."""
    return {name: s for name, s in compose()["services"].items() if "profiles" not in s}


def devstack(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    spec = importlib.util.spec_from_file_location("devstack", ROOT / "scripts" / "devstack.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "devstack", module)  # dataclasses look their module up
    spec.loader.exec_module(module)
    monkeypatch.setattr(module, "RUN_DIR", tmp_path)
    return module


def test_compose_file_follows_the_compose_specification() -> None:
    result = subprocess.run(
        [BIN / "check-jsonschema", "--builtin-schema", "vendor.compose-spec", COMPOSE],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("dockerfile", sorted((ROOT / "docker").glob("*.Dockerfile")), ids=lambda p: p.name)
def test_dockerfiles_pass_hadolint(dockerfile: Path) -> None:
    result = subprocess.run([BIN / "hadolint", dockerfile], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr


def test_images_run_as_non_root_and_only_the_batcher_has_torch() -> None:
    lines = (ROOT / "docker" / "python.Dockerfile").read_text().splitlines()
    text = "\n".join(line for line in lines if not line.startswith("#")) + "\n"
    assert "USER 10001" in text
    stages = dict(re.findall(r"^FROM \S+ AS (\S+)\n(.*?)(?=^FROM |\Z)", text, flags=re.M | re.S))
    assert "torch" not in stages["build-api"] and "torch" in stages["build-batcher"]
    for service in ("ingress", "stream"):
        assert "--from=build-api" in stages[service] and "build-batcher" not in stages[service]
    assert "HF_HUB_OFFLINE=1" in stages["batcher"] and "/opt/model" in stages["batcher"]


def test_published_ports_are_loopback_only() -> None:
    for name, service in compose()["services"].items():
        for port in service.get("ports", []):
            assert str(port).startswith("127.0.0.1:"), f"{name} publishes {port}"


def test_compose_ships_no_passwords_and_env_example_has_every_knob() -> None:
    text = COMPOSE.read_text()
    used = set(re.findall(r"\$\{(\w+)", text))
    example = (ROOT / ".env.example").read_text()
    listed = set(re.findall(r"^(\w+)=", example, flags=re.M))
    assert used <= listed, f"missing from .env.example: {sorted(used - listed)}"
    for secret in ("RABBITMQ_PASSWORD", "REDIS_PASSWORD", "GRAFANA_PASSWORD"):
        assert re.search(rf"^{secret}=$", example, flags=re.M), f"{secret} must have no default"
        assert f"${{{secret}:?" in text, f"compose must refuse to start without {secret}"


def test_make_env_fills_every_password() -> None:
    spec = importlib.util.spec_from_file_location("make_env", ROOT / "scripts" / "make_env.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    filled = module.fill((ROOT / ".env.example").read_text())
    passwords = re.findall(r"^\w+_PASSWORD=(.*)$", filled, flags=re.M)
    assert len(passwords) == 3 and all(len(p) >= 24 for p in passwords)  # RabbitMQ, Redis, Grafana
    assert len(set(passwords)) == 3


def test_make_up_runs_the_services_compose_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stack = devstack(tmp_path, monkeypatch)
    plan = stack.up_plan({**stack.DEFAULTS, "BATCHER_REPLICAS": "2"})
    kinds = {process.name.split("-")[0] for process in plan}
    assert kinds == set(always_on()) - INFRASTRUCTURE
    assert [p.name for p in plan if p.name.startswith("batcher")] == ["batcher-1", "batcher-2"]


@pytest.mark.parametrize(
    ("replicas", "asked", "cores", "each"),
    [("1", "", 2, "0"), ("2", "", 2, "1"), ("2", "0", 8, "4"), ("3", "", 2, "1"), ("2", "2", 2, "2")],
)
def test_make_up_shares_the_cores_among_the_batchers(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    replicas: str,
    asked: str,
    cores: int,
    each: str,
) -> None:
    """Unless TORCH_THREADS is set, each of several batchers gets its share of the cores
    (at least one); one batcher keeps PyTorch's default (0: every core)."""
    stack = devstack(tmp_path, monkeypatch)
    monkeypatch.setattr(stack.os, "sched_getaffinity", lambda pid: set(range(cores)))
    env = {**stack.DEFAULTS, "BATCHER_REPLICAS": replicas, "TORCH_THREADS": asked}
    batchers = [p for p in stack.up_plan(env) if p.name.startswith("batcher")]
    assert len(batchers) == int(replicas)
    assert {p.env["TORCH_THREADS"] for p in batchers} == {each}


def test_make_up_and_compose_agree_on_ports_and_modules() -> None:
    services = compose()["services"]
    assert services["ingress"]["environment"]["INGRESS_PORT"] == str(names.INGRESS_PORT)
    assert services["stream"]["environment"]["STREAM_PORT"] == str(names.STREAM_PORT)
    envoy = yaml.safe_load((ROOT / "envoy" / "envoy.yaml").read_text())
    upstreams = {
        c["name"]: c["load_assignment"]["endpoints"][0]["lb_endpoints"][0]["endpoint"]["address"][
            "socket_address"
        ]
        for c in envoy["static_resources"]["clusters"]
    }
    assert upstreams == {
        "ingress": {"address": "ingress", "port_value": names.INGRESS_PORT},
        "stream": {"address": "stream", "port_value": names.STREAM_PORT},
    }
    dockerfile = (ROOT / "docker" / "python.Dockerfile").read_text()
    for service in ("ingress", "stream", "batcher"):
        assert services[service]["build"]["target"] == service
        assert f'CMD ["python", "-m", "{service}"]' in dockerfile


def test_every_compose_setting_is_read_by_a_service() -> None:
    sources = "".join(p.read_text() for p in (ROOT / "services").rglob("settings.py"))
    sources += "".join(
        (ROOT / "src" / "batchline" / f).read_text()
        for f in ("settings.py", "logs.py", "access.py", "tracing.py")
    )
    services = compose()["services"]
    for name in ("ingress", "stream", "batcher"):
        for variable in services[name]["environment"]:
            assert f'"{variable}"' in sources, f"{name} sets {variable}, which no settings.py reads"


def test_the_tls_override_runs_what_make_tls_config_writes() -> None:
    override = yaml.safe_load((ROOT / "docker-compose.tls.yml").read_text())["services"]["envoy"]
    recipe = (ROOT / "Makefile").read_text().split("\ntls-config:")[1].split("\n\n")[0]
    # Compose mounts ./envoy at /etc/envoy: the rendered file is the one the command runs.
    assert "> envoy/envoy.tls.yaml" in recipe and override["command"][-1] == "/etc/envoy/envoy.tls.yaml"
    [mount] = override["volumes"]
    folder = mount.rsplit(":", 2)[1]  # ${TLS_DIR:?...}:/etc/envoy/tls:ro
    assert f"{folder}/tls.crt" in recipe and f"{folder}/tls.key" in recipe
    assert "TLS_DIR" in (ROOT / ".env.example").read_text()
