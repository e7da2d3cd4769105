"""Readers of the deployment files that several test modules check: the Dockerfile's
instructions, metrics.yaml's exported names, the dashboard's PromQL and the
prometheus-adapter rules."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

from tsbatch.paths import REPO_ROOT

DOCKERFILE = REPO_ROOT / "Dockerfile"
DASHBOARD = REPO_ROOT / "observability" / "grafana-dashboard.json"
ADAPTER_VALUES = REPO_ROOT / "observability" / "prometheus-adapter-values.yaml"
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


def instructions(path: Path = DOCKERFILE) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined, comments dropped."""
    result: list[tuple[str, str]] = []
    pending = ""
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if pending and line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        full = pending + line
        pending = ""
        keyword, _, arguments = full.partition(" ")
        result.append((keyword.upper(), arguments.strip()))
    return result


def exec_form(keyword: str) -> list[str]:
    matches = [arguments for kw, arguments in instructions() if kw == keyword]
    assert len(matches) == 1, f"expected exactly one {keyword}"
    value = matches[0]
    if keyword == "HEALTHCHECK":
        value = value[value.index("CMD") + 3 :].strip()
    parsed = json.loads(value)
    assert isinstance(parsed, list), f"{keyword} must use the exec (JSON) form"
    return parsed


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


def adapter_rules() -> list[dict]:
    """The prometheus-adapter rules, as the adapter's Helm chart receives them (rules.custom)."""
    return yaml.safe_load(ADAPTER_VALUES.read_text())["rules"]["custom"]
