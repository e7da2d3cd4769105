"""Observability files: the Grafana dashboard, the Prometheus configs, the metric declarations.

Every metric a dashboard query names must be one TorchServe exports: its own metrics and
the handlers' custom ones are both declared in metrics.yaml (TorchServe drops undeclared
custom metrics), so metrics.yaml is the list to check against. The same queries run
against a real Prometheus in tests/integration/test_prometheus.py.
"""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest
import yaml

from batchkit import metrics as batch_metrics
from tests.unit.deploy.readers import (
    all_exprs,
    dashboard,
    declared_metric_names,
    exported_series_names,
    promql_metric_names,
    query_panels,
)
from tsbatch.paths import REPO_ROOT

PROMETHEUS_LOCAL = REPO_ROOT / "observability" / "prometheus.yml"
PROMETHEUS_KUBERNETES = REPO_ROOT / "observability" / "prometheus-kubernetes.yml"


def test_promql_metric_names_parses_what_the_dashboard_uses() -> None:
    expr = (
        '1000 * histogram_quantile(0.99, sum by (le, ModelName) (rate(RequestHandlerSeconds_bucket{ModelName=~"$model"}'
        "[$__rate_interval]))) / clamp_min(sum(rate(BatchesTotal[1m])), 1e-3) and on (pod) up"
    )
    assert promql_metric_names(expr) == {"RequestHandlerSeconds_bucket", "BatchesTotal", "up"}


def test_dashboard_is_valid_grafana_json() -> None:
    document = dashboard()
    assert document["title"] and document["uid"] and isinstance(document["schemaVersion"], int)
    ids = [panel["id"] for panel in document["panels"]]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    variables = {variable["name"] for variable in document["templating"]["list"]}
    assert {"datasource", "namespace", "pod", "model"} <= variables
    for panel in document["panels"]:
        grid = panel["gridPos"]
        assert grid["x"] >= 0 and grid["x"] + grid["w"] <= 24 and grid["h"] > 0
    for panel in query_panels(document):
        assert panel["targets"], f"panel {panel['title']!r} has no query"
        assert panel["datasource"]["uid"] == "${datasource}"
        ref_ids = [target["refId"] for target in panel["targets"]]
        assert len(ref_ids) == len(set(ref_ids))
        for target in panel["targets"]:
            assert target["expr"].count("(") == target["expr"].count(")"), target["expr"]


def test_every_metric_in_the_dashboard_is_exported() -> None:
    exported = exported_series_names()
    for expr in all_exprs(dashboard()):
        unknown = promql_metric_names(expr) - exported
        assert not unknown, f"{expr}\n  uses metrics TorchServe does not export here: {sorted(unknown)}"


def test_the_check_catches_an_unknown_metric() -> None:
    assert promql_metric_names("rate(ts_inference_requests_totl[1m])") - exported_series_names()


def test_dashboard_covers_what_ops_need() -> None:
    exprs = "\n".join(all_exprs(dashboard()))
    required = {
        "requests/s": "rate(ts_inference_requests_total",
        "p50": "histogram_quantile(0.5,",
        "p99": "histogram_quantile(0.99,",
        "queue latency": "ts_queue_latency_microseconds",
        "mean batch size": "BatchedRequestsTotal",
        "fill ratio": "BatchFillRatio",
        "padding efficiency": "PaddedTokensTotal",
        "worker restarts": "changes(WorkerLoadTime",
        "errors": "Requests5XX",
    }
    missing = [what for what, needle in required.items() if needle not in exprs]
    assert not missing, f"dashboard lacks {missing}"


def test_every_selector_follows_the_namespace_and_pod_variables() -> None:
    """With several pods (and namespaces) behind one Prometheus, every panel is filterable;
    locally (no such labels) `=~".*"` still matches, so the same dashboard serves both."""
    for expr in all_exprs(dashboard()):
        for name in promql_metric_names(expr):
            selectors = re.findall(rf"(?<![\w:]){name}(?![\w:])(\{{[^}}]*\}})?", expr)
            for selector in selectors:
                assert 'namespace=~"$namespace"' in selector and 'pod=~"$pod"' in selector, (name, expr)
    gpu = [e for e in all_exprs(dashboard()) if "GPUUtilization" in e]
    assert gpu and all("by (pod, DeviceId)" in e for e in gpu), "GPU series must be per pod"


def test_metrics_yaml_declares_every_handler_metric() -> None:
    declared = declared_metric_names()
    for names, kind in (
        (batch_metrics.GAUGE_METRICS, "gauge"),
        (batch_metrics.COUNTER_METRICS, "counter"),
        (batch_metrics.HISTOGRAM_METRICS, "histogram"),
    ):
        for name in names:
            assert declared.get(name) == kind, f"{name} must be declared as a {kind} in metrics.yaml"


def test_local_prometheus_config_scrapes_the_metrics_port() -> None:
    config = yaml.safe_load(PROMETHEUS_LOCAL.read_text())
    from tsbatch.config.properties import read_properties

    metrics_address = read_properties(REPO_ROOT / "config.properties")["metrics_address"]
    targets = [t for job in config["scrape_configs"] for sc in job["static_configs"] for t in sc["targets"]]
    assert metrics_address.removeprefix("http://") in targets


def test_kubernetes_prometheus_config_keeps_namespace_and_pod_labels() -> None:
    config = yaml.safe_load(PROMETHEUS_KUBERNETES.read_text())
    relabels = config["scrape_configs"][0]["relabel_configs"]
    targets = {rule.get("target_label") for rule in relabels}
    assert {"namespace", "pod", "__address__"} <= targets, "prometheus-adapter needs namespace and pod labels"
    for rule in relabels:
        re.compile(rule.get("regex", "(.*)"))
    address = next(rule for rule in relabels if rule.get("target_label") == "__address__")
    joined = "10.0.0.7:80;8082"
    assert (
        re.fullmatch(address["regex"], joined).expand(address["replacement"].replace("$", "\\"))
        == "10.0.0.7:8082"
    )


@pytest.mark.skipif(
    shutil.which("promtool") is None, reason="promtool not installed (scripts/ensure_prometheus.sh)"
)
def test_promtool_accepts_the_local_config() -> None:
    # Debian's Prometheus is built without Kubernetes discovery, so only the local file.
    result = subprocess.run(
        ["promtool", "check", "config", str(PROMETHEUS_LOCAL)], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr
