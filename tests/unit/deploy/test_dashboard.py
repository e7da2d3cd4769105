"""Observability files: the Grafana dashboard, the Prometheus configs, the metric declarations.

Every metric a dashboard query names must be one TorchServe exports: its own metrics and
the handlers' custom ones are both declared in metrics.yaml (TorchServe drops undeclared
custom metrics), so metrics.yaml is the list to check against. The same queries run
against a real Prometheus in tests/integration/test_prometheus.py.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from batchkit import metrics as batch_metrics
from tsbatch.paths import REPO_ROOT

DASHBOARD = REPO_ROOT / "observability" / "grafana-dashboard.json"
PROMETHEUS_LOCAL = REPO_ROOT / "observability" / "prometheus.yml"
PROMETHEUS_KUBERNETES = REPO_ROOT / "observability" / "prometheus-kubernetes.yml"

PROMQL_KEYWORDS = {
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
    "and",
    "or",
    "unless",
    "bool",
    "offset",
}
HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")


def declared_metric_names(path: Path = REPO_ROOT / "metrics.yaml") -> dict[str, str]:
    """Every metric name TorchServe exports with this metrics.yaml -> its type."""
    document = yaml.safe_load(path.read_text())
    names: dict[str, str] = {}
    for section in ("ts_metrics", "model_metrics"):
        for kind, entries in (document.get(section) or {}).items():
            for entry in entries:
                names[entry["name"]] = kind
    return names


def exported_series_names(path: Path = REPO_ROOT / "metrics.yaml") -> set[str]:
    """Names as they appear in a scrape (histograms add _bucket/_sum/_count)."""
    names = set()
    for name, kind in declared_metric_names(path).items():
        names.add(name)
        if kind == "histogram":
            names.update(name + suffix for suffix in HISTOGRAM_SUFFIXES)
    return names


def promql_metric_names(expr: str) -> set[str]:
    """Metric names a PromQL expression selects (functions, keywords, labels dropped)."""
    text = re.sub(r'"(?:\\.|[^"\\])*"', '""', expr)  # strings
    text = re.sub(r"\{[^}]*\}", "", text)  # label matchers
    text = re.sub(r"\[[^\]]*\]", "", text)  # range selectors
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", text)  # label lists
    names = set()
    for match in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", text):
        following = text[match.end() :].lstrip()
        if following.startswith("(") or match.group() in PROMQL_KEYWORDS:
            continue
        if match.start() > 0 and (text[match.start() - 1].isdigit() or text[match.start() - 1] == "."):
            continue  # exponent of a number such as 1e-3
        names.add(match.group())
    return names


def dashboard() -> dict:
    return json.loads(DASHBOARD.read_text())


def query_panels(document: dict) -> list[dict]:
    return [panel for panel in document["panels"] if panel["type"] != "row"]


def all_exprs(document: dict) -> list[str]:
    return [target["expr"] for panel in query_panels(document) for target in panel["targets"]]


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
    assert {"datasource", "model"} <= variables
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
