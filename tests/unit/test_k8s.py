"""deploy/k8s: valid against the Kubernetes schemas (and KEDA's API), and every reference in it
resolves. No cluster runs here, so this is how the manifests are checked: strict schema
validation of every object, then the cross-references a schema cannot see."""

from __future__ import annotations

import json
import re
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from batchline import names
from tests.conftest import ROOT

K8S = ROOT / "deploy" / "k8s"
# The oldest Kubernetes the manifests promise to run on (gRPC probes are GA from 1.27) and the
# newest schema the validator ships.
VERSIONS = ("1.30.0", kubernetes_validate.latest_version())


def kustomization() -> dict[str, Any]:
    return dict(yaml.safe_load((K8S / "kustomization.yaml").read_text()))


def objects() -> list[dict[str, Any]]:
    found = []
    for resource in kustomization()["resources"]:
        found += [doc for doc in yaml.safe_load_all((K8S / resource).read_text()) if doc]
    return found


def of_kind(kind: str) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in objects() if o["kind"] == kind}


def containers() -> list[dict[str, Any]]:
    return [c for d in of_kind("Deployment").values() for c in d["spec"]["template"]["spec"]["containers"]]


def test_kustomization_lists_every_manifest() -> None:
    listed = set(kustomization()["resources"])
    on_disk = {p.name for p in K8S.glob("*.yaml")} - {"kustomization.yaml"}
    assert listed == on_disk


@pytest.mark.parametrize("version", VERSIONS)
def test_core_objects_pass_the_kubernetes_schemas_strictly(version: str) -> None:
    for obj in objects():
        if not obj["apiVersion"].startswith("keda.sh/"):
            kubernetes_validate.validate(obj, version, strict=True)


def test_keda_objects_pass_kedas_api_strictly() -> None:
    schema = json.loads((ROOT / "tests" / "data" / "keda-v1alpha1.schema.json").read_text())
    keda = [o for o in objects() if o["apiVersion"].startswith("keda.sh/")]
    assert {o["kind"] for o in keda} == {"ScaledObject", "TriggerAuthentication"}
    for obj in keda:
        jsonschema.validate(obj, schema, cls=jsonschema.Draft202012Validator)
    typo = {**keda[-1], "spec": {**keda[-1]["spec"], "minReplicas": 1}}
    with pytest.raises(jsonschema.ValidationError):  # the schema is strict enough to matter
        jsonschema.validate(typo, schema, cls=jsonschema.Draft202012Validator)


def test_the_batcher_scales_on_the_queue_the_services_use() -> None:
    [scaled] = of_kind("ScaledObject").values()
    target = of_kind("Deployment")[scaled["spec"]["scaleTargetRef"]["name"]]
    assert target["metadata"]["name"] == "batcher" and "replicas" not in target["spec"]  # KEDA owns it
    [trigger] = scaled["spec"]["triggers"]
    assert trigger["type"] == "rabbitmq"
    assert trigger["metadata"]["queueName"] == of_kind("ConfigMap")["batchline-config"]["data"]["QUEUE_NAME"]
    auth = of_kind("TriggerAuthentication")[trigger["authenticationRef"]["name"]]
    [host] = auth["spec"]["secretTargetRef"]
    assert (host["name"], host["key"]) == ("batchline-credentials", "AMQP_URL")
    assert scaled["spec"]["minReplicaCount"] >= 1


def test_services_select_deployments_and_name_their_ports() -> None:
    deployments = of_kind("Deployment")
    for name, service in of_kind("Service").items():
        selector = service["spec"]["selector"]
        [pod] = [
            d["spec"]["template"]
            for d in deployments.values()
            if selector.items() <= d["spec"]["template"]["metadata"]["labels"].items()
        ]
        ports = {p["name"] for c in pod["spec"]["containers"] for p in c["ports"]}
        for port in service["spec"]["ports"]:
            assert port["targetPort"] in ports, f"service {name} targets a port no container names"


def test_probes_use_the_health_each_service_serves() -> None:
    for container in containers():
        ports = {p["name"]: p["containerPort"] for p in container["ports"]}
        for kind in ("startupProbe", "readinessProbe", "livenessProbe"):
            probe = container.get(kind)
            if probe is None:
                continue
            [spec] = [v for k, v in probe.items() if k in ("grpc", "tcpSocket", "httpGet")]
            port = ports.get(spec["port"], spec["port"])
            assert port in ports.values(), f"{container['name']} {kind} probes a port it does not open"
        assert "readinessProbe" in container and "livenessProbe" in container, container["name"]
        # Liveness never asks about dependencies: a Redis outage must not restart every pod.
        assert "grpc" not in container["livenessProbe"], container["name"]


def test_the_envoy_config_finds_the_services_by_name() -> None:
    envoy = yaml.safe_load((ROOT / "envoy" / "envoy.yaml").read_text())
    services = of_kind("Service")
    for cluster in envoy["static_resources"]["clusters"]:
        address = cluster["load_assignment"]["endpoints"][0]["lb_endpoints"][0]["endpoint"]["address"]
        host, port = address["socket_address"]["address"], address["socket_address"]["port_value"]
        assert port in [p["port"] for p in services[host]["spec"]["ports"]]
    assert {p["port"] for p in services["ingress"]["spec"]["ports"]} == {names.INGRESS_PORT}
    assert {p["port"] for p in services["stream"]["spec"]["ports"]} == {names.STREAM_PORT}
    dockerfile = (ROOT / "docker" / "envoy.Dockerfile").read_text()
    assert "envoy/envoy.yaml" in dockerfile and "envoy/batchline.pb" in dockerfile


def test_every_setting_is_read_by_a_service_and_every_image_is_pinned_in_one_place() -> None:
    sources = "".join(p.read_text() for p in (ROOT / "services").rglob("settings.py"))
    sources += "".join(
        (ROOT / "src" / "batchline" / f).read_text()
        for f in ("settings.py", "logs.py", "access.py", "tracing.py")
    )
    variables = set(of_kind("ConfigMap")["batchline-config"]["data"])
    variables |= {e["name"] for c in containers() for e in c.get("env", [])}
    variables |= set(re.findall(r"^(\w+)=", (K8S / "credentials.example.env").read_text(), flags=re.M))
    for variable in variables:
        assert f'"{variable}"' in sources, f"{variable} is set but no settings.py reads it"
    refs = {
        r["configMapRef"]["name"] for c in containers() for r in c.get("envFrom", []) if "configMapRef" in r
    }
    assert refs <= set(of_kind("ConfigMap"))
    images = {c["image"].split()[0] for c in containers()}
    assert images == {i["name"] for i in kustomization()["images"]}


def test_no_secret_is_committed() -> None:
    assert not of_kind("Secret")
    example = (K8S / "credentials.example.env").read_text()
    assert "CHANGE-ME" in example
    assert "deploy/k8s/credentials.env" in (ROOT / ".gitignore").read_text().splitlines()
