"""Kubernetes, KServe and Locust manifests, validated offline and against each other.

Kubernetes objects are checked with kubernetes-validate's bundled schemas in strict mode
(unknown fields fail). KServe's InferenceService CRD is not bundled, so it is checked in
two parts: its pod-level fields and containers against Kubernetes' own PodSpec and
Container schemas (strict), and the KServe-specific fields against the field list of
KServe's v1beta1 API (ComponentExtensionSpec and PredictorSpec).
"""

from __future__ import annotations

import copy
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml
from kubernetes_validate import utils as kv_utils
from referencing import Registry, Resource

from tests.unit.deploy.readers import (
    adapter_rules,
    exec_form,
    exported_series_names,
    instructions,
    promql_metric_names,
)
from tsbatch.config.properties import model_settings, read_properties
from tsbatch.environment import TOKEN_ENV
from tsbatch.paths import REPO_ROOT
from tsbatch.sla.profiles import load_profile

DEPLOY = REPO_ROOT / "deploy"
KUBERNETES_FILES = sorted((DEPLOY / "kubernetes").glob("*.yaml"))
INFERENCE_SERVICE = DEPLOY / "kserve" / "inferenceservice.yaml"
CONTAINER_CONFIG = DEPLOY / "config.container.properties"
CLUSTER_CONFIG = DEPLOY / "config.cluster.properties"
DRAIN = ["python", "/app/deploy/probe.py", "drain"]
K8S_VERSION = kv_utils.latest_version()

# KServe v1beta1: fields every component has, and the predictor's own (model formats, runtimes).
KSERVE_EXTENSION_FIELDS = {
    "minReplicas", "maxReplicas", "scaleTarget", "scaleMetric", "scaleMetricType", "autoScaling",
    "containerConcurrency", "timeout", "canaryTrafficPercent", "logger", "batcher", "labels",
    "annotations", "deploymentStrategy",
}  # fmt: skip
KSERVE_PREDICTOR_FIELDS = {
    "model", "sklearn", "xgboost", "tensorflow", "pytorch", "triton", "onnx", "huggingface", "pmml",
    "lightgbm", "paddle", "workerSpec",
}  # fmt: skip
KSERVE_SCALE_METRICS = {"cpu", "memory", "concurrency", "rps"}
DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


