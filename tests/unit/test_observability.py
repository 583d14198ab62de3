"""The observability profile: Prometheus scrapes every service where it serves /metrics, and the
Grafana dashboard is well-formed and asks only for metrics the services export."""

from __future__ import annotations

import json
import re
from typing import Any

import prometheus_client
import yaml

import batcher.metrics
import ingress.metrics
import stream.metrics
from tests.conftest import ROOT

OBSERVABILITY = ROOT / "deploy" / "observability"
DASHBOARD = OBSERVABILITY / "grafana" / "dashboards" / "batchline.json"


def exported() -> set[str]:
    """Every series name the services' metrics can produce."""
    assert batcher.metrics and ingress.metrics and stream.metrics  # imported: registered
    names = set()
    for metric in prometheus_client.REGISTRY.collect():
        for sample in metric.samples:
            names.add(sample.name)
        suffixes = {"counter": ["_total"], "histogram": ["_bucket", "_sum", "_count"]}.get(metric.type, [""])
        names.update(metric.name + suffix for suffix in suffixes)
    return {name for name in names if name.startswith("batchline_")}


def test_prometheus_scrapes_each_service_on_its_metrics_port() -> None:
    config = yaml.safe_load((OBSERVABILITY / "prometheus.yml").read_text())
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    jobs = {job["job_name"]: job["dns_sd_configs"][0] for job in config["scrape_configs"]}
    assert set(jobs) == {"ingress", "batcher", "stream"}
    for name, discovery in jobs.items():
        assert discovery["names"] == [name]
        assert str(discovery["port"]) == compose[name]["environment"]["METRICS_PORT"]
    for name in ("prometheus", "grafana"):
        assert compose[name]["profiles"] == ["observability"]


def test_the_dashboard_is_grafana_json_over_exported_metrics() -> None:
    dashboard: dict[str, Any] = json.loads(DASHBOARD.read_text())
    assert (
        dashboard["uid"] == "batchline" and dashboard["title"] and isinstance(dashboard["schemaVersion"], int)
    )
    panels = dashboard["panels"]
    assert len({p["id"] for p in panels}) == len(panels)  # ids unique
    available = exported()
    used = set()
    for panel in panels:
        assert panel["type"] == "timeseries" and panel["datasource"]["uid"] == "prometheus"
        assert {"x", "y", "w", "h"} <= set(panel["gridPos"]) and panel["gridPos"]["x"] + panel["gridPos"][
            "w"
        ] <= 24
        assert len({t["refId"] for t in panel["targets"]}) == len(panel["targets"])
        for target in panel["targets"]:
            assert target["expr"].count("(") == target["expr"].count(")"), target["expr"]
            used.update(re.findall(r"\bbatchline_\w+", target["expr"]))
    assert used and used <= available, f"not exported by any service: {sorted(used - available)}"
    wanted = {"batchline_job_seconds_bucket", "batchline_queue_depth", "batchline_batch_size_sum"}
    assert wanted <= used  # throughput, latency percentiles, batch size, queue depth and drain
    datasource = yaml.safe_load(
        (OBSERVABILITY / "grafana/provisioning/datasources/prometheus.yml").read_text()
    )
    assert datasource["datasources"][0]["uid"] == "prometheus"
