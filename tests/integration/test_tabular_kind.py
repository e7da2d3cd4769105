"""A model kind from another distribution: tests/kinds/tabular installed into a folder of its
own (found through its ``tsbatch.kinds`` entry point, on PYTHONPATH), archived by ``tsbatch
archive`` from a models.yaml that names it, and served by a real TorchServe. Nothing of the
toolkit's tree names the kind: it is its folder alone."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml

from tsbatch.archive import artifacts
from tsbatch.config.properties import format_models, read_properties, replace_entry
from tsbatch.paths import DEFAULT_PROPERTIES, REPO_ROOT
from tsbatch.server.process import TorchServe, absolute_log_config

KIND_DIR = REPO_ROOT / "tests" / "kinds" / "tabular"
MODEL = "tabular_demo"
LABELS = ["low", "medium", "high"]
# Long enough for a concurrent burst to be served as one batch.
SETTINGS = {"minWorkers": 1, "maxWorkers": 1, "batchSize": 8, "maxBatchDelay": 200, "responseTimeout": 60}


def install(into: Path) -> Path:
    """pip install of the kind's distribution into ``into``/site, built from a copy (an
    in-tree build would leave build/ and egg-info in the repository)."""
    source = into / "source"
    shutil.copytree(KIND_DIR, source, ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info"))
    site = into / "site"
    command = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation"]
    subprocess.run([*command, "--target", str(site), str(source)], check=True, capture_output=True)
    return site


def properties_for(work: Path) -> Path:
    """config.properties serving the one tabular model, its paths absolute."""
    values = read_properties(DEFAULT_PROPERTIES)
    text = DEFAULT_PROPERTIES.read_text()
    entries = {
        "load_models": f"{MODEL}.mar",
        "metrics_config": str(REPO_ROOT / values["metrics_config"]),
        "plugins_path": str(REPO_ROOT / values["plugins_path"]),
        "vmargs": absolute_log_config(values["vmargs"], REPO_ROOT),
    }
    for key, value in entries.items():
        text = replace_entry(text, key, f"{key}={value}\n")
    models = {MODEL: {"1.0": {"defaultVersion": True, "marName": f"{MODEL}.mar", **SETTINGS}}}
    text = replace_entry(text, "models", format_models(models))
    path = work / "config.properties"
    path.write_text(text)
    return path


@pytest.fixture(scope="module")
def archived(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(config.properties, model store) after ``tsbatch archive`` with the kind installed."""
    work = tmp_path_factory.mktemp("tabular")
    site = install(work)
    manifest = {
        "build_dir": "build",
        "model_store": "model-store",
        "models": {
            MODEL: {"kind": "tabular", "version": "1.0", "num_features": 4, "labels": LABELS, "top_k": 3}
        },
    }
    (work / "models.yaml").write_text(yaml.safe_dump(manifest))
    properties = properties_for(work)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])),
    }
    command = [sys.executable, "-m", "tsbatch", "archive", "--manifest", str(work / "models.yaml")]
    built = subprocess.run(
        [*command, "--properties", str(properties)], env=env, cwd=work, capture_output=True, text=True
    )
    assert built.returncode == 0, built.stdout + built.stderr
    return properties, work / "model-store"


@pytest.fixture(scope="module")
def server(start_server: Any, archived: tuple[Path, Path]) -> TorchServe:
    properties, store = archived
    return start_server(store, [MODEL], source=properties)


def test_the_archive_carries_the_kind_s_own_handler_modules(archived: tuple[Path, Path]) -> None:
    _, store = archived
    with zipfile.ZipFile(store / f"{MODEL}.mar") as archive:
        names = set(archive.namelist())
        manifest = json.loads(archive.read("MAR-INF/MANIFEST.json"))
    assert {
        "tabular_classifier_handler.py",
        "tabular_serving/config.py",
        "tabular_serving/errors.py",
    } <= names
    assert "batchkit/handler_base.py" in names and "model.pt" in names
    assert manifest["model"]["handler"] == "tabular_classifier_handler.py"


def predict(server: TorchServe, body: Any) -> requests.Response:
    # A session per call: the test's threads must not share one connection pool.
    with requests.Session() as session:
        return session.post(
            f"{server.url('inference')}/predictions/{MODEL}",
            data=json.dumps(body),
            headers={**server.client.headers("inference"), "Content-Type": "application/json"},
            timeout=60,
        )


def test_rows_are_answered_and_a_bad_row_fails_alone(server: TorchServe, archived: tuple[Path, Path]) -> None:
    _, store = archived
    centres = artifacts.read_json(store.parent / "build" / MODEL / artifacts.BUILD_INFO_FILE)["class_centres"]
    bodies: list[Any] = [{"features": centres[label]} for label in LABELS]
    bodies += [
        {"features": [1.0, "two", 3.0, 4.0]},
        [{"features": centres[label]} for label in reversed(LABELS)],
    ]
    counted = ["BatchedRequestsTotal", "BatchesTotal"]
    before = server.settled_counters(MODEL, counted)
    with ThreadPoolExecutor(max_workers=len(bodies)) as pool:  # at once: one batch
        responses = list(pool.map(lambda body: predict(server, body), bodies))
    floor = {"BatchedRequestsTotal": before.get("BatchedRequestsTotal", 0.0) + len(bodies)}
    after = server.settled_counters(MODEL, counted, at_least=floor)
    batches = after["BatchesTotal"] - before.get("BatchesTotal", 0.0)
    assert batches < len(bodies), "the burst was served in fewer batches than requests: bad and good together"

    for label, response in zip(LABELS, responses, strict=False):
        assert response.status_code == 200, response.text
        answer = response.json()
        assert answer["model"] == MODEL and len(answer["predictions"]) == 3
        best = answer["predictions"][0]
        assert best["label"] == label and best["index"] == LABELS.index(label) and best["probability"] > 0.5
        assert sorted(p["label"] for p in answer["predictions"]) == sorted(LABELS)

    bad = responses[len(LABELS)]
    assert bad.status_code == 400 and bad.headers["Content-Type"].startswith("application/json")
    error = bad.json()["error"]
    assert error["type"] == "invalid_features" and '"features"[1] must be a finite number' in error["message"]

    listed = responses[-1]
    assert listed.status_code == 200, listed.text
    assert [answer["predictions"][0]["label"] for answer in listed.json()["results"]] == list(
        reversed(LABELS)
    )