def documents(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def all_kubernetes_objects() -> list[dict[str, Any]]:
    return [doc for path in KUBERNETES_FILES for doc in documents(path)]


def find(kind: str, name: str) -> dict[str, Any]:
    matches = [d for d in all_kubernetes_objects() if d["kind"] == kind and d["metadata"]["name"] == name]
    assert len(matches) == 1, f"expected one {kind}/{name}"
    return matches[0]


def container(deployment: dict[str, Any], name: str | None = None) -> dict[str, Any]:
    containers = deployment["spec"]["template"]["spec"]["containers"]
    return next(c for c in containers if name is None or c["name"] == name)


def validate_definition(instance: Any, schema_file: str) -> None:
    """Validate against one bundled Kubernetes schema (strict), e.g. container-v1.json."""
    directory = f"kubernetes-json-schema/v{K8S_VERSION}-local-strict"
    schema = kv_utils.schema_contents(f"{directory}/{schema_file}", K8S_VERSION)
    definitions = kv_utils.schema_contents(f"{directory}/_definitions.json", K8S_VERSION)
    registry = Resource.from_contents(definitions) @ (Resource.from_contents(schema) @ Registry())
    jsonschema.validators.Draft202012Validator(schema, registry=registry).validate(instance)


def check_inference_service(document: dict[str, Any]) -> None:
    assert document["apiVersion"] == "serving.kserve.io/v1beta1" and document["kind"] == "InferenceService"
    assert DNS_LABEL.fullmatch(document["metadata"]["name"]), "name must be a DNS-1123 label"
    assert set(document["spec"]) <= {"predictor", "transformer", "explainer"}
    predictor = document["spec"]["predictor"]
    kserve_fields = {key for key in predictor if key in KSERVE_EXTENSION_FIELDS | KSERVE_PREDICTOR_FIELDS}
    pod_spec = {key: value for key, value in predictor.items() if key not in kserve_fields}
    validate_definition(pod_spec, "podspec-v1.json")  # unknown fields land here and fail
    for item in pod_spec["containers"]:
        validate_definition(item, "container-v1.json")
    if "scaleMetric" in predictor:
        assert predictor["scaleMetric"] in KSERVE_SCALE_METRICS
    for key in ("minReplicas", "maxReplicas", "scaleTarget", "timeout"):
        if key in predictor:
            assert isinstance(predictor[key], int) and predictor[key] >= 0, key
    assert predictor.get("minReplicas", 1) <= predictor.get("maxReplicas", 1)


# ---------------------------------------------------------------- schemas
@pytest.mark.parametrize("path", KUBERNETES_FILES, ids=lambda p: p.name)
def test_kubernetes_manifests_pass_strict_schema_validation(path: Path) -> None:
    for document in documents(path):
        kubernetes_validate.validate(document, K8S_VERSION, strict=True)


def test_strict_validation_catches_a_misspelled_field() -> None:
    broken = copy.deepcopy(find("Deployment", "torchserve"))
    broken["spec"]["template"]["spec"]["containers"][0]["readinesProbe"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, K8S_VERSION, strict=True)


def test_inference_service_structure() -> None:
    (document,) = documents(INFERENCE_SERVICE)
    check_inference_service(document)


@pytest.mark.parametrize(
    "mutation",
    [
        lambda p: p.__setitem__("minReplica", 1),  # misspelled KServe field
        lambda p: p["containers"][0].__setitem__("imagePullPolice", "Always"),  # misspelled container field
        lambda p: p.__setitem__("scaleMetric", "queue"),
    ],
)
def test_inference_service_check_catches_mistakes(mutation) -> None:
    (document,) = documents(INFERENCE_SERVICE)
    mutation(document["spec"]["predictor"])
    with pytest.raises((jsonschema.ValidationError, AssertionError)):
        check_inference_service(document)


# ---------------------------------------------------------------- consistency
def test_every_workload_runs_the_same_image() -> None:
    images = {
        c["image"]
        for d in all_kubernetes_objects()
        if d["kind"] == "Deployment"
        for c in d["spec"]["template"]["spec"]["containers"]
    }
    (service,) = documents(INFERENCE_SERVICE)
    images |= {c["image"] for c in service["spec"]["predictor"]["containers"]}
    assert len(images) == 1, images


def cluster_pods() -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(pod spec, TorchServe container) of the Deployment and of the KServe predictor."""
    (service,) = documents(INFERENCE_SERVICE)
    predictor = service["spec"]["predictor"]
    deployment = find("Deployment", "torchserve")["spec"]["template"]["spec"]
    return [
        (deployment, container(find("Deployment", "torchserve"))),
        (predictor, predictor["containers"][0]),
    ]


def test_torchserve_and_kserve_run_the_images_command_with_the_cluster_profile() -> None:
    """The image's CMD with --ts-config pointing at the cluster config (token auth off)."""
    command = exec_form("CMD")
    expected = [
        f"/app/deploy/{CLUSTER_CONFIG.name}" if t.endswith(CONTAINER_CONFIG.name) else t for t in command
    ]
    assert expected != command
    for _pod, main in cluster_pods():
        assert main["args"] == expected
    assert read_properties(CLUSTER_CONFIG)["disable_token_authorization"] == "true"
    assert read_properties(CONTAINER_CONFIG)["disable_token_authorization"] == "false", (
        "single host keeps auth"
    )


def inference_port(main: dict) -> str | int:
    """How a pod's container names its inference port: by name, else by number."""
    named = [port["name"] for port in main["ports"] if port.get("name") == "inference"]
    return named[0] if named else int(main["ports"][0]["containerPort"])


def test_cluster_pods_drain_and_fail_readiness_without_cuda() -> None:
    """preStop drains (readiness fails first) within a grace period longer than the slowest
    batch; GPU pods ask the handlers to fail their load when CUDA is unusable."""
    slowest_batch = max(
        int(m["responseTimeout"]) for m in model_settings(read_properties(CLUSTER_CONFIG)).values()
    )
    for pod, main in cluster_pods():
        env = {item["name"]: item.get("value") for item in main.get("env", [])}
        assert env["TSBATCH_REQUIRE_CUDA"] == "1"
        assert main["lifecycle"]["preStop"]["exec"]["command"] == DRAIN
        assert pod["terminationGracePeriodSeconds"] > float(env["TSBATCH_DRAIN_SECONDS"]) + slowest_batch
        ready = {"path": "/v2/health/ready", "port": inference_port(main)}
        assert main["startupProbe"]["httpGet"] == main["readinessProbe"]["httpGet"] == ready
        assert main["livenessProbe"]["httpGet"] == {"path": "/v2/health/live", "port": inference_port(main)}
        served = main["args"][main["args"].index("--ts-config") + 1]
        assert served == "/app/deploy/config.cluster.properties"
        assert read_properties(CLUSTER_CONFIG)["disable_token_authorization"] == "true", (
            "plain HTTP probes of /v2/health need token auth off (TorchServe checks tokens there too)"
        )
        assert read_properties(CLUSTER_CONFIG)["plugins_path"] == "/app/build/plugins", (
            "the /v2/health routes come from the frontend plugin the image builds there"
        )
        assert env["TSBATCH_DRAIN_FILE"].startswith("/"), "the plugin and the preStop hook must agree on it"
        assert main["readinessProbe"]["failureThreshold"] <= 3, "a broken pod must leave the Service quickly"
        assert pod["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
        assert (
            pod["securityContext"]["runAsNonRoot"]
            and main["securityContext"]["allowPrivilegeEscalation"] is False
        )
        assert main["securityContext"]["capabilities"]["drop"] == ["ALL"]


def test_autoscaled_deployment_sets_no_replicas() -> None:
    assert "replicas" not in find("Deployment", "torchserve")["spec"], "the HPA owns replicas"


def test_network_policy_admits_only_the_edge_load_tests_and_prometheus() -> None:
    policy = find("NetworkPolicy", "torchserve")
    deployment = find("Deployment", "torchserve")
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert policy["spec"]["podSelector"]["matchLabels"].items() <= labels.items()
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    ports = [port["port"] for rule in policy["spec"]["ingress"] for port in rule["ports"]]
    assert sorted(ports) == ["inference", "metrics"], "never the management port"
    locust_labels = find("Deployment", "locust-worker")["spec"]["template"]["metadata"]["labels"]
    inference_sources = next(
        r["from"] for r in policy["spec"]["ingress"] if r["ports"][0]["port"] == "inference"
    )
    assert any(
        "podSelector" in s and s["podSelector"]["matchLabels"].items() <= locust_labels.items()
        for s in inference_sources
    ), "the load-test pods must reach the inference port"
    ingress = find("Ingress", "torchserve")
    assert ingress["metadata"]["annotations"]["nginx.ingress.kubernetes.io/auth-type"], (
        "the edge authenticates"
    )
    backends = {
        p["backend"]["service"]["port"]["name"] for r in ingress["spec"]["rules"] for p in r["http"]["paths"]
    }
    assert backends == {"inference"}


def test_torchserve_pod_has_gpu_probes_and_ports_matching_the_container_config() -> None:
    deployment = find("Deployment", "torchserve")
    main = container(deployment, "torchserve")
    resources = main["resources"]
    assert resources["limits"]["nvidia.com/gpu"] == resources["requests"]["nvidia.com/gpu"] == "1"
    properties = read_properties(CONTAINER_CONFIG)
    ports = {p["name"]: p["containerPort"] for p in main["ports"]}
    for kind in ("inference", "management", "metrics"):
        assert ports[kind] == int(properties[f"{kind}_address"].rsplit(":", 1)[1])
    assert main["readinessProbe"]["httpGet"] == {"path": "/v2/health/ready", "port": "inference"}
    assert CONTAINER_CONFIG.exists() and CLUSTER_CONFIG.exists()
    annotations = deployment["spec"]["template"]["metadata"]["annotations"]
    assert int(annotations["prometheus.io/port"]) == ports["metrics"]
    security = deployment["spec"]["template"]["spec"]["securityContext"]
    assert security["runAsNonRoot"] and security["runAsUser"] == int(_dockerfile_uid())


def test_service_and_disruption_budget_select_the_torchserve_pods() -> None:
    deployment = find("Deployment", "torchserve")
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    service = find("Service", "torchserve")
    assert service["spec"]["selector"].items() <= labels.items()
    port_names = {p["name"] for p in container(deployment)["ports"]}
    assert {p["targetPort"] for p in service["spec"]["ports"]} <= port_names
    assert "management" not in {p["name"] for p in service["spec"]["ports"]}, (
        "keep the management API private"
    )
    budget = find("PodDisruptionBudget", "torchserve")
    assert budget["spec"]["selector"]["matchLabels"].items() <= labels.items()


def test_autoscaler_uses_load_gauges_the_adapter_serves() -> None:
    hpa = find("HorizontalPodAutoscaler", "torchserve")
    assert hpa["spec"]["scaleTargetRef"]["name"] == "torchserve"
    wanted = {m["pods"]["metric"]["name"] for m in hpa["spec"]["metrics"] if m["type"] == "Pods"}
    rules = adapter_rules()
    served = {rule["name"]["as"] for rule in rules}
    assert wanted and wanted <= served, f"HPA asks for {wanted - served}, which no adapter rule serves"
    exported = exported_series_names()
    for rule in rules:
        series = promql_metric_names(rule["seriesQuery"])
        assert len(series) == 1 and series <= exported
        assert re.search(rule["name"]["matches"], next(iter(series)))
        query = rule["metricsQuery"]
        assert "<<.LabelMatchers>>" in query and "<<.GroupBy>>" in query
        assert "rate(" in query, "an HPA must scale on a rate or mean, not an ever-growing counter"
        assert (
            promql_metric_names(query.replace("<<.LabelMatchers>>", "").replace("<<.GroupBy>>", "pod"))
            <= exported
        )


def test_locust_master_and_workers_run_the_locustfile() -> None:
    master, worker = find("Deployment", "locust-master"), find("Deployment", "locust-worker")
    master_args, worker_args = container(master)["args"], container(worker)["args"]
    for args in (master_args, worker_args):
        assert args[:2] == ["-f", "loadtest/locustfile.py"]
        assert container(master)["workingDir"] == "/app" and (REPO_ROOT / args[1]).exists()
    assert "--master" in master_args and "--worker" in worker_args
    service = find("Service", "locust-master")
    assert worker_args[worker_args.index("--master-host") + 1] == service["metadata"]["name"]
    assert 5557 in {p["port"] for p in service["spec"]["ports"]}, "workers connect to the master on 5557"
    assert master_args[master_args.index("--host") + 1] == "http://torchserve:8080"
    profile = master_args[master_args.index("--sla-profile") + 1]
    assert load_profile(profile), f"SLA profile {profile} missing"
    assert TOKEN_ENV in {e["name"] for e in container(worker).get("env", [])}


@pytest.mark.parametrize("deployment", ["locust-master", "locust-worker"])
def test_locust_accepts_the_manifest_arguments(deployment: str) -> None:
    """Locust parses the arguments (its own and the locustfile's; one it does not know exits 2)
    and lists the users."""
    args = container(find("Deployment", deployment))["args"]
    locust = Path(sys.executable).parent / "locust"
    result = subprocess.run(
        [str(locust), *args, "--list"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr[-2000:]


def _dockerfile_uid() -> str:
    return [arguments for keyword, arguments in instructions() if keyword == "USER"][-1].split(":")[0]
